"""The GLUE classifier's SavedModel export (the two-SavedModel layout of
albert_tf/serving/saved_model.py) and its TFLite model.

- ``serving_default``: ``input_ids``, ``input_mask``, ``segment_ids`` int32 [batch, seq] ->
  ``probabilities`` float32 [batch, num_labels] softmax (regression: the raw output [batch, 1]),
  ``predictions`` int32 [batch] arg-max class id (regression: float32 [batch] score), and
  ``threshold`` float32 scalar when one is given (the reference's ``--threshold_to_export``), and
  ``labels`` string [batch], the predicted class's name, when label names are given (a classifier
  trained on the user's own files);
- ``serve_text``: ``text_a``, ``text_b`` string [batch] (an empty ``text_b`` means a single
  sentence) -> the same outputs and the packed ``input_ids`` int32 [batch, L]: ``TextPacker``'s
  ``[CLS] a [SEP] b [SEP]``, a pair cut to max_seq_length - 3 pieces by popping from the end of the
  longer side (ties: b), a single sentence to max_seq_length - 2.

An early-exit model (``AlbertClassifierModel(early_exit=...)``, run_classifier's --early_exit)
serves with its ``ExitPolicy`` (albert_tf/tasks/classification/early_exit.py), in a
``tf.while_loop`` (albert_tf/tasks/classification/early_exit_inference.py): both
signatures stop computing once every example of the request has exited (the rule recorded at
export: a patience, a confidence, or a fixed depth) and add ``layers_used`` int32 [batch], the
layers each example ran; ``serve_patience`` and ``serve_text_patience`` take the same inputs plus
``patience`` int32 scalar (>= 1), and a classification's ``serve_confidence`` and
``serve_text_confidence`` ``confidence`` float32 scalar in (0, 1), which they stop by instead of
the recorded rule. ``assets.extra/early_exit.json`` records the policy.

Unlike the reference's export (serialized ``tf.Example`` strings of fixed length), clients need no
protobuf step.

``TextPacker`` is the in-graph packing of ``serve_text`` (the classifier features' truncation).
``export_classifier_tflite`` writes the TFLite model (float32, or int8 / float16 weights) and
``export_classifier_onnx`` the ONNX model (float32): ``logits`` and ``probabilities``
[1, num_labels] on int32 ids [1, L] of any length L up to max_seq_length
(albert_tf/serving/tflite.py, albert_tf/serving/onnx_export.py); an early-exit model's at a
fixed depth, computing only those layers.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Mapping, Sequence

import tensorflow as tf

from albert_tf.serving.input_checks import check, gated
from albert_tf.serving.saved_model import (ServingModule, has_text_signature, ids_specs, text_specs,
                                           write_export)
from albert_tf.serving.text_packing import truncate_and_pack
from albert_tf.serving.onnx_export import export_onnx
from albert_tf.serving.tflite import OutputsFn, export_tflite
from albert_tf.tasks.classification.early_exit import ExitPolicy
from albert_tf.tasks.classification.early_exit_inference import (early_exit_logits,
                                                                 fixed_depth_logits)
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.in_graph import InGraphTokenizer


class TextPacker(tf.Module):
    """One or two raw texts per example -> model inputs, with the classifier features' rules.

    ``packer(text_a, text_b)`` (string [B] each; an empty ``text_b`` after normalisation means a
    single-text example) -> ``input_ids``, ``input_mask``, ``segment_ids`` int32 [B, L] with
    L <= max_seq_length. Requires a SentencePiece tokenizer.
    """

    def __init__(self, tokenizer: FullTokenizer, max_seq_length: int,
                 name: str = "text_packer"):
        super().__init__(name=name)
        self.tokenizer = InGraphTokenizer.from_full_tokenizer(tokenizer)
        self.cls_id, self.sep_id = tokenizer.cls_id, tokenizer.sep_id
        self.max_seq_length = max_seq_length

    def __call__(self, text_a: tf.Tensor, text_b: tf.Tensor) -> dict[str, tf.Tensor]:
        normalized_b = self.tokenizer.normalize(text_b)
        ids_a, ids_b = self.tokenizer(text_a), self.tokenizer.encode_normalized(normalized_b)
        # A pair only where text_b is non-empty after normalisation (the reference's `if text_b`).
        has_b = tf.strings.length(normalized_b) > 0
        return truncate_and_pack(ids_a, ids_b, has_b, self.max_seq_length, self.cls_id,
                                 self.sep_id)


# The rules a request to an early-exit model may stop by instead of the recorded one: {input
# name: its spec}; each gives the signatures serve_<name> and serve_text_<name>.
REQUEST_RULES = {"patience": tf.TensorSpec([], tf.int32, name="patience"),
                 "confidence": tf.TensorSpec([], tf.float32, name="confidence")}


class ClassifierServing(ServingModule):
    """The GLUE classifier's signatures (see the module doc); ``packer`` adds ``serve_text``,
    ``label_names`` (class id order) the ``labels`` output; ``policy`` (an early-exit model's;
    default: all its layers) how it stops, and the signatures of ``request_rules``."""

    def __init__(self, model: AlbertClassifierModel, threshold: float | None = None,
                 packer: TextPacker | None = None, label_names: Sequence[str] | None = None,
                 policy: ExitPolicy | None = None):
        super().__init__(model, name="albert_classifier_serving")
        self.policy = None
        if model.early_exit is not None:
            self.policy = policy or ExitPolicy.full_depth(model.config.num_hidden_layers)
            self.policy.check(model.config.num_hidden_layers)
        elif policy is not None:
            raise ValueError("an exit policy for a model without early exit")
        self.threshold = None if threshold is None else tf.constant(threshold, tf.float32)
        if label_names is not None and (model.is_regression or
                                        len(label_names) != model.num_labels):
            raise ValueError(f"{len(label_names)} label names for a model with "
                             f"{model.num_labels} classes (regression: {model.is_regression})")
        self.label_names = None if label_names is None else tf.constant(list(label_names))
        self.packer = packer
        self.define_signatures(ids_specs(),
                               text_specs("text_a", "text_b") if packer is not None else None,
                               layouts={name: () for name in REQUEST_RULES})
        self.request_rules = () if self.policy is None else (
            ("patience",) if model.is_regression else ("patience", "confidence"))
        for rule in self.request_rules:
            setattr(self, f"serve_{rule}", tf.function(
                functools.partial(self._outputs_by_rule, rule), autograph=False,
                input_signature=[{spec.name: spec for spec in (*ids_specs(),
                                                               REQUEST_RULES[rule])}]))
            if packer is not None:
                setattr(self, f"serve_text_{rule}", tf.function(
                    functools.partial(self._text_outputs_by_rule, rule), autograph=False,
                    input_signature=[{spec.name: spec for spec in (
                        *text_specs("text_a", "text_b"), REQUEST_RULES[rule])}]))

    def signatures(self) -> dict[str, tf.types.experimental.GenericFunction]:
        """ServingModule's, plus with early exit ``serve_<rule>`` (and ``serve_text_<rule>``)
        for each of ``request_rules``."""
        signatures = super().signatures()
        for rule in self.request_rules:
            for name in (f"serve_{rule}", f"serve_text_{rule}"):
                if hasattr(self, name):
                    signatures[name] = getattr(self, name)
        return signatures

    def _checked_rule(self, rule: str, inputs: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """The request's ``rule`` input behind its checks: a scalar; a patience at least 1, a
        confidence in (0, 1)."""
        value = self.checked_ranks({rule: inputs[rule]})[rule]
        if rule == "patience":
            valid = check(value >= 1, "patience must be >= 1, got ", value)
        else:
            valid = check(tf.logical_and(value > 0, value < 1),
                          "confidence must lie in (0, 1), got ", value)
        return gated({rule: value}, [valid])[rule]

    def _outputs_by_rule(self, rule: str, inputs: Mapping[str, tf.Tensor]
                         ) -> dict[str, tf.Tensor]:
        value = self._checked_rule(rule, inputs)
        ids = self.checked_ranks({name: inputs[name] for name in self.ids_names})
        return self.outputs_from_ids(**gated(ids, self.ids_checks(ids)), **{rule: value})

    def _text_outputs_by_rule(self, rule: str, inputs: Mapping[str, tf.Tensor]
                              ) -> dict[str, tf.Tensor]:
        value = self._checked_rule(rule, inputs)
        texts = self.checked_ranks({name: inputs[name] for name in self.text_names})
        features = self.packer(**gated(texts, self.text_checks(texts)))
        served = getattr(self, f"serve_{rule}")
        return {**served({**{name: features[name] for name in self.ids_names}, rule: value}),
                "input_ids": features["input_ids"]}

    def outputs_from_ids(self, input_ids: tf.Tensor, input_mask: tf.Tensor,
                         segment_ids: tf.Tensor, patience: tf.Tensor | None = None,
                         confidence: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
        """The outputs on ids; an early-exit model stops by ``patience`` or ``confidence``
        (default: its policy's rule)."""
        ids = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        extra = {}
        if self.policy is None:
            logits = self.model(ids, training=False)["logits"]
        else:
            logits, extra["layers_used"] = early_exit_logits(
                self.model, ids, self.policy, patience=patience, confidence=confidence)
        outputs = self.scored(logits)
        outputs.update(extra)
        return outputs

    def scored(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        """``probabilities``, ``predictions`` (and ``threshold``, ``labels``) of logits [B, C]."""
        if self.model.is_regression:
            outputs = {"probabilities": logits, "predictions": logits[:, 0]}
        else:
            outputs = {"probabilities": tf.nn.softmax(logits, axis=-1),
                       "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}
        if self.threshold is not None:
            outputs["threshold"] = tf.identity(self.threshold)
        if self.label_names is not None:
            outputs["labels"] = tf.gather(self.label_names, outputs["predictions"])
        return outputs

    def outputs_from_text(self, text_a: tf.Tensor, text_b: tf.Tensor) -> dict[str, tf.Tensor]:
        features = self.packer(text_a, text_b)
        return {**self.serve_features(features), "input_ids": features["input_ids"]}


def export_classifier(model: AlbertClassifierModel, export_dir: str, threshold: float | None = None,
                      assets: dict[str, str] | None = None, tokenizer: FullTokenizer | None = None,
                      max_seq_length: int | None = None,
                      label_names: Sequence[str] | None = None,
                      policy: ExitPolicy | None = None) -> str:
    """Writes the GLUE classifier's export to ``export_dir`` (see the module doc); returns the path.

    threshold: NaN or None = no ``threshold`` output. assets: e.g. {"labels.txt": ...}. tokenizer
    (SentencePiece mode): adds ``with_text``, truncating to ``max_seq_length`` (default
    max_position_embeddings). label_names: adds the ``labels`` output (a classification).
    policy: an early-exit model's stopping (default: all its layers).
    """
    if threshold is not None and math.isnan(threshold):
        threshold = None
    max_seq_length = max_seq_length or model.config.max_position_embeddings

    def serving_module(with_text: bool) -> ClassifierServing:
        packer = TextPacker(tokenizer, max_seq_length) if with_text else None
        return ClassifierServing(model, threshold, packer, label_names, policy)

    if model.early_exit is not None:
        policy = policy or ExitPolicy.full_depth(model.config.num_hidden_layers)
        assets = {**(assets or {}), "early_exit.json": json.dumps(
            {"heads": model.early_exit, **dataclasses.asdict(policy)}, sort_keys=True) + "\n"}
    return write_export(export_dir, serving_module, has_text_signature(tokenizer), assets)


def file_outputs(model: AlbertClassifierModel, layers: int | None = None) -> OutputsFn:
    """The outputs of the classifier's TFLite and ONNX files: (model, int32 [1, L] inputs) ->
    ``logits`` and ``probabilities`` float32 [1, num_labels] (softmax; a regression such as
    STS-B: the raw score, as the SavedModel's ``probabilities``). An early-exit model runs
    ``layers`` of its layers (default: all) and that layer's classifier, computing only those."""
    if layers is not None and model.early_exit is None:
        raise ValueError("a fixed depth for a model without early exit")

    def outputs(model: AlbertClassifierModel, inputs: dict[str, tf.Tensor]
                ) -> dict[str, tf.Tensor]:
        if model.early_exit is None:
            logits = model(inputs, training=False)["logits"]
        else:
            logits = fixed_depth_logits(model, inputs, layers or model.config.num_hidden_layers)
        probabilities = logits if model.is_regression else tf.nn.softmax(logits, axis=-1)
        return {"logits": logits, "probabilities": probabilities}

    return outputs


def export_classifier_tflite(model: AlbertClassifierModel, path: str, max_seq_length: int,
                             quantization: str = "none", layers: int | None = None) -> str:
    """Writes the classifier's TFLite model to ``path`` (``file_outputs``: ``logits``,
    ``probabilities`` [1, num_labels] on inputs [1, L], L up to ``max_seq_length``), its weights
    stored as ``quantization`` says (``none``: float32, ``dynamic_range``: int8, ``float16``;
    albert_tf/serving/tflite.py). An early-exit model runs ``layers`` of its layers (default:
    all). Returns ``path``."""
    return export_tflite(model, path, max_seq_length, file_outputs(model, layers), quantization)


def export_classifier_onnx(model: AlbertClassifierModel, path: str, max_seq_length: int,
                           layers: int | None = None, quantization: str = "none") -> str:
    """Writes the classifier's ONNX model to ``path``: the TFLite file's signature
    (``file_outputs``) as an ONNX graph, its weights float32 (``quantization`` ``none``) or int8
    (``dynamic_range``; albert_tf/serving/onnx_export.py; needs tf2onnx, requirements-onnx.txt,
    and for int8 onnxruntime). An early-exit model runs ``layers`` of its layers (default: all).
    Returns ``path``."""
    return export_onnx(model, path, max_seq_length, file_outputs(model, layers), quantization)
