"""SQuAD reader, character alignment, features, records, feature files and command line
(data_prep/squad*.py).

Expected values: the golden features in ../shared/data/squad/reference_golden (made by the
reference's own code with en8k.model), a cell-by-cell banded-LCS table and a scanning index filler
written here from the documented rules, and the raw JSON files themselves. The tests that read the
shared data are marked requires_shared_data or use en8k.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import tracemalloc

import pytest
import tensorflow as tf

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.normalization import preprocess_text
from data_prep.common.feature_cache import read_feature_file
from data_prep.question_answering import alignment
from data_prep.question_answering.alignment import IndexFiller, align_characters
from data_prep.question_answering.examples import (SquadDataError, parse_squad_questions,
                                                   read_squad_examples, read_squad_questions)
from data_prep.question_answering.feature_file import squad_feature_file, write_squad_feature_file
from albert_tf.tasks.question_answering.records import parse_squad_record
from data_prep.question_answering.features import (FIRST_UNIQUE_ID, SquadFeatureSettings,
                                                   convert_examples, convert_questions,
                                                   feature_metadata)
from tests.command_runner import run_command
from tests.shared_setup import EN8K_MODEL, SHARED_DATA_DIR
from tests import spm_fixtures
from tests.spm_fixtures import write_wordpiece_vocab

SQUAD_DIR = os.path.join(SHARED_DATA_DIR, "squad")
GOLDEN_DIR = os.path.join(SQUAD_DIR, "reference_golden")
V1_SAMPLE = os.path.join(SQUAD_DIR, "dev-v1.1-sample.json")
V2_SAMPLE = os.path.join(SQUAD_DIR, "dev-v2.0-sample.json")
GOLDEN_FILES = ("v1.1-sample_S384", "v1.1-sample_S64", "v2.0-sample_S384", "v2.0-sample_S64")
SEQUENCE_COLUMNS = ("input_ids", "input_mask", "segment_ids", "p_mask")
LABEL_COLUMNS = {"start_positions": "start_position", "end_positions": "end_position",
                 "is_impossible": "is_impossible"}
# A Korean paragraph: every syllable decomposes (NFKD) into 2-3 jamo, so only the spaces align.
UNALIGNABLE_CONTEXT = "한국어는 대한민국의 공용어이며 많은 사람이 사용한다. 서울은 수도이다."


def load_json(path: str):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def write_json(path, value) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
    return str(path)


def golden(name: str) -> dict:
    return load_json(os.path.join(GOLDEN_DIR, name + ".json"))


def settings_of(golden_file: dict, is_training: bool = False) -> SquadFeatureSettings:
    s = golden_file["settings"]
    return SquadFeatureSettings(s["max_seq_length"], s["doc_stride"], s["max_query_length"],
                                is_training)


def golden_row(unique_id: int, feature, is_training: bool) -> dict:
    """A feature as the golden files list it (the reference's InputFeatures fields)."""
    row = {"unique_id": unique_id, **feature_metadata(feature, is_training)}
    del row["doc_offset"]  # not a field of the reference's: checked by the sidecar test
    row.update({name: getattr(feature, name) for name in SEQUENCE_COLUMNS})
    if is_training:
        row.update({name: getattr(feature, name) for name in LABEL_COLUMNS.values()})
    return row


def one_paragraph_dataset(context: str, qas: list[dict]) -> dict:
    return {"version": "test", "data": [{"title": "t", "paragraphs": [{"context": context,
                                                                      "qas": qas}]}]}


# -- golden equality ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", GOLDEN_FILES)
@pytest.mark.parametrize("key,is_training", [("features", False), ("train_features", True)])
def test_features_equal_the_reference_golden_files(en8k, name, key, is_training):
    reference = golden(name)
    source = os.path.join(SQUAD_DIR, reference["settings"]["source"])
    examples = read_squad_examples(source, is_training)
    ours = [golden_row(unique_id, feature, is_training) for unique_id, feature in
            convert_examples(examples, en8k.sp_model, True, settings_of(reference, is_training))]
    assert len(ours) == len(reference[key])
    for mine, theirs in zip(ours, reference[key]):
        assert mine == theirs, f"unique_id {theirs['unique_id']}"


# -- character alignment -----------------------------------------------------------------------------

def banded_lcs_table_alignment(raw_keys, piece_text):
    """The reference's banded LCS, filled cell by cell (independent of the bit-parallel version)."""
    n, m = len(raw_keys), len(piece_text)

    def fill(max_dist):
        lengths, moves = {}, {}
        for i in range(n):
            for j in range(max(0, i - max_dist), min(m, i + max_dist)):
                best = 0
                if i > 0:
                    moves[i, j], best = 0, lengths.get((i - 1, j), 0)
                if j > 0 and lengths.get((i, j - 1), 0) > best:
                    moves[i, j], best = 1, lengths[i, j - 1]
                diagonal = lengths.get((i - 1, j - 1), 0) if i > 0 and j > 0 else 0
                if raw_keys[i] == piece_text[j] and diagonal + 1 > best:
                    moves[i, j], best = 2, diagonal + 1
                lengths[i, j] = best
        return lengths, moves

    if n == 0 or m == 0:
        return None
    max_dist = abs(n - m) + 5
    lengths, moves = fill(max_dist)
    if lengths.get((n - 1, m - 1), 0) <= 0.8 * n:
        lengths, moves = fill(2 * max_dist)
    raw_to_piece, piece_to_raw = [None] * n, [None] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0 and (i, j) in moves:
        if moves[i, j] == 2:
            raw_to_piece[i], piece_to_raw[j] = j, i
            i, j = i - 1, j - 1
        elif moves[i, j] == 1:
            j -= 1
        else:
            i -= 1
    total = lengths.get((n - 1, m - 1), 0)
    if total < 0.8 * n or all(v is None for v in raw_to_piece):
        return None
    return raw_to_piece, piece_to_raw, total


def perturbed_pair(rng: random.Random) -> tuple[list[str], str]:
    """Raw keys and a piece text made from them by dropped, inserted and changed characters;
    some keys are empty or two characters long (accents, ligatures), some pairs unrelated."""
    raw = [rng.choice("abc abc abc \n") if rng.random() < 0.9 else rng.choice(["fi", ""])
           for _ in range(rng.randint(1, 50))]
    rate = rng.choice([0.0, 0.02, 0.1, 0.3])
    piece = [" "] if rng.random() < 0.3 else []
    for key in raw:
        if len(key) != 1:
            piece.extend(key if rng.random() < 0.5 else " ")
            continue
        draw = rng.random()
        if draw < rate:
            continue
        if draw < 2 * rate:
            piece.append(rng.choice("abc "))
        piece.append(key)
    if rng.random() < 0.1:
        piece = [rng.choice("ab ") for _ in range(rng.randint(0, 60))]
    return raw, "".join(piece)


@pytest.fixture(params=["one_block", "small_blocks"])
def row_blocks(request, monkeypatch):
    """The alignment keeps its rows in one block (short texts), or in blocks of about sqrt(n) rows
    recomputed during the backtrack, match bits a few rows at a time (what long texts get)."""
    if request.param == "small_blocks":
        monkeypatch.setattr(alignment, "_BLOCK_BITS", 1)
        monkeypatch.setattr(alignment, "_MATCH_BATCH_CELLS", 64)
    return request.param


def test_alignment_equals_the_cell_by_cell_table_on_perturbed_strings(row_blocks):
    rng = random.Random(1234)
    aligned = 0
    for _ in range(1500):
        raw, piece_text = perturbed_pair(rng)
        expected = banded_lcs_table_alignment(raw, piece_text)
        result = align_characters(raw, piece_text)
        got = None if result is None else (result.orig_to_chartok, result.chartok_to_orig,
                                           result.lcs_length)
        assert got == expected, (raw, piece_text)
        aligned += expected is not None
    assert 300 < aligned < 1200  # both outcomes are exercised


def paragraph_alignment_inputs(tokenizer, text: str) -> tuple[list[str], str]:
    pieces = tokenizer.tokenize(preprocess_text(text, lower=True))
    keys = [preprocess_text(char, remove_space=False, lower=True) for char in text]
    return keys, "".join(pieces).replace("\u2581", " ")


def test_alignment_equals_the_cell_by_cell_table_on_real_paragraphs(en8k, row_blocks):
    contexts = [p["context"] for path in (V1_SAMPLE, V2_SAMPLE)
                for article in load_json(path)["data"] for p in article["paragraphs"]]
    for text in contexts + ["  Leading spaces,\n\tnewlines and $45, 1,990 caf\u00e9 \ufb01ne  ",
                            UNALIGNABLE_CONTEXT]:
        keys, piece_text = paragraph_alignment_inputs(en8k, text)
        result = align_characters(keys, piece_text)
        got = None if result is None else (result.orig_to_chartok, result.chartok_to_orig,
                                           result.lcs_length)
        assert got == banded_lcs_table_alignment(keys, piece_text)


@pytest.mark.parametrize("length", [7500, 30000])
def test_alignment_memory_is_linear_in_the_text_length(length):
    # Text of `length` chars, its pieces' text without 20 of them (band half-width 25 at any
    # length). Keeping every row as a bit vector of all m columns (n * m / 8 bytes and more: 14
    # and 184 MB measured) exceeds the bound at both lengths; the alignment's own lists and its
    # rows' bands take about 200 bytes per char.
    rng = random.Random(length)
    raw = [rng.choice("abcdefgh ") for _ in range(length)]
    dropped = set(rng.sample(range(length), 20))
    piece_text = "".join(char for index, char in enumerate(raw) if index not in dropped)
    tracemalloc.start()
    try:
        result = align_characters(raw, piece_text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.lcs_length == length - 20
    assert peak < 400 * length


def scanning_fill(index, position, limit, is_start):
    """The gap rule of the reference's index conversion, by walking to the neighbours."""
    if index[position] is not None:
        return index[position]
    before = next((index[p] for p in range(position, -1, -1) if index[p] is not None), None)
    after = next((index[p] for p in range(position, len(index)) if index[p] is not None), None)
    if before is None:
        return (0 if is_start else after - 1) if after >= 1 else after
    if after is None:
        if limit is not None and before < limit - 1:
            return before + 1 if is_start else limit - 1
        return before
    if after > before + 1:
        return before + 1 if is_start else after - 1
    return after if is_start else before


def test_index_filler_follows_the_gap_rule():
    rng = random.Random(7)
    for _ in range(300):
        size = rng.randint(1, 12)
        targets = sorted(rng.sample(range(20), size))
        index = [t if rng.random() < 0.5 else None for t in targets]
        if all(v is None for v in index):
            index[rng.randrange(size)] = targets[0]
        limit = rng.choice([None, 20, targets[-1] + 1])
        filler = IndexFiller(index, limit)
        for position in range(size):
            for is_start in (True, False):
                assert filler.fill(position, is_start) == scanning_fill(index, position, limit,
                                                                        is_start)


# -- reader ------------------------------------------------------------------------------------------

@pytest.mark.requires_shared_data
def test_reader_keeps_file_order_text_and_labels():
    dataset = load_json(V2_SAMPLE)
    qas = [(p["context"], qa) for a in dataset["data"] for p in a["paragraphs"] for qa in p["qas"]]
    train = read_squad_examples(V2_SAMPLE, is_training=True)
    evaluation = read_squad_examples(V2_SAMPLE, is_training=False)
    assert [e.qas_id for e in train] == [qa["id"] for _, qa in qas] == [e.qas_id for e in evaluation]
    for example, (context, qa) in zip(train, qas):
        assert example.paragraph_text == context and example.question_text == qa["question"]
        assert example.is_impossible == qa["is_impossible"]
        if qa["is_impossible"]:
            assert (example.orig_answer_text, example.start_position) == ("", -1)
        else:
            answer = qa["answers"][0]
            assert (example.orig_answer_text, example.start_position) == (answer["text"],
                                                                          answer["answer_start"])
    for example, (_, qa) in zip(evaluation, qas):
        assert example.start_position is None and not example.is_impossible
        assert list(example.answers) == [answer["text"] for answer in qa["answers"]]


@pytest.mark.requires_shared_data
def test_training_needs_exactly_one_answer_per_answerable_question():
    dataset = copy.deepcopy(load_json(V1_SAMPLE))
    qa = dataset["data"][0]["paragraphs"][0]["qas"][1]
    qa["answers"].append(dict(qa["answers"][0]))
    with pytest.raises(SquadDataError, match=f"question {qa['id']}: .*exactly 1 answer, found 2"):
        parse_squad_questions(dataset, is_training=True, source="dev.json")
    assert len(parse_squad_questions(dataset, is_training=False).examples) == 8  # eval: every answer


@pytest.mark.parametrize("answer,match", [({"text": "", "answer_start": 4}, "non-empty text"),
                                          ({"text": "Normans", "answer_start": -1}, "offset >= 0"),
                                          ({"text": "x"}, "missing 'answer_start'")])
def test_malformed_training_answers_are_errors_naming_the_question(answer, match):
    dataset = one_paragraph_dataset("The Normans were in Normandy.",
                                    [{"id": "q1", "question": "Who?", "answers": [answer]}])
    with pytest.raises(SquadDataError, match=f"question q1: .*{match}"):
        parse_squad_questions(dataset, is_training=True)


def test_training_answers_not_found_at_answer_start_skip_their_question():
    context = "The Normans were in Normandy.\nRollo led them."
    qas = [{"id": id_, "question": "Who?", "answers": [{"text": text, "answer_start": start}]}
           for id_, text, start in [("right", "Normans", 4), ("shifted", "Normans", 5),
                                    ("newline", "Normandy. Rollo", 20), ("wrong-text", "Danes", 4),
                                    ("past-the-end", "them. Then", len(context) - 5)]]
    dataset = one_paragraph_dataset(context, qas)
    questions = parse_squad_questions(dataset, is_training=True)
    assert [(e.qas_id, e.orig_answer_text, e.start_position) for e in questions.examples] == [
        ("right", "Normans", 4), ("newline", "Normandy. Rollo", 20)]
    assert questions.skipped_qas_ids == ["shifted", "wrong-text", "past-the-end"]
    evaluation = parse_squad_questions(dataset, is_training=False)  # no label, nothing skipped
    assert len(evaluation.examples) == 5 and evaluation.skipped_qas_ids == []


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("is_training", [False, True])
def test_a_repeated_question_id_is_refused_naming_both_places(is_training):
    dataset = load_json(V1_SAMPLE)
    repeated = dataset["data"][0]["paragraphs"][0]["qas"][2]["id"]
    dataset["data"][1]["paragraphs"][1]["qas"][0]["id"] = repeated
    with pytest.raises(SquadDataError, match=re.escape(
            f"dev.json: question id '{repeated}' appears twice, at data[0].paragraphs[0].qas[2] "
            "and at data[1].paragraphs[1].qas[0]; ids must be unique")):
        parse_squad_questions(dataset, is_training, source="dev.json")


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("is_training", [False, True])
def test_squad_2_data_read_as_v1_names_the_file_question_and_flag(is_training):
    with pytest.raises(SquadDataError, match=re.escape(
            f"{V2_SAMPLE}: question 5ad39d53604f3c001a3fe8d3: an unanswerable question "
            "(is_impossible is true): SQuAD 2.0 data needs --version_2_with_negative")):
        read_squad_questions(V2_SAMPLE, is_training, version_2_with_negative=False)
    assert len(read_squad_questions(V2_SAMPLE, is_training, True).examples) == 14
    assert len(read_squad_questions(V2_SAMPLE, is_training, None).examples) == 14
    assert len(read_squad_questions(V1_SAMPLE, is_training, False).examples) == 8
    dataset = load_json(V1_SAMPLE)
    dataset["data"][1]["paragraphs"][0]["qas"][0]["answers"] = []
    with pytest.raises(SquadDataError, match=re.escape(
            "question 56e16182e3433e1400422e28: an unanswerable question (it has no answer)")):
        parse_squad_questions(dataset, is_training, version_2_with_negative=False)


def test_reader_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(SquadDataError, match="bad.json: not a SQuAD JSON file"):
        read_squad_examples(str(bad), is_training=False)
    with pytest.raises(SquadDataError, match="missing.json"):
        read_squad_examples(str(tmp_path / "missing.json"), is_training=False)
    write_json(bad, {"data": [{"paragraphs": [{"context": "c", "qas": [{"id": "q9"}]}]}]})
    with pytest.raises(SquadDataError, match="question q9: missing 'question'"):
        read_squad_examples(str(bad), is_training=False)


def test_settings_are_checked():
    with pytest.raises(SquadDataError, match="greater than max_query_length"):
        SquadFeatureSettings(max_seq_length=67, doc_stride=128, max_query_length=64)
    with pytest.raises(SquadDataError, match="doc_stride"):
        SquadFeatureSettings(max_seq_length=384, doc_stride=0, max_query_length=64)


# -- records and feature files ----------------------------------------------------------------------

def parsed_records(path: str) -> list[tf.train.Example]:
    return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]


@pytest.mark.parametrize("is_training", [False, True])
def test_records_round_trip_in_the_reference_schema(en8k, tmp_path, is_training):
    reference = golden("v2.0-sample_S64")
    settings = settings_of(reference, is_training)
    path = str(tmp_path / "features.tf_record")
    written = write_squad_feature_file(V2_SAMPLE, path, en8k, settings)
    expected = reference["train_features" if is_training else "features"]
    assert written.num_records == len(expected) == read_feature_file(path).num_records
    names = {"unique_ids", *SEQUENCE_COLUMNS} | (set(LABEL_COLUMNS) if is_training else set())
    for record, feature in zip(parsed_records(path), expected):
        columns = record.features.feature
        assert set(columns) == names
        assert all(columns[name].WhichOneof("kind") == "int64_list" for name in names)
        assert list(columns["unique_ids"].int64_list.value) == [feature["unique_id"]]
        for name in SEQUENCE_COLUMNS:
            assert list(columns[name].int64_list.value) == feature[name]
        for name, field in LABEL_COLUMNS.items():
            if is_training:
                assert list(columns[name].int64_list.value) == [int(feature[field])]
    batch = next(iter(tf.data.TFRecordDataset(path).batch(1000).map(
        lambda records: parse_squad_record(records, settings.max_seq_length, is_training))))
    assert set(batch) == names and all(value.dtype == tf.int32 for value in batch.values())
    assert batch["input_ids"].shape == (len(expected), settings.max_seq_length)
    assert batch["unique_ids"].numpy().tolist() == [f["unique_id"] for f in expected]
    assert batch["p_mask"].numpy().tolist() == [f["p_mask"] for f in expected]


def test_eval_sidecar_holds_what_post_processing_needs(en8k, tmp_path):
    reference = golden("v2.0-sample_S384")
    path = str(tmp_path / "dev.tf_record")
    metadata = write_squad_feature_file(V2_SAMPLE, path, en8k).metadata
    dataset = load_json(V2_SAMPLE)
    contexts = [p["context"] for a in dataset["data"] for p in a["paragraphs"]]
    qas = [qa for a in dataset["data"] for p in a["paragraphs"] for qa in p["qas"]]
    assert metadata["paragraphs"] == contexts
    assert [(e["qas_id"], metadata["paragraphs"][e["paragraph_index"]]) for e in
            metadata["examples"]] == [(e.qas_id, e.paragraph_text) for e in
                                      read_squad_examples(V2_SAMPLE, False)]
    assert [e["answers"] for e in metadata["examples"]] == [
        [answer["text"] for answer in qa["answers"]] for qa in qas]
    keys = ("unique_id", "example_index", "doc_span_index", "paragraph_len",
            "tok_start_to_orig_index", "tok_end_to_orig_index", "token_is_max_context")
    assert [{k: f[k] for k in keys} for f in metadata["features"]] == [
        {k: f[k] for k in keys} for f in reference["features"]]
    for feature, reference_feature in zip(metadata["features"], reference["features"]):
        first_sep = reference_feature["input_ids"].index(en8k.sep_id)
        assert feature["doc_offset"] == first_sep + 1 == min(map(int, feature["token_is_max_context"]))
    assert (metadata["num_questions"], metadata["num_features"]) == (len(qas), 16)
    assert metadata["dropped_qas_ids"] == [] and metadata["skipped_qas_ids"] == []


def repeated_dataset(path, copies: int) -> str:
    dataset = load_json(V2_SAMPLE)
    data = []
    for index in range(copies):
        for article in copy.deepcopy(dataset["data"]):
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    qa["id"] += f"-{index}"
            data.append(article)
    return write_json(path, {"data": data})


def test_output_does_not_depend_on_the_number_of_workers(en8k, tmp_path):
    source = repeated_dataset(tmp_path / "squad.json", copies=6)  # 84 questions: two chunks
    outputs = []
    for workers in (1, 2):
        path = str(tmp_path / f"features_{workers}.tf_record")
        write_squad_feature_file(source, path, en8k,
                                 SquadFeatureSettings(64, 16, 16, is_training=True),
                                 num_workers=workers)
        with open(path, "rb") as records, open(path + ".json", "rb") as sidecar:
            outputs.append((records.read(), sidecar.read()))
    assert outputs[0] == outputs[1]
    examples = read_squad_examples(V2_SAMPLE, is_training=False)
    settings = SquadFeatureSettings(64, 16, 16)
    by_chunk = [list(convert_questions(examples, en8k.sp_model, True, settings,
                                       num_workers=workers, with_metadata=True,
                                       chunk_questions=1)) for workers in (1, 2)]
    assert by_chunk[0] == by_chunk[1]
    assert len(by_chunk[0]) == len(examples)


def test_feature_cache_reuses_and_rebuilds(en8k, tmp_path):
    cache_dir = str(tmp_path / "cache")
    first = squad_feature_file(V1_SAMPLE, en8k, SquadFeatureSettings(64, 16, 16), cache_dir)
    modified = os.path.getmtime(first.path)
    again = squad_feature_file(V1_SAMPLE, en8k, SquadFeatureSettings(64, 16, 16), cache_dir)
    assert again == first and os.path.getmtime(again.path) == modified
    other = squad_feature_file(V1_SAMPLE, en8k, SquadFeatureSettings(384, 128, 64), cache_dir)
    assert other.path != first.path
    assert (first.num_records, other.num_records) == (len(golden("v1.1-sample_S64")["features"]),
                                                      len(golden("v1.1-sample_S384")["features"]))


def test_a_cached_file_is_checked_for_the_squad_version_asked(en8k, tmp_path):
    cache_dir = str(tmp_path / "cache")
    built = squad_feature_file(V2_SAMPLE, en8k, SquadFeatureSettings(
        64, 16, 16, True, version_2_with_negative=True), cache_dir)
    assert built.metadata["num_questions"] == 14
    with pytest.raises(SquadDataError, match="question 5ad39d53604f3c001a3fe8d3: .*"
                                             "--version_2_with_negative"):
        squad_feature_file(V2_SAMPLE, en8k, SquadFeatureSettings(
            64, 16, 16, True, version_2_with_negative=False), cache_dir)


def test_a_paragraph_that_does_not_align_drops_its_questions_and_lists_them(en8k, tmp_path):
    dataset = load_json(V1_SAMPLE)
    dataset["data"][0]["paragraphs"].insert(1, {"context": UNALIGNABLE_CONTEXT, "qas": [
        {"id": "korean-1", "question": "What is the capital?",
         "answers": [{"text": "서울은", "answer_start": UNALIGNABLE_CONTEXT.index("서울은")}]},
        {"id": "korean-2", "question": "Which language?",
         "answers": [{"text": "한국어는", "answer_start": 0}]}]})
    source = write_json(tmp_path / "squad.json", dataset)
    keys, piece_text = paragraph_alignment_inputs(en8k, UNALIGNABLE_CONTEXT)
    assert banded_lcs_table_alignment(keys, piece_text) is None  # the reference drops it too
    for is_training in (False, True):
        path = str(tmp_path / f"features_{is_training}.tf_record")
        metadata = write_squad_feature_file(source, path, en8k, SquadFeatureSettings(
            384, 128, 64, is_training)).metadata
        assert metadata["dropped_qas_ids"] == ["korean-1", "korean-2"]
        assert metadata["num_questions"] == 10 and metadata["num_features"] == 9
        unique_ids = [r.features.feature["unique_ids"].int64_list.value[0]
                      for r in parsed_records(path)]
        assert unique_ids == list(range(FIRST_UNIQUE_ID, FIRST_UNIQUE_ID + 9))
    assert [e["qas_id"] for e in read_feature_file(str(tmp_path / "features_False.tf_record"))
            .metadata["examples"]][2:5] == ["56ddde6b9a695914005b962a", "korean-1", "korean-2"]
    example_indexes = {f["example_index"] for f in
                       read_feature_file(str(tmp_path / "features_False.tf_record"))
                       .metadata["features"]}
    assert example_indexes == {0, 1, 2, 5, 6, 7, 8, 9}


def test_an_answer_covering_no_piece_is_an_error_naming_the_question(en8k, tmp_path):
    # A lone combining accent vanishes in the pieces' text: its start snaps forward to the next
    # piece, its end back to the previous one (the reference fails an assertion here).
    context = "Rollo\u0301 led the Normans."
    dataset = one_paragraph_dataset(context, [{"id": "q-gap", "question": "What?", "answers": [
        {"text": "\u0301", "answer_start": 5}]}])
    examples = parse_squad_questions(dataset, is_training=True).examples
    with pytest.raises(SquadDataError, match="question q-gap: .*covers no piece"):
        list(convert_examples(examples, en8k.sp_model, True,
                              SquadFeatureSettings(is_training=True)))
    output = str(tmp_path / "features.tf_record")
    with pytest.raises(SquadDataError, match="question q-gap"):  # raised in a worker process
        write_squad_feature_file(write_json(tmp_path / "squad.json", dataset), output, en8k,
                                 SquadFeatureSettings(is_training=True), num_workers=2)
    assert not os.path.exists(output) and not os.path.exists(output + ".json")


def test_a_wordpiece_tokenizeris_refused(tmp_path):
    wordpiece = FullTokenizer(vocab_file=write_wordpiece_vocab(tmp_path, ["the"]))
    with pytest.raises(SquadDataError, match="SentencePiece"):
        dataset = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
            "context": "the cat", "qas": [{"id": "q", "question": "who?", "answers": []}]}]}]}
        write_squad_feature_file(write_json(tmp_path / "squad.json", dataset),
                                 str(tmp_path / "x.tf_record"), wordpiece)


