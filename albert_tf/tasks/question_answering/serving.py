"""SavedModel export of a fine-tuned SQuAD model (v1.1 or v2.0) in the two-SavedModel layout of
albert_tf/serving/saved_model.py, the reference's post-processing of its text signature's outputs,
and the v1.1 TFLite model.

``serving_default`` takes the feature records' inputs:

- v1.1: ``input_ids``, ``input_mask``, ``segment_ids`` int32 [batch, seq] -> ``start_logits``,
  ``end_logits`` float32 [batch, seq];
- v2.0: the same plus ``p_mask`` int32 [batch, seq] (1 where no answer can lie: question, [SEP],
  padding; 0 at [CLS] and the context) -> the answer verifier's beam: ``start_top_log_probs``,
  ``start_top_index`` [batch, k] (the k = start_n_top best starts, best first),
  ``end_top_log_probs``, ``end_top_index`` [batch, k * k'] (the k' = end_n_top best ends of start i
  at i * k' + j) and ``cls_logits`` [batch] (higher: more likely unanswerable). seq >= max(k, k').

``serve_text``: ``question``, ``context`` string [batch] -> the outputs above for the first window
of the features (``QuestionContextPacker``: the question's first max_query_length pieces, the
context's first max_seq_length - 3 - len(question); the rest of a longer context is not read), plus
``input_ids`` and, per position, ``char_start`` / ``char_end`` int32 [batch, L]: the code points
[start, end) of the context the token comes from, -1 where the position holds no context token.
Rows are padded to L, the longest packed row of the request (v2.0: at least max(k, k'), the beam),
not to max_seq_length: the outputs at the real positions are those of the features' first window
padded to max_seq_length (padding is masked out of attention and, by p_mask, out of the answers),
and the per-position ones (v1.1 ``start_logits``, ``end_logits``) are [batch, L].

A client cuts the answer out of its context without Python:

- v1.1: the pair s <= e of context positions (char_start >= 0) with e - s < max_answer_length (30)
  and the largest start_logits[s] + end_logits[e] (the reference ranks the pairs of the 20 best
  starts and ends); the answer is ``context[char_start[s]:char_end[e]]``;
- v2.0: the same over the beam: s = start_top_index[i], e = end_top_index[i * k' + j], scored
  start_top_log_probs[i] + end_top_log_probs[i * k' + j]; no answer where cls_logits is at least
  the threshold tuned on dev data (run_squad's null_score_diff_threshold).

``postprocess_text_outputs`` runs the reference's post-processing (n-best lists, probabilities, v2
null odds) on those outputs.

``export_squad_tflite`` writes the v1.1 model's TFLite model (float32, or int8 / float16 weights:
``start_logits``, ``end_logits`` [1, L] on inputs of any length L up to max_seq_length, the
outputs of the reference's SQuAD v1 TFLite export), ``export_squad_onnx`` the same as an ONNX
model (float32); the v2.0 model (top-k beam over start/end positions) has neither, as in the
reference.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import tensorflow as tf

from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.serving.input_checks import check, values_in_range
from albert_tf.serving.saved_model import (ServingModule, has_text_signature, ids_specs, text_specs,
                                           write_export)
from albert_tf.serving.text_packing import constant_column, keep_first, pack_segments
from albert_tf.serving.onnx_export import OnnxExportError, export_onnx
from albert_tf.serving.tflite import TFLiteExportError, export_tflite
from albert_tf.tasks.question_answering.model import V1_OUTPUTS, V2_OUTPUTS, AlbertSquadModel
from albert_tf.tasks.question_answering.postprocessing import (Question, SquadPostprocessingError,
                                                               V1Predictions, V1RawResult,
                                                               V2Predictions, V2RawResult,
                                                               WindowMetadata, postprocess_v1,
                                                               postprocess_v2)
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.spans import SpanTokenizer


class QuestionContextPacker(tf.Module):
    """A question and its context -> the first window of the SQuAD features
    (data_prep/question_answering/features.py), with every context token's character span.

    ``packer(question [B], context [B])`` (raw strings) -> int32 [B, L]:

    - ``input_ids``, ``input_mask``, ``segment_ids``, ``p_mask``: ``[CLS] query [SEP] context [SEP]``
      as the features lay it out; the query keeps its first ``max_query_length`` pieces, the context
      its first ``max_seq_length - 3 - len(query)`` (the first window);
    - ``char_start``, ``char_end``: the code points ``[start, end)`` of the raw context that the
      token at each position comes from (``SpanTokenizer``), -1 where the position holds no context
      token.

    L is the longest row of the request (at most max_seq_length), or ``min_length`` where that is
    more (SQuAD 2.0: its beam). Shorter rows are padded as the features are (ids 0, p_mask 1,
    spans -1), so the model's outputs at the real positions are those of the features' first
    window, padded to max_seq_length or not.
    """

    def __init__(self, tokenizer: FullTokenizer, max_seq_length: int, max_query_length: int,
                 min_length: int = 1, name: str = "question_context_packer"):
        super().__init__(name=name)
        self.tokenizer = SpanTokenizer(tokenizer)
        self.cls_id, self.sep_id = tokenizer.cls_id, tokenizer.sep_id
        self.max_seq_length = max_seq_length
        self.max_query_length = max_query_length
        self.min_length = min_length

    def __call__(self, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
        query = self.tokenizer.normalizer(question)
        query = keep_first(query, tf.minimum(query.row_lengths(), self.max_query_length))
        document = self.tokenizer(context)
        length = tf.minimum(document["ids"].row_lengths(),
                            self.max_seq_length - 3 - query.row_lengths())
        batch = query.nrows()
        features = pack_segments(query, keep_first(document["ids"], length),
                                 tf.ones([batch], tf.bool), self.cls_id, self.sep_id)
        for name in ("char_start", "char_end"):
            no_span = constant_column(batch, -1)
            features[name] = tf.concat([no_span, -tf.ones_like(query), no_span,
                                        keep_first(document[name], length), no_span],
                                       axis=1).to_tensor(-1, shape=tf.shape(features["input_ids"]))
        at_cls = tf.equal(tf.range(tf.shape(features["input_ids"])[1]), 0)
        features["p_mask"] = tf.where((features["char_start"] >= 0) | at_cls, 0, 1)
        length = tf.shape(features["input_ids"])[1]
        padding = [[0, 0], [0, tf.maximum(length, self.min_length) - length]]
        padding_values = {"p_mask": 1, "char_start": -1, "char_end": -1}
        return {name: tf.pad(value, padding, constant_values=padding_values.get(name, 0))
                for name, value in features.items()}


TEXT_FEATURES = ("input_ids", "char_start", "char_end")


def min_positions(model: AlbertSquadModel) -> int:
    """The fewest positions an input of ``model`` may have: SQuAD 2.0's top-k beam needs
    max(start_n_top, end_n_top); v1.1 takes any length from 1."""
    if model.version_2:
        return max(model.head.start_n_top, model.head.end_n_top)
    return 1


class SquadServing(ServingModule):
    """The SQuAD model's signatures (see the module doc); ``packer`` adds ``serve_text``."""

    def __init__(self, model: AlbertSquadModel, packer: QuestionContextPacker | None = None):
        super().__init__(model, name="albert_squad_serving")
        self.packer = packer
        self.output_names = V2_OUTPUTS if model.version_2 else V1_OUTPUTS
        self.define_signatures(ids_specs(INPUT_NAMES + (("p_mask",) if model.version_2 else ())),
                               text_specs("question", "context") if packer is not None else None)

    def ids_checks(self, ids: Mapping[str, tf.Tensor]) -> list[tf.Operation]:
        """The shared checks (``p_mask`` included) and, for SQuAD 2.0, a ``p_mask`` of 0 and 1 and
        room for the beam."""
        checks = super().ids_checks(ids)
        if self.model.version_2:
            checks.append(values_in_range(ids["p_mask"], "p_mask", 0, 2,
                                          "1 where no answer can lie, 0 where one can"))
            beam = min_positions(self.model)
            length = tf.shape(ids["input_ids"])[-1]
            checks.append(check(length >= beam, "input_ids has ", length, " positions but SQuAD "
                                f"2.0 inputs need at least {beam} (start_n_top, end_n_top); pad "
                                "them with p_mask 1"))
        return checks

    def outputs_from_ids(self, input_ids: tf.Tensor, input_mask: tf.Tensor, segment_ids: tf.Tensor,
                         p_mask: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
        inputs = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        if self.model.version_2:
            inputs["p_mask"] = p_mask
        outputs = self.model(inputs, training=False)
        return {name: outputs[name] for name in self.output_names}

    def outputs_from_text(self, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
        features = self.packer(question, context)
        outputs = self.serve_features(features)
        return {**outputs, **{name: features[name] for name in TEXT_FEATURES}}


def export_squad(model: AlbertSquadModel, export_dir: str, tokenizer: FullTokenizer | None = None,
                 max_seq_length: int = 384, max_query_length: int = 64) -> str:
    """Writes the SQuAD model's export to ``export_dir`` (see the module doc); returns the path.

    tokenizer (SentencePiece mode) adds ``with_text``, with the features' ``max_seq_length`` and
    ``max_query_length``. Raises ValueError for lengths the features reject.
    """
    if max_seq_length <= max_query_length + 3:
        raise ValueError(f"max_seq_length ({max_seq_length}) must exceed max_query_length + 3 "
                         f"({max_query_length + 3}).")

    def serving_module(with_text: bool) -> SquadServing:
        packer = (QuestionContextPacker(tokenizer, max_seq_length, max_query_length,
                                        min_positions(model)) if with_text else None)
        return SquadServing(model, packer)

    return write_export(export_dir, serving_module, has_text_signature(tokenizer))


def postprocess_text_outputs(question_ids: Sequence[str], contexts: Sequence[str],
                             outputs: Mapping[str, np.ndarray], n_best_size: int = 20,
                             max_answer_length: int = 30) -> V1Predictions | V2Predictions:
    """The reference's post-processing of ``serve_text`` outputs (v2 when they hold cls_logits).

    question_ids, contexts: one per row of the outputs, in order (the contexts as sent). Every row is
    its question's only window, each context token in its max-context window. A row without
    context tokens gets the reference's answer for a question without windows. Returns what
    ``postprocess_v1`` / ``postprocess_v2`` return: predictions, n-best lists (and null odds).
    """
    char_start, char_end = np.asarray(outputs["char_start"]), np.asarray(outputs["char_end"])
    if not len(question_ids) == len(contexts) == len(char_start):
        raise SquadPostprocessingError(
            f"{len(question_ids)} question ids and {len(contexts)} contexts for "
            f"{len(char_start)} output rows; expected one of each per row")
    version_2 = "cls_logits" in outputs
    examples, features, results = [], [], []
    for row, (question_id, context) in enumerate(zip(question_ids, contexts)):
        examples.append(Question(question_id, context))
        positions = np.flatnonzero(char_start[row] >= 0)
        if positions.size == 0:
            continue
        features.append(WindowMetadata(
            unique_id=row, example_index=row, doc_offset=int(positions[0]),
            tok_start_to_orig_index=tuple(char_start[row, positions].tolist()),
            tok_end_to_orig_index=tuple((char_end[row, positions] - 1).tolist()),
            max_context=np.ones(positions.size, bool)))
        if version_2:
            results.append(V2RawResult(row, *(outputs[name][row] for name in V2_OUTPUTS)))
        else:
            results.append(V1RawResult(row, *(outputs[name][row] for name in V1_OUTPUTS)))
    if version_2:
        return postprocess_v2(examples, features, results, n_best_size, max_answer_length)
    return postprocess_v1(examples, features, results, n_best_size, max_answer_length)


def _tflite_outputs(model: AlbertSquadModel, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    outputs = model(inputs, training=False)
    return {name: outputs[name] for name in V1_OUTPUTS}


def export_squad_tflite(model: AlbertSquadModel, path: str, max_seq_length: int,
                        quantization: str = "none") -> str:
    """Writes the SQuAD v1.1 model's TFLite model to ``path``: ``start_logits`` and ``end_logits``
    float32 [1, max_seq_length], the outputs of the reference's SQuAD v1 TFLite export, its weights
    stored as ``quantization`` says (``none``: float32 as the reference, ``dynamic_range``: int8,
    ``float16``; albert_tf/serving/tflite.py). The SQuAD 2.0 model (top-k beam over start/end
    positions) has none, as in the reference: TFLiteExportError. Returns ``path``."""
    if model.version_2:
        raise TFLiteExportError("the SQuAD 2.0 model has no TFLite export (the reference had "
                                "none either); export a SQuAD v1.1 model (version_2=False).")
    return export_tflite(model, path, max_seq_length, _tflite_outputs, quantization)


def export_squad_onnx(model: AlbertSquadModel, path: str, max_seq_length: int,
                      quantization: str = "none") -> str:
    """Writes the SQuAD v1.1 model's ONNX model to ``path``: the TFLite file's signature
    (``start_logits``, ``end_logits`` float32 [1, L] on inputs [1, L], L up to
    ``max_seq_length``) as an ONNX graph, its weights float32 (``quantization`` ``none``) or
    int8 (``dynamic_range``; albert_tf/serving/onnx_export.py; needs tf2onnx,
    requirements-onnx.txt, and for int8 onnxruntime). The SQuAD 2.0 model has none:
    OnnxExportError. Returns ``path``."""
    if model.version_2:
        raise OnnxExportError("the SQuAD 2.0 model has no ONNX export (as none in TFLite); "
                              "export a SQuAD v1.1 model (version_2=False).")
    return export_onnx(model, path, max_seq_length, _tflite_outputs, quantization)
