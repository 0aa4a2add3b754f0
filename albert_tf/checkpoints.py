"""Checkpoints: the reference TF1 format (its names <-> Keras variables) and albert_tf's own.

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

import collections
import dataclasses
import os
import re
from typing import Iterable

import keras
import numpy as np
import tensorflow as tf
from google.protobuf import text_encoding
from tensorflow.core.protobuf import trackable_object_graph_pb2

from albert_tf.io_utils import absolute_path, atomic_write_text
from albert_tf.modeling import AlbertModel, AttentionFFNBlock
from albert_tf.task_model import AlbertTaskModel

TF2_CHECKPOINT_NAME = "model.ckpt"
CHECKPOINT_STATE_FILE = "checkpoint"  # names the latest checkpoint of a directory
SAVED_MODEL_FILE = "saved_model.pb"
SAVED_MODEL_VARIABLES = ("variables", "variables")  # the checkpoint prefix inside a SavedModel
_IGNORED_SUFFIXES = ("/adam_m", "/adam_v", "/lamb_m", "/lamb_v")
_IGNORED_NAMES = ("global_step", "_CHECKPOINTABLE_OBJECT_GRAPH")
_LAYER_NORM_VARIANT = re.compile(r"(^|/)(?:layer_normalization|layer_norm)(_\d+)?(?=/)")
_GROUP = re.compile(r"/group_\d+/")
_OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"  # the object graph an object-based checkpoint stores
_VARIABLE_VALUE = "VARIABLE_VALUE"  # the attribute under which a variable's value is saved
_MODEL_EDGE = "model"  # every albert_tf checkpoint keeps its task model under this edge of the root


class CheckpointMismatchError(ValueError):
    """A checkpoint does not fit the model: a shape differs or variables are missing."""


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
    """What a warm start loaded. Model variables are named by their reference (TF1) names."""

    checkpoint: str
    loaded: dict[str, str]  # model name -> checkpoint name it was read from
    missing: list[str]  # model variables the checkpoint lacks (left as they were)
    unused: list[str]  # checkpoint variables no model variable took
    ignored: int  # optimizer slots and global_step skipped
    kind: str = "reference"  # the checkpoint's format: "reference" (TF1 names) or "albert_tf"

    def missing_encoder(self) -> list[str]:
        """Missing ``bert/...`` variables: an encoder that did not load."""
        return [name for name in self.missing if name.startswith("bert/")]

    def missing_heads(self) -> list[str]:
        """Missing head variables: they keep their random initial values."""
        return [name for name in self.missing if not name.startswith("bert/")]

    def require_complete_encoder(self) -> None:
        """Raises if any encoder variable was not in the checkpoint (never a silent random init)."""
        missing = self.missing_encoder()
        if missing:
            raise CheckpointMismatchError(
                f"Checkpoint {self.checkpoint} lacks {len(missing)} encoder variable(s) of the model, "
                f"e.g. {missing[:3]}; check that --albert_config_file matches the checkpoint "
                "(num_hidden_groups, inner_group_num, embedding_size) or use --init_from_group0.")

    def format(self) -> str:
        """A human-readable summary, printed by the scripts; missing heads get a WARNING line."""
        lines = [f"Loaded {len(self.loaded)} variable(s) from {self.kind} checkpoint "
                 f"{self.checkpoint} ({self.ignored} optimizer slot(s)/global_step ignored)."]
        grown = {k: v for k, v in self.loaded.items() if k != v}
        if grown:
            lines.append(f"  {len(grown)} variable(s) initialised from another group "
                         f"(e.g. {next(iter(grown))} <- {grown[next(iter(grown))]}).")
        lines.append(f"  missing from the checkpoint ({len(self.missing)}): "
                     + (", ".join(self.missing) if self.missing else "none"))
        lines.append(f"  unused checkpoint variables ({len(self.unused)}): "
                     + (", ".join(self.unused) if self.unused else "none"))
        heads = self.missing_heads()
        if heads:
            lines.append(f"WARNING: {len(heads)} head variable(s) are not in {self.checkpoint} and "
                         f"keep their random initial values: {', '.join(heads)}.")
        return "\n".join(lines)


def _model_of(config_file: str | None) -> str:
    return f"the model of {config_file}" if config_file else "the model's config"


def _shape_mismatch(name: str, checkpoint: str, stored: Iterable[int], expected: Iterable[int],
                    config_file: str | None) -> CheckpointMismatchError:
    return CheckpointMismatchError(
        f"Checkpoint {checkpoint} does not fit {_model_of(config_file)}: {name} has shape "
        f"{tuple(stored)} in the checkpoint, the model expects {tuple(expected)}. Use the config "
        "the checkpoint was written with.")


def resolve_checkpoint_path(path: str) -> str:
    """A checkpoint prefix from a prefix, a directory of checkpoints (its latest) or a SavedModel
    directory; FileNotFoundError naming the path otherwise.

    A SavedModel's ``variables/variables`` is an object-based checkpoint rooted at the exported
    module: albert_tf's exports keep their task model in the attribute ``model``, so it reads like
    a checkpoint of ``tf.train.Checkpoint(model=...)``.
    """
    if tf.io.gfile.isdir(path):
        if tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE)):
            return os.path.join(path, *SAVED_MODEL_VARIABLES)
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


def load_tf1_checkpoint(model: keras.Model, path: str, init_from_group0: bool = False,
                        config_file: str | None = None) -> LoadReport:
    """Assigns the reference-named variables of checkpoint ``path`` to ``model``.

    With ``init_from_group0`` a model variable of group g absent from the checkpoint is read from
    the same variable of group 0 (the reference's growth of a 1-group checkpoint into G groups).
    Raises CheckpointMismatchError on a shape mismatch (naming the variable, both shapes, the
    checkpoint and ``config_file``, the model's config) before any variable changes.
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
            raise _shape_mismatch(name, path, raw_shapes[raw], variable.shape, config_file)
        assignments.append((variable, raw))
        loaded[name] = source
    for variable, raw in assignments:
        variable.assign(reader.get_tensor(raw).astype(np.float32))
    used = set(loaded.values())
    unused = sorted(name for name in by_canonical if name not in used)
    return LoadReport(checkpoint=path, loaded=loaded, missing=missing, unused=unused,
                      ignored=ignored)


def write_checkpoint_state(directory: str, name: str) -> None:
    """Points ``directory``'s ``checkpoint`` state file at the prefix ``name`` alone, atomically.
    ``name`` is relative to ``directory``, so that the directory can be moved."""
    entry = f'"{text_encoding.CEscape(name, as_utf8=True)}"'  # a text-format protobuf string
    atomic_write_text(os.path.join(directory, CHECKPOINT_STATE_FILE),
                      f"model_checkpoint_path: {entry}\nall_model_checkpoint_paths: {entry}\n")


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


# ------------------------------------------------------------ albert_tf's own (object-based) format
ObjectPath = tuple[str, ...]  # edge names from a checkpoint's root to an object


def checkpoint_root(model: keras.Model) -> tf.train.Checkpoint:
    """The root albert_tf saves a model under: ``model`` for a task model, ``model/albert`` for an
    encoder alone (so an encoder and the encoder of a task model have the same object paths)."""
    if isinstance(model, AlbertModel):
        return tf.train.Checkpoint(model=tf.train.Checkpoint(albert=model))
    return tf.train.Checkpoint(model=model)


def object_variable_paths(root: tf.train.Checkpoint) -> dict[ObjectPath, keras.Variable]:
    """Every variable reachable from ``root`` with the object path ``tf.train.Checkpoint`` saves it
    under: breadth first, the first path to an object wins, as TensorFlow's own traversal."""
    view = tf.train.TrackableView(root)
    paths: dict[int, ObjectPath] = {id(root): ()}
    variables: dict[ObjectPath, keras.Variable] = {}
    queue = collections.deque([root])
    while queue:
        parent = queue.popleft()
        for name, child in view.children(parent).items():
            if id(child) in paths:
                continue
            paths[id(child)] = paths[id(parent)] + (name,)
            if isinstance(child, (keras.Variable, tf.Variable)):
                variables[paths[id(child)]] = child
            queue.append(child)
    return variables


class _StoredObjectGraph:
    """The object graph of an object-based checkpoint: which saved value an object path names."""

    def __init__(self, reader: tf.train.CheckpointReader, path: str):
        if not reader.has_tensor(_OBJECT_GRAPH):
            raise CheckpointMismatchError(
                f"{path} is a reference TF1 checkpoint, not an albert_tf (object-based) one.")
        graph = trackable_object_graph_pb2.TrackableObjectGraph()
        graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH))
        self._children = [{child.local_name: child.node_id for child in node.children}
                          for node in graph.nodes]
        self._keys = [next((a.checkpoint_key for a in node.attributes if a.name == _VARIABLE_VALUE),
                           None) for node in graph.nodes]

    def key(self, path: ObjectPath) -> str | None:
        """The saved value at ``path`` (None if the checkpoint has no variable there)."""
        node = 0
        for name in path:
            node = self._children[node].get(name)
            if node is None:
                return None
        return self._keys[node]

    def variables(self, path: ObjectPath = ()) -> dict[str, ObjectPath]:
        """{saved value: its first object path} of every variable reachable from ``path`` (a value
        may be saved under another path, e.g. the optimizer's list of the variables it trains)."""
        start = 0
        for name in path:
            start = self._children[start].get(name)
            if start is None:
                return {}
        paths, queue = {start: tuple(path)}, collections.deque([start])
        while queue:
            node = queue.popleft()
            for name, child in self._children[node].items():
                if child not in paths:
                    paths[child] = paths[node] + (name,)
                    queue.append(child)
        return {self._keys[node]: object_path for node, object_path in paths.items()
                if self._keys[node] is not None}


