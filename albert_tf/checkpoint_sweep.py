"""The reference's evaluation sweep: evaluate every saved checkpoint, keep the best as model.ckpt-best.

Results are appended per checkpoint to ``eval_results.txt`` as "key = value" lines (rewritten
atomically after each checkpoint); the best checkpoint's files are copied to ``model.ckpt-best.*``.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Mapping

import tensorflow as tf

from albert_tf.checkpoints import TF2_CHECKPOINT_NAME
from albert_tf.io_utils import atomic_write_text

BEST_PREFIX = TF2_CHECKPOINT_NAME + "-best"
_STEP_PATTERN = re.compile(re.escape(TF2_CHECKPOINT_NAME) + r"-(\d+)\.index$")


def list_checkpoints(directory: str) -> list[tuple[int, str]]:
    """[(step, prefix)] of ``model.ckpt-<step>`` in ``directory``, ascending; best excluded."""
    found = []
    for path in tf.io.gfile.glob(os.path.join(directory, TF2_CHECKPOINT_NAME + "-*.index")):
        match = _STEP_PATTERN.search(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path[:-len(".index")]))
    return sorted(found)


def copy_checkpoint(source_prefix: str, target_prefix: str) -> None:
    """Copies a checkpoint's files; each lands under a temporary name first, the index last."""
    files = tf.io.gfile.glob(source_prefix + ".data-*") + [source_prefix + ".index"]
    for path in files:
        target = target_prefix + path[len(source_prefix):]
        tf.io.gfile.copy(path, target + ".tmp", overwrite=True)
        tf.io.gfile.rename(target + ".tmp", target, overwrite=True)


def format_metrics(metrics: Mapping[str, float]) -> str:
    return "".join(f"{key} = {value}\n" for key, value in sorted(metrics.items()))


def sweep_checkpoints(directory: str, evaluate: Callable[[str], dict[str, float]], key: str,
                      log: Callable[[str], None] = print,
                      results_file: str = "eval_results.txt") -> tuple[int, dict[str, float]]:
    """Evaluates each checkpoint (``evaluate(prefix) -> metrics``); higher ``key`` is better.

    Returns (best step, its metrics). Raises if the directory holds no checkpoint.
    """
    checkpoints = list_checkpoints(directory)
    if not checkpoints:
        raise FileNotFoundError(f"No {TF2_CHECKPOINT_NAME}-<step> checkpoint in {directory} to "
                                "evaluate; train first (--do_train).")
    report, best_step, best = "", None, None
    for step, prefix in checkpoints:
        metrics = dict(evaluate(prefix), global_step=step)
        if key not in metrics:
            raise KeyError(f"Evaluation produced no {key!r}; got {sorted(metrics)}.")
        improved = best is None or metrics[key] > best[key]
        if improved:
            best_step, best = step, metrics
            copy_checkpoint(prefix, os.path.join(directory, BEST_PREFIX))
        report += format_metrics(metrics)
        report += f"best {key} = {best[key]} (step {best_step})\n" + "=" * 50 + "\n"
        atomic_write_text(os.path.join(directory, results_file), report)
        log(f"Evaluated {prefix}: " + ", ".join(f"{k} = {v:.4g}" for k, v in sorted(metrics.items()))
            + (f"  (new best, copied to {BEST_PREFIX})" if improved else ""))
    return best_step, best
