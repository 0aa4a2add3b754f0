"""PABEE's patience rule (Zhou et al., NeurIPS 2020, "BERT Loses Patience") on the outputs of the
internal classifiers, in NumPy, and what ``--do_eval`` reports of it.

An early-exit classifier (``AlbertClassifierModel(early_exit=...)``) has one internal classifier
after each of its L layers; ``layer_logits`` float [N, L, C] holds their outputs (a regression:
C = 1, the score). Layers are counted from 1.

- The training loss weighs layer j's loss by j: ``pabee_weights(L)`` = j / (1 + 2 + ... + L).
- Patience t (an int >= 1): an example exits after layer j as soon as its prediction has stayed
  unchanged t times in a row, i.e. the classifiers of layers j - t, ..., j give the same class (a
  regression: each score differs from the one before by less than ``threshold``); an example that
  never does runs all L layers. So patience 1 exits at layer 2 at the earliest and a patience of
  L - 1 or more always runs all L layers (the paper's rule, where patience t is t agreements, not t
  classifiers). ``--inference_layers=k`` is the fixed depth k instead: every example exits after
  layer k.
- Confidence c (a classification only; a probability, 0 < c < 1): an example exits after the
  first layer whose classifier gives its class a probability of at least c (softmax); one that
  never does runs all L layers. It can exit after layer 1. (DeeBERT's rule, Xin et al., ACL 2020,
  by the top probability instead of the entropy.) The sweep measures it at ``CONFIDENCES``.
- The prediction is the output of the layer the example exits at.

``early_exit_metrics`` turns a whole evaluation set's ``layer_logits`` into the table of the
sweep: each layer's metrics, and for patience 1..L and each confidence the metrics and the mean
number of layers used, under keys ``early_exit/layer_<j>/<key>``, ``early_exit/patience_<t>/<key>``,
``early_exit/confidence_<c>/<key>`` and ``.../mean_layers``; ``choose_rule`` picks the rule (a
patience or a confidence) that export and prediction use by default, recorded in ``RESULTS_FILE``
with the best checkpoint's table. No model
here: the same rule in the graph, for serving, is
albert_tf/tasks/classification/early_exit_inference.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, Mapping

import numpy as np
import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_write_text
from albert_tf.files.json_objects import read_json_object
from albert_tf.files.run_manifest import Fact, read_manifest
from albert_tf.tasks.classification.trainings import DEFAULT_DISTILLATION

# The key prefix of every early-exit result (eval_results.txt, TensorBoard, best_results.json).
PREFIX = "early_exit"
MEAN_LAYERS = "mean_layers"
# A regression's default threshold of "unchanged" (STS-B scores span 0-5): a score that moves by
# less than this between two layers counts as an agreement.
DEFAULT_REGRESSION_THRESHOLD = 0.1
# The points of the dev metric (2.0 = 0.02) that the chosen patience may give up for running only
# the first layer instead of all L; proportionally less for saving fewer (``choose_rule``).
DEFAULT_TOLERANCE_POINTS = 2.0
# The confidences the sweep measures (of those above 1 / C: a lower one exits every example after
# layer 1, which ``--inference_layers=1`` is): steps of 0.05, then 0.97 and 0.99.
CONFIDENCES = tuple(round(0.05 * step, 2) for step in range(1, 20)) + (0.97, 0.99)


def pabee_weights(num_layers: int) -> np.ndarray:
    """float64 [L]: layer j's weight in the training loss, j / (1 + ... + L) (PABEE's eq. 4)."""
    layers = np.arange(1, num_layers + 1, dtype=np.float64)
    return layers / layers.sum()


def agreements(layer_logits: np.ndarray, is_regression: bool,
               threshold: float = DEFAULT_REGRESSION_THRESHOLD) -> np.ndarray:
    """bool [N, L - 1]: entry j - 1 says whether layer j + 1 agrees with layer j (the same arg-max
    class; a regression: a score within ``threshold`` of the previous one)."""
    if is_regression:
        scores = layer_logits[..., 0]
        return np.abs(scores[:, 1:] - scores[:, :-1]) < threshold
    classes = np.argmax(layer_logits, axis=-1)
    return classes[:, 1:] == classes[:, :-1]


def exit_layers(layer_logits: np.ndarray, patience: int, is_regression: bool,
                threshold: float = DEFAULT_REGRESSION_THRESHOLD) -> np.ndarray:
    """int64 [N]: the layer (1..L) each example of ``layer_logits`` [N, L, C] exits after with
    ``patience`` (>= 1; see the module doc)."""
    if patience < 1:
        raise ValueError(f"patience must be >= 1, got {patience}")
    agree = agreements(layer_logits, is_regression, threshold)
    num_examples, num_layers = layer_logits.shape[:2]
    streak = np.zeros(num_examples, np.int64)
    exits = np.full(num_examples, num_layers, np.int64)
    done = np.zeros(num_examples, bool)
    for layer in range(2, num_layers + 1):
        streak = np.where(agree[:, layer - 2], streak + 1, 0)
        exiting = ~done & (streak >= patience)
        exits[exiting] = layer
        done |= exiting
    return exits


def softmax(logits: np.ndarray) -> np.ndarray:
    """The softmax over the last axis of ``logits``, in their dtype."""
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def confident_exit_layers(layer_logits: np.ndarray, confidence: float) -> np.ndarray:
    """int64 [N]: the first layer (1..L) whose classifier in ``layer_logits`` [N, L, C] gives its
    class a softmax probability of at least ``confidence``; L where none does."""
    sure = softmax(np.asarray(layer_logits, np.float64)).max(-1) >= confidence
    sure[:, -1] = True
    return np.argmax(sure, axis=1).astype(np.int64) + 1


def sweep_confidences(num_labels: int) -> tuple[float, ...]:
    """The ``CONFIDENCES`` a classification of ``num_labels`` classes is measured at: those above
    1 / num_labels (a regression: none)."""
    return tuple(value for value in CONFIDENCES if num_labels > 1 and value > 1 / num_labels)


def outputs_at(layer_logits: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """[N, C]: each example's output at its (1-based) exit layer ``layers`` [N]."""
    return layer_logits[np.arange(len(layers)), np.asarray(layers) - 1]


