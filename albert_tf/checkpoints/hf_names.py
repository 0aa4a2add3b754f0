"""The Hugging Face (``transformers``) ALBERT format: its weight names and layouts, its config.

What ``transformers``' ``AlbertModel`` / ``AlbertForPreTraining`` and keras-hub's ``AlbertBackbone``
read, stated against the reference's TF1 names (albert_tf/checkpoints/tf1_names.py):

- ``hf_key(name)``: the safetensors key of a reference name and whether its layout is transposed
  (a dense kernel [in, out] is a ``torch.nn.Linear`` weight [out, in]; embedding tables, LayerNorm
  and the SOP classifier's ``output_weights`` [2, H] keep theirs); None for a name the format has
  no place for (a fine-tuning head).
- ``hf_config_dict(config, ...)`` / ``albert_config_from_hf(values)``: the ``config.json`` of a
  config and back. ``check_representable(config)`` refuses what the format cannot hold: a
  ``cross_layer_sharing`` other than ``all``, and (num_hidden_layers, num_hidden_groups) pairs for
  which transformers' layer -> group mapping, int(l / (L / G)), differs from the reference's,
  int(l / L * G), by float rounding (e.g. L = G = 22).
- The format always projects E -> H (``embedding_hidden_mapping_in``); an albert_tf model with
  embedding_size == hidden_size has no projection, so the identity (``IDENTITY_PROJECTION``) is
  written in its place, and only the identity is accepted back.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from albert_tf.errors.user_error import UserError
from albert_tf.models.config import AlbertConfig
from albert_tf.models.heads import CLASSIFIER_DROPOUT
from albert_tf.models.layers import LAYER_NORM_EPSILON


class HuggingFaceFormatError(UserError, ValueError):
    """A model or a directory that the Hugging Face ALBERT format cannot represent, or that is not
    one; the message names the key or value and what was expected."""


MODEL_TYPE = "albert"
ENCODER_PREFIX = "albert."  # the encoder's keys in AlbertForPreTraining (AlbertModel drops it)
PROJECTION_KEYS = ("albert.encoder.embedding_hidden_mapping_in.weight",
                   "albert.encoder.embedding_hidden_mapping_in.bias")
IDENTITY_PROJECTION = "identity"  # what PROJECTION_KEYS hold for a model with E == H
# The MLM decoder, tied to the word embeddings and to predictions.bias: written by older
# transformers versions, accepted when equal to what they are tied to.
TIED_KEYS = {"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
             "predictions.decoder.bias": "predictions.bias"}
# Buffers some writers save, never weights.
BUFFER_KEYS = ("albert.embeddings.position_ids", "albert.embeddings.token_type_ids")

_FIXED = {
    "bert/embeddings/word_embeddings": ("albert.embeddings.word_embeddings.weight", False),
    "bert/embeddings/token_type_embeddings": ("albert.embeddings.token_type_embeddings.weight",
                                              False),
    "bert/embeddings/position_embeddings": ("albert.embeddings.position_embeddings.weight", False),
    "bert/embeddings/LayerNorm/gamma": ("albert.embeddings.LayerNorm.weight", False),
    "bert/embeddings/LayerNorm/beta": ("albert.embeddings.LayerNorm.bias", False),
    "bert/encoder/embedding_hidden_mapping_in/kernel": (PROJECTION_KEYS[0], True),
    "bert/encoder/embedding_hidden_mapping_in/bias": (PROJECTION_KEYS[1], False),
    "bert/pooler/dense/kernel": ("albert.pooler.weight", True),
    "bert/pooler/dense/bias": ("albert.pooler.bias", False),
    "cls/predictions/transform/dense/kernel": ("predictions.dense.weight", True),
    "cls/predictions/transform/dense/bias": ("predictions.dense.bias", False),
    "cls/predictions/transform/LayerNorm/gamma": ("predictions.LayerNorm.weight", False),
    "cls/predictions/transform/LayerNorm/beta": ("predictions.LayerNorm.bias", False),
    "cls/predictions/output_bias": ("predictions.bias", False),
    "cls/seq_relationship/output_weights": ("sop_classifier.classifier.weight", False),
    "cls/seq_relationship/output_bias": ("sop_classifier.classifier.bias", False),
}
_BLOCK = re.compile(r"^bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/(.+)/"
                    r"(kernel|bias|gamma|beta)$")
_BLOCK_PARTS = {"attention_1/self/query": "attention.query",
                "attention_1/self/key": "attention.key",
                "attention_1/self/value": "attention.value",
                "attention_1/output/dense": "attention.dense", "LayerNorm": "attention.LayerNorm",
                "ffn_1/intermediate/dense": "ffn", "ffn_1/intermediate/output/dense": "ffn_output",
                "LayerNorm_1": "full_layer_layer_norm"}
_WEIGHTS = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}


def hf_key(name: str) -> tuple[str, bool] | None:
    """(safetensors key, transposed) of the reference name ``name``; None if the format lacks it."""
    if name in _FIXED:
        return _FIXED[name]
    match = _BLOCK.match(name)
    if match is None or match.group(3) not in _BLOCK_PARTS:
        return None
    group, inner, part, weight = match.groups()
    return (f"albert.encoder.albert_layer_groups.{group}.albert_layers.{inner}."
            f"{_BLOCK_PARTS[part]}.{_WEIGHTS[weight]}", weight == "kernel")


# albert_tf's hidden_act -> transformers' name of the same function; the tanh GELU is "gelu_new"
# ("gelu" is the exact erf form there).
_ACTIVATION_TO_HF = {"gelu": "gelu_new", "relu": "relu", "tanh": "tanh", "linear": "linear",
                     "": "linear"}
_ACTIVATION_FROM_HF = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu",
                       "relu": "relu", "tanh": "tanh", "linear": "linear"}
_SIZE_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
              "num_hidden_groups", "num_attention_heads", "intermediate_size", "inner_group_num",
              "max_position_embeddings", "type_vocab_size")
_FLOAT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")
# The config values that decide what a model computes and are not visible in weight shapes: a
# checkpoint whose config.json differs in one of them from the model's config is refused.
COMPUTE_KEYS = ("num_hidden_layers", "num_hidden_groups", "inner_group_num",
                "num_attention_heads", "hidden_act")


def _groups_differ(layers: int, groups: int) -> int | None:
    """The first layer that transformers' mapping puts in another group than the reference's."""
    return next((layer for layer in range(layers)
                 if int(layer / layers * groups) != int(layer / (layers / groups))), None)


def check_representable(config: AlbertConfig) -> None:
    """HuggingFaceFormatError unless the format computes the model of ``config`` as albert_tf."""
    if config.cross_layer_sharing != "all":
        raise HuggingFaceFormatError(
            f"cross_layer_sharing {config.cross_layer_sharing!r} cannot be written in the Hugging "
            "Face ALBERT format: it shares whole blocks within a group only ('all').")
    layers, groups = config.num_hidden_layers, config.num_hidden_groups
    layer = _groups_differ(layers, groups)
    if layer is not None:
        raise HuggingFaceFormatError(
            f"num_hidden_layers {layers} with num_hidden_groups {groups} cannot be written in the "
            f"Hugging Face ALBERT format: its layer -> group mapping int(l / (L / G)) puts layer "
            f"{layer} in group {int(layer / (layers / groups))}, the reference's int(l / L * G) in "
            f"group {int(layer / layers * groups)} (float rounding).")
    if config.hidden_act.lower() not in _ACTIVATION_TO_HF:
        raise HuggingFaceFormatError(f"hidden_act {config.hidden_act!r} has no Hugging Face name.")


def keras_hub_differences(config: AlbertConfig) -> list[str]:
    """Where keras-hub's AlbertBackbone, which loads the directory, computes another model than
    ``config``'s: it always applies the tanh GELU, and runs L // G layers per group in sequence
    (the reference's mapping only when G divides L)."""
    differences = []
    if config.hidden_act.lower() != "gelu":
        differences.append(f"it applies the tanh GELU, not hidden_act {config.hidden_act!r}")
    if config.num_hidden_layers % config.num_hidden_groups:
        differences.append(
            f"it runs {config.num_hidden_layers // config.num_hidden_groups} layer(s) per group, "
            f"as num_hidden_groups {config.num_hidden_groups} does not divide num_hidden_layers "
            f"{config.num_hidden_layers}")
    return differences


def hf_config_dict(config: AlbertConfig, with_heads: bool, pad_id: int, cls_id: int,
                   sep_id: int) -> dict[str, Any]:
    """The ``config.json`` of ``config`` (``AlbertForPreTraining`` when ``with_heads``, else
    ``AlbertModel``); the special-token ids are the SentencePiece model's. Checks
    ``check_representable`` first."""
    check_representable(config)
    return {
        "architectures": ["AlbertForPreTraining" if with_heads else "AlbertModel"],
        "model_type": MODEL_TYPE,
        **{key: getattr(config, key) for key in _SIZE_KEYS + _FLOAT_KEYS},
        "hidden_act": _ACTIVATION_TO_HF[config.hidden_act.lower()],
        "layer_norm_eps": LAYER_NORM_EPSILON,
        "classifier_dropout_prob": CLASSIFIER_DROPOUT,
        "position_embedding_type": "absolute",
        "pad_token_id": pad_id, "bos_token_id": cls_id, "eos_token_id": sep_id,
        "tie_word_embeddings": True,
        "dtype": "float32",
    }


def albert_config_from_hf(values: Mapping[str, Any], source: str) -> AlbertConfig:
    """The AlbertConfig of a Hugging Face ``config.json`` (``values``, read from ``source``).

    HuggingFaceFormatError for what albert_tf does not compute: another model_type, an activation
    albert_tf lacks (transformers' "gelu" is the exact erf GELU; the reference's is the tanh one,
    "gelu_new"), a layer_norm_eps other than the reference's 1e-12, relative position embeddings,
    or a layer -> group mapping that differs from the reference's.
    """
    if values.get("model_type") != MODEL_TYPE:
        raise HuggingFaceFormatError(f"{source}: model_type {values.get('model_type')!r}; "
                                     f"expected {MODEL_TYPE!r}.")
    act = values.get("hidden_act", "gelu_new")
    if act not in _ACTIVATION_FROM_HF:
        hint = (" (the exact erf GELU; ALBERT's is the tanh one, 'gelu_new')"
                if act == "gelu" else "")
        raise HuggingFaceFormatError(f"{source}: hidden_act {act!r}{hint} is not one albert_tf "
                                     f"computes; expected one of {sorted(_ACTIVATION_FROM_HF)}.")
    eps = values.get("layer_norm_eps", LAYER_NORM_EPSILON)
    if eps != LAYER_NORM_EPSILON:
        raise HuggingFaceFormatError(f"{source}: layer_norm_eps {eps}; albert_tf computes "
                                     f"LayerNorm with the reference's {LAYER_NORM_EPSILON}.")
    position = values.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise HuggingFaceFormatError(f"{source}: position_embedding_type {position!r}; albert_tf "
                                     "has absolute position embeddings only.")
    missing = [key for key in _SIZE_KEYS if key not in values]
    if missing:
        raise HuggingFaceFormatError(f"{source} lacks {', '.join(missing)}.")
    config = AlbertConfig.from_dict(
        {**{key: values[key] for key in _SIZE_KEYS + _FLOAT_KEYS if key in values},
         "hidden_act": _ACTIVATION_FROM_HF[act]})
    check_representable(config)
    return config


def compute_differences(config: AlbertConfig, other: AlbertConfig) -> list[str]:
    """"<key> <other's value> (the model's: <config's value>)" for each of ``COMPUTE_KEYS`` in which
    ``other`` differs from ``config`` (activation names compared case-insensitively)."""
    def value(source: AlbertConfig, key: str) -> Any:
        found = getattr(source, key)
        return found.lower() if isinstance(found, str) else found

    return [f"{key} {getattr(other, key)!r} (the model's: {getattr(config, key)!r})"
            for key in COMPUTE_KEYS if value(config, key) != value(other, key)]
