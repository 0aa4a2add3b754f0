"""The reference's TF1 variable names <-> the Keras variables of an encoder or a task model.

- ``tf1_variable_map(model)``: {reference name: variable} for an ``AlbertModel`` (the ``bert/...``
  scope, ``encoder_variable_map``) or any ``AlbertTaskModel``, whose head adds its names through
  ``tf1_head_variables()``.
- Transformer names: the reference's ``group_{g}/inner_group_{k}/...`` under the default
  ``cross_layer_sharing`` ``all``; under ``attention`` / ``ffn`` / ``none`` each layer l owns the
  scope ``group_{l}`` (the reference's names for G = L), where a shared part appears once, under
  the first layer that runs it (e.g. ``attention``: ``group_0/.../attention_1`` and ``LayerNorm``,
  and ``ffn_1`` and ``LayerNorm_1`` under every ``group_{l}``).
- ``canonical_name``: the ``layer_normalization`` / ``layer_norm`` spellings of ``LayerNorm`` (and a
  ``:0`` suffix) that other TF1 writers use map to the reference's.
- ``is_ignored_name``: optimizer slots, ``global_step`` and object-graph metadata are never weights.
- ``group_zero_name``: where ``init_from_group0`` reads a variable the checkpoint lacks (the
  reference's growth of a 1-group checkpoint into G groups).
"""

from __future__ import annotations

import re

import keras

from albert_tf.models.encoder import AlbertModel, AlbertTransformer, AttentionFFNBlock
from albert_tf.models.layers import LayerNorm
from albert_tf.models.task_model import AlbertTaskModel

_IGNORED_SUFFIXES = ("/adam_m", "/adam_v", "/lamb_m", "/lamb_v")
_IGNORED_NAMES = ("global_step", "_CHECKPOINTABLE_OBJECT_GRAPH")
_LAYER_NORM_VARIANT = re.compile(r"(^|/)(?:layer_normalization|layer_norm)(_\d+)?(?=/)")
_GROUP = re.compile(r"/group_\d+/")


_ATTENTION_NAMES = (("attention_1/self/query", "query"), ("attention_1/self/key", "key"),
                    ("attention_1/self/value", "value"),
                    ("attention_1/output/dense", "attention_output"),
                    ("LayerNorm", "attention_layer_norm"))
_FFN_NAMES = (("ffn_1/intermediate/dense", "ffn_intermediate"),
              ("ffn_1/intermediate/output/dense", "ffn_output"), ("LayerNorm_1", "ffn_layer_norm"))


def _part_variables(prefix: str, block: AttentionFFNBlock,
                    names: tuple[tuple[str, str], ...]) -> dict[str, keras.Variable]:
    """{reference name: variable} of one part (attention or feed-forward) of a block."""
    variables = {}
    for tf1_name, attribute in names:
        layer = getattr(block, attribute)
        weights = (("beta", "gamma") if isinstance(layer, LayerNorm) else ("kernel", "bias"))
        for weight in weights:
            variables[f"{prefix}/{tf1_name}/{weight}"] = getattr(layer, weight)
    return variables


def _transformer_variables(transformer: AlbertTransformer) -> dict[str, keras.Variable]:
    """{reference name: variable} of the transformer: each part under the scope
    ``group_{n}/inner_group_{k}`` of the first layer that runs it (n = ``variable_group``)."""
    variables: dict[str, keras.Variable] = {}
    named: set[int] = set()
    for layer_index, blocks in enumerate(transformer.layer_blocks):
        group = transformer.variable_group(layer_index)
        for k, block in enumerate(blocks):
            prefix = f"bert/encoder/transformer/group_{group}/inner_group_{k}"
            for names in (_ATTENTION_NAMES, _FFN_NAMES):
                first_layer = getattr(block, names[0][1])
                if id(first_layer) not in named:
                    named.add(id(first_layer))
                    variables.update(_part_variables(prefix, block, names))
    return variables


def encoder_variable_map(albert: AlbertModel) -> dict[str, keras.Variable]:
    """{reference name: variable} for the ``bert/...`` scope of an AlbertModel."""
    emb = albert.embeddings
    names = {
        "bert/embeddings/word_embeddings": emb.word_embeddings,
        "bert/embeddings/token_type_embeddings": emb.token_type_embeddings,
        "bert/embeddings/position_embeddings": emb.position_embeddings,
        "bert/embeddings/LayerNorm/beta": emb.layer_norm.beta,
        "bert/embeddings/LayerNorm/gamma": emb.layer_norm.gamma,
    }
    if albert.embedding_projection is not None:
        names["bert/encoder/embedding_hidden_mapping_in/kernel"] = albert.embedding_projection.kernel
        names["bert/encoder/embedding_hidden_mapping_in/bias"] = albert.embedding_projection.bias
    names.update(_transformer_variables(albert.transformer))
    names["bert/pooler/dense/kernel"] = albert.pooler.kernel
    names["bert/pooler/dense/bias"] = albert.pooler.bias
    return names


def tf1_variable_map(model: keras.Model) -> dict[str, keras.Variable]:
    """{reference TF1 name: variable} for an AlbertModel or an ``AlbertTaskModel`` (encoder + head)."""
    if isinstance(model, AlbertModel):
        return encoder_variable_map(model)
    if not isinstance(model, AlbertTaskModel):
        raise TypeError(f"{type(model).__name__} is neither an AlbertModel nor an AlbertTaskModel.")
    return {**encoder_variable_map(model.albert), **model.tf1_head_variables()}


def canonical_name(name: str) -> str:
    """Strips ':0' and maps ``layer_normalization[_N]`` / ``layer_norm[_N]`` to ``LayerNorm[_N]``."""
    name = name.split(":")[0]
    return _LAYER_NORM_VARIANT.sub(lambda m: f"{m.group(1)}LayerNorm{m.group(2) or ''}", name)


def is_ignored_name(name: str) -> bool:
    """Optimizer slots, the global step and object-graph metadata are never model weights."""
    return name in _IGNORED_NAMES or name.endswith(_IGNORED_SUFFIXES)


def group_zero_name(name: str) -> str:
    """The reference name of the same variable in group 0 (``.../group_3/...`` -> ``.../group_0/...``):
    where ``init_from_group0`` reads a variable the checkpoint lacks, as the reference's growth of a
    1-group checkpoint into G groups."""
    return _GROUP.sub("/group_0/", name)
