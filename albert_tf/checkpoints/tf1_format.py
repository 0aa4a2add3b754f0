"""Reference TF1 checkpoints: loading them into a model and writing a model under the reference names.

- ``load_tf1_checkpoint``: reads a checkpoint written by the reference (or by
  ``export_tf1_checkpoint``): optimizer slots and ``global_step`` are ignored, ``layer_normalization``
  / ``layer_norm`` spellings of ``LayerNorm`` are accepted (albert_tf/checkpoints/tf1_names.py). A
  shape mismatch is a ``CheckpointMismatchError`` naming the variable, both shapes, the checkpoint
  and (when given) the config file, raised before any variable changes. Returns a ``LoadReport``.
- ``export_tf1_checkpoint``: writes the reference names (no optimizer slots; optionally only some
  names, so a head the source lacked is not exported as if trained), under a temporary prefix
  renamed when complete.
"""

from __future__ import annotations

import os
from typing import Iterable

import keras
import numpy as np
import tensorflow as tf

from albert_tf.checkpoints.config_beside import check_config_beside
from albert_tf.checkpoints.files import (check_data_shards, is_object_based_checkpoint,
                                         write_checkpoint_state)
from albert_tf.checkpoints.run_directory import resolve_checkpoint_path
from albert_tf.checkpoints.report import CheckpointMismatchError, LoadReport, shape_mismatch_error
from albert_tf.checkpoints.tf1_names import (canonical_name, group_zero_name, is_ignored_name,
                                             tf1_variable_map)
from albert_tf.files.paths import absolute_path


def load_tf1_checkpoint(model: keras.Model, path: str, init_from_group0: bool = False,
                        config_file: str | None = None) -> LoadReport:
    """Assigns the reference-named variables of checkpoint ``path`` to ``model``.

    With ``init_from_group0`` a model variable of group g absent from the checkpoint is read from
    the same variable of group 0 (the reference's growth of a 1-group checkpoint into G groups).
    Raises CheckpointMismatchError on a shape mismatch (naming the variable, both shapes, the
    checkpoint and ``config_file``, the model's config) before any variable changes.
    """
    path = resolve_checkpoint_path(path)
    check_data_shards(path)
    check_config_beside(path, model.config, config_file, init_from_group0)
    if is_object_based_checkpoint(path):
        raise CheckpointMismatchError(
            f"{path} is an albert_tf (object-based) checkpoint, not a reference TF1 checkpoint; "
            "restore it with tf.train.Checkpoint or pass it as --init_checkpoint, which accepts "
            "both formats.")
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
            source = group_zero_name(name)
        if source not in by_canonical:
            missing.append(name)
            continue
        raw = by_canonical[source]
        if tuple(raw_shapes[raw]) != tuple(variable.shape):
            raise shape_mismatch_error(name, path, raw_shapes[raw], variable.shape, config_file)
        assignments.append((variable, raw))
        loaded[name] = source
    for variable, raw in assignments:
        variable.assign(reader.get_tensor(raw).astype(np.float32))
    used = set(loaded.values())
    unused = sorted(name for name in by_canonical if name not in used)
    return LoadReport(checkpoint=path, loaded=loaded, missing=missing, unused=unused,
                      ignored=ignored)


def export_tf1_checkpoint(model: keras.Model, prefix: str, global_step: int = 0,
                          only: Iterable[str] | None = None) -> str:
    """Writes the model's variables under the reference names to ``prefix`` (.index + .data).

    ``only``: the reference names to write (e.g. a ``LoadReport``'s loaded ones, so that no random
    head is exported as if trained); all by default. No optimizer slots. Written under a temporary
    prefix and renamed, then the directory's ``checkpoint`` state file points at it. Returns
    ``prefix``.
    """
    names = tf1_variable_map(model)
    if only is not None:
        names = {name: names[name] for name in only}
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
    write_checkpoint_state(directory, os.path.basename(prefix))
    return prefix
