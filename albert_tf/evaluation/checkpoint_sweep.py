"""The reference's evaluation sweep: evaluate every saved checkpoint, keep the best as model.ckpt-best.

Results are appended per checkpoint to ``eval_results.txt`` as "key = value" lines
(``format_metrics``; rewritten atomically after each checkpoint). The sweep's state (the evaluation
data, the last evaluated step, the best step, value and metrics) and the best checkpoint (its
step, metrics and fingerprint) live in the run manifest (albert_tf/files/run_manifest.py), updated
after every checkpoint, so a rerun evaluates only the checkpoints after the last one evaluated and
a finished sweep evaluates nothing. ``model.ckpt-best`` only ever receives a checkpoint this sweep
evaluated, and the sweep ends by checking that it holds the recorded best
(albert_tf/checkpoints/run_directory.py, ``settled_best``). A ``SweepPolicy`` chooses between the
reference's two flavours:

- pretraining / SQuAD / RACE (``SweepPolicy()``, the default): the best one's files copied to
  ``model.ckpt-best.*`` whenever it improves; other evaluation data than the earlier sweep's start
  the sweep afresh;
- GLUE (``SweepPolicy.glue(train_step)``, run_classifier's and run_ner's): polls for new checkpoints
  until the one at ``train_step`` has been evaluated (so it can run beside training) while a
  training run holds the directory, deletes evaluated non-best checkpoints once more than one newer
  checkpoint exists (checked again after the last evaluation, where the reference stops without
  cleaning up), and finally *renames* the best checkpoint to ``model.ckpt-best.*``; it also writes
  the reference's ``best_trial.txt`` ("<last evaluated step>:<best step>:<best value>") and refuses
  other evaluation data than the sweep it resumes. Its eval_results.txt writes ``best = <best
  value before this checkpoint>`` after each block, as the reference does.

A named evaluation (``evaluation``: a pretraining run evaluated on records of another sentence
task) keeps a state of its own and never touches model.ckpt-best. The sweep takes the evaluation as
a function of a checkpoint prefix, so it knows no model; albert_tf/evaluation/best_checkpoint.py
plugs in ``Trainer.evaluate_checkpoint``. Listing, copying, renaming and removing checkpoint files
is albert_tf/checkpoints/files.py.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable, Mapping

import tensorflow as tf

from albert_tf.checkpoints.files import (BEST_CHECKPOINT_NAME, TF2_CHECKPOINT_NAME,
                                         checkpoint_fingerprint, copy_checkpoint,
                                         list_checkpoints, remove_checkpoint, rename_checkpoint)
from albert_tf.checkpoints.run_directory import best_prefix, settled_best
from albert_tf.errors.user_error import MissingFileError, UserError
from albert_tf.files.atomic import atomic_write_text
from albert_tf.files.earlier_layouts import BEST_TRIAL_FILE
from albert_tf.files.run_manifest import RunManifest, read_manifest, update_manifest



_SEPARATOR = "=" * 50 + "\n"


class EvalDataChanged(UserError, ValueError):
    """A resumed sweep's evaluation data differ from those of the sweep it resumes."""