def layer_key(layer: int, key: str) -> str:
    return f"{PREFIX}/layer_{layer}/{key}"


def patience_key(patience: int, key: str) -> str:
    return f"{PREFIX}/patience_{patience}/{key}"


def confidence_key(confidence: float, key: str) -> str:
    return f"{PREFIX}/confidence_{confidence:g}/{key}"


@dataclasses.dataclass(frozen=True)
class ExitRule:
    """One row of the sweep's table that inference can stop by: a ``patience`` (an int >= 1) or a
    ``confidence`` (0 < c < 1), exactly one of them set."""

    patience: int | None = None
    confidence: float | None = None

    def __post_init__(self):
        if (self.patience is None) == (self.confidence is None):
            raise ValueError(f"an exit rule is a patience or a confidence: {self}")

    def key(self, key: str) -> str:
        """This rule's row key for the metric ``key`` in the sweep's table."""
        return (patience_key(self.patience, key) if self.patience is not None
                else confidence_key(self.confidence, key))

    def __str__(self) -> str:
        return (f"patience {self.patience}" if self.patience is not None
                else f"confidence {self.confidence:g}")


def table_rules(results: Mapping[str, float]) -> list[ExitRule]:
    """The rules an ``early_exit_metrics`` table measured: patience 1..L, then its confidences
    in increasing order."""
    confidences = sorted({float(name.split("/")[1][len("confidence_"):]) for name in results
                          if name.startswith(f"{PREFIX}/confidence_")})
    return ([ExitRule(patience=patience) for patience in range(1, num_layers_of(results) + 1)]
            + [ExitRule(confidence=confidence) for confidence in confidences])


Metrics = Callable[[np.ndarray], Mapping[str, float]]


