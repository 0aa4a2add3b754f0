"""The label set a run directory's checkpoints were trained for, recorded in its run manifest.

A task's output layer means something only with its labels: class ids and their names (GLUE, the
user's own classes), NER's tags, RACE's answer letters, SQuAD's version. The first run in an output
directory records {"task_type": ..., "labels": [names in id order] or null, "task": the data the
checkpoints are trained on, where one label set fits several (e.g. GLUE's SST-2 and WNLI both have
the labels 0 and 1)} as the record ``LABEL_SET`` (albert_tf/files/run_manifest.py); every later run
there (resumed training, evaluation, prediction, export) checks it first, so a prediction can never
name classes or tags the checkpoints were not trained for, and a run of one task never resumes,
evaluates or predicts with another task's checkpoints. A record without "task" (an earlier
version's label_list.json) is checked on its task type and labels only.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from albert_tf.files.run_manifest import Fact, RunManifest, RunManifestError


@dataclasses.dataclass(frozen=True)
class LabelSet:
    """What a task's outputs mean: ``task_type`` (e.g. "classification", "regression",
    "token_classification"), ``labels``, the names in id order (None where there are none), and
    ``task``, the task the checkpoints are trained for where the task type and labels do not say it
    (run_classifier: the GLUE task, or "own data"; None where unknown or not needed)."""

    task_type: str
    labels: tuple[str, ...] | None = None
    task: str | None = None

    def describe(self) -> str:
        labels = "no labels" if self.labels is None else f"labels {list(self.labels)}"
        task = f" (task {self.task})" if self.task is not None else ""
        return f"a {self.task_type} with {labels}{task}"

    def fits(self, stored: "LabelSet") -> bool:
        """Whether a run with this label set may use checkpoints trained for ``stored``: the same
        task type and labels, and the same task unless either does not say it."""
        return ((self.task_type, self.labels) == (stored.task_type, stored.labels)
                and (self.task is None or stored.task is None or self.task == stored.task))

    def to_fact(self) -> dict[str, Any]:
        return {"task_type": self.task_type,
                "labels": None if self.labels is None else list(self.labels), "task": self.task}

    @classmethod
    def from_record(cls, value: Any) -> "LabelSet":
        """The label set of a recorded value; ValueError when it is not one."""
        try:
            task_type, labels, task = value["task_type"], value["labels"], value.get("task")
        except (TypeError, KeyError, AttributeError):
            raise ValueError(f"not a label set: {value!r}") from None
        if not isinstance(task_type, str) or (task is not None and not isinstance(task, str)) or (
                labels is not None and not all(isinstance(label, str) for label in labels)):
            raise ValueError(f"not a label set: {value!r}")
        return cls(task_type, None if labels is None else tuple(labels), task)


def _difference(value: Any, recorded: Any) -> tuple[str, str] | None:
    this, stored = LabelSet.from_record(value), LabelSet.from_record(recorded)
    return None if this.fits(stored) else (stored.describe(), this.describe())


LABEL_SET = Fact("label_set", "checkpoints trained for", compare=_difference)


def recorded_label_set(manifest: RunManifest) -> LabelSet | None:
    """The label set ``manifest`` records; None when it records none (RunManifestError naming
    the file for a record that is not one)."""
    value = manifest.fact(LABEL_SET.key)
    try:
        return None if value is None else LabelSet.from_record(value)
    except ValueError as error:
        raise RunManifestError(f"{manifest.where(LABEL_SET.key)}: expected {{\"task_type\": ..., "
                               f"\"labels\": [...] or null}} ({error}); it was written by a run "
                               "in this directory") from None
