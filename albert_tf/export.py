"""SavedModel export of fine-tuned models, with named serving signatures.

``export_classifier(model, export_dir)`` writes a SavedModel of an ``AlbertClassifierModel``.

Signature ``serving_default``: ``input_ids``, ``input_mask``, ``segment_ids`` (int32 [batch, seq], any
batch and any seq up to max_position_embeddings) ->

- ``probabilities``: float32 [batch, num_labels] softmax (regression: the raw output [batch, 1]),
- ``predictions``: int32 [batch] arg-max class id (regression: float32 [batch] score),
- ``threshold``: float32 scalar, only when a threshold is given (the reference's
  ``--threshold_to_export``, for clients that threshold ``probabilities`` themselves).

Signature ``serve_text`` (when a SentencePiece ``tokenizer`` is given): raw strings ``text_a`` and
``text_b`` (string [batch]; an empty ``text_b`` means a single-sentence example) -> the same outputs.
The text is normalised, tokenised and packed in the graph by ``text_packing.TextPacker`` (identical
ids to the Python features): ``[CLS] a [SEP] b [SEP]``, a pair truncated to max_seq_length - 3
pieces by popping from the end of the longer side (ties: b), a single sentence cut to
max_seq_length - 2; padded to the longest example of the batch.

Unlike the reference's export (serialized ``tf.Example`` strings of fixed length), clients need no
protobuf step. Load with ``import tensorflow_text`` (registers the SentencePiece op of
``serve_text``) then ``tf.saved_model.load(export_dir)``, and call
``.signatures["serving_default"](input_ids=..., input_mask=..., segment_ids=...)``.
"""

from __future__ import annotations

import math

import tensorflow as tf

from albert_tf.heads import AlbertClassifierModel
from albert_tf.io_utils import temporary_path
from albert_tf.text_packing import TextPacker
from albert_tf.tokenization import FullTokenizer

SERVING_INPUTS = ("input_ids", "input_mask", "segment_ids")


class ClassifierServingModule(tf.Module):
    """Holds the Keras classifier and its serving functions (inference mode, no dropout)."""

    def __init__(self, model: AlbertClassifierModel, threshold: float | None = None,
                 tokenizer: FullTokenizer | None = None, max_seq_length: int | None = None):
        super().__init__(name="albert_classifier_serving")
        self.model = model
        self.threshold = None if threshold is None else tf.constant(threshold, tf.float32)
        self.packer = None
        if tokenizer is not None:
            self.packer = TextPacker(tokenizer,
                                     max_seq_length or model.config.max_position_embeddings)

    def _outputs(self, input_ids, input_mask, segment_ids) -> dict[str, tf.Tensor]:
        logits = self.model({"input_ids": input_ids, "input_mask": input_mask,
                             "segment_ids": segment_ids}, training=False)["logits"]
        if self.model.is_regression:
            outputs = {"probabilities": logits, "predictions": logits[:, 0]}
        else:
            outputs = {"probabilities": tf.nn.softmax(logits, axis=-1),
                       "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}
        if self.threshold is not None:
            outputs["threshold"] = tf.identity(self.threshold)
        return outputs

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name=name)
                                  for name in SERVING_INPUTS])
    def serve(self, input_ids: tf.Tensor, input_mask: tf.Tensor,
              segment_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._outputs(input_ids, input_mask, segment_ids)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                  tf.TensorSpec([None], tf.string, name="text_b")])
    def serve_text(self, text_a: tf.Tensor, text_b: tf.Tensor) -> dict[str, tf.Tensor]:
        return self._outputs(**self.packer(text_a, text_b))


def export_classifier(model: AlbertClassifierModel, export_dir: str, threshold: float | None = None,
                      assets: dict[str, str] | None = None, tokenizer: FullTokenizer | None = None,
                      max_seq_length: int | None = None) -> str:
    """Writes the SavedModel to ``export_dir`` (must not exist yet or be empty); returns the path.

    threshold: NaN or None = no ``threshold`` output. assets: {file name: text} written to
    ``export_dir/assets.extra`` (e.g. the label list). tokenizer (SentencePiece mode): adds the
    ``serve_text`` signature, truncating to ``max_seq_length`` (default max_position_embeddings).
    """
    if threshold is not None and math.isnan(threshold):
        threshold = None
    if tf.io.gfile.exists(export_dir) and tf.io.gfile.listdir(export_dir):
        raise FileExistsError(f"--export_dir {export_dir} exists and is not empty; choose a new "
                              "directory (an export is never overwritten in place).")
    if tokenizer is not None and tokenizer.sp_model is None:
        tokenizer = None  # WordPiece: no in-graph tokenizer, ids signature only
    module = ClassifierServingModule(model, threshold, tokenizer, max_seq_length)
    signatures = {"serving_default": module.serve}
    if tokenizer is not None:
        signatures["serve_text"] = module.serve_text
    if tf.io.gfile.exists(export_dir):
        tf.io.gfile.rmtree(export_dir)  # empty, checked above
    with temporary_path(export_dir.rstrip("/")) as tmp_dir:  # renamed into place when complete
        tf.saved_model.save(module, tmp_dir, signatures=signatures)
        for name, text in (assets or {}).items():
            tf.io.gfile.makedirs(f"{tmp_dir}/assets.extra")
            with tf.io.gfile.GFile(f"{tmp_dir}/assets.extra/{name}", "w") as handle:
                handle.write(text)
    return export_dir
