"""Converting checkpoints between the reference TF1 format and albert_tf's own (the library of
``python -m albert_tf.convert_checkpoint``).

- ``tf1_to_albert_tf``: a reference checkpoint -> ``output_dir/model.ckpt-0`` (albert_tf's format);
- ``albert_tf_to_tf1``: an albert_tf checkpoint (prefix or directory) -> ``output_dir/model.ckpt``.

Both load the source into the model they are given (the command gives the pretraining model:
encoder + MLM and SOP heads), print the load report and require the whole encoder. Only what the
source holds is written: a head the source lacks is left out of the output, never written with its
random initial values.

The output directory belongs to the converter (``check_output_dir``). One that holds any other
checkpoint (a training run's, a released model's) is refused, ``overwrite`` or not: writing there
would change the ``checkpoint`` state file that run resumes from. An earlier conversion of the same
direction is replaced only with ``overwrite``. Source format and output directory are checked
before anything is loaded; a refusal is a ``ConversionError``.
"""

from __future__ import annotations

import os

import keras
import tensorflow as tf

from albert_tf.checkpoints.files import (TF2_CHECKPOINT_NAME, is_object_based_checkpoint,
                                         resolve_checkpoint_path, write_checkpoint_state)
from albert_tf.checkpoints.object_format import (checkpoint_root, load_object_checkpoint,
                                                 object_variable_paths)
from albert_tf.checkpoints.report import LoadReport
from albert_tf.checkpoints.tf1_format import export_tf1_checkpoint, load_tf1_checkpoint
from albert_tf.checkpoints.tf1_names import tf1_variable_map
from albert_tf.files.paths import absolute_path
from albert_tf.models.task_model import AlbertTaskModel

ALBERT_TF_OUTPUT = f"{TF2_CHECKPOINT_NAME}-0"  # the prefix a reference checkpoint converts to
TF1_OUTPUT = TF2_CHECKPOINT_NAME  # the prefix an albert_tf checkpoint converts to
_TEMPORARY_SUFFIX = ".tmp-export"  # export_tf1_checkpoint's temporary prefix


class ConversionError(ValueError):
    """A conversion refused before any work: a source of the wrong format, an unusable output."""


def _checkpoints_in(directory: str) -> set[str]:
    """Names of the checkpoint prefixes in ``directory``: its ``.index`` files and the entries of
    its ``checkpoint`` state file (the temporary prefix of an interrupted export excluded)."""
    names = {name[:-len(".index")] for name in tf.io.gfile.listdir(directory)
             if name.endswith(".index") and not name.endswith(_TEMPORARY_SUFFIX + ".index")}
    state = tf.train.get_checkpoint_state(directory)
    if state is not None:
        listed = [state.model_checkpoint_path, *state.all_model_checkpoint_paths]
        names.update(os.path.basename(path) for path in listed if path)
    return names


def check_output_dir(output_dir: str, output_name: str, overwrite: bool) -> str:
    """The prefix ``output_dir/output_name`` to write. ConversionError when ``output_dir`` is a
    file, holds any other checkpoint (never touched, even with ``overwrite``), or already holds
    ``output_name`` and ``overwrite`` is False."""
    prefix = os.path.join(absolute_path(output_dir), output_name)
    if not tf.io.gfile.exists(output_dir):
        return prefix
    if not tf.io.gfile.isdir(output_dir):
        raise ConversionError(f"--output_dir={output_dir} is a file; expected a directory.")
    present = _checkpoints_in(output_dir)
    others = sorted(present - {output_name})
    if others:
        raise ConversionError(
            f"--output_dir={output_dir} holds other checkpoints ({', '.join(others[:5])}): it is a "
            "training run's or a model's directory, and converting into it would change the "
            "'checkpoint' file that it resumes from. Choose a new or empty directory "
            "(--overwrite never applies to other checkpoints).")
    if output_name in present and not overwrite:
        raise ConversionError(f"{prefix} already exists (an earlier conversion); pass --overwrite "
                              "to replace it, or choose another --output_dir.")
    return prefix


