"""albert_tf/tasks/question_answering/postprocessing.py against the reference's own SQuAD
post-processing outputs.

The golden files (../shared/data/squad/reference_golden) hold, for the two dev samples at two window
geometries, the reference's eval features, synthetic raw outputs per window and what the reference's
squad_utils wrote from them. Hand-built windows check the candidate filters against a brute-force
enumeration of the valid spans.
"""

from __future__ import annotations

import functools
import json
import os

import numpy as np
import pytest
import sentencepiece as spm

from albert_tf.tasks.question_answering import postprocessing as sp
from tests.shared_setup import EN8K_MODEL, SHARED_DATA_DIR

SQUAD_DIR = os.path.join(SHARED_DATA_DIR, "squad")
V1_GOLDEN = ("v1.1-sample_S384.json", "v1.1-sample_S64.json")
V2_GOLDEN = ("v2.0-sample_S384.json", "v2.0-sample_S64.json")


@functools.lru_cache(maxsize=None)
def _golden(name: str) -> dict:
    with open(os.path.join(SQUAD_DIR, "reference_golden", name), encoding="utf-8") as handle:
        return json.load(handle)


@functools.lru_cache(maxsize=None)
def _dataset(source: str) -> list:
    with open(os.path.join(SQUAD_DIR, source), encoding="utf-8") as handle:
        return json.load(handle)["data"]


def _examples(dataset) -> list[sp.Question]:
    return [sp.Question(qa["id"], paragraph["context"])
            for article in dataset for paragraph in article["paragraphs"] for qa in paragraph["qas"]]


def _inputs(name: str):
    """(golden, dataset, examples, features, raw results) of one golden file."""
    golden = _golden(name)
    dataset = _dataset(golden["settings"]["source"])
    features = [sp.WindowMetadata.from_record(record) for record in golden["features"]]
    result_type = sp.V1RawResult if golden["settings"]["version"] == 1 else sp.V2RawResult
    results = [result_type(**record) for record in golden["raw_results"]]
    return golden, dataset, _examples(dataset), features, results


def _run(name: str, examples=None, features=None):
    golden, dataset, all_examples, all_features, results = _inputs(name)
    settings = golden["settings"]
    postprocess = sp.postprocess_v1 if settings["version"] == 1 else sp.postprocess_v2
    return postprocess(all_examples if examples is None else examples,
                       all_features if features is None else features, results,
                       n_best_size=settings["n_best_size"],
                       max_answer_length=settings["max_answer_length"])


def _assert_nbest_equal(actual: dict, expected: dict) -> None:
    assert list(actual) == list(expected)
    for qas_id, entries in expected.items():
        assert [entry["text"] for entry in actual[qas_id]] == [entry["text"] for entry in entries]
        for got, want in zip(actual[qas_id], entries):
            assert list(got) == ["text", "probability", "start_log_prob", "end_log_prob"]
            for key in ("probability", "start_log_prob", "end_log_prob"):
                assert got[key] == pytest.approx(want[key], rel=1e-6, abs=0), (qas_id, key)


def _assert_scores_equal(actual: dict, expected: dict) -> None:
    assert list(actual) == list(expected)
    for key, value in expected.items():
        assert actual[key] == pytest.approx(value, rel=1e-6, abs=1e-12), key


# -- the reference's outputs -------------------------------------------------------------------------

@pytest.mark.requires_shared_data
@pytest.mark.parametrize("name", V1_GOLDEN)
def test_v1_matches_the_reference(name):
    golden, dataset, *_ = _inputs(name)
    output = _run(name)
    assert list(output.predictions.items()) == list(golden["predictions"].items())
    _assert_nbest_equal(output.nbest, golden["nbest_predictions"])
    _assert_scores_equal(sp.evaluate_v1(dataset, output.predictions), golden["evaluate_v1"])


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("name", V2_GOLDEN)
def test_v2_matches_the_reference(name):
    golden, dataset, *_ = _inputs(name)
    output = _run(name)
    _assert_nbest_equal(output.nbest, golden["nbest_predictions"])
    _assert_scores_equal(output.null_odds, golden["null_odds"])
    assert list(output.predictions(None).items()) == list(golden["predictions_threshold_none"].items())
    assert list(output.predictions(0.0).items()) == list(golden["predictions_threshold_0"].items())

    metrics, tuned = sp.evaluate_v2(dataset, output)
    reference = {key: metrics[key] for key in ("exact", "f1", "total", "null_score_diff_threshold")}
    _assert_scores_equal(reference, golden["evaluate_v2_reference"])
    assert list(tuned.items()) == list(golden["predictions_reference_tuned"].items())


