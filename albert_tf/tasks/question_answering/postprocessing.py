"""SQuAD post-processing: raw model outputs per window -> answers, n-best lists, null odds and scores.

Reproduces the reference's ``accumulate_predictions_v1/v2``, ``write_predictions_v1/v2`` and
``evaluate_v2`` output for output (texts, order, probabilities, files), from plain data: the feature
builder's per-window metadata (``WindowMetadata``), the questions (``Question``) and the model's
outputs per window (``V1RawResult`` / ``V2RawResult``).

Candidates. v1 pairs the ``n_best_size`` best start and end positions of a window (by logit); v2 takes
the head's own top-k starts and, for each, its top-k' ends. A pair survives when start and end lie on
document pieces of the window, the start is in the window that gives its piece the most context, the
end is not before the start and the span has at most ``max_answer_length`` pieces.

Per question, the candidates of all its windows are ranked by start + end score (stable: ties keep
window order, then start-major order); the answer text is cut from the raw paragraph with the pieces'
character offsets and stripped; repeated texts are skipped, up to ``n_best_size`` entries; the
probabilities are a softmax over the kept entries' scores. A question without any candidate (for
instance one the feature builder dropped because its text could not be aligned, so it has no window)
gets the nonce entry "empty" (v1) or "" with scores -1e6 (v2). v1 predicts the first entry's text; v2
predicts it unless the question's null score (the minimum ``cls_logits`` over its windows, 1e6
without windows) reaches a threshold.

The v1 "log prob" fields are the raw logits, as in the reference.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Iterable, Mapping, Sequence

import numpy as np

from albert_tf.files.atomic import atomic_write_text
from albert_tf.tasks.question_answering.metrics import squad_v1_scores, squad_v2_scores

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"

# The reference's null score of a question without any window, and its nonce n-best entries.
NO_FEATURE_NULL_SCORE = 1e6
_V1_NONCE = ("empty", 0.0, 0.0)
_V2_NONCE = ("", -1e6, -1e6)

# evaluate_v2 scores with the official script's default no-answer threshold applied to null_odds,
# which are raw logits rather than probabilities (the reference's quirk, kept for its numbers).
_REFERENCE_NA_PROB_THRESH = 1.0


class SquadPostprocessingError(ValueError):
    """Inconsistent post-processing input: names the window (unique_id) or question and what is wrong."""


@dataclasses.dataclass(frozen=True)
class Question:
    """One question: its id and the raw (unnormalized) paragraph its answers are cut from."""

    qas_id: str
    paragraph_text: str


@dataclasses.dataclass(frozen=True, eq=False)
class WindowMetadata:
    """What post-processing needs of one window ([CLS] query [SEP] document pieces [SEP]).

    unique_id: the window's id (matches the raw result's).
    example_index: index of its question in the examples list.
    doc_offset: window position of the first document piece (1 + the position of the first [SEP]).
    tok_start_to_orig_index, tok_end_to_orig_index: [P] character offsets, in the raw paragraph, of the
      first and last character of each of the window's P document pieces.
    max_context: [P] bool, whether this window gives the piece its most context.
    """

    unique_id: int
    example_index: int
    doc_offset: int
    tok_start_to_orig_index: tuple[int, ...]
    tok_end_to_orig_index: tuple[int, ...]
    max_context: np.ndarray

    @classmethod
    def from_record(cls, record: Mapping) -> "WindowMetadata":
        """Builds a feature from the feature builder's record (the reference's InputFeatures fields).

        Reads ``unique_id``, ``example_index``, ``tok_start_to_orig_index``, ``tok_end_to_orig_index``
        and ``token_is_max_context`` (window position -> bool; int or str keys, one per document
        piece); ``doc_offset`` when present, else the first position of ``token_is_max_context``.
        Other keys (input_ids, paragraph_len, ...) are ignored.
        """
        unique_id = record.get("unique_id")
        if record.get("example_index") is None:
            raise SquadPostprocessingError(
                f"feature unique_id={unique_id}: no example_index (a training feature? post-processing "
                "needs the eval features)")
        starts = tuple(map(int, record["tok_start_to_orig_index"]))
        ends = tuple(map(int, record["tok_end_to_orig_index"]))
        flags = record["token_is_max_context"]
        flags = dict(zip(map(int, flags.keys()), map(bool, flags.values())))
        if len(starts) != len(ends) or not starts:
            raise SquadPostprocessingError(
                f"feature unique_id={unique_id}: tok_start_to_orig_index has {len(starts)} entries and "
                f"tok_end_to_orig_index {len(ends)}; expected the same non-zero number of pieces")
        doc_offset = int(record["doc_offset"]) if "doc_offset" in record else min(flags, default=-1)
        expected = range(doc_offset, doc_offset + len(starts))
        # Keys are distinct, so matching count and extremes means exactly the expected positions.
        if (len(flags), min(flags, default=None), max(flags, default=None)) != (
                len(expected), expected.start, expected.stop - 1):
            raise SquadPostprocessingError(
                f"feature unique_id={unique_id}: token_is_max_context must hold exactly the document "
                f"positions {expected.start}..{expected.stop - 1} (one per piece), found "
                f"{len(flags)} positions from {min(flags, default=None)} to {max(flags, default=None)}")
        return cls(unique_id=int(unique_id), example_index=int(record["example_index"]),
                   doc_offset=doc_offset, tok_start_to_orig_index=starts, tok_end_to_orig_index=ends,
                   max_context=np.fromiter(map(flags.__getitem__, expected), dtype=bool,
                                           count=len(expected)))


def _vector(values, name: str, unique_id: int, dtype) -> np.ndarray:
    array = np.asarray(values, dtype=dtype)
    if array.ndim != 1 or array.size == 0:
        raise SquadPostprocessingError(
            f"raw result unique_id={unique_id}: {name} must be a non-empty vector, got shape "
            f"{array.shape}")
    return array


@dataclasses.dataclass(eq=False)
class V1RawResult:
    """The v1 head's outputs for one window: start_logits, end_logits [S] (stored as float64)."""

    unique_id: int
    start_logits: np.ndarray
    end_logits: np.ndarray

    def __post_init__(self):
        self.unique_id = int(self.unique_id)
        self.start_logits = _vector(self.start_logits, "start_logits", self.unique_id, np.float64)
        self.end_logits = _vector(self.end_logits, "end_logits", self.unique_id, np.float64)
        if self.start_logits.shape != self.end_logits.shape:
            raise SquadPostprocessingError(
                f"raw result unique_id={self.unique_id}: start_logits {self.start_logits.shape} and "
                f"end_logits {self.end_logits.shape} differ in shape")