@dataclasses.dataclass(frozen=True)
class SweepPolicy:
    """How a sweep keeps its checkpoints.

    resumable_only: other evaluation data than the recorded sweep's are refused (True: GLUE's, which
      writes best_trial.txt) rather than evaluated afresh.
    prune: delete an evaluated non-best checkpoint once more than one newer checkpoint exists.
    rename_best: rename the best checkpoint to model.ckpt-best at the end (False: copy on improvement).
    until_step: keep polling, while a training run holds the directory, until a checkpoint at or
      after this step has been evaluated (None: one pass over what exists now).
    poll_seconds: wait between two looks for new checkpoints (shortened so that the last look
      falls at max_wait_seconds).
    max_wait_seconds: stop waiting after this long without a new checkpoint (None: wait forever).
    best_line: the line written after each checkpoint's metrics; fields ``key``, ``best``,
      ``best_step`` (after this checkpoint) and ``previous`` (the best value before it).
    """

    resumable_only: bool = False
    prune: bool = False
    rename_best: bool = False
    until_step: int | None = None
    poll_seconds: float = 60.0
    max_wait_seconds: float | None = None
    best_line: str = "best {key} = {best} (step {best_step})\n"

    @classmethod
    def glue(cls, train_step: int, poll_seconds: float = 60.0,
             max_wait_seconds: float | None = None) -> "SweepPolicy":
        """run_classifier's flavour: resumable, polling, pruning, renaming the best checkpoint."""
        return cls(resumable_only=True, prune=True, rename_best=True, until_step=train_step,
                   poll_seconds=poll_seconds, max_wait_seconds=max_wait_seconds,
                   best_line="best = {previous}\n")


def _describe(sources: Mapping[str, str]) -> str:
    return ", ".join(f"{name + ': ' if name else ''}{source}" for name, source in sources.items())


def check_eval_data(manifest: RunManifest, eval_data: Mapping[str, str], policy: SweepPolicy,
                    evaluation: str = "") -> bool:
    """Whether the sweep ``evaluation`` of a run's ``manifest`` resumes its recorded state with
    ``eval_data`` ({set name: what identifies its data, e.g. the feature file}); False when it must
    start afresh (nothing recorded, or, for a policy that is not ``resumable_only``, other data).
    EvalDataChanged (naming both) for a ``resumable_only`` policy and other data: the resumed sweep
    would report a best checkpoint chosen on the earlier data as this run's."""
    state = manifest.sweep(evaluation)
    recorded = state.get("eval_data")
    if "last_step" not in state:
        return False
    if recorded is None or not eval_data or recorded == dict(eval_data):
        return True
    if not policy.resumable_only:
        return False
    raise EvalDataChanged(
        f"{manifest.where_sweep(evaluation)}: the checkpoints in this directory were "
        f"evaluated on {_describe(recorded)}; this run evaluates {_describe(eval_data)} (another "
        "evaluation file, or other feature settings such as --max_seq_length). Resuming its sweep "
        "would report a best checkpoint chosen on the earlier data. Give the earlier evaluation "
        "file and settings, or use another --output_dir")


def format_metrics(metrics: Mapping[str, float]) -> str:
    return "".join(f"{key} = {value}\n" for key, value in sorted(metrics.items()))


@dataclasses.dataclass
class SweepState:
    """Progress of a sweep (its part of the run manifest): the last evaluated step and the best
    (step, value, metrics); -1 = none yet."""

    last_step: int = -1
    best_step: int = -1
    best_value: float = -1.0
    best_metrics: dict[str, float] | None = None

    @classmethod
    def recorded(cls, state: Mapping, key: str) -> "SweepState":
        """The state a manifest's sweep section holds (a fresh one for an empty section)."""
        if "best_step" not in state:
            return cls(last_step=state.get("last_step", -1))
        value = state.get("best_value")
        metrics = state.get("best_metrics") or {key: value}
        return cls(state.get("last_step", state["best_step"]), state["best_step"],
                   -1.0 if value is None else value, dict(metrics))

    def section(self, eval_data: Mapping[str, str] | None) -> dict:
        return {"eval_data": dict(eval_data) if eval_data else None, "last_step": self.last_step,
                "best_step": self.best_step, "best_value": self.best_value,
                "best_metrics": self.best_metrics}

    def format(self) -> str:
        """The reference's best_trial.txt."""
        return f"{self.last_step}:{self.best_step}:{self.best_value}"