def _source(path: str, flag: str, object_based: bool) -> str:
    """The checkpoint prefix that ``--<flag>=path`` names, checked to have that flag's format."""
    try:
        prefix = resolve_checkpoint_path(path)
    except FileNotFoundError as err:
        raise ConversionError(f"--{flag}: {err}") from None
    if is_object_based_checkpoint(prefix) != object_based:
        hint = ("an albert_tf checkpoint; pass it as --checkpoint to convert it to the reference "
                "format." if not object_based else
                "a reference TF1 checkpoint; pass it as --tf1_checkpoint to convert it to "
                "albert_tf.")
        raise ConversionError(f"--{flag}={path} is {hint}")
    return prefix


def _complete_parts(model: keras.Model,
                    report: LoadReport) -> tuple[dict[str, keras.layers.Layer], list[str]]:
    """({attribute: part}, [attribute]) of the model's parts (encoder, each head) whose variables
    the report loaded all of, and of those it did not."""
    loaded = {id(tf1_variable_map(model)[name]) for name in report.loaded}
    complete: dict[str, bool] = {}
    for object_path, variable in object_variable_paths(checkpoint_root(model)).items():
        part = object_path[1]  # (model, part, ...)
        complete[part] = complete.get(part, True) and id(variable) in loaded
    children = tf.train.TrackableView(model).children(model)
    return ({name: children[name] for name, ok in complete.items() if ok},
            [name for name, ok in complete.items() if not ok])


def tf1_to_albert_tf(model: AlbertTaskModel, tf1_checkpoint: str, output_dir: str,
                     init_from_group0: bool = False, overwrite: bool = False,
                     config_file: str | None = None) -> str:
    """Converts a reference checkpoint to ``output_dir/model.ckpt-0``; returns that prefix.

    model: a fresh task model of the checkpoint's config (the command uses the pretraining model,
    whose heads a released checkpoint holds); the source is loaded into it.

    Prints the load report; raises if encoder variables are missing. The encoder and each head
    the source holds completely are written; the ``checkpoint`` state file then names the output.
    """
    output_prefix = check_output_dir(output_dir, ALBERT_TF_OUTPUT, overwrite)
    source = _source(tf1_checkpoint, "tf1_checkpoint", object_based=False)
    report = load_tf1_checkpoint(model, source, init_from_group0, config_file)
    print(report.format())
    report.require_complete_encoder()
    parts, left_out = _complete_parts(model, report)
    if left_out:
        print(f"Left out of {output_prefix} (not in the source): {', '.join(left_out)}.")
    prefix = tf.train.Checkpoint(model=tf.train.Checkpoint(**parts)).write(output_prefix)
    write_checkpoint_state(os.path.dirname(prefix), ALBERT_TF_OUTPUT)
    return prefix


def albert_tf_to_tf1(model: AlbertTaskModel, checkpoint: str, output_dir: str,
                     init_from_group0: bool = False, overwrite: bool = False,
                     config_file: str | None = None) -> tuple[str, str, int]:
    """Converts an albert_tf checkpoint to ``output_dir/model.ckpt`` under the reference names;
    returns (the checkpoint read, the prefix written, the number of variables written).

    model: a fresh task model of the checkpoint's config, loaded from the source.

    Prints the load report; raises if encoder variables are missing; writes only the variables
    the source holds.
    """
    output_prefix = check_output_dir(output_dir, TF1_OUTPUT, overwrite)
    source = _source(checkpoint, "checkpoint", object_based=True)
    report = load_object_checkpoint(model, source, init_from_group0, config_file)
    print(report.format())
    report.require_complete_encoder()
    if report.missing:
        print(f"Left out of {output_prefix} (not in the source): {', '.join(report.missing)}.")
    export_tf1_checkpoint(model, output_prefix, only=report.loaded)
    return source, output_prefix, len(report.loaded)