@pytest.mark.requires_shared_data
def test_v2_threshold_blanks_questions_whose_null_score_reaches_it():
    output = _run("v2.0-sample_S384.json")
    lowest = min(output.null_odds, key=output.null_odds.get)
    at_lowest = output.predictions(output.null_odds[lowest])
    assert at_lowest[lowest] == ""  # equal to the threshold: no answer
    assert set(at_lowest.values()) == {""}
    above_all = output.predictions(max(output.null_odds.values()) + 1.0)
    assert above_all == output.predictions(None) == output.best_texts
    assert "" not in above_all.values()


@pytest.mark.requires_shared_data
def test_v2_official_metrics_beside_the_reference_ones():
    golden, dataset, *_ = _inputs("v2.0-sample_S384.json")
    metrics, tuned = sp.evaluate_v2(dataset, _run("v2.0-sample_S384.json"))
    answerable = sum(bool(qa["answers"]) for article in dataset
                     for paragraph in article["paragraphs"] for qa in paragraph["qas"])
    total = metrics["official_total"]
    assert (total, metrics["official_HasAns_total"], metrics["official_NoAns_total"]) == (
        len(tuned), answerable, len(tuned) - answerable)
    # The tuned threshold is the lowest null score, so every prediction is "" (the threshold question
    # included, as predictions use >=): every unanswerable question is right, no answerable one.
    assert set(tuned.values()) == {""}
    assert metrics["official_NoAns_exact"] == metrics["official_NoAns_f1"] == 100.0
    assert metrics["official_HasAns_exact"] == metrics["official_HasAns_f1"] == 0.0
    assert metrics["official_exact"] == pytest.approx(100.0 * (total - answerable) / total)
    # The official best-F1 search counts the threshold question as answered, so it scores higher.
    assert metrics["official_best_f1_thresh"] == metrics["null_score_diff_threshold"]
    assert metrics["official_best_f1"] > metrics["official_f1"]


# -- questions without windows, filters, merging -----------------------------------------------------

@pytest.mark.requires_shared_data
@pytest.mark.parametrize("name", V1_GOLDEN + V2_GOLDEN)
def test_questions_without_windows_still_get_a_prediction(name):
    golden, _, examples, features, _ = _inputs(name)
    dropped = {1, 4}  # as if the feature builder failed to align these questions
    kept = [feature for feature in features if feature.example_index not in dropped]
    output = _run(name, features=kept)
    full = _run(name)
    dropped_ids = {examples[i].qas_id for i in dropped}
    assert list(output.nbest) == [example.qas_id for example in examples]
    if golden["settings"]["version"] == 1:
        predictions, nonce = output.predictions, ("empty", 0.0, 0.0)
        reference = full.predictions
    else:
        predictions, nonce = output.predictions(0.0), ("", -1e6, -1e6)
        reference = full.predictions(0.0)
        assert output.predictions(None)[examples[1].qas_id] == ""
        for qas_id in dropped_ids:
            assert output.null_odds[qas_id] == 1e6
    for qas_id in dropped_ids:
        assert predictions[qas_id] == nonce[0]
        assert output.nbest[qas_id] == [{"text": nonce[0], "probability": 1.0,
                                         "start_log_prob": nonce[1], "end_log_prob": nonce[2]}]
    assert {q: t for q, t in predictions.items() if q not in dropped_ids} == {
        q: t for q, t in reference.items() if q not in dropped_ids}