def early_exit_metrics(layer_logits: np.ndarray, metrics: Metrics, is_regression: bool,
                       threshold: float = DEFAULT_REGRESSION_THRESHOLD,
                       weights: np.ndarray | None = None) -> dict[str, float]:
    """The sweep's table of one evaluation: ``metrics(outputs [N, C]) -> {key: value}`` of each
    layer's classifier alone, of patience 1..L and (a classification) of each of
    ``sweep_confidences``, with the mean number of layers used (weighted by ``weights`` [N], e.g.
    ``is_real_example``; None: all 1)."""
    num_examples, num_layers = layer_logits.shape[:2]
    weights = np.ones(num_examples) if weights is None else np.asarray(weights, np.float64)
    results = {}
    for layer in range(1, num_layers + 1):
        for key, value in metrics(layer_logits[:, layer - 1]).items():
            results[layer_key(layer, key)] = float(value)
    rules = [(ExitRule(patience=patience),
              exit_layers(layer_logits, patience, is_regression, threshold))
             for patience in range(1, num_layers + 1)]
    if not is_regression:
        rules += [(ExitRule(confidence=confidence),
                   confident_exit_layers(layer_logits, confidence))
                  for confidence in sweep_confidences(layer_logits.shape[2])]
    for rule, layers in rules:
        for key, value in metrics(outputs_at(layer_logits, layers)).items():
            results[rule.key(key)] = float(value)
        results[rule.key(MEAN_LAYERS)] = float(
            np.sum(layers * weights) / max(np.sum(weights), 1e-12))
    return results


def num_layers_of(results: Mapping[str, float]) -> int:
    """L, from the keys of an ``early_exit_metrics`` table (0 if it holds none)."""
    layers = [int(name.split("/")[1][len("layer_"):]) for name in results
              if name.startswith(f"{PREFIX}/layer_")]
    return max(layers, default=0)


def choose_rule(results: Mapping[str, float], key: str,
                tolerance_points: float = DEFAULT_TOLERANCE_POINTS) -> ExitRule:
    """The rule of the table (a patience or a confidence) that best trades the dev metric ``key``
    (higher is better) for layers: the one that maximises
    metric - tolerance_points / 100 * (mean layers - 1) / (L - 1).

    Every layer an example runs after the first costs tolerance_points / (L - 1) points, so a
    rule may lose against the full depth (patience L - 1: every example runs all L layers) at
    most tolerance_points times the fraction of those layers it saves, and never more than
    tolerance_points; tolerance 0: the best metric, whatever it costs. The full depth's own
    metric is not a lone threshold: a full depth one lucky dev point higher does not push the
    choice to the deepest patiences. Ties: fewer mean layers, then a patience before a
    confidence, then the larger patience or confidence. ``results``: an ``early_exit_metrics``
    table.
    """
    num_layers = num_layers_of(results)
    if num_layers == 0:
        raise ValueError("no early-exit results to choose a rule from")
    if num_layers == 1:
        return ExitRule(patience=1)
    cost = tolerance_points / 100 / (num_layers - 1)

    def order(rule: ExitRule) -> tuple:
        layers = results[rule.key(MEAN_LAYERS)]
        value = results[rule.key(key)] - cost * (layers - 1)
        return (round(value, 12), -layers, rule.patience is not None,
                rule.patience or rule.confidence)

    return max(table_rules(results), key=order)


# What the table and early_exit_results.json say of the ordinary model's dev metric, by training:
# two-stage's full depth is the ordinary model; joint training changes it.
ORDINARY_IS_FULL_DEPTH = "two-stage training: the full depth is the ordinary model"
ORDINARY_UNKNOWN = ("unknown (joint training changes the full depth; train without --early_exit, "
                    "the same recipe and seed, to know it)")