def sweep_checkpoints(directory: str, evaluate: Callable[[str], dict[str, float]], key: str,
                      log: Callable[[str], None] = print,
                      results_file: str = "eval_results.txt",
                      policy: SweepPolicy = SweepPolicy(),
                      sleep: Callable[[float], None] = time.sleep,
                      evaluation: str = "", eval_data: Mapping[str, str] | None = None,
                      training_alive: Callable[[], bool] = lambda: False
                      ) -> tuple[int, dict[str, float]]:
    """Evaluates each checkpoint after the last one the sweep ``evaluation`` evaluated
    (``evaluate(prefix) -> metrics``); higher ``key`` is better. ``eval_data`` identifies the
    evaluation data (``check_eval_data``); ``training_alive`` says whether a training run still
    holds the directory (a sweep with ``until_step`` waits for new checkpoints only then).

    Returns (best step, its metrics), the recorded ones when nothing new was better. Raises
    MissingFileError (a FileNotFoundError) if there is no checkpoint to evaluate.
    """
    manifest = read_manifest(directory)
    resumes = check_eval_data(manifest, eval_data or {}, policy, evaluation)
    state = SweepState.recorded(manifest.sweep(evaluation), key) if resumes else SweepState()
    results_path = os.path.join(directory, results_file)
    report = ""
    if resumes and tf.io.gfile.exists(results_path):  # keep the earlier checkpoints' results
        with tf.io.gfile.GFile(results_path) as handle:
            report = handle.read()
    keeps_best = not evaluation
    waited, finishing = 0.0, False
    while True:
        checkpoints = list_checkpoints(directory)
        steps = [step for step, _ in checkpoints]
        evaluated_any = False
        if policy.prune:
            _prune_evaluated(checkpoints, state)
        for step, prefix in checkpoints:
            if step <= state.last_step:
                continue
            metrics = dict(evaluate(prefix), global_step=step)
            if key not in metrics:
                raise KeyError(f"Evaluation produced no {key!r}; got {sorted(metrics)}.")
            evaluated_any = True
            previous = state.best_value if state.best_step >= 0 else -1  # the reference's start
            improved = state.best_step < 0 or metrics[key] > state.best_value
            if improved:
                state.best_step, state.best_value, state.best_metrics = step, metrics[key], metrics
            state.last_step = step
            _record(directory, evaluation, state, eval_data,
                    {"step": step, "selection_metric": key, "metrics": metrics,
                     "fingerprint": checkpoint_fingerprint(prefix)}
                    if improved and keeps_best else None)
            if improved and keeps_best and not policy.rename_best:
                copy_checkpoint(prefix, best_prefix(directory))
            if policy.prune and _is_prunable(step, steps, state):  # at once, as the reference
                remove_checkpoint(prefix)
            report += format_metrics(metrics) + policy.best_line.format(
                key=key, best=state.best_value, best_step=state.best_step, previous=previous)
            report += _SEPARATOR
            atomic_write_text(results_path, report)
            if policy.resumable_only:
                atomic_write_text(os.path.join(directory, BEST_TRIAL_FILE), state.format())
            log(f"Evaluated {prefix}: " + ", ".join(f"{k} = {v:.4g}" for k, v in
                                                     sorted(metrics.items()))
                + ("" if not improved else " (new best)" if policy.rename_best or not keeps_best
                   else f"  (new best, copied to {BEST_CHECKPOINT_NAME})"))
        if policy.until_step is None or state.last_step >= policy.until_step:
            break
        if evaluated_any:
            waited = 0.0
        elif not training_alive() and not finishing:
            finishing = True  # one more look: its last checkpoint may have come as it ended
        elif not training_alive():
            if state.last_step >= 0:
                log(f"No training run holds {directory}: evaluated its checkpoints up to step "
                    f"{state.last_step} (step {policy.until_step} will not come).")
            break
        elif policy.max_wait_seconds is not None and waited >= policy.max_wait_seconds:
            evaluated = (f"last evaluated step {state.last_step}" if state.last_step >= 0
                         else "none evaluated yet")
            log(f"No new checkpoint in {directory} for {waited:.0f} s ({evaluated}, waiting for "
                f"step {policy.until_step}); finishing the sweep.")
            break
        else:
            log(_waiting_line(directory, state.last_step, policy, waited))
            delay = _poll_delay(policy, waited)
            sleep(delay)
            waited += delay
    if state.best_step < 0:
        raise MissingFileError(f"No {TF2_CHECKPOINT_NAME}-<step> checkpoint in {directory} to "
                               "evaluate, and no training run holds it; train first (--do_train), "
                               "or start this evaluation job after the training job.")
    if policy.prune:  # what this last pass superseded
        _prune_evaluated(list_checkpoints(directory), state)
    if keeps_best:
        if policy.rename_best:
            _rename_best(directory, state.best_step, log)
        settled_best(directory)
    return state.best_step, state.best_metrics