# A hand-built window: [CLS] q q [SEP] aa bb cc dd ee [SEP] (positions 0..9), "cc" not max-context.
# Each piece's last character is the space after it, so answers need stripping.
PARAGRAPH = " aa bb cc dd ee "
DOC_OFFSET = 4
PIECE_STARTS = (1, 4, 7, 10, 13)
PIECE_ENDS = tuple(start + 2 for start in PIECE_STARTS)
MAX_CONTEXT = {4: True, 5: True, 6: False, 7: True, 8: True}


def _window(unique_id: int = 7, max_context: dict = MAX_CONTEXT) -> sp.WindowMetadata:
    return sp.WindowMetadata.from_record({
        "unique_id": unique_id, "example_index": 0,
        "tok_start_to_orig_index": list(PIECE_STARTS),
        "tok_end_to_orig_index": list(PIECE_ENDS),
        "token_is_max_context": max_context})


def _valid_spans(start_positions, end_positions, max_answer_length):
    """Brute force: (start, end) window positions that make an answer, in enumeration order."""
    pieces = len(PIECE_STARTS)
    return [(s, e) for s in start_positions for e in end_positions
            if DOC_OFFSET <= s < DOC_OFFSET + pieces and MAX_CONTEXT[s]
            and s <= e < DOC_OFFSET + pieces and e - s + 1 <= max_answer_length]


def _span_text(start: int, end: int) -> str:
    return PARAGRAPH[PIECE_STARTS[start - DOC_OFFSET]:PIECE_ENDS[end - DOC_OFFSET] + 1].strip()


# (10, 30): 12 valid spans, cut to 10; (3, 3, seed 2): the 3 best starts and ends leave 3 of 9.
@pytest.mark.parametrize("n_best_size,max_answer_length,seed", [(10, 2, 0), (10, 30, 1), (3, 3, 2)])
def test_v1_keeps_exactly_the_valid_spans_ranked_by_score(n_best_size, max_answer_length, seed):
    rng = np.random.default_rng(seed)
    start_logits, end_logits = rng.normal(size=10), rng.normal(size=10)
    output = sp.postprocess_v1([sp.Question("q", PARAGRAPH)], [_window()],
                               [sp.V1RawResult(7, start_logits, end_logits)],
                               n_best_size=n_best_size, max_answer_length=max_answer_length)
    best_starts = np.argsort(-start_logits)[:n_best_size]
    best_ends = np.argsort(-end_logits)[:n_best_size]
    spans = sorted(_valid_spans(best_starts, best_ends, max_answer_length),
                   key=lambda span: -(start_logits[span[0]] + end_logits[span[1]]))[:n_best_size]
    assert spans, "the random logits must leave at least one valid span"
    nbest = output.nbest["q"]
    assert [entry["text"] for entry in nbest] == [_span_text(s, e) for s, e in spans]
    scores = np.array([start_logits[s] + end_logits[e] for s, e in spans])
    np.testing.assert_allclose([entry["probability"] for entry in nbest],
                               np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum(),
                               rtol=1e-12)
    assert [entry["start_log_prob"] for entry in nbest] == [start_logits[s] for s, _ in spans]
    assert output.predictions["q"] == nbest[0]["text"]


