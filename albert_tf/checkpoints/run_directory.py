"""The checkpoints of a run directory, as its manifest (albert_tf/files/run_manifest.py) knows them.

- ``trained_checkpoint``: where the last trained step is, the checkpoint a rerun resumes from: its
  ``model.ckpt-<step>``, or ``model.ckpt-best`` once the sweep renamed it there (a directory of an
  earlier version, without a manifest, is read from its checkpoints and TF's ``checkpoint`` state
  file); ``record_trained`` records it after each save.
- ``recorded_best``: the checkpoint the manifest's best describes, checked by its fingerprint
  (read only); ``settled_best``: the same, moved to ``model.ckpt-best`` by a run holding the
  directory where a stopped sweep did not finish the move.
- ``resolve_checkpoint_path``: what a path given as a checkpoint names: a prefix, a SavedModel
  directory, or a run directory (its best checkpoint, else its last trained one).
"""

from __future__ import annotations

import os

import tensorflow as tf
from google.protobuf import text_format

from albert_tf.checkpoints.files import (BEST_CHECKPOINT_NAME, SAVED_MODEL_FILE,
                                         SAVED_MODEL_VARIABLES, TF2_CHECKPOINT_NAME,
                                         checkpoint_fingerprint, checkpoint_step, copy_checkpoint,
                                         list_checkpoints, not_a_checkpoint_message)
from albert_tf.errors.user_error import MissingFileError, UserError
from albert_tf.files.run_manifest import (MANIFEST_NAME, RunManifest, raise_trained,
                                          read_manifest, update_manifest)


class RunDirectoryError(UserError, ValueError):
    """A run directory's checkpoints are not what its manifest says (files removed or replaced by
    hand): the message names them and what to do."""


def best_prefix(directory: str) -> str:
    return os.path.join(directory, BEST_CHECKPOINT_NAME)


def _exists(prefix: str) -> bool:
    return tf.io.gfile.exists(prefix + ".index")


def _state_file_step(directory: str) -> int | None:
    """The step of the checkpoint TF's ``checkpoint`` state file names (None without one, or
    when the file is not one)."""
    try:
        state = tf.train.get_checkpoint_state(directory)
    except (ValueError, tf.errors.OpError, text_format.ParseError):
        return None
    return checkpoint_step(state.model_checkpoint_path) if state else None


def trained_checkpoint(manifest: RunManifest) -> tuple[int, str] | None:
    """(step, prefix) of the last trained checkpoint of the directory of ``manifest``; None when it
    has none.
    RunDirectoryError when the manifest records a trained step whose checkpoint is gone (never a
    silent restart from an older checkpoint or from random weights)."""
    directory, best = manifest.directory, manifest.best
    if manifest.trained is not None:
        step = manifest.trained["step"]
        prefix = os.path.join(directory, manifest.trained["checkpoint"])
        if _exists(prefix):
            return step, prefix
        if best is not None and best["step"] == step and _exists(best_prefix(directory)):
            return step, best_prefix(directory)  # renamed by a sweep stopped before recording it
        raise RunDirectoryError(
            f"{directory} was trained to step {step} ({MANIFEST_NAME}), but its checkpoint "
            f"{prefix} is gone: the run cannot continue from it, and training again would start "
            "from other weights. Restore the checkpoint, or use another --output_dir")
    found = list_checkpoints(directory)
    state_step = _state_file_step(directory)
    renamed = state_step is not None and state_step not in dict(found)
    sweep_best = manifest.sweep().get("best_step", best and best["step"])
    if renamed and sweep_best == state_step and _exists(best_prefix(directory)):
        found.append((state_step, best_prefix(directory)))  # an earlier version's renamed best
    return max(found) if found else None


def record_trained(directory: str, step: int, prefix: str) -> None:
    """Records that training reached ``step``, its checkpoint at ``prefix`` (in ``directory``),
    unless a later step is recorded already (a training job beside this evaluation job)."""
    update_manifest(directory,
                    lambda content: raise_trained(content, step, os.path.basename(prefix)))