def format_table(results: Mapping[str, float], keys: tuple[str, ...],
                 ordinary_is_full_depth: bool = False) -> str:
    """The table ``--do_eval`` prints: a row per layer (its classifier alone) and per patience and
    confidence (with the mean layers used), a column per metric ``keys``; then the ordinary
    model's row (the
    full depth's, ``ordinary_is_full_depth``: two-stage training), or a line saying it is
    unknown."""
    num_layers = num_layers_of(results)
    header = f"{'':>16}" + "".join(f"{key:>14}" for key in keys) + f"{'mean layers':>14}"
    lines = [header]
    for layer in range(1, num_layers + 1):
        lines.append(f"{f'layer {layer}':>16}" + "".join(
            f"{results[layer_key(layer, key)]:>14.4f}" for key in keys) + f"{layer:>14}")
    for rule in table_rules(results):
        lines.append(f"{str(rule):>16}" + "".join(
            f"{results[rule.key(key)]:>14.4f}" for key in keys)
            + f"{results[rule.key(MEAN_LAYERS)]:>14.2f}")
    if ordinary_is_full_depth:
        lines.append(f"{'ordinary':>16}" + "".join(
            f"{results[layer_key(num_layers, key)]:>14.4f}" for key in keys)
            + f"{num_layers:>14}  ({ORDINARY_IS_FULL_DEPTH})")
    else:
        lines.append(f"{'ordinary':>16}  {ORDINARY_UNKNOWN}")
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class ExitPolicy:
    """How inference stops: after a layer whose prediction stayed unchanged ``patience`` times,
    or (``confidence`` set, a classification) after a layer whose classifier gives its class at
    least that probability, and at the latest after layer ``max_layers``;
    ``regression_threshold``: a regression's "unchanged". A fixed depth k is
    ``ExitPolicy.fixed_depth(k, L)`` (a patience of L, which no streak reaches: a streak of
    unchanged predictions is at most L - 1 long); a confidence alone is
    ``ExitPolicy.of_rule(ExitRule(confidence=c), L)`` (with that patience of L)."""

    patience: int
    max_layers: int
    regression_threshold: float = DEFAULT_REGRESSION_THRESHOLD
    confidence: float | None = None

    @classmethod
    def full_depth(cls, num_layers: int) -> "ExitPolicy":
        """Every example runs all L layers (the ordinary classifier's outputs)."""
        return cls.fixed_depth(num_layers, num_layers)

    @classmethod
    def fixed_depth(cls, layers: int, num_layers: int,
                    regression_threshold: float = DEFAULT_REGRESSION_THRESHOLD) -> "ExitPolicy":
        """Every example exits after layer ``layers`` of ``num_layers``."""
        return cls(num_layers, layers, regression_threshold)

    @classmethod
    def of_rule(cls, rule: ExitRule, num_layers: int,
                regression_threshold: float = DEFAULT_REGRESSION_THRESHOLD) -> "ExitPolicy":
        """``rule`` over all ``num_layers`` layers."""
        if rule.patience is not None:
            return cls(rule.patience, num_layers, regression_threshold)
        return cls(num_layers, num_layers, regression_threshold, rule.confidence)

    @property
    def patience_can_stop_early(self) -> bool:
        """Whether the patience may stop an example before layer ``max_layers``: patience p exits
        no earlier than layer p + 1."""
        return self.patience < self.max_layers - 1

    @property
    def can_stop_early(self) -> bool:
        """Whether some example may exit before layer ``max_layers``: a confidence, or a patience
        that can (``patience_can_stop_early``)."""
        return self.confidence is not None or self.patience_can_stop_early

    def check(self, num_layers: int) -> None:
        """ValueError unless 1 <= patience, 1 <= max_layers <= L and a confidence in (0, 1)."""
        if (self.patience < 1 or not 1 <= self.max_layers <= num_layers
                or (self.confidence is not None and not 0 < self.confidence < 1)):
            raise ValueError(f"{self} for a model of {num_layers} layers")

    def describe(self) -> str:
        """How it stops, in words, e.g. "at patience 2, at the latest after layer 12"."""
        if not self.can_stop_early:
            return f"after layer {self.max_layers} (a fixed depth)"
        rule = (f"at confidence {self.confidence:g}" if self.confidence is not None
                else f"at patience {self.patience}")
        return f"{rule}, at the latest after layer {self.max_layers}"


def stopped_layers(layer_logits: np.ndarray, is_regression: bool,
                   policy: ExitPolicy) -> np.ndarray:
    """int64 [N]: each example's exit layer under ``policy`` (the patience rule, and the
    confidence rule when it has one, over the first ``max_layers`` layers of ``layer_logits``
    [N, L, C]: the first layer where either stops), as the served model stops."""
    layer_logits = layer_logits[:, :policy.max_layers]
    layers = exit_layers(layer_logits, policy.patience, is_regression,
                         policy.regression_threshold)
    if policy.confidence is not None:
        layers = np.minimum(layers, confident_exit_layers(layer_logits, policy.confidence))
    return layers


