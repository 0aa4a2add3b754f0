"""SQuAD v1.1 / v2.0 fine-tuning for the Trainer.

Loss: v1, the mean over the batch of (CE(start) + CE(end)) / 2; v2, the mean of
0.5 (CE_start + CE_end) + 0.5 BCE(answerability). An evaluation gathers the raw outputs of every
window, then ``reduce`` runs the reference's post-processing with the windows' metadata and the
questions (``SquadEvalContext``), writes predictions.json, nbest_predictions.json (and v2
null_odds.json) and scores them; the padding windows that fill the last batch on TPU
(``is_real_example`` 0) are left out first:

- v1: the official v1.1 ``exact_match`` and ``f1``;
- v2: the official v2.0 scores of the predictions at the fixed ``null_score_diff_threshold``
  (``exact``, ``f1``, ``total``, ``HasAns_*``, ``NoAns_*``, ``best_exact`` / ``best_f1`` and their
  thresholds), and the reference's own figure, whose threshold is tuned on the evaluated data itself
  (``reference_tuned_exact``, ``reference_tuned_f1``, ``reference_tuned_threshold``): the number
  the paper's tables use, an optimistic one. Checkpoints are selected by ``reference_tuned_f1`` as
  the reference does. predictions.json holds the tuned predictions (as the reference leaves it)
  unless ``tuned_predictions`` is False, then those at the fixed threshold.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.question_answering.heads import (DEFAULT_END_N_TOP, DEFAULT_START_N_TOP,
                                                      DEFAULT_V2_DROPOUT, squad_v1_loss,
                                                      squad_v2_loss)
from albert_tf.tasks.question_answering.metrics import squad_v2_scores
from albert_tf.tasks.question_answering.model import V1_OUTPUTS, V2_OUTPUTS, AlbertSquadModel
from albert_tf.tasks.question_answering.postprocessing import (Question, V1RawResult, V2RawResult,
                                                               WindowMetadata, evaluate_v1,
                                                               evaluate_v2, postprocess_v1,
                                                               postprocess_v2,
                                                               write_prediction_files)
from albert_tf.training.per_example import examples_normalizer, real_examples
from albert_tf.training.task import Features


@dataclasses.dataclass(frozen=True)
class SquadEvalContext:
    """What an evaluation needs besides the raw outputs.

    examples: every question of the evaluated file in reader order (dropped ones included).
    features: the metadata of every window, in record order.
    dataset: the SQuAD JSON's "data" list (the gold answers) for scoring.
    output_dir: where the prediction files are written.
    """

    examples: Sequence[Question]
    features: Sequence[WindowMetadata]
    dataset: Sequence[Mapping]
    output_dir: str

    @classmethod
    def from_metadata(cls, metadata: Mapping, output_dir: str) -> "SquadEvalContext":
        """The context of an eval feature file, from its sidecar metadata: ``paragraphs`` (raw
        texts), ``examples`` ({qas_id, paragraph_index, answers}, every question in file order) and
        ``features`` (one record per window, see ``WindowMetadata.from_record``)."""
        if metadata.get("is_training"):
            raise ValueError("a training feature file has no evaluation metadata; evaluate on "
                             "features built with is_training=False.")
        paragraphs = metadata["paragraphs"]
        rows = metadata["examples"]
        examples = [Question(row["qas_id"], paragraphs[row["paragraph_index"]]) for row in rows]
        qas = [{"id": row["qas_id"], "answers": [{"text": text} for text in row["answers"]]}
               for row in rows]
        return cls(examples=examples,
                   features=[WindowMetadata.from_record(record) for record in metadata["features"]],
                   dataset=[{"paragraphs": [{"qas": qas}]}], output_dir=output_dir)


@dataclasses.dataclass(frozen=True)
class SquadSettings:
    """Post-processing settings (the reference's flags of the same names)."""

    version_2: bool = False
    n_best_size: int = 20
    max_answer_length: int = 30
    start_n_top: int = DEFAULT_START_N_TOP
    end_n_top: int = DEFAULT_END_N_TOP
    dropout_prob: float = DEFAULT_V2_DROPOUT
    null_score_diff_threshold: float = 0.0
    tuned_predictions: bool = True

    @property
    def selection_metric(self) -> str:
        return "reference_tuned_f1" if self.version_2 else "f1"


class SquadTask:
    """Fine-tuning of ``AlbertSquadModel`` (a ``training.Task``)."""

    def __init__(self, config: AlbertConfig, settings: SquadSettings):
        self.config = config
        self.settings = settings

    def build_model(self) -> keras.Model:
        s = self.settings
        return AlbertSquadModel(self.config, s.version_2, s.start_n_top, s.end_n_top,
                                s.dropout_prob)

    def loss_normalizers(self, features: Features) -> dict[str, tf.Tensor]:
        return examples_normalizer(features)

    def train_loss(self, model: keras.Model, features: Features,
                   normalizers: Mapping[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        outputs = model(features, training=True)
        if self.settings.version_2:
            losses = squad_v2_loss(outputs["start_log_probs"], outputs["end_log_probs"],
                                   outputs["cls_logits"], features["start_positions"],
                                   features["end_positions"], features["is_impossible"])
        else:
            losses = squad_v1_loss(outputs["start_logits"], outputs["end_logits"],
                                   features["start_positions"], features["end_positions"])
        return tf.reduce_sum(losses) / normalizers["examples"], {}

    def predict_outputs(self, model: keras.Model, features: Features) -> dict[str, tf.Tensor]:
        outputs = model(features, training=False)
        names = V2_OUTPUTS if self.settings.version_2 else V1_OUTPUTS
        return {"unique_ids": tf.reshape(features["unique_ids"], [-1]),
                "is_real_example": features["is_real_example"],
                **{name: outputs[name] for name in names}}

    def reduce(self, outputs: Mapping[str, np.ndarray], context: SquadEvalContext) -> dict[str, float]:
        """Post-processes every window's outputs, writes the prediction files, returns the scores."""
        s = self.settings
        raw = _raw_results(outputs, V2RawResult if s.version_2 else V1RawResult,
                           V2_OUTPUTS if s.version_2 else V1_OUTPUTS)
        if not s.version_2:
            result = postprocess_v1(context.examples, context.features, raw, s.n_best_size,
                                    s.max_answer_length)
            write_prediction_files(context.output_dir, result.predictions, result.nbest)
            return evaluate_v1(context.dataset, result.predictions)
        result = postprocess_v2(context.examples, context.features, raw, s.n_best_size,
                                s.max_answer_length)
        reference, tuned = evaluate_v2(context.dataset, result)
        fixed = result.predictions(s.null_score_diff_threshold)
        metrics = squad_v2_scores(context.dataset, fixed)  # the predictions as written
        for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
            metrics[key] = reference[f"official_{key}"]
        metrics.update(reference_tuned_exact=reference["exact"],
                       reference_tuned_f1=reference["f1"],
                       reference_tuned_threshold=reference["null_score_diff_threshold"])
        write_prediction_files(context.output_dir, tuned if s.tuned_predictions else fixed,
                               result.nbest, result.null_odds)
        return {key: float(value) for key, value in metrics.items()}


def _raw_results(outputs: Mapping[str, np.ndarray], result_type: type,
                 names: Sequence[str]) -> list:
    """One raw result per window from the concatenated outputs; the padding windows that fill the
    last batch on TPU (``is_real_example`` 0, copies of a real window) are left out."""
    unique_ids, *columns = real_examples(outputs, "unique_ids", *names)
    return [result_type(int(unique_id), *(column[row] for column in columns))
            for row, unique_id in enumerate(unique_ids)]