@pytest.mark.parametrize("dataset, is_training, message", [
    ({"version": "1.1", "data": []}, False,
     "squad: error: {path}: no question (0 articles, 0 paragraphs): expected questions in "
     "data[].paragraphs[].qas[]"),
    ({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "abc", "qas": []}]}]},
     True, "squad: error: {path}: no question (1 articles, 1 paragraphs)"),
    ({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "abc def", "qas": [
        {"id": "q1", "question": "x?", "answers": [{"text": "zzz", "answer_start": 0}]}]}]}]},
     True, "squad: error: {path}: every one of its 1 training questions is skipped: their answer "
           "text is not found at answer_start (q1); check the offsets"),
])
def test_a_file_without_a_usable_question_is_refused(tmp_path, dataset, is_training, message):
    # It used to give a feature file of 0 records and exit status 0.
    path = write_json(tmp_path / "squad.json", dataset)
    output = tmp_path / "out" / "f.tfrecord"
    result = run_command("-m data_prep.squad", f"--input_file={path}", f"--output_file={output}",
                         f"--spm_model_file={spm_fixtures.cached_tiny_spm()}",
                         f"--is_training={is_training}", "--num_workers=1")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith(message.format(path=path))
    assert "Traceback" not in result.stderr and not output.parent.exists()