@dataclasses.dataclass(frozen=True)
class EarlyExitSettings:
    """run_classifier's early-exit flags.

    heads: ``EARLY_EXIT_HEADS`` of the model. training: how its internal classifiers are trained
    (trainings.TRAININGS: "two_stage" or "joint"); ordinary_learning_rate and
    ordinary_train_steps: two-stage, stage 1's peak learning rate and steps (--learning_rate,
    --train_step; the run's own are stage 2's); distillation: two-stage, stage 2's weight of the
    full depth's answers in each internal classifier's loss (--early_exit_distillation).
    patience / confidence / inference_layers: how --do_predict and --export_dir stop (at most one
    given; none: the rule chosen on dev, a patience or a confidence).
    regression_threshold: a regression's "unchanged" (None: not given; the one the run directory
    records, else ``DEFAULT_REGRESSION_THRESHOLD``; ``threshold``). tolerance_points:
    --patience_tolerance, the
    dev-metric points the chosen rule may trade for skipping all layers after the first
    (``choose_rule``); None when not given: the sweep chooses with
    ``DEFAULT_TOLERANCE_POINTS``, prediction and export take the rule the sweep chose.
    """

    heads: str
    training: str = "joint"
    ordinary_learning_rate: float | None = None
    ordinary_train_steps: int | None = None
    patience: int | None = None
    inference_layers: int | None = None
    regression_threshold: float | None = None
    tolerance_points: float | None = None
    distillation: float = DEFAULT_DISTILLATION
    confidence: float | None = None

    @property
    def threshold(self) -> float:
        """A regression's "unchanged", the default where none was given or recorded."""
        return (DEFAULT_REGRESSION_THRESHOLD if self.regression_threshold is None
                else self.regression_threshold)

    @property
    def sweep_tolerance(self) -> float:
        """The tolerance the sweep chooses the rule with."""
        return (DEFAULT_TOLERANCE_POINTS if self.tolerance_points is None
                else self.tolerance_points)

    def check_depth(self, num_layers: int) -> None:
        """UserError when --inference_layers asks for more layers than the model's
        ``num_layers``: run_classifier checks it against the config before any work."""
        if self.inference_layers is not None and self.inference_layers > num_layers:
            raise UserError(f"--inference_layers={self.inference_layers}: the model has "
                            f"{num_layers} layers (num_hidden_layers of --albert_config_file).")

    def policy(self, num_layers: int, results_path: str) -> ExitPolicy:
        """How prediction and export stop: the fixed depth --inference_layers, or --patience or
        --exit_confidence over all the layers, by default the rule chosen on dev
        (``RESULTS_FILE`` at ``results_path``; chosen again from its table with
        --patience_tolerance when that was given). UserError for a depth the model has not."""
        self.check_depth(num_layers)
        if self.inference_layers is not None:
            return ExitPolicy.fixed_depth(self.inference_layers, num_layers, self.threshold)
        if self.patience is not None or self.confidence is not None:
            rule = ExitRule(self.patience, self.confidence)
        else:
            rule = read_chosen_rule(results_path, self.tolerance_points)
        return ExitPolicy.of_rule(rule, num_layers, self.threshold)


# The threshold a regression's early-exit table, chosen patience and exports were made with:
# predictions and exports with another one would not stop as the table says.
REGRESSION_THRESHOLD = Fact("regression_threshold", "early-exit decisions made with",
                              describe="--regression_threshold={}".format)


# The early-exit results of the best checkpoint, written by the sweep into --output_dir:
# {"selection_metric": key, "patience" or "confidence": the chosen rule (the other null),
#  "tolerance_points": ...,
#  "num_layers": L, "table": {early_exit/... key: value}, "best_step", "fingerprint": the
#  checkpoint it describes (the run manifest's best; a file naming another one is refused)}.
RESULTS_FILE = "early_exit_results.json"


def results_of(best: Mapping[str, float], key: str, tolerance_points: float,
               ordinary_is_full_depth: bool = False) -> dict[str, object] | None:
    """The content of ``RESULTS_FILE`` for the sweep's best metrics ``best`` (its unnamed
    evaluation set's table; None when ``best`` holds none: a resumed sweep whose best came
    earlier and whose eval_results.txt lost it). ``key``: the metric the rule is chosen by.
    ``chosen``: the chosen rule's price, its metric and mean layers and how far it is from the
    full depth and from the ordinary model, in points; ``ordinary``: the ordinary model's metric,
    known when the full depth is the ordinary model (``ordinary_is_full_depth``: two-stage
    training), else None; ``ordinary_note`` says which."""
    table = {name: value for name, value in best.items() if name.startswith(f"{PREFIX}/")}
    if not table:
        return None
    num_layers = num_layers_of(table)
    rule = choose_rule(table, key, tolerance_points)
    chosen, full = table[rule.key(key)], table[layer_key(num_layers, key)]
    ordinary = full if ordinary_is_full_depth else None
    return {"selection_metric": key, "patience": rule.patience, "confidence": rule.confidence,
            "tolerance_points": tolerance_points, "num_layers": num_layers, "table": table,
            "chosen": {key: chosen, MEAN_LAYERS: table[rule.key(MEAN_LAYERS)],
                       "points_from_full_depth": round(100 * (chosen - full), 6),
                       "points_from_ordinary": (None if ordinary is None
                                                else round(100 * (chosen - ordinary), 6))},
            "ordinary": None if ordinary is None else {key: ordinary},
            "ordinary_note": ORDINARY_IS_FULL_DEPTH if ordinary_is_full_depth
            else ORDINARY_UNKNOWN}


