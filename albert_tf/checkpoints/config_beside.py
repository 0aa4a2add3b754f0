"""The config kept beside a checkpoint, checked against the config a command was given.

A checkpoint's shapes and names fix most of its config (the sizes, the groups) but not the keys
that only change how the weights are used: ``num_attention_heads`` (the query, key and value
weights are [H, H] however many heads split them) and ``hidden_act``. A config that differs there
loads without a mismatch and computes something else, silently. ``num_hidden_layers`` is not in the
shapes either (one group's weights serve any depth); running a shared block at another depth can
be meant, so it gets a warning, not an error.

Released models, pretraining runs (albert_tf/checkpoints/run_config.py) and conversions keep the
checkpoint's config beside it as ``albert_config.json``; when one is there and is not the config
given, those keys must agree. Reference TF1 and albert_tf checkpoints are checked (a Hugging Face
directory's own config.json is compared by its loader).
"""

from __future__ import annotations

import os

from absl import logging

from albert_tf.checkpoints.report import CheckpointMismatchError, model_description
from albert_tf.checkpoints.run_config import recorded_config, run_config_path
from albert_tf.files.paths import path_identity
from albert_tf.models.config import AlbertConfig

# Keys the weights do not show that change what the model computes.
_KEYS_NOT_IN_THE_WEIGHTS = ("num_attention_heads", "hidden_act")


def check_config_beside(checkpoint: str, config: AlbertConfig, config_file: str | None) -> None:
    """CheckpointMismatchError naming both files when ``<checkpoint's directory>/albert_config.json``
    exists, is not ``config_file`` and sets another ``num_attention_heads`` or ``hidden_act`` than
    ``config``; a warning when it sets another ``num_hidden_layers``. ``checkpoint``: a prefix."""
    directory = os.path.dirname(checkpoint)
    beside = run_config_path(directory)
    if config_file and path_identity(config_file) == path_identity(beside):
        return
    recorded = recorded_config(directory)
    if recorded is None:
        return
    differing = [key for key in _KEYS_NOT_IN_THE_WEIGHTS
                 if getattr(config, key) != getattr(recorded, key)]
    if differing:
        details = ", ".join(f"{key}={getattr(config, key)!r} (beside it: "
                            f"{getattr(recorded, key)!r})" for key in differing)
        raise CheckpointMismatchError(
            f"{model_description(config_file)} does not match {beside}, the config beside "
            f"checkpoint {checkpoint}: {details}. The weights fit both, so the model would "
            f"compute something else than the one trained; use {beside}, or correct it if it "
            "is not the checkpoint's.")
    if config.num_hidden_layers != recorded.num_hidden_layers:
        logging.warning("%s runs the shared layers %d times, but %s, the config beside checkpoint "
                        "%s, says %d: the model is not the one trained at that depth.",
                        model_description(config_file), config.num_hidden_layers, beside,
                        checkpoint, recorded.num_hidden_layers)