@dataclasses.dataclass(eq=False)
class V2RawResult:
    """The v2 (XLNet-style) head's outputs for one window.

    start_top_log_probs, start_top_index: [k] the k best starts (window positions) and their log-probs.
    end_top_log_probs, end_top_index: [k * k'], the k' best ends of start i at i * k' + j.
    cls_logits: the answerability logit (higher: more likely unanswerable).
    """

    unique_id: int
    start_top_log_probs: np.ndarray
    start_top_index: np.ndarray
    end_top_log_probs: np.ndarray
    end_top_index: np.ndarray
    cls_logits: float

    def __post_init__(self):
        uid = self.unique_id = int(self.unique_id)
        self.start_top_log_probs = _vector(self.start_top_log_probs, "start_top_log_probs", uid,
                                           np.float64)
        self.start_top_index = _vector(self.start_top_index, "start_top_index", uid, np.int64)
        self.end_top_log_probs = _vector(self.end_top_log_probs, "end_top_log_probs", uid, np.float64)
        self.end_top_index = _vector(self.end_top_index, "end_top_index", uid, np.int64)
        self.cls_logits = float(np.asarray(self.cls_logits).reshape(()))
        num_starts, num_ends = self.start_top_index.size, self.end_top_index.size
        if (self.start_top_log_probs.size != num_starts or self.end_top_log_probs.size != num_ends
                or num_ends % num_starts):
            raise SquadPostprocessingError(
                f"raw result unique_id={uid}: expected start_top_* of one length k and end_top_* of "
                f"length k * end_n_top, got {self.start_top_log_probs.size}/{num_starts} and "
                f"{self.end_top_log_probs.size}/{num_ends}")


@dataclasses.dataclass
class V1Predictions:
    """predictions: qas_id -> answer text; nbest: qas_id -> [{text, probability, start_log_prob,
    end_log_prob}], both in question order (predictions.json / nbest_predictions.json)."""

    predictions: dict[str, str]
    nbest: dict[str, list[dict]]


