"""Feature files shared by every fine-tuning task: a TFRecord of ``tf.train.Example`` records plus a
JSON sidecar, and a cache of them keyed by everything that determines their bytes.

A feature file is two files::

    <name>.tf_record        the serialized records
    <name>.tf_record.json   {"format_version", "key", "num_records", "record_bytes", "metadata"}

(``format_version`` is the sidecar's own version, ``SIDECAR_VERSION``.)

``metadata`` is whatever the task's post-processing needs besides the records (GLUE: the guids of the
real examples; SQuAD: per-feature token maps; ...). The record file is written under a temporary name
and renamed when complete, then the sidecar is written atomically, so a sidecar only ever describes a
complete record file, and a record file whose size differs from the sidecar's ``record_bytes`` is
detected instead of trusted.

The cache (``cached_feature_file``) keys an entry by the sidecar version, task, split, the task's
settings, the tokenizer fingerprint and the size and sha256 of every input file. A task's settings
are one frozen dataclass per feature builder (``GlueFeatureSettings``, ``SquadFeatureSettings``,
...: sequence lengths, what the reader keeps, and ``features_version``, the task's records version
``FEATURES_VERSION``), which is both what the builder converts with and, as
``dataclasses.asdict``, the key: a setting cannot change the records without changing the key.
Unlike the reference, which silently reuses ``<task>_train.tf_record`` after the sequence length,
the tokenizer or the input file changed, an entry is reused only when its sidecar holds exactly
that key.

Every file operation goes through ``tf.io.gfile``, so cache directories and inputs may be ``gs://``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from typing import Any, Callable, Mapping, NamedTuple, Protocol, Sequence

import tensorflow as tf
from absl import logging

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_write_text, temporary_path
from albert_tf.files.paths import absolute_path
from data_prep.common.user_errors import opening_user_file

# The sidecar's version (its field ``format_version``): bump when the sidecar schema or the cache's
# naming changes (every existing entry is then rebuilt). A task whose record bytes change for the
# same inputs bumps its FEATURES_VERSION, inside its own settings, instead.
SIDECAR_VERSION = 1

RECORD_SUFFIX = ".tf_record"
_SIDECAR_FIELDS = ("format_version", "key", "num_records", "record_bytes", "metadata")
_NAME_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_HASH_BLOCK_BYTES = 1 << 20
_DIGEST_CHARACTERS = 16  # of the sha256 naming a cache entry


class FeatureCacheError(UserError, ValueError):
    """A feature file is incomplete or inconsistent, or an input is missing; the message names the file."""


class FeatureFile(NamedTuple):
    """A complete feature file.

    path: the TFRecord file. num_records: how many records it holds. metadata: the task-specific,
    JSON-serialisable dict its builder returned, as read back from JSON (tuples become lists).
    """

    path: str
    num_records: int
    metadata: dict


class RecordSink(Protocol):
    """Where a builder writes its serialized ``tf.train.Example`` records, in file order."""

    def write(self, serialized: bytes) -> None: ...


class _CountingSink:
    """A RecordSink that forwards to a TFRecordWriter and counts the records."""

    def __init__(self, writer: tf.io.TFRecordWriter):
        self._writer = writer
        self.count = 0

    def write(self, serialized: bytes) -> None:
        self._writer.write(serialized)
        self.count += 1


def sidecar_path(record_path: str) -> str:
    """The JSON sidecar of a record file: ``record_path + ".json"``."""
    return record_path + ".json"


def _json_round_trip(value: Any, what: str) -> Any:
    """``value`` as JSON reads it back (tuples -> lists); TypeError naming ``what`` if it is not JSON."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as error:
        raise TypeError(f"{what} must be JSON-serialisable: {error}") from error


def _remove_if_present(path: str) -> None:
    if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