def price_line(results: Mapping[str, object]) -> str:
    """What the chosen rule of ``results_of``'s content costs, in one line: its metric and
    mean layers, against the full depth and against the ordinary model (or that it is
    unknown)."""
    chosen, key = results["chosen"], results["selection_metric"]
    line = (f"{key} {chosen[key]:.4f} with {chosen[MEAN_LAYERS]:.2f} of {results['num_layers']} "
            f"layers on average: {chosen['points_from_full_depth']:+.2f} points against the "
            "full depth")
    if results["ordinary"] is None:
        return line + f"; against the ordinary model: {results['ordinary_note']}"
    return (line + f", {chosen['points_from_ordinary']:+.2f} against the ordinary model "
            f"({results['ordinary'][key]:.4f}; {results['ordinary_note']})")


def write_results(path: str, results: Mapping[str, object]) -> None:
    """Writes ``results_of``'s content to ``path`` (``RESULTS_FILE`` in --output_dir),
    atomically."""
    atomic_write_text(path, json.dumps(results, indent=1, sort_keys=True) + "\n")


def chosen_rule(results: Mapping[str, object]) -> ExitRule:
    """The rule ``results_of``'s content records (a file written before confidences were
    measured records a patience alone). ValueError when it records no valid one."""
    patience, confidence = results.get("patience"), results.get("confidence")
    if confidence is None:
        if not isinstance(patience, int) or isinstance(patience, bool) or patience < 1:
            raise ValueError(f"expected a patience >= 1, got {patience!r}")
        return ExitRule(patience=patience)
    if (patience is not None or not isinstance(confidence, (int, float))
            or isinstance(confidence, bool) or not 0 < confidence < 1):
        raise ValueError(f"expected a patience >= 1 or a confidence in (0, 1), got patience "
                         f"{patience!r} and confidence {confidence!r}")
    return ExitRule(confidence=float(confidence))


def read_chosen_rule(path: str, tolerance_points: float | None = None) -> ExitRule:
    """The rule chosen on dev that ``RESULTS_FILE`` at ``path`` records; with
    ``tolerance_points`` other than the file's, the one ``choose_rule`` takes from its table
    with that tolerance. UserError when there is none (no early-exit sweep yet) or the file is
    not one."""
    if not tf.io.gfile.exists(path):
        raise UserError(f"{path} does not exist: the stopping rule chosen on dev is written by "
                        "--do_eval with --early_exit; run it, or give --patience, "
                        "--exit_confidence or --inference_layers.")
    results = read_json_object(path, UserError, "the early-exit results")
    best = read_manifest(os.path.dirname(path)).best
    if results.get("fingerprint") and best and best.get("fingerprint") not in (
            None, results["fingerprint"]):
        raise UserError(f"{path} describes the checkpoint of step {results.get('best_step')}, not "
                        f"model.ckpt-best (step {best['step']}): its rule was chosen for "
                        "other weights; rerun --do_eval with --early_exit to choose it again.")
    try:
        rule = chosen_rule(results)
    except ValueError as error:
        raise UserError(f"{path}: {error}.") from None
    if tolerance_points is None or tolerance_points == results.get("tolerance_points"):
        return rule
    try:
        return choose_rule(results["table"], results["selection_metric"], tolerance_points)
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{path}: no early-exit table to choose a rule from with "
                        f"--patience_tolerance={tolerance_points}; rerun --do_eval with "
                        "--early_exit.") from None