def _match_object_checkpoint(model: keras.Model, reader: tf.train.CheckpointReader, path: str,
                             init_from_group0: bool, config_file: str | None
                             ) -> tuple[LoadReport, list[tuple[keras.Variable, str]]]:
    """The report of loading object-based checkpoint ``path`` (read by ``reader``) into ``model``
    and its assignments (variable, saved key); CheckpointMismatchError on a shape mismatch.
    Changes nothing."""
    stored = _StoredObjectGraph(reader, path)
    shapes = reader.get_variable_to_shape_map()
    reference_order = {id(v): (i, name)
                       for i, (name, v) in enumerate(tf1_variable_map(model).items())}
    unnamed = (len(reference_order), "")
    variables = dict(sorted(object_variable_paths(checkpoint_root(model)).items(),
                            key=lambda item: reference_order.get(id(item[1]), unnamed)))
    names = {object_path: reference_order.get(id(v), unnamed)[1] or "/".join(object_path)
             for object_path, v in variables.items()}
    path_of = {name: object_path for object_path, name in names.items()}

    loaded: dict[str, str] = {}
    missing: list[str] = []
    assignments = []
    for object_path, variable in variables.items():
        name = source = names[object_path]
        key = stored.key(object_path)
        if key is None and init_from_group0 and _GROUP.sub("/group_0/", name) in path_of:
            source = _GROUP.sub("/group_0/", name)
            key = stored.key(path_of[source])
        if key is None:
            missing.append(name)
            continue
        if tuple(shapes[key]) != tuple(variable.shape):
            raise _shape_mismatch(name, path, shapes[key], variable.shape, config_file)
        assignments.append((variable, key))
        loaded[name] = source
    in_model = stored.variables((_MODEL_EDGE,))
    used = {key for _, key in assignments}
    unused = sorted("/".join(object_path) for key, object_path in in_model.items()
                    if key not in used)
    ignored = len(stored.variables().keys() - in_model.keys())
    report = LoadReport(checkpoint=path, loaded=loaded, missing=missing, unused=unused,
                        ignored=ignored, kind="albert_tf")
    return report, assignments