@dataclasses.dataclass
class V2Predictions:
    """best_texts: qas_id -> best non-null text; nbest as in v1; null_odds: qas_id -> null score
    (null_odds.json). ``predictions(threshold)`` gives predictions.json."""

    best_texts: dict[str, str]
    nbest: dict[str, list[dict]]
    null_odds: dict[str, float]

    def predictions(self, null_score_diff_threshold: float | None = None) -> dict[str, str]:
        """qas_id -> answer: the best text, or "" where the null score is >= the threshold.

        None: never "" (except the nonce entry of a question without candidates).
        """
        return {qid: (text if null_score_diff_threshold is None
                      or self.null_odds[qid] < null_score_diff_threshold else "")
                for qid, text in self.best_texts.items()}


@dataclasses.dataclass
class _Candidates:
    """Surviving (start, end) pairs of one window, in the reference's order; pieces, not positions."""

    start_pieces: np.ndarray
    end_pieces: np.ndarray
    start_scores: np.ndarray
    end_scores: np.ndarray


def _best_indexes(logits: np.ndarray, n_best_size: int) -> np.ndarray:
    """Positions of the n largest logits, largest first; ties keep position order."""
    return np.argsort(-logits, kind="stable")[:n_best_size]


def _valid_candidates(feature: WindowMetadata, start_positions: np.ndarray, end_positions: np.ndarray,
                      start_scores: np.ndarray, end_scores: np.ndarray,
                      max_answer_length: int) -> _Candidates:
    """The reference's filters on window positions [N]; survivors keep their order.

    v2's extra test (start before the document) is implied by the max-context test: only document
    pieces carry a max-context flag.
    """
    num_pieces = len(feature.tok_start_to_orig_index)
    start_pieces = start_positions - feature.doc_offset
    end_pieces = end_positions - feature.doc_offset
    start_in_doc = (start_pieces >= 0) & (start_pieces < num_pieces)
    start_max_context = np.where(
        start_in_doc, feature.max_context[np.clip(start_pieces, 0, num_pieces - 1)], False)
    keep = (start_max_context & (end_pieces < num_pieces) & (end_positions >= start_positions)
            & (end_positions - start_positions + 1 <= max_answer_length))
    return _merge_repeated_pairs(
        _Candidates(start_pieces[keep], end_pieces[keep], start_scores[keep], end_scores[keep]))


def _merge_repeated_pairs(candidates: _Candidates) -> _Candidates:
    """One candidate per (start, end) pair, at its first place, scored by the mean of its scores.

    The reference collects a window's scores per pair and averages them. A real head's top-k never
    repeats a pair, but any other source of outputs (synthetic or edited ones) may.
    """
    pairs = list(zip(candidates.start_pieces.tolist(), candidates.end_pieces.tolist()))
    if len(set(pairs)) == len(pairs):
        return candidates
    members: dict[tuple[int, int], list[int]] = {}
    for k, pair in enumerate(pairs):
        members.setdefault(pair, []).append(k)
    start_scores, end_scores = candidates.start_scores.tolist(), candidates.end_scores.tolist()
    merged = [(start, end, sum(start_scores[k] for k in ks) / len(ks),
               sum(end_scores[k] for k in ks) / len(ks)) for (start, end), ks in members.items()]
    return _Candidates(*(np.array(column) for column in zip(*merged)))


def _v1_candidates(feature: WindowMetadata, result: V1RawResult, n_best_size: int,
                   max_answer_length: int) -> _Candidates:
    """Every pair of the n_best_size best starts and ends (start-major), filtered."""
    starts = _best_indexes(result.start_logits, n_best_size)
    ends = _best_indexes(result.end_logits, n_best_size)
    start_positions = np.repeat(starts, ends.size)
    end_positions = np.tile(ends, starts.size)
    return _valid_candidates(feature, start_positions, end_positions,
                             result.start_logits[start_positions], result.end_logits[end_positions],
                             max_answer_length)


