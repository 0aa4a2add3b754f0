"""The evaluation steps every script shares: the checkpoint sweep with its report, and the best
checkpoint that prediction and export start from.

``run_checkpoint_sweep`` evaluates checkpoints through ``Trainer.evaluate_checkpoint`` (restore,
predict, reduce) under a ``SweepPolicy``, writes the best checkpoint's metrics to TensorBoard and to
``best_results.json`` (what the seed driver and the results tables read) and prints where the best
checkpoint and eval_results.txt are.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Sequence

import tensorflow as tf

from albert_tf.evaluation.checkpoint_sweep import BEST_PREFIX, SweepPolicy, sweep_checkpoints
from albert_tf.files.atomic import atomic_write_text
from albert_tf.training.task import EvalSet
from albert_tf.training.trainer import Trainer

# The best checkpoint's metrics, written by every sweep: {"selection_metric": key, "best_step": step,
# "metrics": {name: value}} (after a resumed sweep whose best came earlier, only the key's value).
BEST_RESULTS_FILE = "best_results.json"


def run_checkpoint_sweep(trainer: Trainer, eval_sets: Sequence[EvalSet], selection_key: str,
                         policy: SweepPolicy) -> tuple[int, dict[str, float]]:
    """Evaluates the checkpoints of the trainer's output_dir, keeps the best by ``selection_key``.

    Returns (best step, its metrics).
    """
    output_dir = trainer.config.output_dir
    evaluate = functools.partial(trainer.evaluate_checkpoint, eval_sets=eval_sets)
    best_step, best = sweep_checkpoints(output_dir, evaluate, selection_key, policy=policy)
    trainer.write_eval_summaries(best, best_step)
    results = {"selection_metric": selection_key, "best_step": int(best_step),
               "metrics": {name: float(value) for name, value in best.items()}}
    atomic_write_text(os.path.join(output_dir, BEST_RESULTS_FILE),
                      json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"Best checkpoint: step {best_step}, {selection_key} {best[selection_key]:.4f} -> "
          f"{os.path.join(output_dir, BEST_PREFIX)}; all results in "
          f"{os.path.join(output_dir, 'eval_results.txt')}", flush=True)
    return best_step, best


def best_checkpoint_prefix(output_dir: str, selecting_flag: str = "--do_eval") -> str:
    """The prefix of ``model.ckpt-best`` in ``output_dir``.

    Raises FileNotFoundError when no sweep has selected it yet, naming ``selecting_flag``, the flag
    of the script's sweep.
    """
    best_prefix = os.path.join(output_dir, BEST_PREFIX)
    if not tf.io.gfile.exists(best_prefix + ".index"):
        raise FileNotFoundError(f"{best_prefix} does not exist: prediction and export use the best "
                                f"checkpoint, which {selecting_flag} selects; add {selecting_flag} "
                                "(or run it first).")
    return best_prefix


def restore_best_checkpoint(trainer: Trainer) -> str:
    """Loads ``model.ckpt-best`` of the output_dir into the model; returns its prefix."""
    best_prefix = best_checkpoint_prefix(trainer.config.output_dir)
    trainer.restore_weights(best_prefix)
    return best_prefix