def load_object_checkpoint(model: keras.Model, path: str, init_from_group0: bool = False,
                           config_file: str | None = None) -> LoadReport:
    """Assigns the variables of an albert_tf checkpoint (``tf.train.Checkpoint(model=<task
    model>)``, also a SavedModel's variables) that ``model`` has, matched through the object graph:
    the encoder under ``model/albert``, heads under their attribute names.

    Model weights only (no optimizer state). With ``init_from_group0`` a variable of group g that
    the checkpoint lacks is read from group 0, as for reference checkpoints. Raises
    CheckpointMismatchError on a shape mismatch before any variable changes.
    """
    path = resolve_checkpoint_path(path)
    reader = tf.train.load_checkpoint(path)
    report, assignments = _match_object_checkpoint(model, reader, path, init_from_group0,
                                                   config_file)
    for variable, key in assignments:
        variable.assign(reader.get_tensor(key))
    return report


def load_checkpoint(model: keras.Model, path: str, init_from_group0: bool = False,
                    config_file: str | None = None) -> LoadReport:
    """The warm start: loads a reference TF1 or an albert_tf checkpoint (prefix or directory) into
    ``model`` and returns the report. Callers print ``report.format()`` and call
    ``report.require_complete_encoder()``: heads may be missing (fine-tuning from pretraining), the
    encoder may not."""
    path = resolve_checkpoint_path(path)
    loader = load_object_checkpoint if is_object_based_checkpoint(path) else load_tf1_checkpoint
    return loader(model, path, init_from_group0=init_from_group0, config_file=config_file)


