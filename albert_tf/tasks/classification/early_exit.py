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
- The prediction is the output of the layer the example exits at.

``early_exit_metrics`` turns a whole evaluation set's ``layer_logits`` into the table of the
sweep: each layer's metrics, and for patience 1..L the metrics and the mean number of layers used,
under keys ``early_exit/layer_<j>/<key>``, ``early_exit/patience_<t>/<key>`` and
``early_exit/patience_<t>/mean_layers``; ``choose_patience`` picks the patience that export and
prediction use by default, recorded in ``RESULTS_FILE`` with the best checkpoint's table. No model
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
# the first layer instead of all L; proportionally less for saving fewer (``choose_patience``).
DEFAULT_TOLERANCE_POINTS = 2.0


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


def outputs_at(layer_logits: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """[N, C]: each example's output at its (1-based) exit layer ``layers`` [N]."""
    return layer_logits[np.arange(len(layers)), np.asarray(layers) - 1]


def layer_key(layer: int, key: str) -> str:
    return f"{PREFIX}/layer_{layer}/{key}"


def patience_key(patience: int, key: str) -> str:
    return f"{PREFIX}/patience_{patience}/{key}"


Metrics = Callable[[np.ndarray], Mapping[str, float]]


def early_exit_metrics(layer_logits: np.ndarray, metrics: Metrics, is_regression: bool,
                       threshold: float = DEFAULT_REGRESSION_THRESHOLD,
                       weights: np.ndarray | None = None) -> dict[str, float]:
    """The sweep's table of one evaluation: ``metrics(outputs [N, C]) -> {key: value}`` of each
    layer's classifier alone and of patience 1..L, with the mean number of layers used (weighted
    by ``weights`` [N], e.g. ``is_real_example``; None: all 1)."""
    num_examples, num_layers = layer_logits.shape[:2]
    weights = np.ones(num_examples) if weights is None else np.asarray(weights, np.float64)
    results = {}
    for layer in range(1, num_layers + 1):
        for key, value in metrics(layer_logits[:, layer - 1]).items():
            results[layer_key(layer, key)] = float(value)
    for patience in range(1, num_layers + 1):
        layers = exit_layers(layer_logits, patience, is_regression, threshold)
        for key, value in metrics(outputs_at(layer_logits, layers)).items():
            results[patience_key(patience, key)] = float(value)
        results[patience_key(patience, MEAN_LAYERS)] = float(
            np.sum(layers * weights) / max(np.sum(weights), 1e-12))
    return results


def num_layers_of(results: Mapping[str, float]) -> int:
    """L, from the keys of an ``early_exit_metrics`` table (0 if it holds none)."""
    layers = [int(name.split("/")[1][len("layer_"):]) for name in results
              if name.startswith(f"{PREFIX}/layer_")]
    return max(layers, default=0)


def choose_patience(results: Mapping[str, float], key: str,
                    tolerance_points: float = DEFAULT_TOLERANCE_POINTS) -> int:
    """The patience that best trades the dev metric ``key`` (higher is better) for layers: the
    one that maximises  metric - tolerance_points / 100 * (mean layers - 1) / (L - 1).

    Every layer an example runs after the first costs tolerance_points / (L - 1) points, so a
    patience may lose against the full depth (patience L - 1: every example runs all L layers)
    at most tolerance_points times the fraction of those layers it saves, and never more than
    tolerance_points; tolerance 0: the best metric, whatever it costs. The full depth's own
    metric is not a lone threshold: a full depth one lucky dev point higher does not push the
    choice to the deepest patiences. Ties: fewer mean layers, then the larger patience.
    ``results``: an ``early_exit_metrics`` table.
    """
    num_layers = num_layers_of(results)
    if num_layers == 0:
        raise ValueError("no early-exit results to choose a patience from")
    if num_layers == 1:
        return 1
    cost = tolerance_points / 100 / (num_layers - 1)

    def value(patience: int) -> float:
        return (results[patience_key(patience, key)]
                - cost * (results[patience_key(patience, MEAN_LAYERS)] - 1))

    return max(range(1, num_layers + 1), key=lambda p: (
        round(value(p), 12), -results[patience_key(p, MEAN_LAYERS)], p))


# What the table and early_exit_results.json say of the ordinary model's dev metric, by training:
# two-stage's full depth is the ordinary model; joint training changes it.
ORDINARY_IS_FULL_DEPTH = "two-stage training: the full depth is the ordinary model"
ORDINARY_UNKNOWN = ("unknown (joint training changes the full depth; train without --early_exit, "
                    "the same recipe and seed, to know it)")


def format_table(results: Mapping[str, float], keys: tuple[str, ...],
                 ordinary_is_full_depth: bool = False) -> str:
    """The table ``--do_eval`` prints: a row per layer (its classifier alone) and per patience
    (with the mean layers used), a column per metric ``keys``; then the ordinary model's row (the
    full depth's, ``ordinary_is_full_depth``: two-stage training), or a line saying it is
    unknown."""
    num_layers = num_layers_of(results)
    header = f"{'':>12}" + "".join(f"{key:>14}" for key in keys) + f"{'mean layers':>14}"
    lines = [header]
    for layer in range(1, num_layers + 1):
        lines.append(f"{f'layer {layer}':>12}" + "".join(
            f"{results[layer_key(layer, key)]:>14.4f}" for key in keys) + f"{layer:>14}")
    for patience in range(1, num_layers + 1):
        lines.append(f"{f'patience {patience}':>12}" + "".join(
            f"{results[patience_key(patience, key)]:>14.4f}" for key in keys)
            + f"{results[patience_key(patience, MEAN_LAYERS)]:>14.2f}")
    if ordinary_is_full_depth:
        lines.append(f"{'ordinary':>12}" + "".join(
            f"{results[layer_key(num_layers, key)]:>14.4f}" for key in keys)
            + f"{num_layers:>14}  ({ORDINARY_IS_FULL_DEPTH})")
    else:
        lines.append(f"{'ordinary':>12}  {ORDINARY_UNKNOWN}")
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class ExitPolicy:
    """How inference stops: after a layer whose prediction stayed unchanged ``patience`` times,
    and at the latest after layer ``max_layers``; ``regression_threshold``: a regression's
    "unchanged". A fixed depth k is ``ExitPolicy.fixed_depth(k, L)`` (a patience of L, which no
    streak reaches: a streak of unchanged predictions is at most L - 1 long)."""

    patience: int
    max_layers: int
    regression_threshold: float = DEFAULT_REGRESSION_THRESHOLD

    @classmethod
    def full_depth(cls, num_layers: int) -> "ExitPolicy":
        """Every example runs all L layers (the ordinary classifier's outputs)."""
        return cls.fixed_depth(num_layers, num_layers)

    @classmethod
    def fixed_depth(cls, layers: int, num_layers: int,
                    regression_threshold: float = DEFAULT_REGRESSION_THRESHOLD) -> "ExitPolicy":
        """Every example exits after layer ``layers`` of ``num_layers``."""
        return cls(num_layers, layers, regression_threshold)

    def check(self, num_layers: int) -> None:
        """ValueError unless 1 <= patience and 1 <= max_layers <= L."""
        if self.patience < 1 or not 1 <= self.max_layers <= num_layers:
            raise ValueError(f"{self} for a model of {num_layers} layers")


def stopped_layers(layer_logits: np.ndarray, is_regression: bool,
                   policy: ExitPolicy) -> np.ndarray:
    """int64 [N]: each example's exit layer under ``policy`` (the patience rule over the first
    ``max_layers`` layers of ``layer_logits`` [N, L, C]), as the served model stops."""
    return exit_layers(layer_logits[:, :policy.max_layers], policy.patience, is_regression,
                       policy.regression_threshold)


@dataclasses.dataclass(frozen=True)
class EarlyExitSettings:
    """run_classifier's early-exit flags.

    heads: ``EARLY_EXIT_HEADS`` of the model. training: how its internal classifiers are trained
    (trainings.TRAININGS: "two_stage" or "joint"); ordinary_learning_rate and
    ordinary_train_steps: two-stage, stage 1's peak learning rate and steps (--learning_rate,
    --train_step; the run's own are stage 2's); distillation: two-stage, stage 2's weight of the
    full depth's answers in each internal classifier's loss (--early_exit_distillation).
    patience / inference_layers: how --do_predict and --export_dir stop (at most one given;
    neither: the patience chosen on dev).
    regression_threshold: a regression's "unchanged" (None: not given; the one the run directory
    records, else ``DEFAULT_REGRESSION_THRESHOLD``; ``threshold``). tolerance_points:
    --patience_tolerance, the
    dev-metric points the chosen patience may trade for skipping all layers after the first
    (``choose_patience``); None when not given: the sweep chooses with
    ``DEFAULT_TOLERANCE_POINTS``, prediction and export take the patience the sweep chose.
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

    @property
    def threshold(self) -> float:
        """A regression's "unchanged", the default where none was given or recorded."""
        return (DEFAULT_REGRESSION_THRESHOLD if self.regression_threshold is None
                else self.regression_threshold)

    @property
    def sweep_tolerance(self) -> float:
        """The tolerance the sweep chooses the patience with."""
        return (DEFAULT_TOLERANCE_POINTS if self.tolerance_points is None
                else self.tolerance_points)

    def check_depth(self, num_layers: int) -> None:
        """UserError when --inference_layers asks for more layers than the model's
        ``num_layers``: run_classifier checks it against the config before any work."""
        if self.inference_layers is not None and self.inference_layers > num_layers:
            raise UserError(f"--inference_layers={self.inference_layers}: the model has "
                            f"{num_layers} layers (num_hidden_layers of --albert_config_file).")

    def policy(self, num_layers: int, results_path: str) -> ExitPolicy:
        """How prediction and export stop: the fixed depth --inference_layers, or --patience over
        all the layers, by default the patience chosen on dev (``RESULTS_FILE`` at
        ``results_path``; chosen again from its table with --patience_tolerance when that was
        given). UserError for a depth the model has not."""
        self.check_depth(num_layers)
        if self.inference_layers is not None:
            return ExitPolicy.fixed_depth(self.inference_layers, num_layers, self.threshold)
        patience = (self.patience if self.patience is not None
                    else read_chosen_patience(results_path, self.tolerance_points))
        return ExitPolicy(patience, num_layers, self.threshold)


# The threshold a regression's early-exit table, chosen patience and exports were made with:
# predictions and exports with another one would not stop as the table says.
REGRESSION_THRESHOLD = Fact("regression_threshold", "early-exit decisions made with",
                              describe="--regression_threshold={}".format)


# The early-exit results of the best checkpoint, written by the sweep into --output_dir:
# {"selection_metric": key, "patience": the chosen patience, "tolerance_points": ...,
#  "num_layers": L, "table": {early_exit/... key: value}, "best_step", "fingerprint": the
#  checkpoint it describes (the run manifest's best; a file naming another one is refused)}.
RESULTS_FILE = "early_exit_results.json"


def results_of(best: Mapping[str, float], key: str, tolerance_points: float,
               ordinary_is_full_depth: bool = False) -> dict[str, object] | None:
    """The content of ``RESULTS_FILE`` for the sweep's best metrics ``best`` (its unnamed
    evaluation set's table; None when ``best`` holds none: a resumed sweep whose best came
    earlier and whose eval_results.txt lost it). ``key``: the metric the patience is chosen by.
    ``chosen``: the chosen patience's price, its metric and mean layers and how far it is from the
    full depth and from the ordinary model, in points; ``ordinary``: the ordinary model's metric,
    known when the full depth is the ordinary model (``ordinary_is_full_depth``: two-stage
    training), else None; ``ordinary_note`` says which."""
    table = {name: value for name, value in best.items() if name.startswith(f"{PREFIX}/")}
    if not table:
        return None
    num_layers = num_layers_of(table)
    patience = choose_patience(table, key, tolerance_points)
    chosen, full = table[patience_key(patience, key)], table[layer_key(num_layers, key)]
    ordinary = full if ordinary_is_full_depth else None
    return {"selection_metric": key, "patience": patience, "tolerance_points": tolerance_points,
            "num_layers": num_layers, "table": table,
            "chosen": {key: chosen, MEAN_LAYERS: table[patience_key(patience, MEAN_LAYERS)],
                       "points_from_full_depth": round(100 * (chosen - full), 6),
                       "points_from_ordinary": (None if ordinary is None
                                                else round(100 * (chosen - ordinary), 6))},
            "ordinary": None if ordinary is None else {key: ordinary},
            "ordinary_note": ORDINARY_IS_FULL_DEPTH if ordinary_is_full_depth
            else ORDINARY_UNKNOWN}


def price_line(results: Mapping[str, object]) -> str:
    """What the chosen patience of ``results_of``'s content costs, in one line: its metric and
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


def read_chosen_patience(path: str, tolerance_points: float | None = None) -> int:
    """The patience chosen on dev that ``RESULTS_FILE`` at ``path`` records; with
    ``tolerance_points`` other than the file's, the one ``choose_patience`` takes from its table
    with that tolerance. UserError when there is none (no early-exit sweep yet) or the file is
    not one."""
    if not tf.io.gfile.exists(path):
        raise UserError(f"{path} does not exist: the patience chosen on dev is written by "
                        "--do_eval with --early_exit; run it, or give --patience or "
                        "--inference_layers.")
    results = read_json_object(path, UserError, "the early-exit results")
    best = read_manifest(os.path.dirname(path)).best
    if results.get("fingerprint") and best and best.get("fingerprint") not in (
            None, results["fingerprint"]):
        raise UserError(f"{path} describes the checkpoint of step {results.get('best_step')}, not "
                        f"model.ckpt-best (step {best['step']}): its patience was chosen for "
                        "other weights; rerun --do_eval with --early_exit to choose it again.")
    patience = results.get("patience")
    if not isinstance(patience, int) or patience < 1:
        raise UserError(f"{path}: expected a patience >= 1, got {patience!r}.")
    if tolerance_points is None or tolerance_points == results.get("tolerance_points"):
        return patience
    try:
        return choose_patience(results["table"], results["selection_metric"], tolerance_points)
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{path}: no early-exit table to choose a patience from with "
                        f"--patience_tolerance={tolerance_points}; rerun --do_eval with "
                        "--early_exit.") from None
