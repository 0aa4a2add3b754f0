"""Token classification (NER) fine-tuning for the Trainer.

- Loss: softmax cross-entropy at each word's first piece (``label_weights`` 1), summed over the
  batch and divided by the global number of such positions; a word's other pieces, [CLS], [SEP] and
  padding do not count.
- Eval outputs per window: the arg-max tag id and the cross-entropy at every position,
  ``word_index`` / ``sentence_index`` (which word each position predicts, from the window where it
  has the most context; data_prep/token_classification/features.py) and ``is_real_example``; a
  batch cut to a shorter length (albert_tf/training/length_buckets.py) has its per-position
  outputs padded back to ``max_seq_length`` (tag 0, loss 0, word_index -1: no word), so the
  windows of every batch line up.
- ``word_predictions`` turns them into one tag id per word of every sentence (each word exactly
  once, or a ValueError); ``reduce`` scores them against the gold tags with ``entity_metrics``
  (``precision``, ``recall``, ``f1``, ``accuracy``, per type) plus ``eval_loss`` / ``loss``, the
  mean cross-entropy over the words. Checkpoints are selected by ``f1``.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.tasks.token_classification.metrics import entity_metrics
from albert_tf.tasks.token_classification.model import AlbertTokenClassifierModel
from albert_tf.training.per_example import real_examples
from albert_tf.training.task import Features

SELECTION_METRIC = "f1"


@dataclasses.dataclass(frozen=True)
class NerEvalContext:
    """What an evaluation needs besides the outputs: the tag names (tag id = index) and the gold
    tags of every sentence of the evaluated file, in file order."""

    tags: tuple[str, ...]
    gold: tuple[tuple[str, ...], ...]


def _position_losses(logits: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """logits [B, S, C], labels [B, S] -> (cross-entropy [B, S], arg-max tag id int32 [B, S])."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    loss = -tf.gather(log_probs, tf.cast(labels, tf.int32), batch_dims=2)
    return loss, tf.argmax(logits, axis=-1, output_type=tf.int32)


class TokenClassifierTask:
    """Fine-tuning of ``AlbertTokenClassifierModel`` on ``num_tags`` tags (a ``training.Task``);
    ``max_seq_length``: the records' length S, the length of every per-position output."""

    def __init__(self, config: AlbertConfig, num_tags: int, max_seq_length: int):
        self.config = config
        self.num_tags = num_tags
        self.max_seq_length = max_seq_length

    def build_model(self) -> keras.Model:
        return AlbertTokenClassifierModel(self.config, self.num_tags)

    def loss_normalizers(self, features: Features) -> dict[str, tf.Tensor]:
        """{"words": the local number of word-first positions}."""
        return {"words": tf.reduce_sum(tf.cast(features["label_weights"], tf.float32))}

    def train_loss(self, model: keras.Model, features: Features,
                   normalizers: Mapping[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        logits = model(model_inputs(features), training=True)["logits"]
        loss, predictions = _position_losses(logits, features["label_ids"])
        weights = tf.cast(features["label_weights"], tf.float32)
        correct = tf.cast(tf.equal(predictions, features["label_ids"]), tf.float32)
        return (tf.math.divide_no_nan(tf.reduce_sum(loss * weights), normalizers["words"]),
                {"accuracy": tf.math.divide_no_nan(tf.reduce_sum(correct * weights),
                                                   normalizers["words"])})

    def predict_outputs(self, model: keras.Model, features: Features) -> dict[str, tf.Tensor]:
        logits = model(model_inputs(features), training=False)["logits"]
        loss, predictions = _position_losses(logits, features["label_ids"])
        padded = self._padded
        return {"predictions": padded(predictions, 0), "position_loss": padded(loss, 0.0),
                "word_index": padded(features["word_index"], -1),
                "sentence_index": features["sentence_index"],
                "is_real_example": features["is_real_example"]}

    def _padded(self, values: tf.Tensor, fill: int | float) -> tf.Tensor:
        """[B, L] -> [B, max_seq_length], the positions after L set to ``fill``."""
        padding = self.max_seq_length - tf.shape(values)[1]
        return tf.pad(values, [[0, 0], [0, padding]], constant_values=fill)

    def reduce(self, outputs: Mapping[str, np.ndarray],
               context: NerEvalContext) -> dict[str, float]:
        """Entity metrics and the mean word loss of one evaluation (see the module doc)."""
        words_per_sentence = [len(tags) for tags in context.gold]
        predicted = word_predictions(outputs, words_per_sentence)
        metrics = entity_metrics(context.gold, [[context.tags[tag] for tag in sentence]
                                                for sentence in predicted])
        losses, word_index = real_examples(outputs, "position_loss", "word_index")
        metrics["eval_loss"] = float(np.mean(losses[word_index >= 0]))
        metrics["loss"] = metrics["eval_loss"]
        return metrics


def model_inputs(features: Features) -> dict[str, tf.Tensor]:
    return {name: features[name] for name in INPUT_NAMES}


def word_predictions(outputs: Mapping[str, np.ndarray],
                     words_per_sentence: Sequence[int]) -> list[list[int]]:
    """One predicted tag id per word of every sentence, from ``Trainer.predict`` outputs over a
    file's windows (padding records left out). ValueError if a word gets no or two predictions
    (the records do not belong to these sentences)."""
    predictions, word_index, sentence_index = real_examples(
        outputs, "predictions", "word_index", "sentence_index")
    predicted = [[-1] * count for count in words_per_sentence]
    for row, column in zip(*np.nonzero(word_index >= 0)):
        sentence, word = int(sentence_index[row]), int(word_index[row, column])
        if sentence >= len(predicted) or word >= len(predicted[sentence]):
            raise ValueError(f"a window predicts word {word} of sentence {sentence}, which the "
                             "file does not have")
        if predicted[sentence][word] != -1:
            raise ValueError(f"word {word} of sentence {sentence} is predicted twice")
        predicted[sentence][word] = int(predictions[row, column])
    for sentence, tags in enumerate(predicted):
        if -1 in tags:
            raise ValueError(f"word {tags.index(-1)} of sentence {sentence} got no prediction")
    return predicted