def require_same_model(model: keras.Model, path: str, config_file: str | None = None) -> None:
    """Raises CheckpointMismatchError unless the albert_tf checkpoint ``path`` holds exactly the
    model's variables with the model's shapes: what resuming a run or evaluating its checkpoints
    needs (a config edited since the run started fails here with one message, not TensorFlow's)."""
    reader = tf.train.load_checkpoint(path)
    report, _ = _match_object_checkpoint(model, reader, path, False, config_file)
    if report.missing or report.unused:
        parts = []
        if report.missing:
            parts.append(f"lacks {len(report.missing)} of its variable(s) (e.g. "
                         f"{', '.join(report.missing[:3])})")
        if report.unused:
            parts.append(f"holds {len(report.unused)} it does not have (e.g. "
                         f"{', '.join(report.unused[:3])})")
        raise CheckpointMismatchError(
            f"Checkpoint {path} was written by another model than {_model_of(config_file)}: it "
            + " and ".join(parts) + ". Use the config and task the run started with, or a new "
            "--output_dir.")


def require_same_optimizer(optimizer: keras.optimizers.Optimizer, path: str) -> None:
    """Raises CheckpointMismatchError unless the albert_tf checkpoint ``path`` holds the state of an
    optimizer like ``optimizer`` under ``optimizer``: the same variables, shapes and dtypes. Else a
    resumed run would take another optimizer's state, or none, in silence (or TensorFlow's error)."""
    reader = tf.train.load_checkpoint(path)
    stored = _StoredObjectGraph(reader, path)
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    matched, differing = set(), []
    for object_path, variable in object_variable_paths(
            tf.train.Checkpoint(optimizer=optimizer)).items():
        key = stored.key(object_path)
        if (key is None or tuple(shapes[key]) != tuple(variable.shape)
                or dtypes[key] != tf.as_dtype(variable.dtype)):
            differing.append("/".join(object_path))
        matched.add(key)
    extra = sorted("/".join(p) for key, p in stored.variables(("optimizer",)).items()
                   if key not in matched)
    if differing or extra:
        raise CheckpointMismatchError(
            f"Checkpoint {path} holds the state of another optimizer than this run's (were "
            f"--optimizer or --dtype changed since the run started?): {len(differing)} of its "
            f"variable(s) missing or different (e.g. {', '.join(differing[:2]) or 'none'}), "
            f"{len(extra)} other(s) (e.g. {', '.join(extra[:2]) or 'none'}). Use the run's "
            "settings, or a new --output_dir.")


def restore_object_checkpoint(model: keras.Model, path: str) -> str:
    """Restores ``model`` from an albert_tf checkpoint; returns the prefix read.

    The encoder must be complete (matched through the object graph edge ``model/albert``, so a
    pretraining checkpoint initialises a classifier); heads load where the checkpoint has them.
    Raises CheckpointMismatchError naming the checkpoint when encoder variables are missing.
    """
    report = load_object_checkpoint(model, path)
    report.require_complete_encoder()
    return report.checkpoint
