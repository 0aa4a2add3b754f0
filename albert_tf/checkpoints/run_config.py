"""The config a run's checkpoints were trained with: the record ``CONFIG`` of its run manifest,
and ``albert_config.json`` beside them.

A training run records its config when training starts, so a run directory says what it holds
(the results tables read the sharing strategy, the embedding size and the parameter count from
it), and a resume with another architecture stops before any work, naming the keys that differ,
instead of failing inside the restore. Dropout rates may change between runs of one directory.
The run also writes the config as ``albert_config.json`` (where there is none), as a released
model's directory has it, for the commands a user gives that directory to; what runs check is the
manifest's fact.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

from albert_tf.files.run_manifest import Fact, read_manifest
from albert_tf.models.config import AlbertConfig, ConfigError

RUN_CONFIG_FILE = "albert_config.json"
# Keys a run may change on resume: they are not part of the checkpoint's shapes or structure.
_RESUMABLE_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def _difference(value: Any, recorded: Any) -> tuple[str, str] | None:
    """The keys in which two configs (as dicts) differ, outside the dropout rates; keys with class
    defaults (cross_layer_sharing) count whether or not a file spells them out."""
    this, stored = AlbertConfig.from_dict(value), AlbertConfig.from_dict(recorded)
    keys = set(this.to_dict()) | set(stored.to_dict()) | {"cross_layer_sharing"}
    differing = sorted(key for key in keys if key not in _RESUMABLE_KEYS
                       and getattr(this, key, None) != getattr(stored, key, None))
    if not differing:
        return None
    show = lambda config: ", ".join(f"{key}={getattr(config, key, None)!r}"  # noqa: E731
                                    for key in differing)
    return show(stored), show(this)


CONFIG = Fact("config", "checkpoints trained with the config", compare=_difference)


def run_config_path(output_dir: str) -> str:
    """Where the run's config file is kept."""
    return os.path.join(output_dir, RUN_CONFIG_FILE)


def recorded_config(output_dir: str) -> AlbertConfig | None:
    """The config recorded in ``output_dir``'s run manifest, else its ``albert_config.json`` (a
    released model's directory); None when there is neither."""
    manifest = read_manifest(output_dir)
    value = manifest.fact(CONFIG.key)
    if value is not None:
        try:
            return AlbertConfig.from_dict(value)
        except (ValueError, TypeError) as error:
            raise ConfigError(f"{manifest.where(CONFIG.key)}: {error}") from None
    path = run_config_path(output_dir)
    return AlbertConfig.from_json_file(path) if tf.io.gfile.exists(path) else None


def write_config_file(output_dir: str, config: AlbertConfig) -> None:
    """Writes ``albert_config.json`` in ``output_dir`` unless there is one."""
    if not tf.io.gfile.exists(run_config_path(output_dir)):
        config.to_json_file(run_config_path(output_dir))
