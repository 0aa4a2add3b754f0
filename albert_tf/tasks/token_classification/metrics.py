"""Token classification metrics: entity-level precision, recall and F1 with conlleval's semantics
(an entity counts as correct only when its span and type both match exactly), micro-averaged and per
type, and word-level accuracy.

Entities are read from each sentence's tags by ``schemes.entities`` (conlleval's chunk rules), for
the gold and the predicted tags alike; sentences never share an entity. Keys (run_ner's
eval_results.txt and the sweep's selection): ``precision``, ``recall``, ``f1`` (micro),
``accuracy`` (words whose tag is right / words), and per type ``<type>_precision``,
``<type>_recall``, ``<type>_f1``, ``<type>_support`` (gold entities of the type). A division by
zero gives 0, as conlleval does.
"""

from __future__ import annotations

import collections
from typing import Sequence

from albert_tf.evaluation.metrics import safe_div
from albert_tf.tasks.token_classification.schemes import entities


def _precision_recall_f1(correct: int, predicted: int, gold: int) -> tuple[float, float, float]:
    precision, recall = safe_div(correct, predicted), safe_div(correct, gold)
    return precision, recall, safe_div(2 * precision * recall, precision + recall)


def entity_metrics(gold_sentences: Sequence[Sequence[str]],
                   predicted_sentences: Sequence[Sequence[str]]) -> dict[str, float]:
    """The metrics above over sentences of tags (gold and predicted: the same words)."""
    if len(gold_sentences) != len(predicted_sentences):
        raise ValueError(f"{len(gold_sentences)} gold sentences but {len(predicted_sentences)} "
                         "predicted ones")
    gold_count, predicted_count, correct_count = (collections.Counter() for _ in range(3))
    words = right_words = 0
    for index, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences)):
        if len(gold) != len(predicted):
            raise ValueError(f"sentence {index}: {len(gold)} gold tags but {len(predicted)} "
                             "predicted ones")
        words += len(gold)
        right_words += sum(g == p for g, p in zip(gold, predicted))
        gold_entities, predicted_entities = set(entities(gold)), set(entities(predicted))
        gold_count.update(entity.type for entity in gold_entities)
        predicted_count.update(entity.type for entity in predicted_entities)
        correct_count.update(entity.type for entity in gold_entities & predicted_entities)
    precision, recall, f1 = _precision_recall_f1(sum(correct_count.values()),
                                                 sum(predicted_count.values()),
                                                 sum(gold_count.values()))
    results = {"precision": precision, "recall": recall, "f1": f1,
               "accuracy": safe_div(right_words, words)}
    for kind in sorted(set(gold_count) | set(predicted_count)):
        scores = _precision_recall_f1(correct_count[kind], predicted_count[kind], gold_count[kind])
        for name, value in zip(("precision", "recall", "f1"), scores):
            results[f"{kind}_{name}"] = value
        results[f"{kind}_support"] = float(gold_count[kind])
    return results