# -- command line ------------------------------------------------------------------------------------

def run_cli(*flags: str):
    return run_command("-m data_prep.squad", *flags)


@pytest.mark.requires_shared_data
def test_cli_writes_records_and_sidecar(tmp_path):
    output = str(tmp_path / "dev.tfrecord")
    result = run_cli(f"--input_file={V2_SAMPLE}", f"--output_file={output}",
                     f"--spm_model_file={EN8K_MODEL}", "--do_lower_case", "--max_seq_length=64",
                     "--doc_stride=16", "--max_query_length=16", "--nois_training",
                     "--version_2_with_negative", "--num_workers=2")
    assert result.returncode == 0, result.stderr
    assert "questions: 14  features: 179  dropped (paragraph does not align): 0" in result.stdout
    features = read_feature_file(output)
    assert features.num_records == 179 == len(parsed_records(output))
    assert features.metadata["features"][5]["unique_id"] == FIRST_UNIQUE_ID + 5


def test_cli_bad_input_exits_1_with_one_message(tmp_path):
    output = tmp_path / "x.tfrecord"
    result = run_cli("--input_file=/no/such/squad.json", f"--output_file={output}",
                     f"--spm_model_file={spm_fixtures.cached_tiny_spm()}")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "squad: error: SQuAD file not found: /no/such/squad.json")
    assert "Traceback" not in result.stderr
    assert not os.path.exists(output)


