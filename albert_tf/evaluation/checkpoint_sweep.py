"""The reference's evaluation sweep: evaluate every saved checkpoint, keep the best as model.ckpt-best.

Results are appended per checkpoint to ``eval_results.txt`` as "key = value" lines
(``format_metrics``; rewritten atomically after each checkpoint). A ``SweepPolicy`` chooses between
the reference's two flavours:

- pretraining / SQuAD / RACE (``SweepPolicy()``, the default): one pass over the checkpoints present,
  the best one's files copied to ``model.ckpt-best.*`` whenever it improves;
- GLUE (``SweepPolicy.glue(train_step)``, run_classifier's): resumable through ``best_trial.txt``
  ("<last evaluated step>:<best step>:<best value>"), polls for new checkpoints until the one at
  ``train_step`` has been evaluated (so it can run beside training), deletes evaluated non-best
  checkpoints once more than one newer checkpoint exists (checked again after the last evaluation,
  where the reference stops without cleaning up), and finally *renames* the best checkpoint to
  ``model.ckpt-best.*``. Its eval_results.txt writes ``best = <best value before this checkpoint>``
  after each block, as the reference does.

The sweep takes the evaluation as a function of a checkpoint prefix, so it knows no model;
albert_tf/evaluation/best_checkpoint.py plugs in ``Trainer.evaluate_checkpoint``. Listing, copying,
renaming and removing checkpoint files is albert_tf/checkpoints/files.py.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable, Mapping

import tensorflow as tf

from albert_tf.checkpoints.files import (TF2_CHECKPOINT_NAME, copy_checkpoint, list_checkpoints,
                                         remove_checkpoint, rename_checkpoint)
from albert_tf.errors.user_error import MissingFileError, UserError
from albert_tf.files.atomic import atomic_write_text

BEST_PREFIX = TF2_CHECKPOINT_NAME + "-best"
BEST_TRIAL_FILE = "best_trial.txt"


_SEPARATOR = "=" * 50 + "\n"


class SweepStateError(UserError, ValueError):
    """The sweep state file of a run directory (best_trial.txt) is not one: the message names it
    and how to restart the sweep."""


@dataclasses.dataclass(frozen=True)
class SweepPolicy:
    """How a sweep keeps its state and its checkpoints.

    state_file: resumable "<last step>:<best step>:<best value>" file in the directory (None: none).
    prune: delete an evaluated non-best checkpoint once more than one newer checkpoint exists.
    rename_best: rename the best checkpoint to model.ckpt-best at the end (False: copy on improvement).
    until_step: keep polling until a checkpoint at or after this step has been evaluated (None: one
      pass over what exists now).
    poll_seconds: wait between two looks for new checkpoints (shortened so that the last look
      falls at max_wait_seconds).
    max_wait_seconds: stop waiting after this long without a new checkpoint (None: wait forever).
    best_line: the line written after each checkpoint's metrics; fields ``key``, ``best``,
      ``best_step`` (after this checkpoint) and ``previous`` (the best value before it).
    """

    state_file: str | None = None
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
        return cls(state_file=BEST_TRIAL_FILE, prune=True, rename_best=True, until_step=train_step,
                   poll_seconds=poll_seconds, max_wait_seconds=max_wait_seconds,
                   best_line="best = {previous}\n")


@dataclasses.dataclass
class SweepState:
    """Progress of a sweep: the last evaluated step and the best (step, value); -1 = none yet."""

    last_step: int = -1
    best_step: int = -1
    best_value: float = -1.0

    @classmethod
    def read(cls, path: str) -> "SweepState":
        """Parses a best_trial.txt; a missing file is a fresh state."""
        if not tf.io.gfile.exists(path):
            return cls()
        with tf.io.gfile.GFile(path) as handle:
            text = handle.read().strip()
        parts = text.split(":")
        try:
            return cls(int(parts[0]), int(parts[1]), float(parts[2]))
        except (IndexError, ValueError):
            raise SweepStateError(f"{path}: expected '<last step>:<best step>:<best value>', got "
                             f"{text!r}; delete the file to restart the sweep.") from None

    def format(self) -> str:
        return f"{self.last_step}:{self.best_step}:{self.best_value}"


def format_metrics(metrics: Mapping[str, float]) -> str:
    return "".join(f"{key} = {value}\n" for key, value in sorted(metrics.items()))


def sweep_checkpoints(directory: str, evaluate: Callable[[str], dict[str, float]], key: str,
                      log: Callable[[str], None] = print,
                      results_file: str = "eval_results.txt",
                      policy: SweepPolicy = SweepPolicy(),
                      sleep: Callable[[float], None] = time.sleep) -> tuple[int, dict[str, float]]:
    """Evaluates each checkpoint (``evaluate(prefix) -> metrics``); higher ``key`` is better.

    Returns (best step, its metrics). When the best was evaluated by an earlier sweep that this one
    resumes, its metrics are read back from that sweep's ``results_file`` (only ``key`` if the
    block is not there): a rerun rewrites the best's results whole, never cut to one value. Raises
    MissingFileError (a FileNotFoundError) if there is no checkpoint to evaluate.
    """
    state_path = os.path.join(directory, policy.state_file) if policy.state_file else None
    state = SweepState.read(state_path) if state_path else SweepState()
    results_path = os.path.join(directory, results_file)
    report = ""
    if state.last_step >= 0 and tf.io.gfile.exists(results_path):  # resuming: keep earlier results
        with tf.io.gfile.GFile(results_path) as handle:
            report = handle.read()
    best: dict[str, float] | None = None
    if state.best_step >= 0:
        best = _metrics_in_report(report, state.best_step) or {key: state.best_value}
    waited = 0.0
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
                state.best_step, state.best_value, best = step, metrics[key], metrics
                if not policy.rename_best:
                    copy_checkpoint(prefix, os.path.join(directory, BEST_PREFIX))
            state.last_step = step
            if policy.prune and _is_prunable(step, steps, state):  # at once, as the reference
                remove_checkpoint(prefix)
            report += format_metrics(metrics) + policy.best_line.format(
                key=key, best=state.best_value, best_step=state.best_step, previous=previous)
            report += _SEPARATOR
            atomic_write_text(results_path, report)
            if state_path:
                atomic_write_text(state_path, state.format())
            log(f"Evaluated {prefix}: " + ", ".join(f"{k} = {v:.4g}" for k, v in
                                                     sorted(metrics.items()))
                + ("" if not improved else " (new best)" if policy.rename_best
                   else f"  (new best, copied to {BEST_PREFIX})"))
        if policy.until_step is None or state.last_step >= policy.until_step:
            break
        if evaluated_any:
            waited = 0.0
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
    if best is None:
        raise MissingFileError(f"No {TF2_CHECKPOINT_NAME}-<step> checkpoint in {directory} to "
                               "evaluate; train first (--do_train).")
    if policy.prune:  # what this last pass superseded
        _prune_evaluated(list_checkpoints(directory), state)
    if policy.rename_best:
        _rename_best(directory, state.best_step, log)
    return state.best_step, best


def _metrics_in_report(report: str, step: int) -> dict[str, float] | None:
    """The metrics of checkpoint ``step`` in a sweep's results text, None if no block has that
    ``global_step``. A block is ``format_metrics``' "name = value" lines, then the policy's best
    line, then the separator."""
    for block in report.split(_SEPARATOR):
        metrics = _parsed_metrics(block.splitlines()[:-1])
        if metrics is not None and metrics.get("global_step") == step:
            return metrics
    return None


def _parsed_metrics(lines: list[str]) -> dict[str, float] | None:
    """``format_metrics``' lines read back (a name may hold " = ": a label's); None when a line
    is not one."""
    metrics = {}
    for line in lines:
        name, _, value = line.rpartition(" = ")
        try:
            metrics[name] = float(value)
        except ValueError:
            return None
    return metrics if "" not in metrics else None


def _waiting_line(directory: str, last_step: int, policy: SweepPolicy, waited: float) -> str:
    """What the sweep waits for, and for how long at most. With no checkpoint evaluated yet it says
    so (not "after step -1"): an evaluation job started on a mistyped --output_dir would otherwise
    wait its whole --max_eval_wait_secs with no hint that nothing is training there."""
    limit = ("" if policy.max_wait_seconds is None else
             f"; giving up after {policy.max_wait_seconds - waited:.0f} s more without one "
             "(--max_eval_wait_secs)")
    if last_step < 0:
        return (f"No {TF2_CHECKPOINT_NAME}-<step> checkpoint in {directory} yet: waiting for a "
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
    """model.ckpt-<best_step>.* -> model.ckpt-best.* (already done by a finished earlier sweep)."""
    source = os.path.join(directory, f"{TF2_CHECKPOINT_NAME}-{best_step}")
    target = os.path.join(directory, BEST_PREFIX)
    if tf.io.gfile.exists(source + ".index"):
        rename_checkpoint(source, target)
        log(f"Renamed {source} to {target}.")
    elif not tf.io.gfile.exists(target + ".index"):
        raise MissingFileError(f"The best checkpoint {source} (step {best_step}, from "
                               f"{BEST_TRIAL_FILE}) is gone and there is no {target}.")
