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

from albert_tf.checkpoints.run_directory import best_prefix, recorded_best, settled_best
from albert_tf.errors.user_error import MissingFileError
from albert_tf.evaluation.checkpoint_sweep import (SweepPolicy,
                                                   sweep_checkpoints)
from albert_tf.files import run_lock
from albert_tf.files.atomic import atomic_write_text
from albert_tf.files.earlier_layouts import BEST_TRIAL_FILE
from albert_tf.files.run_manifest import RunManifest
from albert_tf.training.task import EvalSet
from albert_tf.training.trainer import Trainer

# The best checkpoint's metrics, written by every sweep from the run manifest's record of it:
# {"selection_metric": key, "best_step": step, "metrics": {name: value}}.
BEST_RESULTS_FILE = "best_results.json"
# What a sweep writes into the output_dir besides the checkpoints and the manifest (names and glob
# patterns; a named evaluation's results files carry its name).
SWEEP_OUTPUTS = ("eval_results*.txt", "best_results*.json", BEST_TRIAL_FILE)


def results_file_names(results_name: str = "") -> tuple[str, str]:
    """(eval results, best results) file names of a sweep: ``eval_results.txt`` and
    ``best_results.json``, or ``eval_results_<name>.txt`` and ``best_results_<name>.json`` for a
    named evaluation (a run evaluated on other data than its own, kept beside its own results)."""
    suffix = f"_{results_name}" if results_name else ""
    stem, extension = os.path.splitext(BEST_RESULTS_FILE)
    return f"eval_results{suffix}.txt", f"{stem}{suffix}{extension}"


def run_checkpoint_sweep(trainer: Trainer, eval_sets: Sequence[EvalSet], selection_key: str,
                         policy: SweepPolicy, results_name: str = ""
                         ) -> tuple[int, dict[str, float]]:
    """Evaluates the checkpoints of the trainer's output_dir, keeps the best by ``selection_key``;
    ``results_name`` names the results files (``results_file_names``).

    Returns (best step, its metrics).
    """
    output_dir = trainer.config.output_dir
    results_file, best_results_file = results_file_names(results_name)
    evaluate = functools.partial(trainer.evaluate_checkpoint, eval_sets=eval_sets)
    best_step, best = sweep_checkpoints(
        output_dir, evaluate, selection_key, results_file=results_file, policy=policy,
        evaluation=results_name, eval_data=eval_data_of(eval_sets),
        training_alive=lambda: run_lock.is_held(output_dir, run_lock.TRAINING))
    trainer.write_eval_summaries(best, best_step)
    results = {"selection_metric": selection_key, "best_step": int(best_step),
               "metrics": {name: float(value) for name, value in best.items()}}
    atomic_write_text(os.path.join(output_dir, best_results_file),
                      json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"Best checkpoint: step {best_step}, {selection_key} {best[selection_key]:.4f} -> "
          f"{best_prefix(output_dir)}; all results in "
          f"{os.path.join(output_dir, results_file)}", flush=True)
    return best_step, best


def eval_data_of(eval_sets: Sequence[EvalSet]) -> dict[str, str]:
    """What identifies the data of each evaluation set that says it ({name: source})."""
    return {eval_set.name: eval_set.source for eval_set in eval_sets if eval_set.source}


def best_checkpoint_prefix(manifest: RunManifest, selecting_flag: str = "--do_eval") -> str:
    """The prefix of the best checkpoint of the directory of ``manifest`` (``recorded_best``:
    model.ckpt-best, checked against the manifest; read only): a run that predicts or exports
    without sweeping checks, before any work, that an earlier sweep selected it.

    Raises MissingFileError (a FileNotFoundError) when no sweep has selected it yet, naming
    ``selecting_flag``, the flag of the script's sweep.
    """
    return _selected(recorded_best(manifest), manifest.directory, selecting_flag)


def _selected(prefix: str | None, output_dir: str, selecting_flag: str) -> str:
    """``prefix``, the best checkpoint found; MissingFileError naming ``selecting_flag`` when none
    was (no sweep has selected one yet)."""
    if prefix is None:
        raise MissingFileError(f"{best_prefix(output_dir)} does not exist: "
                               "prediction and export use the best checkpoint, which "
                               f"{selecting_flag} selects; add {selecting_flag} (or run it first).")
    return prefix


def restore_best_checkpoint(trainer: Trainer) -> str:
    """Loads the best checkpoint of the output_dir into the model (a best whose move a stopped
    sweep did not finish is moved first: the run holds the directory); returns its prefix."""
    output_dir = trainer.config.output_dir
    prefix = _selected(settled_best(output_dir), output_dir, "--do_eval")
    trainer.restore_weights(prefix)
    return prefix