def v1_sample_with(tmp_path, change) -> str:
    """The v1.1 sample after ``change(dataset)``, written to tmp_path/squad.json."""
    dataset = load_json(V1_SAMPLE)
    change(dataset)
    return write_json(tmp_path / "squad.json", dataset)


def repeat_an_id(dataset: dict) -> None:
    dataset["data"][1]["paragraphs"][1]["qas"][0]["id"] = "56ddde6b9a695914005b962a"


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("case", ["repeated id", "squad 2.0 read as v1.1"])
def test_cli_refuses_bad_questions_before_converting(tmp_path, case):
    if case == "repeated id":
        source = v1_sample_with(tmp_path, repeat_an_id)
        message = (f"squad: error: {source}: question id '56ddde6b9a695914005b962a' appears twice, "
                   "at data[0].paragraphs[0].qas[2] and at data[1].paragraphs[1].qas[0]; ids "
                   "must be unique")
    else:
        source = V2_SAMPLE
        message = (f"squad: error: {source}: question 5ad39d53604f3c001a3fe8d3: an unanswerable "
                   "question (is_impossible is true): SQuAD 2.0 data needs "
                   "--version_2_with_negative")
    output = tmp_path / "x.tfrecord"
    result = run_cli(f"--input_file={source}", f"--output_file={output}",
                     f"--spm_model_file={EN8K_MODEL}", "--is_training", "--num_workers=1")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith(message)
    assert "Traceback" not in result.stderr and not os.path.exists(output)


