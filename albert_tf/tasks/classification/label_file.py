"""The label set a classifier was trained with, kept in its output directory.

``label_list.json`` = {"task_type": "classification" | "regression", "labels": [names in class id
order] or null}. The first run on the user's own files writes it before training; every later run
in that directory (resumed training, evaluation, prediction, export) reads it, so class ids keep
their names, and refuses a different label set or task type (``LabelSetMismatch``): the checkpoints'
output layer was trained for that one.
"""

from __future__ import annotations

import json
import os
from typing import Sequence

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_write_text

LABEL_FILE = "label_list.json"


class LabelSetMismatch(UserError, ValueError):
    """This run's label set or task type differs from the one its output directory was trained
    with."""


class LabelFileError(UserError, ValueError):
    """The label file of an output directory is not one (edited by hand, or another program's)."""


def label_file_path(output_dir: str) -> str:
    return os.path.join(output_dir, LABEL_FILE)


def read_label_file(output_dir: str) -> tuple[str, list[str] | None] | None:
    """(task_type, labels) stored in ``output_dir``, or None when there is no label file."""
    path = label_file_path(output_dir)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as handle:
        text = handle.read()
    try:
        stored = json.loads(text)
        task_type, labels = stored["task_type"], stored["labels"]
        if labels is not None and not all(isinstance(label, str) for label in labels):
            raise TypeError("labels must be strings")
    except (ValueError, KeyError, TypeError) as error:
        raise LabelFileError(f"{path}: expected {{\"task_type\": ..., \"labels\": [...] or null}} "
                             f"({error}); it was written by a run in this directory") from None
    return task_type, labels


def write_label_file(output_dir: str, task_type: str, labels: Sequence[str] | None) -> str:
    """Writes ``label_list.json`` atomically; returns its path."""
    path = label_file_path(output_dir)
    text = json.dumps({"task_type": task_type,
                       "labels": None if labels is None else list(labels)}, indent=1)
    atomic_write_text(path, text + "\n")
    return path


def check_label_file(output_dir: str, task_type: str, labels: Sequence[str] | None,
                     source: str) -> None:
    """LabelSetMismatch when ``output_dir`` holds a label file with another task type or label
    set than this run's (taken from ``source``, named in the message)."""
    stored = read_label_file(output_dir)
    if stored is None:
        return
    stored_type, stored_labels = stored
    labels = None if labels is None else list(labels)
    if (stored_type, stored_labels) != (task_type, labels):
        raise LabelSetMismatch(
            f"{label_file_path(output_dir)}: the run in this directory was trained as a "
            f"{stored_type} with labels {stored_labels}; this run has a {task_type} with labels "
            f"{labels} ({source}). Use another --output_dir, or the same labels (--labels) and "
            "--task_type")