def _v2_candidates(feature: WindowMetadata, result: V2RawResult, max_answer_length: int) -> _Candidates:
    """Every (start i, its end j) pair of the head's beam, filtered."""
    ends_per_start = result.end_top_index.size // result.start_top_index.size
    return _valid_candidates(feature, np.repeat(result.start_top_index, ends_per_start),
                             result.end_top_index,
                             np.repeat(result.start_top_log_probs, ends_per_start),
                             result.end_top_log_probs, max_answer_length)


def _softmax(scores: Sequence[float]) -> list[float]:
    """exp(score - max) / sum, summed in order in float64 (the reference's arithmetic)."""
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    total = sum(exps)
    return [value / total for value in exps]


def _nbest(example: Question, features: Sequence[WindowMetadata],
           candidates: Sequence[_Candidates], n_best_size: int,
           nonce: tuple[str, float, float]) -> list[dict]:
    """The question's n-best list from its windows' candidates (see the module docstring)."""
    entries = []
    if features:
        window = np.concatenate([np.full(c.start_pieces.size, i) for i, c in enumerate(candidates)])
        start_pieces = np.concatenate([c.start_pieces for c in candidates])
        end_pieces = np.concatenate([c.end_pieces for c in candidates])
        start_scores = np.concatenate([c.start_scores for c in candidates])
        end_scores = np.concatenate([c.end_scores for c in candidates])
        seen = set()
        for k in np.argsort(-(start_scores + end_scores), kind="stable"):
            if len(entries) >= n_best_size:
                break
            feature = features[window[k]]
            begin = feature.tok_start_to_orig_index[start_pieces[k]]
            end = feature.tok_end_to_orig_index[end_pieces[k]]
            text = example.paragraph_text[begin:end + 1].strip()
            if text not in seen:
                seen.add(text)
                entries.append((text, float(start_scores[k]), float(end_scores[k])))
    entries = entries or [nonce]
    probabilities = _softmax([start + end for _, start, end in entries])
    return [{"text": text, "probability": probability, "start_log_prob": start,
             "end_log_prob": end}
            for (text, start, end), probability in zip(entries, probabilities)]


def _check_unique_ids(examples: Sequence[Question]) -> None:
    """Predictions are keyed by question id: two questions with one id would leave one prediction."""
    first_index: dict[str, int] = {}
    for index, example in enumerate(examples):
        earlier = first_index.setdefault(example.qas_id, index)
        if earlier != index:
            raise SquadPostprocessingError(
                f"question id {example.qas_id!r} is shared by questions {earlier} and {index}; ids "
                "must be unique (predictions are keyed by id: one of the two would be lost)")


def _windows_per_example(examples: Sequence[Question], features: Sequence[WindowMetadata],
                         results: Iterable) -> list[list[tuple[WindowMetadata, object]]]:
    """(feature, raw result) pairs of each example, in feature order."""
    _check_unique_ids(examples)
    by_unique_id = {result.unique_id: result for result in results}
    windows: list[list] = [[] for _ in examples]
    for feature in features:
        if not 0 <= feature.example_index < len(examples):
            raise SquadPostprocessingError(
                f"feature unique_id={feature.unique_id}: example_index {feature.example_index} is not "
                f"an index into the {len(examples)} examples")
        if feature.unique_id not in by_unique_id:
            raise SquadPostprocessingError(
                f"feature unique_id={feature.unique_id} (question "
                f"{examples[feature.example_index].qas_id!r}) has no raw result")
        windows[feature.example_index].append((feature, by_unique_id[feature.unique_id]))
    return windows


def postprocess_v1(examples: Sequence[Question], features: Sequence[WindowMetadata],
                   results: Iterable[V1RawResult], n_best_size: int = 20,
                   max_answer_length: int = 30) -> V1Predictions:
    """The reference's v1 predictions and n-best lists.

    examples: every question of the eval file in reader order, including those the feature builder
    dropped (they have no window and predict "empty"). features: the eval windows, in builder order.
    results: one per window (any order, matched by unique_id).
    """
    predictions, nbest = {}, {}
    for example, windows in zip(examples, _windows_per_example(examples, features, results)):
        entries = _nbest(example, [feature for feature, _ in windows],
                         [_v1_candidates(feature, result, n_best_size, max_answer_length)
                          for feature, result in windows],
                         n_best_size, _V1_NONCE)
        predictions[example.qas_id] = entries[0]["text"]
        nbest[example.qas_id] = entries
    return V1Predictions(predictions, nbest)


