"""The kind of classifier an output directory's checkpoints are, kept beside them as
``<output_dir>/classifier_heads.json`` = {"early_exit": null | "separate" | "shared"}.

run_classifier's checkpoints do not all say what they are: a model with shared early-exit heads
(``--early_exit --early_exit_heads=shared``) has exactly an ordinary classifier's variables, so
evaluating an ordinary run's checkpoints with ``--early_exit`` would report internal classifiers
that were never trained, and the reverse would serve without the patience the run was trained
for. The first run in a directory records its kind; every later run there (resumed training,
evaluation, prediction, export) must have the same, or stops before any work with one line
naming the flags and what the directory holds (``HeadsMismatch``). A directory written before
this record existed is recorded by its next run, as that run says, once its checkpoints agree
with that run's flags as far as they can tell: separate heads or not (shared heads and an
ordinary classifier have the same variables).

``recorded_heads`` also tells the checkpoint converter that a classifier's head is every layer's.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from albert_tf.checkpoints.files import list_checkpoints
from albert_tf.checkpoints.warm_start import unreadable_checkpoint
from albert_tf.errors.user_error import UserError
from albert_tf.evaluation.checkpoint_sweep import BEST_PREFIX
from albert_tf.files.atomic import atomic_write_text
from albert_tf.files.json_objects import read_json_object
from albert_tf.tasks.classification.model import EARLY_EXIT_HEADS, EXIT_CLASSIFIER

HEADS_FILE = "classifier_heads.json"
_KEY = "early_exit"


class HeadsMismatch(UserError, ValueError):
    """This run's early-exit setting differs from the one its output directory was trained
    with, or the record is unreadable."""


def heads_path(output_dir: str) -> str:
    return os.path.join(output_dir, HEADS_FILE)


def describe(heads: str | None) -> str:
    """How run_classifier's flags say ``heads`` (None: an ordinary classifier)."""
    if heads is None:
        return "without --early_exit"
    return f"with --early_exit --early_exit_heads={heads}"


def is_recorded(output_dir: str) -> bool:
    return tf.io.gfile.exists(heads_path(output_dir))


def recorded_heads(output_dir: str) -> str | None:
    """The early-exit heads recorded in ``output_dir`` (None: ordinary, or no record; see
    ``is_recorded``). HeadsMismatch for a record that is not ours."""
    path = heads_path(output_dir)
    if not tf.io.gfile.exists(path):
        return None
    heads = read_json_object(path, HeadsMismatch, path).get(_KEY, "")
    if heads is not None and heads not in EARLY_EXIT_HEADS:
        raise HeadsMismatch(f"{path}: expected {{\"{_KEY}\": null, \"separate\" or \"shared\"}}; "
                            "it is written by run_classifier in its --output_dir.")
    return heads


def check_heads(output_dir: str, heads: str | None) -> None:
    """HeadsMismatch when ``output_dir`` records another kind of classifier than ``heads``
    (this run's: None or one of ``EARLY_EXIT_HEADS``); without a record, when the directory's
    checkpoints have separate heads and this run has not, or the reverse."""
    if not is_recorded(output_dir):
        _check_unrecorded(output_dir, heads)
        return
    stored = recorded_heads(output_dir)
    if stored != heads:
        raise HeadsMismatch(
            f"--output_dir={output_dir} holds a classifier trained {describe(stored)} "
            f"({HEADS_FILE}); this run is {describe(heads)}. Give the early-exit flags it was "
            "trained with, or use another --output_dir.")


def _check_unrecorded(output_dir: str, heads: str | None) -> None:
    """HeadsMismatch when the latest checkpoint of ``output_dir`` (model.ckpt-best if any), in a
    directory without a record, has separate heads and this run has not, or the reverse: this
    run would record its own kind and fail on that checkpoint only later, and a corrected run
    would then be refused by that false record."""
    prefixes = [prefix for _, prefix in list_checkpoints(output_dir)]
    best = os.path.join(output_dir, BEST_PREFIX)
    if tf.io.gfile.exists(best + ".index"):
        prefixes.append(best)
    if not prefixes:
        return
    try:
        names = [name for name, _ in tf.train.list_variables(prefixes[-1])]
    except (tf.errors.OpError, RuntimeError) as error:
        raise unreadable_checkpoint(prefixes[-1], error) from None
    separate = any(f"/{EXIT_CLASSIFIER}_" in name for name in names)
    if separate != (heads == "separate"):
        held = "with" if separate else "without"
        raise HeadsMismatch(
            f"--output_dir={output_dir} has no {HEADS_FILE} and its checkpoint {prefixes[-1]} is "
            f"of a classifier {held} separate early-exit heads; this run is {describe(heads)}. "
            f"Give the early-exit flags it was trained with, or use another --output_dir.")


def record_heads(path: str, heads: str | None) -> None:
    """Writes ``HEADS_FILE`` at ``path`` (in --output_dir, atomically) unless there is one."""
    if not tf.io.gfile.exists(path):
        atomic_write_text(path, json.dumps({_KEY: heads}) + "\n")
