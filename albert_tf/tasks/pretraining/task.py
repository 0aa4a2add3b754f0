"""Pretraining: the input pipeline, MLM + sentence losses and eval metrics of the reference's
run_pretraining, with the sentence objective SOP (the reference's), NSP or none (objective.py).

- MLM loss per position = -log softmax(logits)[label] (no label smoothing); the batch loss is
  ``sum(w * loss) / (sum(w) + 1e-5)`` over the masked positions, w = ``masked_lm_weights``.
- Sentence loss = mean cross-entropy of the 2-way head's logits against ``next_sentence_labels``
  (label 1 = swapped / random).
- total loss = MLM + sentence loss (SOP, NSP) or MLM alone (none: the sentence head gets no
  gradient, so the optimizer leaves it as it is). Eval metrics: ``masked_lm_accuracy``
  (weighted), ``masked_lm_loss`` (weighted mean), the sentence accuracy and loss named by the
  sentence task of the evaluation records (``sentence_order_*`` for SOP records, as the
  reference, ``next_sentence_*`` for NSP records), and ``loss`` (the training objective's: MLM +
  sentence loss, or MLM alone for none).
"""

from __future__ import annotations

import functools
from typing import Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.files.records import (file_records, remember_record_files, require_records,
                                     tfrecord_dataset)
from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tasks.pretraining.objective import require_objective, sentence_metric_names
from albert_tf.tasks.pretraining.records import parse_pretraining_example
from albert_tf.training.input_pipeline import SHUFFLE_BUFFER, DatasetFn, with_run_options
from albert_tf.training.per_example import examples_normalizer
from albert_tf.training.task import Features

MLM_DENOMINATOR_EPSILON = 1e-5


def pretraining_dataset_fn(input_files: Sequence[str], max_seq_length: int,
                           max_predictions_per_seq: int, is_training: bool,
                           seed: int | None = 12345) -> DatasetFn:
    """The reference's pretraining input pipeline, seeded so a resumed run replays the same order.

    Training: file names repeated and shuffled, 4-way interleave of TFRecord readers, shuffle buffer
    100. Evaluation: the files in order, once. Both batch with drop_remainder. Records are batched
    before parsing so that skipping the batches a resumed run already consumed costs no parsing.

    Building a dataset raises ``RecordFileError`` naming the files when they hold no record (the
    repeated file list would be searched forever) or, for evaluation, fewer than one batch.
    """
    files = list(input_files)
    parse = functools.partial(parse_pretraining_example, max_seq_length=max_seq_length,
                              max_predictions_per_seq=max_predictions_per_seq)

    def dataset_fn(batch_size: int, batches_to_skip: int) -> tf.data.Dataset:
        require_records(files, 1 if is_training else batch_size)
        if is_training:
            remember_record_files(files, parse)
            dataset = tf.data.Dataset.from_tensor_slices(files).repeat()
            dataset = dataset.shuffle(len(files), seed=seed)
            dataset = dataset.interleave(
                file_records, cycle_length=min(4, len(files)), num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True)
            dataset = dataset.shuffle(SHUFFLE_BUFFER, seed=seed)
        else:
            dataset = tfrecord_dataset(files, parse)
        dataset = dataset.batch(batch_size, drop_remainder=True).skip(batches_to_skip)
        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        return with_run_options(dataset).prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def model_inputs(features: Features) -> dict[str, tf.Tensor]:
    return {k: features[k] for k in (*INPUT_NAMES, "masked_lm_positions")}


def _per_example_losses(outputs: Mapping[str, tf.Tensor], features: Features):
    """MLM per-position CE [B, M], correctness [B, M]; sentence-head CE [B], correctness [B]."""
    labels = tf.cast(features["masked_lm_ids"], tf.int32)
    mlm_log_probs = tf.nn.log_softmax(outputs["mlm_logits"], axis=-1)
    mlm_ce = -tf.gather(mlm_log_probs, labels, batch_dims=2)
    mlm_correct = tf.cast(tf.equal(tf.argmax(mlm_log_probs, -1, output_type=tf.int32), labels),
                          tf.float32)
    sop_labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
    sop_log_probs = tf.nn.log_softmax(outputs["sop_logits"], axis=-1)
    sop_ce = -tf.gather(sop_log_probs, sop_labels, batch_dims=1)
    sop_correct = tf.cast(tf.equal(tf.argmax(sop_log_probs, -1, output_type=tf.int32), sop_labels),
                          tf.float32)
    return mlm_ce, mlm_correct, sop_ce, sop_correct


