"""The reference TF1 checkpoint format: the reference's variable names <-> Keras variables.

- ``tf1_variable_map(model)``: {reference name: variable} for an encoder or any task model that
  keeps its encoder in ``.albert`` (task heads add their names through ``tf1_head_variables()``).
- ``load_tf1_checkpoint(model, path)``: reads a checkpoint written by the reference (or by
  ``export_tf1_checkpoint``), returns a ``LoadReport`` of loaded / missing / unused variables.
  Optimizer slots and ``global_step`` are ignored; ``layer_normalization`` / ``layer_norm`` spellings
  of ``LayerNorm`` are accepted; a shape mismatch is an error naming both shapes.
- ``export_tf1_checkpoint(model, prefix)``: writes the reference names (no optimizer slots).

The command line that converts a reference checkpoint to an albert_tf checkpoint and back is
``python -m albert_tf.convert_checkpoint`` (see the README).
"""

from __future__ import annotations

import dataclasses
import os
import re

import keras
import numpy as np
import tensorflow as tf

from albert_tf.io_utils import absolute_path
from albert_tf.modeling import AlbertModel, AttentionFFNBlock
from albert_tf.task_model import AlbertTaskModel

TF2_CHECKPOINT_NAME = "model.ckpt"
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


@dataclasses.dataclass
class LoadReport:
    """What ``load_tf1_checkpoint`` did. Names are the reference's (canonical) names."""

    checkpoint: str
    loaded: dict[str, str]  # model name -> checkpoint name it was read from
    missing: list[str]  # model variables the checkpoint lacks (left as they were)
    unused: list[str]  # checkpoint variables no model variable took
    ignored: int  # optimizer slots and global_step skipped

    def missing_encoder(self) -> list[str]:
        """Missing ``bert/...`` variables: an encoder that did not load."""
        return [name for name in self.missing if name.startswith("bert/")]

    def require_complete_encoder(self) -> None:
        """Raises if any encoder variable was not in the checkpoint (never a silent random init)."""
        missing = self.missing_encoder()
        if missing:
            raise ValueError(
                f"Checkpoint {self.checkpoint} lacks {len(missing)} encoder variable(s) of the model, "
                f"e.g. {missing[:3]}; check that --albert_config_file matches the checkpoint "
                "(num_hidden_groups, inner_group_num, embedding_size) or use --init_from_group0.")

    def format(self) -> str:
        """A human-readable summary, printed by the scripts."""
        lines = [f"Loaded {len(self.loaded)} variable(s) from {self.checkpoint} "
                 f"({self.ignored} optimizer slot(s)/global_step ignored)."]
        grown = {k: v for k, v in self.loaded.items() if k != v}
        if grown:
            lines.append(f"  {len(grown)} variable(s) initialised from another group "
                         f"(e.g. {next(iter(grown))} <- {grown[next(iter(grown))]}).")
        lines.append(f"  missing from the checkpoint ({len(self.missing)}): "
                     + (", ".join(self.missing) if self.missing else "none"))
        lines.append(f"  unused checkpoint variables ({len(self.unused)}): "
                     + (", ".join(self.unused) if self.unused else "none"))
        return "\n".join(lines)


def resolve_checkpoint_path(path: str) -> str:
    """A checkpoint prefix from a prefix or a directory; FileNotFoundError naming the path otherwise."""
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f"No checkpoint found in directory {path}.")
        return latest
    if not tf.io.gfile.exists(path + ".index"):
        raise FileNotFoundError(f"Checkpoint {path} does not exist (no {path}.index).")
    return path


def is_object_based_checkpoint(path: str) -> bool:
    """True for checkpoints written by tf.train.Checkpoint (albert_tf's own runs)."""
    names = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    return any("/.ATTRIBUTES/" in name for name in names)


