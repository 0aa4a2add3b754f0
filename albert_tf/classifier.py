"""GLUE fine-tuning (spec 7): the classifier task for the Trainer, its input pipelines, the checks
run before training, and the prediction files.

- Loss: mean softmax cross-entropy of the logits (classification); mean squared error of the single
  output (STS-B regression).
- Eval outputs per example: ``probabilities`` (softmax [B, C]; STS-B: the raw output [B, 1]),
  ``predictions`` (arg-max id; STS-B: the score), the per-example loss, labels and
  ``is_real_example``; metrics come from ``albert_tf.metrics.glue_metrics`` weighted by
  ``is_real_example`` (padding examples weigh 0), plus ``loss`` (= ``eval_loss``, the key Estimator
  added to the reference's results).
- Prediction files (reference format): ``test_results.tsv``, one line of tab-separated
  probabilities per real example (STS-B: the score); ``submit_results.tsv``, header
  ``index\\tprediction`` then ``guid\\t<label name>`` (STS-B: the score).
"""

from __future__ import annotations

import os
from typing import Callable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.heads import AlbertClassifierModel
from albert_tf.io_utils import atomic_open
from albert_tf.metrics import glue_metrics
from albert_tf.training import SHUFFLE_BUFFER, DatasetFn, Features, with_data_sharding

MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids")
# serialized records [B] -> feature dict (data_prep.glue.parse_glue_example with S and regression bound).
ParseFn = Callable[[tf.Tensor], dict[str, tf.Tensor]]


def check_vocab_size(config: AlbertConfig, config_file: str, tokenizer_vocab_size: int,
                     tokenizer_file: str) -> None:
    """Fails fast when the config and the tokenizer disagree on the vocabulary (user problem 3)."""
    if config.vocab_size != tokenizer_vocab_size:
        raise ValueError(
            f"vocab_size={config.vocab_size} in {config_file} does not match the "
            f"{tokenizer_vocab_size} pieces of {tokenizer_file}; the config, the SentencePiece model "
            "and the checkpoint must come from the same pretrained model.")


def train_dataset_fn(record_path: str, parse: ParseFn, seed: int | None = 12345) -> DatasetFn:
    """The reference's training input: records repeated, shuffled (buffer 100, seeded), batched with
    drop_remainder. Batching happens before parsing so that a resumed run skips cheaply."""

    def dataset_fn(batch_size: int, batches_to_skip: int) -> tf.data.Dataset:
        dataset = tf.data.TFRecordDataset(record_path).repeat()
        dataset = dataset.shuffle(SHUFFLE_BUFFER, seed=seed)
        dataset = dataset.batch(batch_size, drop_remainder=True).skip(batches_to_skip)
        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        return with_data_sharding(dataset).prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def eval_dataset(record_path: str, parse: ParseFn, batch_size: int,
                 drop_remainder: bool = False) -> tf.data.Dataset:
    """The records in file order, once. drop_remainder only on TPU, where the file was padded with
    is_real_example=0 records to a multiple of the batch."""
    dataset = tf.data.TFRecordDataset(record_path).batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.map(parse)
    return with_data_sharding(dataset).prefetch(tf.data.AUTOTUNE)


class ClassifierTask:
    """Fine-tuning of ``AlbertClassifierModel`` on one GLUE task (a ``training.Task``).

    num_labels: classes; 1 means regression (STS-B).
    """

    def __init__(self, config: AlbertConfig, task_name: str, num_labels: int):
        self.config = config
        self.task_name = task_name.lower()
        self.num_labels = num_labels
        self.is_regression = num_labels == 1

    def build_model(self) -> keras.Model:
        return AlbertClassifierModel(self.config, self.num_labels)

    def loss_normalizers(self, features: Features) -> dict[str, tf.Tensor]:
        return {"examples": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}

    def _per_example(self, logits: tf.Tensor, features: Features):
        """(per-example loss [B], probabilities [B, C] or [B, 1], predictions [B])."""
        if self.is_regression:
            scores = logits[:, 0]
            labels = tf.cast(features["label_ids"], tf.float32)
            return tf.square(scores - labels), logits, scores
        labels = tf.cast(features["label_ids"], tf.int32)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        loss = -tf.gather(log_probs, labels, batch_dims=1)
        return loss, tf.exp(log_probs), tf.argmax(logits, axis=-1, output_type=tf.int32)

    def train_loss(self, model: keras.Model, features: Features,
                   normalizers: Mapping[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        logits = model(model_inputs(features), training=True)["logits"]
        per_example_loss, _, predictions = self._per_example(logits, features)
        logs = {}
        if not self.is_regression:
            correct = tf.cast(tf.equal(predictions, tf.cast(features["label_ids"], tf.int32)),
                              tf.float32)
            logs["accuracy"] = tf.reduce_sum(correct) / normalizers["examples"]
        return tf.reduce_sum(per_example_loss) / normalizers["examples"], logs

    def predict_outputs(self, model: keras.Model, features: Features) -> dict[str, tf.Tensor]:
        logits = model(model_inputs(features), training=False)["logits"]
        per_example_loss, probabilities, predictions = self._per_example(logits, features)
        return {"probabilities": probabilities, "predictions": predictions,
                "per_example_loss": per_example_loss, "label_ids": features["label_ids"],
                "is_real_example": features["is_real_example"]}

    def eval_metrics(self, outputs: Mapping[str, np.ndarray]) -> dict[str, float]:
        metrics = glue_metrics(self.task_name, outputs["predictions"], outputs["label_ids"],
                               weights=outputs["is_real_example"],
                               loss=outputs["per_example_loss"])
        metrics["loss"] = metrics["eval_loss"]
        return metrics


def model_inputs(features: Features) -> dict[str, tf.Tensor]:
    return {name: features[name] for name in MODEL_INPUTS}


def write_predictions(output_dir: str, guids: Sequence[str],
                      outputs: Mapping[str, np.ndarray], label_list: Sequence[str] | None,
                      suffix: str = "") -> tuple[str, str]:
    """Writes ``test_results<suffix>.tsv`` and ``submit_results<suffix>.tsv`` for the real examples.

    ``outputs`` come from ``Trainer.predict`` in file order; padding records (is_real_example 0)
    may follow the real ones and are dropped. Returns the two paths.
    """
    real = np.asarray(outputs["is_real_example"]).reshape(-1) != 0
    probabilities = np.asarray(outputs["probabilities"])[real]
    predictions = np.asarray(outputs["predictions"])[real]
    if len(probabilities) != len(guids):
        raise ValueError(f"Got {len(probabilities)} real predictions for {len(guids)} examples.")
    results_path = os.path.join(output_dir, f"test_results{suffix}.tsv")
    submit_path = os.path.join(output_dir, f"submit_results{suffix}.tsv")
    with atomic_open(results_path) as results, atomic_open(submit_path) as submit:
        submit.write("index\tprediction\n")
        for guid, row, prediction in zip(guids, probabilities, predictions):
            results.write("\t".join(str(value) for value in row) + "\n")
            label = str(prediction) if label_list is None else label_list[int(prediction)]
            submit.write(f"{guid}\t{label}\n")
    return results_path, submit_path
