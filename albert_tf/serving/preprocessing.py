"""The preprocessing model: raw text -> ALBERT inputs in the graph, saved apart from the encoder.

``PreprocessingModule`` follows the preprocessing SavedModels of TF-Hub's BERT and ALBERT encoders
(``albert_en_preprocess``: a root call, ``tokenize`` and ``bert_pack_inputs`` objects) with ALBERT's
tokenizer and the classifier features' truncation, so its ids equal the Python features':

- ``tokenize(texts)``: string [B] -> int32 RaggedTensor [B, (T)], ``FullTokenizer.encode_text`` of
  every string (normalisation, lowercasing, SentencePiece, digit-comma rule), no [CLS]/[SEP];
  ``tokenize.get_special_tokens_dict()`` -> int32 scalars ``vocab_size``,
  ``start_of_sequence_id`` ([CLS]), ``end_of_segment_id`` ([SEP]), ``padding_id`` (0, what the
  features pad with) and ``mask_id`` ([MASK]);
- ``bert_pack_inputs(segments, seq_length=None)``: a list of one or two such ragged ids ->
  ``input_word_ids``, ``input_mask``, ``input_type_ids`` int32 [B, seq_length] (default: the
  export's), the TF2 encoder's input names (albert_tf/serving/tf2_encoder.py):
  ``[CLS] a [SEP]`` cut to seq_length - 2 ids, or ``[CLS] a [SEP] b [SEP]`` cut to seq_length - 3 by
  popping from the end of the longer segment (ties: b; for two segments the same lengths as
  TF-Hub's round-robin trimming), zero-padded; a row whose second segment is empty is packed as a
  single segment (the Python features' rule for an empty text_b), so
  ``bert_pack_inputs([tokenize(a), tokenize(b)])`` equals the text signature (unless a non-empty
  text_b yields no piece);
- the root call ``preprocessing(sentences)``: string [B] -> the same three tensors of single
  sentences at the export's length (``bert_pack_inputs([tokenize(sentences)])``);
- ``preprocess({"text_a": ..., "text_b": ...})`` and the signature ``serving_default`` (the same
  inputs by name): string [B] each (a ``text_b`` empty after normalisation makes a single-segment
  example) -> albert_tf's (and the reference's) ``input_ids``, ``input_mask``, ``segment_ids`` at the
  export's length, the inputs of the encoder's reference-style signatures and of the fine-tuned
  exports.

Every function checks in the graph that its inputs have one row per example each and the
signature the ranks of its texts (an InvalidArgumentError names the input otherwise,
albert_tf/serving/input_checks.py). ``bert_pack_inputs`` (no input signature: it takes one or two
segments) is also traced for int64 ids (cast), and for what it refuses by name: another number of
segments, a dense tensor; the functions with an input signature leave a dtype or rank to
TensorFlow's TypeError, which names the input (``sentences``, ``texts``, ``text_a``, ...).

It holds SentencePiece ops, so a process loading it imports ``tensorflow_text`` first. The
encoder SavedModel does not hold it (it stays loadable by TensorFlow alone, e.g. the stock
TensorFlow Serving binary, which has no SentencePiece op).

``export_preprocessing`` writes it to a new directory (``python -m albert_tf.export_hub
--preprocessing_export_path``); the hub-style encoder export
(albert_tf/tasks/pretraining/hub_export.py) saves it inside its own directory with
``save_preprocessing``.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.serving.input_checks import (TEXT_LAYOUT, fails, gated, int32_ids, same_rows,
                                            with_ranks)
from albert_tf.serving.saved_model import save_new_directory
from albert_tf.serving.text_packing import pad_to_length, truncate_and_pack
from albert_tf.serving.tf2_encoder import to_tf2_names
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.in_graph import InGraphTokenizer

# A pair needs [CLS], two [SEP] and at least one id of each segment.
MIN_SEQ_LENGTH = 5

_RAGGED_IDS = tf.RaggedTensorSpec([None, None], tf.int32)
_RAGGED_INT64_IDS = tf.RaggedTensorSpec([None, None], tf.int64)
_DENSE_IDS = tf.TensorSpec([None, None], tf.int32)
TEXT_PAIR = ("text_a", "text_b")


class PreprocessingError(UserError, ValueError):
    """The preprocessing model cannot be built as asked (the message says why)."""


class SpecialTokens(tf.Module):
    """``tokenize.get_special_tokens_dict``: called without arguments, the special ids as int32
    scalars (the names of TF-Hub's preprocessing models)."""

    def __init__(self, tokenizer: FullTokenizer):
        super().__init__(name="get_special_tokens_dict")
        self.ids = {"vocab_size": tokenizer.vocab_size, "start_of_sequence_id": tokenizer.cls_id,
                    "end_of_segment_id": tokenizer.sep_id, "padding_id": 0,
                    "mask_id": tokenizer.mask_id}

    @tf.function(input_signature=[], autograph=False)
    def __call__(self) -> dict[str, tf.Tensor]:
        return {name: tf.constant(value, tf.int32) for name, value in self.ids.items()}


class Tokenize(tf.Module):
    """``tokenize``: string [B] -> int32 ids RaggedTensor [B, (T)], with the attribute
    ``get_special_tokens_dict``."""

    def __init__(self, tokenizer: InGraphTokenizer, special_tokens: SpecialTokens):
        super().__init__(name="tokenize")
        self.tokenizer = tokenizer
        self.get_special_tokens_dict = special_tokens

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="texts")], autograph=False)
    def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
        return self.tokenizer(texts)