class PretrainingTask:
    """MLM + sentence-objective pretraining of ``AlbertPretrainingModel`` (a ``training.Task``).

    sentence_objective: ``sop``, ``nsp`` or ``none`` (objective.py). ``reduce``'s context names the
    sentence task of the evaluation records (``sop`` or ``nsp``); None means the objective's own
    (a ``none`` objective has none, so evaluation must name it).
    """

    def __init__(self, config: AlbertConfig, sentence_objective: str = "sop"):
        self.config = config
        self.sentence_objective = require_objective(sentence_objective)

    @property
    def trains_sentence_head(self) -> bool:
        return self.sentence_objective != "none"

    def build_model(self) -> keras.Model:
        return AlbertPretrainingModel(self.config)

    def loss_normalizers(self, features: Features) -> dict[str, tf.Tensor]:
        return {"masked_lm_weight": tf.reduce_sum(features["masked_lm_weights"]),
                **examples_normalizer(features)}

    def train_loss(self, model: keras.Model, features: Features,
                   normalizers: Mapping[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        outputs = model(model_inputs(features), training=True)
        mlm_ce, mlm_correct, sop_ce, sop_correct = _per_example_losses(outputs, features)
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        total_weight, examples = normalizers["masked_lm_weight"], normalizers["examples"]
        mlm_loss = tf.reduce_sum(weights * mlm_ce) / (total_weight + MLM_DENOMINATOR_EPSILON)
        logs = {
            "masked_lm_loss": mlm_loss,
            "masked_lm_accuracy": tf.math.divide_no_nan(tf.reduce_sum(weights * mlm_correct),
                                                        total_weight),
        }
        if not self.trains_sentence_head:
            return mlm_loss, logs
        sentence_loss = tf.reduce_sum(sop_ce) / examples
        loss_key, accuracy_key = sentence_metric_names(self.sentence_objective)
        logs[loss_key] = sentence_loss
        logs[accuracy_key] = tf.reduce_sum(sop_correct) / examples
        return mlm_loss + sentence_loss, logs

    def predict_outputs(self, model: keras.Model, features: Features) -> dict[str, tf.Tensor]:
        outputs = model(model_inputs(features), training=False)
        mlm_ce, mlm_correct, sop_ce, sop_correct = _per_example_losses(outputs, features)
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        return {"mlm_weighted_loss": tf.reduce_sum(weights * mlm_ce, axis=1),
                "mlm_weighted_correct": tf.reduce_sum(weights * mlm_correct, axis=1),
                "mlm_weight": tf.reduce_sum(weights, axis=1),
                "sop_loss": sop_ce, "sop_correct": sop_correct}

    def reduce(self, outputs: Mapping[str, np.ndarray],
               context: str | None = None) -> dict[str, float]:
        sentence_task = context or self.sentence_objective
        if sentence_task == "none":
            raise ValueError("An MLM-only model (sentence objective none) is evaluated on SOP or "
                             "NSP records: name their sentence task (sop or nsp).")
        loss_key, accuracy_key = sentence_metric_names(sentence_task)
        total_weight = float(np.sum(outputs["mlm_weight"]))
        metrics = {
            "masked_lm_accuracy": float(np.sum(outputs["mlm_weighted_correct"]) / total_weight),
            "masked_lm_loss": float(np.sum(outputs["mlm_weighted_loss"]) / total_weight),
            accuracy_key: float(np.mean(outputs["sop_correct"])),
            loss_key: float(np.mean(outputs["sop_loss"])),
        }
        metrics["loss"] = metrics["masked_lm_loss"] + (
            metrics[loss_key] if self.trains_sentence_head else 0.0)
        return metrics