def write_feature_file(record_path: str, build: Callable[[RecordSink], dict],
                       key: Mapping | None = None) -> FeatureFile:
    """Writes a feature file: ``build(sink)`` writes the records and returns the metadata dict.

    The records go to a temporary name; only once ``build`` returns is a previous file pair at
    ``record_path`` replaced: its sidecar is removed, the temporary renamed to ``record_path``,
    then the new sidecar written atomically. So a run that fails while building (bad input met
    half-way, Ctrl-C, a full disk) leaves a previous feature file at that path as it was (the
    user's earlier output of data_prep.race or data_prep.squad is not lost to a failed rerun), and
    a sidecar only ever describes the record file beside it. If anything after the build raises,
    neither ``record_path`` nor its sidecar exists afterwards.
    """
    sidecar = sidecar_path(record_path)
    with temporary_path(record_path) as temporary:
        with opening_user_file(record_path, "feature file"):
            writer = tf.io.TFRecordWriter(temporary)
        with writer:
            sink = _CountingSink(writer)
            metadata = build(sink)
        if not isinstance(metadata, Mapping):
            raise TypeError(f"the builder of {record_path} must return a metadata dict, "
                            f"got {type(metadata).__name__}")
        contents = {"format_version": SIDECAR_VERSION,
                    "key": _json_round_trip(None if key is None else dict(key), "the cache key"),
                    "num_records": sink.count,
                    "record_bytes": tf.io.gfile.stat(temporary).length,
                    "metadata": _json_round_trip(dict(metadata), f"the metadata of {record_path}")}
        # The old sidecar goes before the new records take its file's name, never after.
        _remove_if_present(sidecar)
    try:
        with opening_user_file(sidecar, "feature sidecar"):
            atomic_write_text(sidecar, json.dumps(contents) + "\n")
    except BaseException:
        _remove_if_present(record_path)
        raise
    return FeatureFile(record_path, sink.count, contents["metadata"])


def _load_sidecar(record_path: str) -> dict:
    """The validated sidecar of ``record_path``; FeatureCacheError naming the file otherwise."""
    path = sidecar_path(record_path)
    if not tf.io.gfile.exists(path):
        raise FeatureCacheError(f"{path}: sidecar not found, so {record_path} is not a complete "
                                "feature file (never built, or its build was interrupted)")
    try:
        with opening_user_file(path, "feature sidecar"), tf.io.gfile.GFile(path, "rb") as handle:
            sidecar = json.loads(handle.read().decode("utf-8"))
    except ValueError as error:
        raise FeatureCacheError(f"{path}: not a valid JSON sidecar: {error}") from None
    if not isinstance(sidecar, dict) or any(field not in sidecar for field in _SIDECAR_FIELDS):
        raise FeatureCacheError(f"{path}: expected a JSON object with the fields "
                                f"{list(_SIDECAR_FIELDS)}")
    if sidecar["format_version"] != SIDECAR_VERSION:
        raise FeatureCacheError(f"{path}: format_version {sidecar['format_version']!r}, expected "
                                f"{SIDECAR_VERSION}")
    for field in ("num_records", "record_bytes"):
        value = sidecar[field]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FeatureCacheError(f"{path}: {field} must be a non-negative integer, got {value!r}")
    if not isinstance(sidecar["metadata"], dict):
        raise FeatureCacheError(f"{path}: metadata must be a JSON object")
    if not tf.io.gfile.exists(record_path):
        raise FeatureCacheError(f"{record_path}: record file not found (its sidecar {path} exists)")
    size = tf.io.gfile.stat(record_path).length
    if size != sidecar["record_bytes"]:
        raise FeatureCacheError(f"{record_path}: {size} bytes, but its sidecar {path} says "
                                f"{sidecar['record_bytes']} (truncated or overwritten)")
    return sidecar


def read_feature_file(record_path: str) -> FeatureFile:
    """The feature file at ``record_path``, checked against its sidecar.

    Raises FeatureCacheError naming the file when the sidecar is missing or invalid, or when the
    record file is missing or its size differs from the sidecar's ``record_bytes``.
    """
    sidecar = _load_sidecar(record_path)
    return FeatureFile(record_path, sidecar["num_records"], sidecar["metadata"])