def postprocess_v2(examples: Sequence[Question], features: Sequence[WindowMetadata],
                   results: Iterable[V2RawResult], n_best_size: int = 20,
                   max_answer_length: int = 30) -> V2Predictions:
    """The reference's v2 best texts, n-best lists and null odds (arguments as ``postprocess_v1``).

    A question without a window gets "" (nonce entry) and null score 1e6.
    """
    best_texts, nbest, null_odds = {}, {}, {}
    for example, windows in zip(examples, _windows_per_example(examples, features, results)):
        entries = _nbest(example, [feature for feature, _ in windows],
                         [_v2_candidates(feature, result, max_answer_length)
                          for feature, result in windows],
                         n_best_size, _V2_NONCE)
        best_texts[example.qas_id] = entries[0]["text"]
        nbest[example.qas_id] = entries
        null_odds[example.qas_id] = min([NO_FEATURE_NULL_SCORE]
                                        + [result.cls_logits for _, result in windows])
    return V2Predictions(best_texts, nbest, null_odds)


def evaluate_v1(dataset: Sequence[Mapping], predictions: Mapping[str, str]) -> dict[str, float]:
    """The reference's evaluate_v1 (official v1.1): {"exact_match", "f1"} in percent.

    dataset: the SQuAD JSON's "data" list.
    """
    return squad_v1_scores(dataset, predictions)


def evaluate_v2(dataset: Sequence[Mapping], output: V2Predictions) -> tuple[dict, dict[str, str]]:
    """The reference's evaluate_v2, plus the official v2.0 figures. Returns (metrics, predictions).

    The reference's flow: score the predictions without threshold, take the official best-F1
    threshold on null_odds (tuned on this same data) as ``null_score_diff_threshold``, predict again
    with it and score that. Both scorings also turn every question whose null odds (raw logits)
    exceed 1.0 into a no-answer prediction (the official script's probability threshold, misapplied
    by the reference). Keys: ``exact``, ``f1``, ``total``, ``null_score_diff_threshold`` (the
    reference's numbers, ``f1`` is what checkpoints are selected by).

    The official v2.0 figures, under ``official_`` keys: ``official_exact``, ``official_f1``,
    ``official_total`` and ``official_HasAns_*`` / ``official_NoAns_*`` score the returned
    predictions exactly as written ("" = no answer, no further threshold);
    ``official_best_exact``, ``official_best_f1`` and their ``_thresh`` are the official best-threshold
    scores of the unthresholded predictions with null_odds as no-answer scores (an oracle: tuned on
    the data they score).

    predictions: qas_id -> answer with the tuned threshold (what the reference leaves in
    predictions.json).
    """
    untuned = squad_v2_scores(dataset, output.predictions(None), output.null_odds,
                              na_prob_thresh=_REFERENCE_NA_PROB_THRESH)
    threshold = untuned["best_f1_thresh"]
    predictions = output.predictions(threshold)
    tuned = squad_v2_scores(dataset, predictions, output.null_odds,
                            na_prob_thresh=_REFERENCE_NA_PROB_THRESH)
    metrics = {"exact": tuned["exact"], "f1": tuned["f1"], "total": tuned["total"],
               "null_score_diff_threshold": threshold}
    for key, value in squad_v2_scores(dataset, predictions).items():
        metrics[f"official_{key}"] = value
    for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
        metrics[f"official_{key}"] = untuned[key]
    return metrics, predictions


def write_prediction_files(output_dir: str, predictions: Mapping[str, str],
                           nbest: Mapping[str, list], null_odds: Mapping[str, float] | None = None
                           ) -> list[str]:
    """Writes predictions.json, nbest_predictions.json and (v2) null_odds.json into output_dir.

    JSON with indent=4 and a final newline, as the reference writes them; each file atomically
    (tf.io.gfile, so gs:// works). Returns the paths written.
    """
    contents = {PREDICTIONS_FILE: predictions, NBEST_FILE: nbest}
    if null_odds is not None:
        contents[NULL_ODDS_FILE] = null_odds
    paths = []
    for name, content in contents.items():
        path = os.path.join(output_dir, name)
        atomic_write_text(path, json.dumps(content, indent=4) + "\n")
        paths.append(path)
    return paths