def holds_trained_model(directory: str) -> str | None:
    """What in ``directory`` is a trained model (None: nothing): a run that finds no checkpoint to
    resume from there must not train from scratch over it. (A recorded last trained step without
    its checkpoint is refused earlier, by ``trained_checkpoint``.)"""
    if _exists(best_prefix(directory)):
        return f"its best checkpoint {best_prefix(directory)}"
    return None


def recorded_best(manifest: RunManifest) -> str | None:
    """The prefix of the checkpoint that ``manifest``'s best describes, read only (nothing is
    moved or recorded): ``model.ckpt-best``, or the ``model.ckpt-<step>`` a sweep stopped before
    moving there (it has the recorded fingerprint); None when there is neither a recorded best nor
    a model.ckpt-best.

    A directory of an earlier version records no fingerprint: its model.ckpt-best is taken as its
    best. Any other model.ckpt-best is refused (RunDirectoryError): results would describe other
    weights. A model.ckpt-best without a recorded best (the user's, in a directory albert_tf did
    not train) is returned as it is."""
    directory = manifest.directory
    best, target = manifest.best, best_prefix(directory)
    if best is None:
        return target if _exists(target) else None
    held = checkpoint_fingerprint(target) if _exists(target) else None
    if held is not None and best.get("fingerprint") in (None, held):
        return target
    source = os.path.join(directory, f"{TF2_CHECKPOINT_NAME}-{best['step']}")
    if _exists(source) and checkpoint_fingerprint(source) == best["fingerprint"]:
        return source
    score = best["metrics"].get(best["selection_metric"])
    raise RunDirectoryError(
        f"{target} is not the checkpoint the sweep of {directory} chose (step {best['step']}, "
        f"{best['selection_metric']} {score}; {MANIFEST_NAME}): "
        + ("it is gone" if held is None else "its files were replaced since") + ", so its "
        "results would describe other weights. Restore it, or evaluate again in another "
        "--output_dir")


def settled_best(directory: str) -> str | None:
    """``recorded_best`` of ``directory``, settled by a run holding it: a best a stopped sweep
    had not yet moved to ``model.ckpt-best`` is copied there now, and an earlier version's
    model.ckpt-best gets its fingerprint recorded. Returns model.ckpt-best (None: no best)."""
    manifest = read_manifest(directory)
    prefix, target = recorded_best(manifest), best_prefix(directory)
    if prefix is not None and prefix != target:
        copy_checkpoint(prefix, target)
        print(f"Copied {prefix}, the best checkpoint its sweep chose, to {target}.")
    elif prefix is not None and manifest.best is not None and not manifest.best.get("fingerprint"):
        held = checkpoint_fingerprint(target)
        update_manifest(directory, lambda content: content["best"].update(fingerprint=held))
    return None if prefix is None else target


def resolve_checkpoint_path(path: str) -> str:
    """A checkpoint prefix from a prefix, a SavedModel directory or a run directory (its best
    checkpoint, else its last trained one); FileNotFoundError naming the path
    otherwise. It looks at names only (the index file): ``check_data_shards`` checks the data
    before a checkpoint is read.

    A SavedModel's ``variables/variables`` is an object-based checkpoint rooted at the exported
    module: albert_tf's exports keep their task model in the attribute ``model``, so it reads like
    a checkpoint of ``tf.train.Checkpoint(model=...)``.
    """
    if not tf.io.gfile.isdir(path):
        prefix = path
    elif tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE)):
        prefix = os.path.join(path, *SAVED_MODEL_VARIABLES)
    else:
        prefix = _directory_checkpoint(path)
    if not _exists(prefix):
        raise MissingFileError(not_a_checkpoint_message(prefix))
    return prefix


def _directory_checkpoint(directory: str) -> str:
    """The checkpoint a directory given as a checkpoint stands for: a run directory's best, else
    its last trained one (the commands name the prefix they read, which says which); else the one
    its ``checkpoint`` state file names (a reference TF1 checkpoint's directory)."""
    manifest = read_manifest(directory)
    best = recorded_best(manifest)
    if best is not None:
        return best
    trained = trained_checkpoint(manifest)
    if trained is not None:
        return trained[1]
    latest = tf.train.latest_checkpoint(directory)  # a directory of other checkpoints (TF1)
    if latest is None:
        raise MissingFileError(f"No checkpoint found in directory {directory}.")
    return latest
