"""TODO(split) Checkpoints: the reference TF1 format (its names <-> Keras variables) and albert_tf's own.

- ``tf1_variable_map(model)``: {reference name: variable} for an encoder or any task model that
  keeps its encoder in ``.albert`` (task heads add their names through ``tf1_head_variables()``).
- ``load_checkpoint(model, path)``: the warm start from either format; returns a ``LoadReport`` of
  loaded / missing / unused variables (reference names), which the scripts print.
  ``load_tf1_checkpoint`` reads a checkpoint written by the reference (or by
  ``export_tf1_checkpoint``): optimizer slots and ``global_step`` are ignored,
  ``layer_normalization`` / ``layer_norm`` spellings of ``LayerNorm`` are accepted.
  ``load_object_checkpoint`` reads one written by ``tf.train.Checkpoint(model=<task model>)``
  (albert_tf's runs, conversions, exports), matching variables through the object graph, so a
  checkpoint of one task warm-starts another.
  Either way a shape mismatch is a ``CheckpointMismatchError`` naming the variable, both shapes, the
  checkpoint and (when given) the config file, raised before any variable changes.
- ``require_same_model(model, path)``: a run's own checkpoint (resume, evaluation) must hold exactly
  the model's variables, with its shapes: a config edited between runs is one clear error;
  ``require_same_optimizer`` checks the same of the optimizer's state before a resume.
- ``export_tf1_checkpoint(model, prefix)``: writes the reference names (no optimizer slots).

The command line that converts a reference checkpoint to an albert_tf checkpoint and back is
``python -m albert_tf.convert_checkpoint`` (see the README).
"""

from __future__ import annotations

import re

import keras

from albert_tf.models.encoder import AlbertModel, AttentionFFNBlock
from albert_tf.models.task_model import AlbertTaskModel

_IGNORED_SUFFIXES = ("/adam_m", "/adam_v", "/lamb_m", "/lamb_v")


_IGNORED_NAMES = ("global_step", "_CHECKPOINTABLE_OBJECT_GRAPH")


_LAYER_NORM_VARIANT = re.compile(r"(^|/)(?:layer_normalization|layer_norm)(_\d+)?(?=/)")


_GROUP = re.compile(r"/group_\d+/")


def _block_variables(prefix: str, block: AttentionFFNBlock) -> dict[str, keras.Variable]:
    names = {}
    for tf1_name, dense in (("attention_1/self/query", block.query),
                            ("attention_1/self/key", block.key),
                            ("attention_1/self/value", block.value),
                            ("attention_1/output/dense", block.attention_output),
                            ("ffn_1/intermediate/dense", block.ffn_intermediate),
                            ("ffn_1/intermediate/output/dense", block.ffn_output)):
        names[f"{prefix}/{tf1_name}/kernel"] = dense.kernel
        names[f"{prefix}/{tf1_name}/bias"] = dense.bias
    for tf1_name, norm in (("LayerNorm", block.attention_layer_norm),
                           ("LayerNorm_1", block.ffn_layer_norm)):
        names[f"{prefix}/{tf1_name}/beta"] = norm.beta
        names[f"{prefix}/{tf1_name}/gamma"] = norm.gamma
    return names


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
    for g, blocks in enumerate(albert.transformer.groups):
        for k, block in enumerate(blocks):
            names.update(_block_variables(f"bert/encoder/transformer/group_{g}/inner_group_{k}",
                                          block))
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
