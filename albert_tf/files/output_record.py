"""Which fixed names of a directory belong to albert_tf: the record ``.albert_tf_outputs.json``.

A command writes fixed names into the directories it works in (``checkpoint``, ``model.ckpt-*``,
``eval_results.txt`` in ``--output_dir``) and replaces, renames or deletes what an earlier run of
it wrote under them. A file of the same name that the *user* put there (a released model's
``model.ckpt-best.*`` in the directory given as ``--output_dir``) must not share that fate. The
record tells the two apart: the pre-flight check (albert_tf/files/run_files.py) refuses a fixed name
that exists in a directory when the record does not list it, and, once every check passed, adds
all the fixed names the command declared there (names and glob patterns alike). So a name is
albert_tf's from the first run that found it free; only a file a user adds under a recorded name
later, inside a run's directory, is taken for the run's own.

Directories of earlier versions, which wrote no record, are recognised by the ``checkpoint`` state
file every training run leaves, in the directory or in a directory under one of the run's fixed
names (run_seeds' ``seed_<S>``): there, the existing fixed names are taken as the run's and
recorded. The record is hidden (input patterns skip it) and JSON: ``{"fixed_names": [...]}``.
"""

from __future__ import annotations

import json
from typing import Iterable

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_write_text
from albert_tf.files.json_objects import read_json_object

RECORD_NAME = ".albert_tf_outputs.json"


class OutputRecordError(UserError, ValueError):
    """A record that is not one albert_tf wrote (unreadable, or not its format)."""


def record_path(directory: str) -> str:
    return tf.io.gfile.join(directory, RECORD_NAME)


def recorded_names(directory: str) -> frozenset[str] | None:
    """The fixed names and patterns the record of ``directory`` lists; None when it has none."""
    path = record_path(directory)
    if not tf.io.gfile.exists(path):
        return None
    record = read_json_object(path, OutputRecordError, f"The output record {path}")
    names = record.get("fixed_names")
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise OutputRecordError(f"The output record {path} must hold a list of names under "
                                "\"fixed_names\"; remove it if albert_tf did not write it")
    return frozenset(names)


def add_to_record(directory: str, names: Iterable[str]) -> None:
    """Adds ``names`` to the record of ``directory`` (written whole, atomically; a record that
    would not change is not written, nor is an empty one)."""
    known = recorded_names(directory) or frozenset()
    merged = known | frozenset(names)
    if merged != known:
        atomic_write_text(record_path(directory),
                          json.dumps({"fixed_names": sorted(merged)}, indent=1) + "\n")