def _sha256_of_file(path: str) -> str:
    digest = hashlib.sha256()
    with opening_user_file(path), tf.io.gfile.GFile(path, "rb") as handle:
        for block in iter(lambda: handle.read(_HASH_BLOCK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def file_fingerprints(paths: Sequence[str]) -> list[dict]:
    """Per input file, in order: {"path" (absolute), "size" (bytes), "sha256" (hex)}.

    Raises FeatureCacheError naming a file that does not exist or is a directory.
    """
    fingerprints = []
    for path in paths:
        if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
            raise FeatureCacheError(f"input file not found: {path}")
        fingerprints.append({"path": absolute_path(path), "size": tf.io.gfile.stat(path).length,
                             "sha256": _sha256_of_file(path)})
    return fingerprints


def settings_key(settings: Any) -> dict:
    """The cache key's ``settings``: a settings dataclass as ``dataclasses.asdict`` (nested ones
    too), or a mapping as a dict."""
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        return dataclasses.asdict(settings)
    return dict(settings)


def _identity(task: str, split: str, settings: Any, tokenizer_fingerprint: str) -> dict:
    """Everything that names a cache entry (all of the key except the input files)."""
    for what, value in (("task", task), ("split", split)):
        if not isinstance(value, str) or not _NAME_PART.fullmatch(value):
            raise ValueError(f"feature cache {what} {value!r} must be letters, digits, '_', '.' or "
                             "'-' (it is part of a file name)")
    return {"format_version": SIDECAR_VERSION, "task": task, "split": split,
            "settings": _json_round_trip(settings_key(settings), "the feature settings"),
            "tokenizer_fingerprint": tokenizer_fingerprint}


def feature_file_path(cache_dir: str, task: str, split: str, settings: Any,
                      tokenizer_fingerprint: str) -> str:
    """``<cache_dir>/<task>_<split>_<digest>.tf_record``: the same path for the same task, split,
    settings and tokenizer (digest: 16 hex chars of their sha256), whatever the input files hold."""
    identity = _identity(task, split, settings, tokenizer_fingerprint)
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()
    digest = digest[:_DIGEST_CHARACTERS]
    return tf.io.gfile.join(cache_dir, f"{task}_{split}_{digest}{RECORD_SUFFIX}")


def feature_file_source(features: FeatureFile) -> str:
    """What ``features`` were built from, as one line to record and compare: its input files and a
    digest of its whole cache key (settings, tokenizer, the inputs' sizes and sha256), e.g.
    ``/data/dev.csv (features 3f2a...)``. The file name alone does not say it: an entry keeps its
    name when its input file changes (it is rebuilt in place)."""
    key = _load_sidecar(features.path)["key"]
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()
    inputs = key.get("inputs", []) if isinstance(key, dict) else []
    names = ", ".join(str(item.get("path")) for item in inputs if isinstance(item, dict))
    return f"{names or os.path.basename(features.path)} (features {digest[:_DIGEST_CHARACTERS]})"


def cache_file_pattern(task: str) -> str:
    """The glob pattern of the cache's files of ``task`` (records and sidecars, every split): what
    a command declares it writes into its cache directory."""
    return f"{task}_*_{'?' * _DIGEST_CHARACTERS}{RECORD_SUFFIX}*"


def cached_feature_file(cache_dir: str, task: str, split: str, settings: Any,
                        tokenizer_fingerprint: str, input_paths: Sequence[str],
                        build: Callable[[RecordSink], dict]) -> FeatureFile:
    """The feature file of (task, split, settings, tokenizer, input files): reused or (re)built.

    settings: what changes the records besides the inputs and the tokenizer: the builder's settings
    dataclass (its ``dataclasses.asdict`` is the key's ``settings``; see the module doc), or a
    mapping; JSON-serialisable either way. The entry lives at ``feature_file_path(...)``; it is
    reused when its sidecar's key (sidecar version, task, split, settings, tokenizer fingerprint
    and ``file_fingerprints(input_paths)``) equals this call's and the record file has the recorded
    size.
    Otherwise ``write_feature_file(path, build, key)`` rebuilds it (an edited input file replaces its
    entry). Logs which of the two happened and why.
    """
    record_path = feature_file_path(cache_dir, task, split, settings, tokenizer_fingerprint)
    key = {**_identity(task, split, settings, tokenizer_fingerprint),
           "inputs": file_fingerprints(input_paths)}
    if not tf.io.gfile.exists(sidecar_path(record_path)):
        reason = "not cached yet"
    else:
        try:
            sidecar = _load_sidecar(record_path)
        except FeatureCacheError as error:
            reason = str(error)
        else:
            if sidecar["key"] == key:
                logging.info("reusing cached features %s (%d records)", record_path,
                             sidecar["num_records"])
                return FeatureFile(record_path, sidecar["num_records"], sidecar["metadata"])
            stored = sidecar["key"] if isinstance(sidecar["key"], dict) else {}
            changed = sorted(field for field in key if stored.get(field) != key[field])
            reason = f"cache key changed: {', '.join(changed)}"
    logging.info("building features %s (%s)", record_path, reason)
    # A stale entry of the cache is removed before the rebuild: it is the cache's own file, and a
    # failed rebuild leaves no entry that could be mistaken for the current one.
    _remove_if_present(sidecar_path(record_path))
    _remove_if_present(record_path)
    features = write_feature_file(record_path, build, key)
    logging.info("wrote %d records to %s", features.num_records, record_path)
    return features