class BertPackInputs(tf.Module):
    """``bert_pack_inputs(segments, seq_length=None)``: one or two ragged int32 ids [B, (T)] ->
    TF2-named int32 [B, seq_length] inputs (see the module); ``pack`` gives albert_tf's names."""

    def __init__(self, cls_id: int, sep_id: int, seq_length: int):
        super().__init__(name="bert_pack_inputs")
        self.cls_id, self.sep_id, self.seq_length = cls_id, sep_id, seq_length

    @tf.function(autograph=False)
    def __call__(self, segments: Sequence[tf.RaggedTensor],
                 seq_length: int | tf.Tensor | None = None) -> dict[str, tf.Tensor]:
        length = self.seq_length if seq_length is None else seq_length
        problems = self._problems(segments)
        if problems:  # a trace for a mistake: the outputs' structure, computed from nothing
            empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32),
                                                     tf.zeros([0], tf.int64))
            segments = [gated({"empty": empty}, [fails(problems)])["empty"]]
        named, checks = {}, []
        for index, segment in enumerate(segments):
            values, fits = int32_ids(segment.flat_values, f"segments[{index}]")
            named[f"segments[{index}]"] = segment.with_flat_values(values)
            checks += fits
        named = gated(named, [*checks, *same_rows(named, "segments[0]")])
        first = named["segments[0]"]
        second = named["segments[1]"] if len(segments) == 2 else first[:, :0]
        has_second = second.row_lengths() > 0  # as the features' `if text_b`
        # pad_to_length restores the static length where it is known.
        return to_tf2_names(pad_to_length(self.pack(first, second, has_second, length), length))

    @staticmethod
    def _problems(segments: Sequence[tf.RaggedTensor | tf.Tensor]) -> str:
        """What is wrong with the segments a trace is for ("" if nothing), as messages say it."""
        if not isinstance(segments, (list, tuple)) or len(segments) not in (1, 2):
            given = (f"{len(segments)} segments" if isinstance(segments, (list, tuple))
                     else "one segment not in a list")
            return (f"bert_pack_inputs takes a list of one or two segments, got {given}: give "
                    "[tokenize(text_a)] or [tokenize(text_a), tokenize(text_b)]")
        for index, segment in enumerate(segments):
            if not isinstance(segment, tf.RaggedTensor) or segment.ragged_rank != 1:
                return (f"segments[{index}] must be a RaggedTensor of token ids [batch, (tokens)] "
                        "as tokenize returns it, got a dense tensor or another ragged rank")
        return ""

    # One traced graph of the (costly to trace) ragged truncation, shared by every caller.
    @tf.function(input_signature=[_RAGGED_IDS, _RAGGED_IDS, tf.TensorSpec([None], tf.bool),
                                  tf.TensorSpec([], tf.int32)], autograph=False)
    def pack(self, first: tf.RaggedTensor, second: tf.RaggedTensor, has_second: tf.Tensor,
             seq_length: tf.Tensor) -> dict[str, tf.Tensor]:
        """``input_ids``, ``input_mask``, ``segment_ids`` [B, seq_length] of ``first`` and, where
        ``has_second``, ``second`` (``truncate_and_pack``)."""
        tf.debugging.assert_greater_equal(seq_length, MIN_SEQ_LENGTH,
                                          message=f"seq_length must be >= {MIN_SEQ_LENGTH}")
        packed = truncate_and_pack(first, second, has_second, seq_length, self.cls_id,
                                   self.sep_id)
        return pad_to_length(packed, seq_length)

    def trace(self) -> None:
        """Traces ``__call__`` for one and two segments of int32 or int64 ids, with the default and
        with a given seq_length, so that a saved module offers every variant; and, with the default
        seq_length, for no segment, three, dense ids and a segment not in a list, which its graph
        refuses by name."""
        for ids in (_RAGGED_IDS, _RAGGED_INT64_IDS):
            for count in (1, 2):
                for seq_length in (None, tf.TensorSpec([], tf.int32, name="seq_length")):
                    self.__call__.get_concrete_function([ids] * count, seq_length)
        for segments in ([], [_RAGGED_IDS] * 3, [_DENSE_IDS], [_DENSE_IDS] * 2, _RAGGED_IDS):
            self.__call__.get_concrete_function(segments)