def load_tf1_checkpoint(model: keras.Model, path: str,
                        init_from_group0: bool = False) -> LoadReport:
    """Assigns the reference-named variables of checkpoint ``path`` to ``model``.

    With ``init_from_group0`` a model variable of group g absent from the checkpoint is read from
    the same variable of group 0 (the reference's growth of a 1-group checkpoint into G groups).
    Raises ValueError on a shape mismatch, naming the variable and both shapes.
    """
    path = resolve_checkpoint_path(path)
    if is_object_based_checkpoint(path):
        raise ValueError(f"{path} is an albert_tf (object-based) checkpoint, not a reference TF1 "
                         "checkpoint; restore it with tf.train.Checkpoint or pass it as "
                         "--init_checkpoint, which accepts both formats.")
    reader = tf.train.load_checkpoint(path)
    raw_shapes = reader.get_variable_to_shape_map()
    by_canonical: dict[str, str] = {}
    ignored = 0
    for raw in raw_shapes:
        if is_ignored_name(raw):
            ignored += 1
            continue
        by_canonical[canonical_name(raw)] = raw

    loaded: dict[str, str] = {}
    missing: list[str] = []
    assignments = []
    for name, variable in tf1_variable_map(model).items():
        source = name
        if source not in by_canonical and init_from_group0:
            source = _GROUP.sub("/group_0/", name)
        if source not in by_canonical:
            missing.append(name)
            continue
        raw = by_canonical[source]
        if tuple(raw_shapes[raw]) != tuple(variable.shape):
            raise ValueError(f"Shape mismatch for {name}: checkpoint {path} has {raw} with shape "
                             f"{tuple(raw_shapes[raw])}, the model expects {tuple(variable.shape)}.")
        assignments.append((variable, reader.get_tensor(raw)))
        loaded[name] = source
    for variable, value in assignments:
        variable.assign(value.astype(np.float32))
    used = set(loaded.values())
    unused = sorted(name for name in by_canonical if name not in used)
    return LoadReport(checkpoint=path, loaded=loaded, missing=missing, unused=unused,
                      ignored=ignored)


def export_tf1_checkpoint(model: keras.Model, prefix: str, global_step: int = 0) -> str:
    """Writes the model's variables under the reference names to ``prefix`` (.index + .data).

    No optimizer slots. Written under a temporary prefix and renamed, then the directory's
    ``checkpoint`` state file points at it. Returns ``prefix``.
    """
    names = tf1_variable_map(model)
    prefix = absolute_path(prefix)
    directory = os.path.dirname(prefix)
    tf.io.gfile.makedirs(directory)
    tmp_prefix = prefix + ".tmp-export"
    tensor_names = sorted(names) + ["global_step"]
    tensors = [tf.convert_to_tensor(names[n].numpy()) for n in sorted(names)]
    tensors.append(tf.constant(global_step, tf.int64))
    tf.raw_ops.SaveV2(prefix=tmp_prefix, tensor_names=tensor_names,
                      shape_and_slices=[""] * len(tensor_names), tensors=tensors)
    for suffix in (".data-00000-of-00001", ".index"):
        tf.io.gfile.rename(tmp_prefix + suffix, prefix + suffix, overwrite=True)
    tf.compat.v1.train.update_checkpoint_state(directory, prefix)
    return prefix


def restore_object_checkpoint(model: keras.Model, path: str) -> str:
    """Restores ``model`` from an albert_tf checkpoint (``tf.train.Checkpoint(model=<task model>)``).

    The encoder must be complete (matched through the object graph edge ``model/albert``, so a
    pretraining checkpoint initialises a classifier); heads load where the checkpoint has them.
    Raises ValueError naming the checkpoint when encoder variables are missing.
    """
    path = resolve_checkpoint_path(path)
    encoder = model if isinstance(model, AlbertModel) else model.albert
    encoder_only = tf.train.Checkpoint(model=tf.train.Checkpoint(albert=encoder))
    status = encoder_only.read(path)
    try:
        status.assert_existing_objects_matched()
    except AssertionError as err:
        raise ValueError(f"{path} does not hold a complete albert_tf encoder for this config "
                         f"(model/albert/...): {str(err)[:500]}") from None
    status.expect_partial()
    tf.train.Checkpoint(model=model).read(path).expect_partial()
    return path

