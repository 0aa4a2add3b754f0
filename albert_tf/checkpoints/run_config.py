"""The config a run's checkpoints were trained with, kept beside them as
``<output_dir>/albert_config.json``.

run_pretraining writes it when training starts, so a run directory says what it holds (the results
tables read the sharing strategy, the embedding size and the parameter count from it), and a resume
with another architecture stops before any work, naming the keys that differ, instead of failing
inside the restore. Dropout rates may change between runs of one directory.
"""

from __future__ import annotations

import os

import tensorflow as tf

from albert_tf.models.config import AlbertConfig, ConfigError

RUN_CONFIG_FILE = "albert_config.json"
# Keys a run may change on resume: they are not part of the checkpoint's shapes or structure.
_RESUMABLE_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def run_config_path(output_dir: str) -> str:
    """Where the run's config is kept."""
    return os.path.join(output_dir, RUN_CONFIG_FILE)


def recorded_config(output_dir: str) -> AlbertConfig | None:
    """The config recorded in ``output_dir``; None when no run recorded one."""
    path = run_config_path(output_dir)
    return AlbertConfig.from_json_file(path) if tf.io.gfile.exists(path) else None


def check_run_config(output_dir: str, config: AlbertConfig, config_file: str) -> None:
    """ConfigError (a ValueError) naming the differing keys, ``config_file`` and ``output_dir``
    when the directory records another architecture than ``config``."""
    recorded = recorded_config(output_dir)
    if recorded is None:
        return
    # Keys with class defaults (cross_layer_sharing) count whether or not a file spells them out.
    keys = set(config.to_dict()) | set(recorded.to_dict()) | {"cross_layer_sharing"}
    differing = sorted(key for key in keys if key not in _RESUMABLE_KEYS
                       and getattr(config, key, None) != getattr(recorded, key, None))
    if differing:
        details = ", ".join(f"{key} {getattr(config, key, None)!r} (recorded "
                            f"{getattr(recorded, key, None)!r})" for key in differing)
        raise ConfigError(f"{config_file} differs from the config {output_dir} was trained with "
                          f"({RUN_CONFIG_FILE}): {details}; use that config or another "
                          "output directory.")


def record_run_config(output_dir: str, config: AlbertConfig, config_file: str) -> None:
    """Writes ``config`` to ``<output_dir>/albert_config.json`` (atomically) unless the directory
    records one already; another architecture is refused (``check_run_config``)."""
    check_run_config(output_dir, config, config_file)
    if recorded_config(output_dir) is None:
        config.to_json_file(run_config_path(output_dir))