class PreprocessingModule(tf.Module):
    """Raw text -> encoder inputs at ``seq_length`` (see above).

    tokenizer: a SentencePiece-mode FullTokenizer (its model and do_lower_case are baked in).
    Save it with ``save_preprocessing``.
    """

    def __init__(self, tokenizer: FullTokenizer, seq_length: int, name: str = "preprocessing"):
        super().__init__(name=name)
        if seq_length < MIN_SEQ_LENGTH:
            raise PreprocessingError(f"seq_length must be at least {MIN_SEQ_LENGTH} ([CLS], two "
                                     f"[SEP] and one piece per segment), got {seq_length}.")
        self.tokenizer = InGraphTokenizer.from_full_tokenizer(tokenizer)
        self.tokenize = Tokenize(self.tokenizer, SpecialTokens(tokenizer))
        self.bert_pack_inputs = BertPackInputs(tokenizer.cls_id, tokenizer.sep_id, seq_length)
        self.seq_length = seq_length

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")],
                 autograph=False)
    def __call__(self, sentences: tf.Tensor) -> dict[str, tf.Tensor]:
        """string [B] -> TF2-named int32 [B, seq_length] inputs of single sentences."""
        return self.bert_pack_inputs([self.tokenize(sentences)])

    @tf.function(input_signature=[{name: tf.TensorSpec([None], tf.string, name=name)
                                   for name in TEXT_PAIR}], autograph=False)
    def preprocess(self, texts: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """``text_a``, ``text_b`` string [B] -> int32 [B, seq_length] inputs; an empty text_b
        makes a single-segment example. One dict, as the signature's inputs and for TFSMLayer."""
        texts = with_ranks(texts, {name: TEXT_LAYOUT for name in TEXT_PAIR})
        texts = gated(texts, same_rows(texts, "text_a"))
        normalized_b = self.tokenizer.normalize(texts["text_b"])
        # A pair only where text_b is non-empty after normalisation (the features' `if text_b`).
        has_b = tf.strings.length(normalized_b) > 0
        packed = self.bert_pack_inputs.pack(self.tokenizer(texts["text_a"]),
                                            self.tokenizer.encode_normalized(normalized_b), has_b,
                                            self.seq_length)
        return pad_to_length(packed, self.seq_length)

    def trace_functions(self) -> None:
        """Traces the functions whose inputs vary (``bert_pack_inputs``) before saving."""
        self.bert_pack_inputs.trace()

    def signatures(self) -> dict[str, tf.types.experimental.GenericFunction]:
        """The SavedModel signatures: ``serving_default`` = ``preprocess``."""
        return {"serving_default": self.preprocess}


def save_preprocessing(module: PreprocessingModule, directory: str) -> None:
    module.trace_functions()
    tf.saved_model.save(module, directory, signatures=module.signatures())


def export_preprocessing(tokenizer: FullTokenizer, seq_length: int, export_path: str) -> None:
    """Writes the preprocessing SavedModel (``PreprocessingModule``) to a new ``export_path``."""
    module = PreprocessingModule(tokenizer, seq_length)
    save_new_directory(export_path, lambda directory: save_preprocessing(module, directory))
