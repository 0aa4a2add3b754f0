"""The label set a run directory's checkpoints were trained for, kept beside them.

A task's output layer means something only with its labels: class ids and their names (GLUE, the
user's own classes), NER's tags, RACE's answer letters, SQuAD's version. The first run in an output
directory writes ``label_list.json`` = {"task_type": ..., "labels": [names in id order] or null,
"task": the data the checkpoints are trained on, where one label set fits several (e.g. GLUE's
SST-2 and WNLI both have the labels 0 and 1)}; every later run there (resumed training, evaluation,
prediction, export) reads it and refuses another task type, label set or task
(``LabelSetMismatch``), so a prediction can never name classes or tags the checkpoints were not
trained for, and a run of one task never resumes, evaluates or predicts with another task's
checkpoints. A label file without "task" (written before it was recorded) is checked on its task
type and labels only.
"""

from __future__ import annotations

import dataclasses
import json
import os

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_write_text

LABEL_FILE = "label_list.json"


class LabelSetMismatch(UserError, ValueError):
    """This run's label set or task type differs from the one its output directory was trained
    with."""


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


def label_file_path(output_dir: str) -> str:
    return os.path.join(output_dir, LABEL_FILE)


def read_label_set(output_dir: str) -> LabelSet | None:
    """The label set stored in ``output_dir``, or None when there is no label file."""
    path = label_file_path(output_dir)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as handle:
        text = handle.read()
    try:
        stored = json.loads(text)
        task_type, labels, task = stored["task_type"], stored["labels"], stored.get("task")
        if not isinstance(task_type, str):
            raise TypeError("task_type must be a string")
        if task is not None and not isinstance(task, str):
            raise TypeError("task must be a string")
        if labels is not None and not all(isinstance(label, str) for label in labels):
            raise TypeError("labels must be strings")
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise LabelSetMismatch(f"{path}: expected {{\"task_type\": ..., \"labels\": [...] or "
                               f"null}} ({error}); it was written by a run in this "
                               "directory") from None
    return LabelSet(task_type, None if labels is None else tuple(labels), task)


def write_label_set(output_dir: str, label_set: LabelSet) -> str:
    """Writes ``label_list.json`` atomically; returns its path."""
    path = label_file_path(output_dir)
    labels = None if label_set.labels is None else list(label_set.labels)
    recorded = {"task_type": label_set.task_type, "labels": labels}
    if label_set.task is not None:
        recorded["task"] = label_set.task
    atomic_write_text(path, json.dumps(recorded, indent=1) + "\n")
    return path


def check_label_set(output_dir: str, label_set: LabelSet, source: str) -> None:
    """LabelSetMismatch when ``output_dir`` holds a label file with another task type, label set
    or task than this run's (taken from ``source``, named in the message)."""
    stored = read_label_set(output_dir)
    if stored is not None and not label_set.fits(stored):
        raise LabelSetMismatch(
            f"{label_file_path(output_dir)}: the run in this directory was trained as "
            f"{stored.describe()}; this run has {label_set.describe()} ({source}). Use another "
            "--output_dir, or the same labels and task")