def test_v2_keeps_exactly_the_valid_spans_of_the_beam():
    # Starts: CLS (0), a query position (2), "bb", "cc" (not max-context), "dd"; 3 ends each.
    start_index = [0, 2, 5, 6, 7]
    end_index = [0, 4, 5, 2, 5, 9, 6, 5, 8, 7, 6, 8, 8, 9, 7]
    start_log_probs = [-0.5, -0.6, -0.7, -0.8, -0.9]
    end_log_probs = [-0.1 * (k + 1) for k in range(15)]
    result = sp.V2RawResult(7, start_log_probs, start_index, end_log_probs, end_index, cls_logits=-2.5)
    output = sp.postprocess_v2([sp.Question("q", PARAGRAPH)], [_window()], [result],
                               max_answer_length=2)
    expected = [(start_index[k // 3], end_index[k], start_log_probs[k // 3] + end_log_probs[k])
                for k in range(15)
                if (start_index[k // 3], end_index[k]) in _valid_spans([start_index[k // 3]],
                                                                      [end_index[k]], 2)]
    expected.sort(key=lambda item: -item[2])
    # Survivors: bb..cc -0.7-0.7, bb..bb -0.7-0.8, dd..ee -0.9-1.3, dd..dd -0.9-1.5 (bb..ee too long,
    # dd..[SEP] outside the document, cc not max-context, CLS and query starts outside it).
    assert [entry["text"] for entry in output.nbest["q"]] == [_span_text(s, e) for s, e, _ in expected]
    assert [_span_text(s, e) for s, e, _ in expected] == ["bb cc", "bb", "dd ee", "dd"]
    assert output.null_odds == {"q": -2.5}
    assert output.predictions(-3.0) == {"q": ""} and output.predictions(-2.0) == {"q": "bb cc"}


def test_repeated_pairs_in_a_window_are_averaged_at_their_first_place():
    # Start "bb" (5) twice, each with ends "cc" (6) and "bb" (5): two pairs seen twice.
    result = sp.V2RawResult(7, [-1.0, -2.0], [5, 5], [-0.5, -3.0, -1.5, -0.25], [6, 5, 6, 5],
                            cls_logits=0.0)
    nbest = sp.postprocess_v2([sp.Question("q", PARAGRAPH)], [_window()], [result]).nbest["q"]
    assert [(e["text"], e["start_log_prob"], e["end_log_prob"]) for e in nbest] == [
        ("bb cc", -1.5, -1.0), ("bb", -1.5, -1.625)]


def test_no_surviving_candidate_gives_the_nonce_entries():
    window = _window(max_context={position: False for position in MAX_CONTEXT})
    example = sp.Question("q", PARAGRAPH)
    v1 = sp.postprocess_v1([example], [window], [sp.V1RawResult(7, np.arange(10.0), np.arange(10.0))])
    assert v1.predictions == {"q": "empty"}
    assert v1.nbest["q"] == [{"text": "empty", "probability": 1.0, "start_log_prob": 0.0,
                              "end_log_prob": 0.0}]
    v2 = sp.postprocess_v2([example], [window],
                           [sp.V2RawResult(7, [0.0], [5], [0.0], [5], cls_logits=-4.0)])
    assert v2.best_texts == {"q": ""} and v2.null_odds == {"q": -4.0}
    assert v2.nbest["q"][0]["start_log_prob"] == -1e6


def test_null_score_is_the_minimum_over_the_windows():
    example = sp.Question("q", PARAGRAPH)
    results = [sp.V2RawResult(uid, [0.0], [5], [0.0], [5], cls_logits=cls)
               for uid, cls in ((7, 0.5), (8, -1.5), (9, 3.0))]
    output = sp.postprocess_v2([example], [_window(uid) for uid in (7, 8, 9)], results)
    assert output.null_odds == {"q": -1.5}


# -- input records -----------------------------------------------------------------------------------

@pytest.mark.requires_shared_data
def test_doc_offset_is_the_position_after_the_first_sep():
    sep_id = spm.SentencePieceProcessor(model_file=EN8K_MODEL).piece_to_id("[SEP]")
    for name in V1_GOLDEN + V2_GOLDEN:
        for record, feature in zip(_golden(name)["features"], _inputs(name)[3]):
            assert feature.doc_offset == record["input_ids"].index(sep_id) + 1


@pytest.mark.requires_shared_data
def test_feature_records_accept_int_or_str_positions_and_an_explicit_doc_offset():
    record = _golden("v1.1-sample_S64.json")["features"][3]
    from_str = sp.WindowMetadata.from_record(record)
    with_ints = dict(record, token_is_max_context={int(k): v for k, v in
                                                   record["token_is_max_context"].items()})
    from_int = sp.WindowMetadata.from_record(dict(with_ints, doc_offset=from_str.doc_offset))
    assert not from_str.max_context.all() and from_str.max_context.any()  # a middle window
    np.testing.assert_array_equal(from_int.max_context, from_str.max_context)
    assert (from_int.doc_offset, from_int.tok_start_to_orig_index) == (
        from_str.doc_offset, from_str.tok_start_to_orig_index)
    with pytest.raises(sp.SquadPostprocessingError, match="unique_id=1000000003.*positions 12"):
        sp.WindowMetadata.from_record(dict(record, doc_offset=from_str.doc_offset + 1))


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("change,message", [
    ({"example_index": None}, "unique_id=1000000003: no example_index"),
    ({"tok_end_to_orig_index": [1, 2]}, "tok_end_to_orig_index 2"),
    ({"token_is_max_context": {"11": True}}, "found 1 positions"),
])
def test_bad_feature_records_name_the_window(change, message):
    record = dict(_golden("v1.1-sample_S64.json")["features"][3], **change)
    with pytest.raises(sp.SquadPostprocessingError, match=message):
        sp.WindowMetadata.from_record(record)


def test_bad_raw_results_and_missing_windows_are_named():
    with pytest.raises(sp.SquadPostprocessingError, match="unique_id=5: start_logits .* differ"):
        sp.V1RawResult(5, np.zeros(8), np.zeros(9))
    with pytest.raises(sp.SquadPostprocessingError, match="unique_id=5: expected start_top_"):
        sp.V2RawResult(5, [0.0, 0.0], [1, 2], [0.0] * 3, [1, 2, 3], cls_logits=0.0)
    with pytest.raises(sp.SquadPostprocessingError, match="unique_id=6: start_top_log_probs must be"):
        sp.V2RawResult(6, [], [], [], [], cls_logits=0.0)
    example = sp.Question("q1", PARAGRAPH)
    with pytest.raises(sp.SquadPostprocessingError, match="unique_id=7 \\(question 'q1'\\) has no raw"):
        sp.postprocess_v1([example], [_window()], [sp.V1RawResult(8, np.zeros(10), np.zeros(10))])
    with pytest.raises(sp.SquadPostprocessingError, match="example_index 0 is not an index into the 0"):
        sp.postprocess_v1([], [_window()], [])


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("name", [V1_GOLDEN[1], V2_GOLDEN[1]])
def test_a_question_id_shared_by_two_questions_is_refused(name):
    # Unchecked, the later question's prediction would replace the earlier one's (n questions in,
    # n - 1 predictions out).
    examples = list(_inputs(name)[2])
    examples[6] = sp.Question(examples[1].qas_id, examples[6].paragraph_text)
    with pytest.raises(sp.SquadPostprocessingError,
                       match=f"question id '{examples[1].qas_id}' is shared by questions 1 and 6"):
        _run(name, examples=examples)


# -- files -------------------------------------------------------------------------------------------

@pytest.mark.requires_shared_data
def test_prediction_files_round_trip_in_the_reference_format(tmp_path):
    golden = _golden("v2.0-sample_S64.json")
    output = _run("v2.0-sample_S64.json")
    predictions = output.predictions(0.0)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / sp.PREDICTIONS_FILE).write_text("stale")
    paths = sp.write_prediction_files(str(out_dir), predictions, output.nbest, output.null_odds)
    assert sorted(os.listdir(out_dir)) == sorted(
        [sp.PREDICTIONS_FILE, sp.NBEST_FILE, sp.NULL_ODDS_FILE])  # no temporary left, stale replaced
    assert [os.path.basename(p) for p in paths] == [sp.PREDICTIONS_FILE, sp.NBEST_FILE,
                                                    sp.NULL_ODDS_FILE]
    text = (out_dir / sp.PREDICTIONS_FILE).read_text()
    assert text == json.dumps(golden["predictions_threshold_0"], indent=4) + "\n"
    assert json.loads((out_dir / sp.NBEST_FILE).read_text()) == output.nbest
    assert json.loads((out_dir / sp.NULL_ODDS_FILE).read_text()) == output.null_odds

    v1 = _run("v1.1-sample_S384.json")
    v1_dir = tmp_path / "v1" / "nested"
    sp.write_prediction_files(str(v1_dir), v1.predictions, v1.nbest)
    assert sorted(os.listdir(v1_dir)) == sorted([sp.PREDICTIONS_FILE, sp.NBEST_FILE])
    assert json.loads((v1_dir / sp.NBEST_FILE).read_text()) == v1.nbest
