"""The kind of classifier an output directory's checkpoints are: the record ``HEADS`` of its run
manifest (albert_tf/files/run_manifest.py), null (ordinary), "separate" or "shared".

run_classifier's checkpoints do not all say what they are: a model with shared early-exit heads
(``--early_exit --early_exit_heads=shared``) has exactly an ordinary classifier's variables, so
evaluating an ordinary run's checkpoints with ``--early_exit`` would report internal classifiers
that were never trained, and the reverse would serve without the patience the run was trained
for. The first run in a directory records its kind; every later run there (resumed training,
evaluation, prediction, export) must have the same, or stops before any work with one line
naming what the directory holds. A directory that records no kind (written before it was
recorded) is recorded by its next run, as that run says, once its checkpoints agree with that
run's flags as far as they can tell: separate heads or not (shared heads and an ordinary
classifier have the same variables).

``recorded_heads`` also tells the checkpoint converter that a classifier's head is every layer's.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

from albert_tf.checkpoints.files import BEST_CHECKPOINT_NAME, list_checkpoints
from albert_tf.checkpoints.warm_start import unreadable_checkpoint
from albert_tf.errors.user_error import UserError
from albert_tf.files.run_manifest import Fact, read_manifest, require_fact
from albert_tf.tasks.classification.model import EARLY_EXIT_HEADS, EXIT_CLASSIFIER


class HeadsMismatch(UserError, ValueError):
    """This run's early-exit setting differs from what its output directory's checkpoints are,
    or the record is not one."""


def describe(heads: str | None) -> str:
    """How run_classifier's flags say ``heads`` (None: an ordinary classifier)."""
    if heads is None:
        return "without --early_exit"
    return f"with --early_exit --early_exit_heads={heads}"


def _difference(value: Any, recorded: Any) -> tuple[str, str] | None:
    return None if value == recorded else (describe(recorded), f"a classifier {describe(value)}")


HEADS = Fact("classifier_heads", "a classifier trained", compare=_difference)


def recorded_heads(output_dir: str) -> str | None:
    """The early-exit heads recorded in ``output_dir`` (None: ordinary, or no record; see
    ``is_recorded``). HeadsMismatch for a record that is not one."""
    manifest = read_manifest(output_dir)
    heads = manifest.fact(HEADS.key)
    if heads is not None and heads not in EARLY_EXIT_HEADS:
        raise HeadsMismatch(f"{manifest.where(HEADS.key)}: the recorded kind of classifier "
                            f"{heads!r} is not null, \"separate\" or \"shared\"; run_classifier "
                            "records it")
    return heads


def is_recorded(output_dir: str) -> bool:
    return read_manifest(output_dir).has_fact(HEADS.key)


def check_heads(output_dir: str, heads: str | None) -> None:
    """RunManifestError when ``output_dir`` records another kind of classifier than ``heads``
    (this run's: None or one of ``EARLY_EXIT_HEADS``); without a record, HeadsMismatch when the
    directory's checkpoints have separate heads and this run has not, or the reverse."""
    manifest = read_manifest(output_dir)
    if not manifest.has_fact(HEADS.key):
        _check_unrecorded(output_dir, heads)
        return
    recorded_heads(output_dir)
    require_fact(manifest, HEADS, heads, "its early-exit flags")


def _check_unrecorded(output_dir: str, heads: str | None) -> None:
    """HeadsMismatch when the latest checkpoint of ``output_dir`` (model.ckpt-best if any), in a
    directory without a record, has separate heads and this run has not, or the reverse: this
    run would record its own kind and fail on that checkpoint only later, and a corrected run
    would then be refused by that false record."""
    prefixes = [prefix for _, prefix in list_checkpoints(output_dir)]
    best = os.path.join(output_dir, BEST_CHECKPOINT_NAME)
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
            f"--output_dir={output_dir} records no kind of classifier and its checkpoint "
            f"{prefixes[-1]} is of a classifier {held} separate early-exit heads; this run is "
            f"{describe(heads)}. Give the early-exit flags it was trained with, or use another "
            "--output_dir.")
