"""What a run directory holds, in one file: ``<directory>/run_manifest.json``, owned by this module.

Every later run of a directory relies on what the earlier ones left there: which task and labels
its checkpoints were trained for, with which config, heads and objective; on which data its sweep
evaluated them; which step training reached and where that checkpoint is; which checkpoint the
sweep chose, what it scored and which files it was. Kept in one file, those facts cannot disagree
(they did, when the TF ``checkpoint`` state file still named a checkpoint the sweep had renamed).
The manifest is a JSON object::

    {"format": 2,
     "owned_names": [the fixed names and patterns albert_tf writes in this directory],
     "facts":       {what the checkpoints are: "label_set", "config", "classifier_heads",
                     "early_exit", "sentence_objective", "seed_recipe", ...},
     "trained":     {"step": last trained step, "checkpoint": the file prefix holding it},
     "sweeps":      {evaluation name ("" = the run's own): {"eval_data": {set: feature file},
                     "last_step": last evaluated step, "best_step": ..., "best_value": ...}},
     "best":        {"step", "selection_metric", "metrics", "fingerprint", "evaluation"}}

``read_manifest`` reads it, or, in a directory of an earlier version (which kept these facts in
separate files: label_list.json, albert_config.json, classifier_heads.json,
sentence_objective.json, eval_data*.json, seed_recipe.json, best_trial.txt, best_results*.json and
the list of its outputs .albert_tf_outputs.json), builds the same from those files
(albert_tf/files/earlier_layouts.py); the next ``update_manifest`` writes it, so that run upgrades
the directory. ``update_manifest`` changes it atomically, one process of this machine at a time.
``require_fact`` is the one check of a fact, with the one mismatch message. (Format 1, the first
manifests, named the facts' section "records"; it is read as "facts".)
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from typing import Any, Callable, Mapping

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files import earlier_layouts
from albert_tf.files.atomic import atomic_write_text
from albert_tf.files.json_objects import read_json_object
from albert_tf.files.run_lock import directory_flock

MANIFEST_NAME = "run_manifest.json"
_FORMAT = 2
# Writes of one update of a manifest on a file system without flock (gs://), each read back.
_REMOTE_ATTEMPTS = 5
_SECTIONS = {"owned_names": list, "facts": dict, "trained": dict, "sweeps": dict, "best": dict}


class RunManifestError(UserError, ValueError):
    """A manifest that is not one albert_tf wrote, or a run that does not fit what its directory
    holds: the message names the directory, the fact, both values and what to do."""


@dataclasses.dataclass(frozen=True)
class Fact:
    """One fact a directory records about its checkpoints: its ``key`` in "facts", how messages
    name what the directory holds (``noun``: "checkpoints trained with the config") and show a
    value (``describe``), and, where a run's value may fit a recorded one it does not equal,
    ``compare(value, recorded)``: None when it fits, else (the recorded, this run's) as the
    message shows them."""

    key: str
    noun: str
    describe: Callable[[Any], str] = json.dumps
    compare: Callable[[Any, Any], tuple[str, str] | None] | None = None

    def difference(self, value: Any, recorded: Any) -> tuple[str, str] | None:
        """None when ``value`` fits ``recorded``, else how the message shows (recorded, value):
        ``compare``'s answer, or, without one, equality and ``describe``."""
        if self.compare is not None:
            return self.compare(value, recorded)
        return None if value == recorded else (self.describe(recorded), self.describe(value))


@dataclasses.dataclass(frozen=True)
class RunManifest:
    """A directory's manifest as read (see the module doc); ``exists``: False when the directory
    has no manifest (a new directory, or one of an earlier version: then the sections hold what
    its earlier files say)."""

    directory: str
    content: dict
    exists: bool

    @property
    def owned_names(self) -> frozenset[str] | None:
        """The fixed names albert_tf wrote here; None when nothing says (a directory albert_tf
        never wrote, or one of an earlier version before its list of outputs)."""
        names = self.content.get("owned_names")
        return None if names is None else frozenset(names)

    def fact(self, key: str) -> Any:
        """The recorded value of ``key``; None when none is recorded."""
        return self.content["facts"].get(key)

    def has_fact(self, key: str) -> bool:
        return key in self.content["facts"]

    def where(self, key: str) -> str:
        """The file the fact ``key`` was read from (messages name it): the manifest, or the file
        of an earlier version's layout."""
        if self.exists:
            return manifest_path(self.directory)
        return tf.io.gfile.join(self.directory, earlier_layouts.fact_file(key))

    def where_sweep(self, evaluation: str = "") -> str:
        """The file the state of the sweep ``evaluation`` was read from (see ``where``)."""
        if self.exists:
            return manifest_path(self.directory)
        return tf.io.gfile.join(self.directory, earlier_layouts.eval_data_file(evaluation))

    @property
    def trained(self) -> dict | None:
        """{"step", "checkpoint"} of the last trained step, or None before any."""
        return self.content.get("trained") or None

    def sweep(self, evaluation: str = "") -> dict:
        """The state of the sweep named ``evaluation`` ({} before its first checkpoint)."""
        return dict(self.content["sweeps"].get(evaluation, {}))

    @property
    def best(self) -> dict | None:
        """{"step", "selection_metric", "metrics", "fingerprint", "evaluation"} of the checkpoint
        model.ckpt-best holds, or None before any sweep chose one."""
        return self.content.get("best") or None


def manifest_path(directory: str) -> str:
    return tf.io.gfile.join(directory, MANIFEST_NAME)


def _empty() -> dict:
    return {"format": _FORMAT, "owned_names": None, "facts": {}, "trained": None, "sweeps": {},
            "best": None}


def _checked(path: str, content: dict) -> dict:
    """``content`` with every section, each of its type; RunManifestError naming the file."""
    if content.get("format") == 1:
        content = {("facts" if section == "records" else section): value
                   for section, value in content.items()}
    elif content.get("format") != _FORMAT:
        raise RunManifestError(f"{path}: format {content.get('format')!r} is not one this version "
                               f"of albert_tf reads (1, {_FORMAT}); it is written by albert_tf")
    full = _empty()
    for section, kind in _SECTIONS.items():
        value = content.get(section)
        if value is not None and not isinstance(value, kind):
            raise RunManifestError(f"{path}: \"{section}\" must be a JSON "
                                   f"{'list' if kind is list else 'object'}; it is written by "
                                   "albert_tf (remove it only if albert_tf did not write it)")
        if value is not None:
            full[section] = value
    return full


def read_manifest(directory: str) -> RunManifest:
    """The manifest of ``directory`` (see ``RunManifest``; a directory that does not exist has an
    empty one)."""
    path = manifest_path(directory)
    if tf.io.gfile.exists(path):
        content = _checked(path, read_json_object(path, RunManifestError,
                                                  f"The run manifest {path}"))
        return RunManifest(directory, content, exists=True)
    content = _empty()
    if tf.io.gfile.isdir(directory):
        content.update(earlier_layouts.read_earlier_layout(directory))
    return RunManifest(directory, content, exists=False)


def _as_text(content: dict) -> str:
    """The manifest file's text of ``content``: two contents that write the same file are the same
    (a tuple and the list it reads back as, NaN and NaN)."""
    return json.dumps(content, indent=1, sort_keys=True) + "\n"


def update_manifest(directory: str, change: Callable[[dict], None]) -> RunManifest:
    """Applies ``change`` (which edits the manifest's content in place, and must be idempotent:
    it sets values) to the manifest of ``directory`` as it is now, and writes it atomically.
    Returns the result.

    A training job and its separate evaluation job both update the manifest. Processes of this
    machine update it one at a time (flock). Where the file system has no flock (``gs://``: the
    jobs on two machines), another job's write can land between this read and this write and
    undo this change: the manifest is read back after each write and the change made again on
    what is there, until it holds (RunManifestError after ``_REMOTE_ATTEMPTS`` writes)."""
    remote = "://" in directory
    with directory_flock(directory):
        for attempt in range(_REMOTE_ATTEMPTS + 1 if remote else 1):
            manifest = read_manifest(directory)
            content = copy.deepcopy(manifest.content)
            change(content)
            text = _as_text(content)
            if manifest.exists and text == _as_text(manifest.content):
                return manifest  # the change holds
            if attempt == _REMOTE_ATTEMPTS:
                break
            atomic_write_text(manifest_path(directory), text)
            if not remote:
                return RunManifest(directory, content, exists=True)
    raise RunManifestError(f"{manifest_path(directory)}: another job wrote it each of the "
                           f"{_REMOTE_ATTEMPTS} times this one updated it; one training job and "
                           "one evaluation job may share an --output_dir, no more")


def require_fact(manifest: RunManifest, fact: Fact, value: Any, source: str,
                   what: str = "--output_dir") -> None:
    """RunManifestError when ``manifest`` records another ``fact`` than ``value`` (this run's,
    from ``source``, e.g. "--task_name=RTE"), naming the directory, both values and what to do."""
    if not manifest.has_fact(fact.key):
        return
    difference = fact.difference(value, manifest.fact(fact.key))
    if difference is not None:
        raise RunManifestError(
            f"{what}={manifest.directory} holds {fact.noun} {difference[0]} "
            f"({os.path.basename(manifest.where(fact.key))}); this run has {difference[1]} "
            f"({source}). Give the run's own settings to continue it, or use another {what}")


def require_facts(manifest: RunManifest, values: Mapping[Fact, tuple[Any, str]]) -> None:
    """``require_fact`` for each ``{fact: (value, source)}`` of ``values``."""
    for fact, (value, source) in values.items():
        require_fact(manifest, fact, value, source)


def add_facts(directory: str, values: dict[Fact, tuple[Any, str]],
              trained: tuple[int, str] | None = None) -> RunManifest:
    """Checks each ``(value, source)`` of ``values`` against the manifest of ``directory``
    (``require_facts``), then records those not recorded yet (a recorded value is never
    replaced) and, in the same write, ``trained`` (``raise_trained``'s step and checkpoint)."""
    require_facts(read_manifest(directory), values)

    def add(content: dict) -> None:
        for fact, (value, _) in values.items():
            content["facts"].setdefault(fact.key, value)
        if trained is not None:
            raise_trained(content, *trained)

    return update_manifest(directory, add)


def raise_trained(content: dict, step: int, checkpoint: str) -> None:
    """Records in a manifest's ``content`` that training reached ``step``, its checkpoint the file
    prefix ``checkpoint`` (a name in the directory), unless a later step is recorded already (a
    training job beside this evaluation job): the last trained step only goes up."""
    if (content.get("trained") or {}).get("step", -1) <= step:
        content["trained"] = {"step": int(step), "checkpoint": checkpoint}
