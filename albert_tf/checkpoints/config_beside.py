"""The config kept beside a checkpoint, checked against the config a command was given.

A checkpoint's shapes and names fix most of its config (the sizes, the groups) but not the keys
that only change how the weights are used: ``num_attention_heads`` (the query, key and value
weights are [H, H] however many heads split them) and ``hidden_act``. A config that differs there
loads without a mismatch and computes something else, silently. ``num_hidden_layers`` is not in the
shapes either (one group's weights serve any depth); running a shared block at another depth can
be meant when fine-tuning, so it gets a warning there. A conversion or an export of the checkpoint
(``check_config_of_conversion``) refuses it: its output is meant to be the checkpoint's model, and
a Hugging Face config.json records the depth, a SavedModel runs it. Without a config beside, a
conversion or an export says in one line which keys it took from its config unchecked.

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
# Every key the weights do not show: the depth too.
_KEYS_WITH_THE_DEPTH = ("num_hidden_layers", *_KEYS_NOT_IN_THE_WEIGHTS)
# Keys the weights do show: the shapes of their variables, or (the groups, the sharing) which
# variables there are. A config that differs there is not the checkpoint's, or the config beside it
# is not.
_KEYS_IN_THE_WEIGHTS = ("vocab_size", "embedding_size", "hidden_size", "intermediate_size",
                        "num_hidden_groups", "inner_group_num", "cross_layer_sharing",
                        "max_position_embeddings", "type_vocab_size")
# What --init_from_group0 changes on purpose: it grows the checkpoint's group 0 into every group of
# the model, under any sharing.
_GROWN_FROM_GROUP0 = ("num_hidden_groups", "cross_layer_sharing")


def _differences(config: AlbertConfig, recorded: AlbertConfig, keys) -> str:
    """``key=<config's value> (beside it: <recorded value>)`` of each of ``keys`` that differs,
    joined by commas; empty when none does."""
    return ", ".join(f"{key}={getattr(config, key)!r} (beside it: {getattr(recorded, key)!r})"
                     for key in keys if getattr(config, key) != getattr(recorded, key))


def check_config_beside(checkpoint: str, config: AlbertConfig, config_file: str | None,
                        init_from_group0: bool = False, same_depth: bool = False) -> bool:
    """CheckpointMismatchError naming both files when ``<checkpoint's directory>/albert_config.json``
    exists, is not ``config_file`` and sets another ``num_attention_heads`` or ``hidden_act`` than
    ``config``; a warning when it sets another ``num_hidden_layers`` (an error too with
    ``same_depth``). ``checkpoint``: a prefix. Returns whether there was a config to check against
    (``config_file`` is the one beside, or another lies there).

    When keys the weights do show differ too (``hidden_size``, ``num_hidden_groups``, ...), the
    message names them first: then the weights cannot fit both configs, and one of the two is not
    the checkpoint's. ``init_from_group0``: the groups and the sharing may differ (the load grows
    group 0 into the model's groups)."""
    directory = os.path.dirname(checkpoint)
    beside = run_config_path(directory)
    if config_file and path_identity(config_file) == path_identity(beside):
        return True
    recorded = recorded_config(directory)
    if recorded is None:
        return False
    unseen = _differences(config, recorded,
                          _KEYS_WITH_THE_DEPTH if same_depth else _KEYS_NOT_IN_THE_WEIGHTS)
    if unseen:
        shaped = _differences(config, recorded, [
            key for key in _KEYS_IN_THE_WEIGHTS
            if not (init_from_group0 and key in _GROWN_FROM_GROUP0)])
        mismatch = (f"{model_description(config_file)} does not match {beside}, the config "
                    f"beside checkpoint {checkpoint}")
        if shaped:
            raise CheckpointMismatchError(
                f"{mismatch}: it differs in keys the weights' shapes show, {shaped}, so the "
                f"weights cannot fit both, and in {unseen}. Use {beside} if it is the "
                "checkpoint's config, or correct it if it is not.")
        raise CheckpointMismatchError(
            f"{mismatch}: {unseen}. The weights fit both, so the model would compute something "
            f"else than the one trained; use {beside}, or correct it if it is not the "
            "checkpoint's.")
    if config.num_hidden_layers != recorded.num_hidden_layers:
        logging.warning("%s runs the shared layers %d times, but %s, the config beside checkpoint "
                        "%s, says %d: the model is not the one trained at that depth.",
                        model_description(config_file), config.num_hidden_layers, beside,
                        checkpoint, recorded.num_hidden_layers)
    return True


def check_config_of_conversion(checkpoint: str, config: AlbertConfig, config_file: str | None,
                               init_from_group0: bool = False) -> None:
    """The check of a conversion or an export of ``checkpoint`` (a prefix) before it is read:
    ``check_config_beside`` with the depth refused too, since the output is meant to be the
    checkpoint's model and keeps the config's depth (a warning would leave a wrong output behind).
    With no config beside the checkpoint, prints one line naming the keys the weights cannot show,
    taken from ``config_file`` unchecked."""
    if check_config_beside(checkpoint, config, config_file, init_from_group0, same_depth=True):
        return
    values = ", ".join(f"{key}={getattr(config, key)!r}" for key in _KEYS_WITH_THE_DEPTH)
    print(f"Unchecked: {values} are taken from {config_file or 'the model config'}: the weights "
          f"cannot show them, and there is no {run_config_path(os.path.dirname(checkpoint))} "
          f"beside checkpoint {checkpoint} to compare them with.")