@pytest.mark.requires_shared_data
def test_cli_skips_and_reports_training_answers_not_found_at_answer_start(en8k, tmp_path):
    def shift_an_answer(dataset):
        dataset["data"][1]["paragraphs"][1]["qas"][1]["answers"][0]["answer_start"] += 1

    def remove_that_question(dataset):
        del dataset["data"][1]["paragraphs"][1]["qas"][1]

    output = str(tmp_path / "train.tfrecord")
    result = run_cli(f"--input_file={v1_sample_with(tmp_path, shift_an_answer)}",
                     f"--output_file={output}", f"--spm_model_file={EN8K_MODEL}",
                     "--do_lower_case", "--max_seq_length=64", "--doc_stride=16",
                     "--max_query_length=16", "--is_training", "--num_workers=1")
    assert result.returncode == 0, result.stderr
    assert ("skipped 1 training questions whose answer text is not found at answer_start "
            "(56e16839cd28a01900c67888)") in result.stdout
    metadata = read_feature_file(output).metadata
    assert metadata["skipped_qas_ids"] == ["56e16839cd28a01900c67888"]
    assert metadata["num_questions"] == 7
    # The records are those of the file without that question.
    without = str(tmp_path / "without.tfrecord")
    os.makedirs(tmp_path / "other")
    write_squad_feature_file(v1_sample_with(tmp_path / "other", remove_that_question), without,
                             en8k, SquadFeatureSettings(64, 16, 16, is_training=True))
    with open(output, "rb") as records, open(without, "rb") as expected:
        assert records.read() == expected.read()
