"""What a task plugs into the shared ``Trainer`` (albert_tf/training/trainer.py): the ``Task`` protocol.

A ``Task`` supplies the model, its losses and its evaluation; the Trainer runs it under any
tf.distribute strategy. Losses are replica contributions normalised by *global* totals, so the
summed gradient equals the single-device gradient of the same global batch (see the protocol).
Evaluation is ``predict_outputs`` per batch on the device, then ``reduce`` on the host over the
outputs of a whole ``EvalSet`` and its context (metrics, prediction files). ``Features`` is the
dict of batched tensors a parsed record gives. Each task's implementation lives in
albert_tf/tasks/<task>/task.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Protocol

import keras
import numpy as np
import tensorflow as tf

Features = Mapping[str, tf.Tensor]


class Task(Protocol):
    """What a script plugs into the Trainer: a model, its losses, its evaluation.

    Losses are *replica contributions*: each replica divides its sums by the global normalizers
    (``loss_normalizers`` summed over replicas), so the cross-replica sum is the global-batch value.
    Evaluation is two steps: ``predict_outputs`` per batch on the device (gathered over replicas and
    concatenated over batches by ``Trainer.predict``), then ``reduce`` on the host, which may also use
    what the evaluation set carries besides its records (``EvalSet.context``: the examples, the
    feature file's metadata) and may write prediction files.
    """

    def build_model(self) -> keras.Model:
        """The Keras model (built inside the strategy scope)."""

    def loss_normalizers(self, features: Features) -> dict[str, tf.Tensor]:
        """Local totals (float32 scalars) the losses divide by, e.g. number of examples."""

    def train_loss(self, model: keras.Model, features: Features,
                   normalizers: Mapping[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """(loss contribution, {name: logged contribution}) for one batch with training=True.

        Both are sums over the batch's examples divided by ``normalizers`` (the global totals),
        so the contributions of any partition of a batch add up to the batch's: replicas, and the
        parts a batch of mixed lengths is split into (``LengthSplit``), rely on it."""

    def predict_outputs(self, model: keras.Model, features: Features) -> dict[str, tf.Tensor]:
        """Per-example outputs [B, ...] of an eval/predict pass (training=False)."""

    def reduce(self, outputs: Mapping[str, np.ndarray], context: Any) -> dict[str, float]:
        """Metrics from the concatenated outputs of a whole evaluation set and its context."""


@dataclasses.dataclass(frozen=True)
class EvalSet:
    """One evaluation input of a task.

    name: prefixes its metric keys ("" for none; MNLI's second set is "mismatched").
    dataset_fn: () -> the batched, parsed dataset in file order (built anew for every checkpoint).
    context: whatever the task's ``reduce`` needs besides the outputs (None for pretraining).
    max_steps: evaluate at most this many batches (None: all).
    source: what the set's data are, e.g. its feature file's name (changes with the data and the
      feature settings); recorded in the sweep's state in the run manifest
      (albert_tf/evaluation/checkpoint_sweep.py), which does not resume on other data. None: not
      recorded.
    """

    name: str
    dataset_fn: Callable[[], tf.data.Dataset]
    context: Any = None
    max_steps: int | None = None
    source: str | None = None