def _record(directory: str, evaluation: str, state: SweepState,
            eval_data: Mapping[str, str] | None, best: dict | None) -> None:
    """The sweep's state after one checkpoint (and, when it is the new best of the run's own
    evaluation, the best: recorded before its files move, so that a stop in between leaves a
    manifest that names them by their fingerprint)."""
    def change(content: dict) -> None:
        content["sweeps"][evaluation] = state.section(eval_data)
        if best is not None:
            content["best"] = dict(best, evaluation=evaluation)

    update_manifest(directory, change)


def _waiting_line(directory: str, last_step: int, policy: SweepPolicy, waited: float) -> str:
    """What the sweep waits for, and for how long at most."""
    limit = ("" if policy.max_wait_seconds is None else
             f"; giving up after {policy.max_wait_seconds - waited:.0f} s more without one "
             "(--max_eval_wait_secs)")
    if last_step < 0:
        return (f"No {TF2_CHECKPOINT_NAME}-<step> checkpoint in {directory} yet: waiting for the "
                f"training run there to write them (until step {policy.until_step}){limit}.")
    return (f"Waiting for checkpoints after step {last_step} in {directory} "
            f"(until step {policy.until_step}){limit}.")


def _poll_delay(policy: SweepPolicy, waited: float) -> float:
    """Seconds until the next look for checkpoints: poll_seconds, but never past max_wait_seconds."""
    if policy.max_wait_seconds is None:
        return policy.poll_seconds
    return min(policy.poll_seconds, max(policy.max_wait_seconds - waited, 0.0))


def _is_prunable(step: int, steps: list[int], state: SweepState) -> bool:
    """The reference's rule: an evaluated checkpoint, not the best, with more than one newer one."""
    newer = sum(1 for other in steps if other > step)
    return step <= state.last_step and step != state.best_step and newer > 1


def _prune_evaluated(checkpoints: list[tuple[int, str]], state: SweepState) -> None:
    """Deletes every checkpoint ``_is_prunable`` selects."""
    steps = [step for step, _ in checkpoints]
    for step, prefix in checkpoints:
        if _is_prunable(step, steps, state):
            remove_checkpoint(prefix)


def _rename_best(directory: str, best_step: int, log: Callable[[str], None]) -> None:
    """model.ckpt-<best_step>.* -> model.ckpt-best.*, when those files are the recorded best (a
    checkpoint of that step trained again later is another one, and stays where it is); the last
    trained checkpoint, if it was that one, is recorded under its new name."""
    source = os.path.join(directory, f"{TF2_CHECKPOINT_NAME}-{best_step}")
    target = best_prefix(directory)
    best = read_manifest(directory).best
    if not tf.io.gfile.exists(source + ".index") or best is None:
        return
    recorded = best.get("fingerprint")
    if recorded is None:  # an earlier version's sweep, stopped before its rename
        if tf.io.gfile.exists(target + ".index"):
            return
    elif checkpoint_fingerprint(source) != recorded:
        return
    rename_checkpoint(source, target)
    log(f"Renamed {source} to {target}.")

    def change(content: dict) -> None:
        trained = content.get("trained")
        if trained and trained["checkpoint"] == os.path.basename(source):
            trained["checkpoint"] = BEST_CHECKPOINT_NAME

    update_manifest(directory, change)
