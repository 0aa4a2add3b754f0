"""Per-example losses and outputs shared by the tasks that pick one of C classes (GLUE, RACE), and
the real examples among a prediction pass's outputs.

In the graph: ``softmax_outputs`` gives the softmax cross-entropy per example with the
probabilities and the arg-max class; ``examples_normalizer`` and ``mean_with_accuracy`` turn
per-example values into a replica's contribution to the global-batch mean (the Trainer sums the
replicas). On the host: ``real_examples`` drops the padding records (``is_real_example`` 0) that
fill the last evaluation or prediction batch on TPU (albert_tf/training/input_pipeline.py).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import tensorflow as tf

from albert_tf.training.task import Features


def examples_normalizer(features: Features) -> dict[str, tf.Tensor]:
    """{"examples": the local batch size} as float32: what a per-example mean divides by."""
    return {"examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}


def softmax_outputs(logits: tf.Tensor,
                    labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """logits float [B, C], labels int [B] -> (cross-entropy -log softmax(logits)[label] float32
    [B], probabilities [B, C], arg-max class int32 [B])."""
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    loss = -tf.gather(log_probs, tf.cast(labels, tf.int32), batch_dims=1)
    return loss, tf.exp(log_probs), tf.argmax(logits, axis=-1, output_type=tf.int32)


def mean_with_accuracy(per_example_loss: tf.Tensor, predictions: tf.Tensor, labels: tf.Tensor,
                       normalizers: Mapping[str, tf.Tensor]
                       ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """(loss contribution, {"accuracy": contribution}): sums over the local batch [B] divided by
    the global number of examples."""
    correct = tf.cast(tf.equal(predictions, tf.cast(labels, tf.int32)), tf.float32)
    return (tf.reduce_sum(per_example_loss) / normalizers["examples"],
            {"accuracy": tf.reduce_sum(correct) / normalizers["examples"]})


def real_examples(outputs: Mapping[str, np.ndarray], *names: str) -> list[np.ndarray]:
    """The outputs ``names`` of ``Trainer.predict`` (one row per record, in record order) restricted
    to the real examples: padding records (``is_real_example`` 0) are dropped."""
    real = np.asarray(outputs["is_real_example"]).reshape(-1) != 0
    return [np.asarray(outputs[name])[real] for name in names]
