"""How an early-exit classifier's internal classifiers are trained (``--early_exit_training``),
and where a two-stage run's first stage comes from.

- ``two_stage`` (DeeBERT's; the default with separate heads): stage 1 is the ordinary classifier,
  trained exactly as without --early_exit, or an ordinary classifier --init_checkpoint already
  holds; stage 2 trains the internal classifiers of layers 1..L-1 alone, the encoder (its pooler
  too) and the ordinary classifier frozen, at its own learning rate (--early_exit_learning_rate,
  by default 10 x --learning_rate: trainings.py). The full depth is then the ordinary model, bit
  for bit.
- ``joint`` (PABEE's): every layer's classifier and the encoder trained together from the start
  by PABEE's weighted loss; the full depth is not the ordinary model's (better or worse).

Shared heads (``--early_exit_heads=shared``) have no classifier of their own to train in a second
stage: they train jointly only. An output directory records its kind of training (the run
manifest's ``early_exit_training``); an early-exit directory trained before the fact was recorded
was trained jointly (the only kind there was).
"""

from __future__ import annotations

import os

import tensorflow as tf

from albert_tf.checkpoints.warm_start import resolve_checkpoint_source, unreadable_checkpoint
from albert_tf.errors.user_error import UserError
from albert_tf.files.run_manifest import Fact, RunManifest, read_manifest
from albert_tf.tasks.classification.classifier_heads import HEADS
from albert_tf.tasks.classification.model import EXIT_CLASSIFIER
from albert_tf.tasks.classification.trainings import JOINT

# Stage 1's run directory inside --output_dir, when the run trains the ordinary classifier itself.
ORDINARY_DIR = "ordinary"
# The ordinary head's variable, by checkpoint format: TF1 (the reference's name), object-based.
_ORDINARY_HEAD = ("output_weights", "model/classifier/output_weights/.ATTRIBUTES/VARIABLE_VALUE")


def describe(training: str) -> str:
    """How run_classifier's flags say ``training``."""
    return f"--early_exit_training={training}"


TRAINING = Fact("early_exit_training", "internal classifiers trained with", describe=describe)


def recorded_training(manifest: RunManifest) -> str | None:
    """The training ``manifest``'s directory records; "joint" for an early-exit directory with a
    trained checkpoint and no such fact (written before it was recorded); None: nothing."""
    if manifest.has_fact(TRAINING.key):
        return manifest.fact(TRAINING.key)
    trained = manifest.trained is not None or manifest.best is not None
    return JOINT if trained and manifest.fact(HEADS.key) is not None else None


def check_training(manifest: RunManifest, training: str) -> None:
    """UserError, in one line, when the run directory of ``manifest`` holds internal classifiers
    trained another way than ``training``: a rerun with the other kind would mix the two, or
    report one as the other."""
    recorded = recorded_training(manifest)
    if recorded is not None and recorded != training:
        raise UserError(f"--output_dir={manifest.directory} holds internal classifiers trained "
                        f"with {describe(recorded)}; this run has {describe(training)}. Give "
                        f"{describe(recorded)} to continue it, or use another --output_dir.")


def ordinary_classifier(init_checkpoint: str | None) -> bool:
    """Whether --init_checkpoint (a checkpoint prefix, a SavedModel or a run directory, resolved as
    the warm start resolves it) holds an ordinary fine-tuned classifier: its head
    ``output_weights`` and no early-exit classifier. Then it is stage 1 of a two-stage run, read
    and never written; a checkpoint without a classifier head (pretraining's, Hugging Face's) is
    what stage 1 starts from. UserError for an early-exit classifier (its encoder was trained
    with internal classifiers: not the ordinary model)."""
    if not init_checkpoint:
        return False
    source = resolve_checkpoint_source(init_checkpoint)
    if source.hugging_face:
        return False
    try:
        names = {name for name, _ in tf.train.list_variables(source.path)}
    except (tf.errors.OpError, RuntimeError) as error:
        raise unreadable_checkpoint(source.path, error) from None
    directory = os.path.dirname(source.path)
    early_exit = (any(f"/{EXIT_CLASSIFIER}_" in name or name.startswith("early_exit/")
                      for name in names)
                  or read_manifest(directory).fact(HEADS.key) is not None)
    if early_exit:
        raise UserError(f"--init_checkpoint={init_checkpoint}: a classifier trained with "
                        "--early_exit; two-stage training starts from an ordinary one (or from a "
                        "pretrained model, training the ordinary one first). Give "
                        f"{describe(JOINT)} to go on from it jointly.")
    return bool(names & set(_ORDINARY_HEAD))
