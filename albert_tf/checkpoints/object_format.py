"""albert_tf's own checkpoints: object-based, written by ``tf.train.Checkpoint(model=<task model>)``.

Runs, conversions and exports (a SavedModel's variables) keep the task model under the edge
``model`` and its encoder under ``model/albert``, so variables match through the object graph and a
checkpoint of one task warm-starts another.

- ``load_object_checkpoint``: the model's weights that the checkpoint holds (no optimizer state);
  a shape mismatch is a ``CheckpointMismatchError`` naming the variable, both shapes, the
  checkpoint and (when given) the config file, raised before any variable changes. Returns a
  ``LoadReport`` under the reference names (albert_tf/checkpoints/tf1_names.py).
- ``restore_object_checkpoint``: the same, requiring the whole encoder.
- ``require_same_model(model, path)``: a run's own checkpoint (resume, evaluation) must hold exactly
  the model's variables, with its shapes: a config edited between runs is one clear error;
  ``require_same_optimizer`` checks the same of the optimizer's state before a resume.
- ``checkpoint_root``, ``object_variable_paths``: the object paths albert_tf saves a model under;
  ``stored_model_variables``: those a checkpoint holds, with their shapes.
"""

from __future__ import annotations

import collections

import keras
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from albert_tf.checkpoints.config_beside import check_config_beside
from albert_tf.checkpoints.files import check_data_shards
from albert_tf.checkpoints.run_directory import resolve_checkpoint_path
from albert_tf.checkpoints.report import (CheckpointMismatchError, LoadReport, model_description,
                                          shape_mismatch_error)
from albert_tf.checkpoints.tf1_names import group_zero_name, tf1_variable_map
from albert_tf.models.encoder import AlbertModel

_OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"  # the object graph an object-based checkpoint stores
_VARIABLE_VALUE = "VARIABLE_VALUE"  # the attribute under which a variable's value is saved
_MODEL_EDGE = "model"  # every albert_tf checkpoint keeps its task model under this edge of the root


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


def stored_model_variables(path: str) -> dict[ObjectPath, tuple[int, ...]]:
    """{object path below the task model (the ``model`` edge left out): shape} of every model
    variable of the albert_tf checkpoint ``path`` (a prefix), e.g. ``("classifier",
    "output_weights")``; CheckpointMismatchError for a reference TF1 checkpoint."""
    reader = tf.train.load_checkpoint(path)
    shapes = reader.get_variable_to_shape_map()
    stored = _StoredObjectGraph(reader, path).variables((_MODEL_EDGE,))
    return {object_path[1:]: tuple(shapes[key]) for key, object_path in stored.items()}


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
        if key is None and init_from_group0 and group_zero_name(name) in path_of:
            source = group_zero_name(name)
            key = stored.key(path_of[source])
        if key is None:
            missing.append(name)
            continue
        if tuple(shapes[key]) != tuple(variable.shape):
            raise shape_mismatch_error(name, path, shapes[key], variable.shape, config_file)
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
    check_data_shards(path)
    check_config_beside(path, model.config, config_file, init_from_group0)
    reader = tf.train.load_checkpoint(path)
    report, assignments = _match_object_checkpoint(model, reader, path, init_from_group0,
                                                   config_file)
    for variable, key in assignments:
        variable.assign(reader.get_tensor(key))
    return report


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
            f"Checkpoint {path} was written by another model than {model_description(config_file)}: it "
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
