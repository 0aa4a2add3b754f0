"""RACE reading, features, records and command line (data_prep/race.py, data_prep/multiple_choice/).

Real data: ../shared/data/race, 8 articles (31 questions) in both layouts (one JSON article per file,
and the reference's all.txt with one per line), and the features the reference's own race_utils built
from them (reference_golden/*.json: S=512/qa=128 and S=128/qa=32, en8k.model, do_lower_case). Invalid
inputs are real articles with one field broken here. Tests that need none of it (reading rules on
articles written here, feature layout, argument errors) run without the shared data.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.common.feature_cache import read_feature_file, write_feature_file
from data_prep.multiple_choice.feature_file import race_feature_file, write_race_records
from albert_tf.tasks.multiple_choice.records import parse_race_record, race_feature_spec
from data_prep.multiple_choice.features import (RaceFeatureSettings, check_lengths, choice_row,
                                                question_features, serialize_race_features)
from data_prep.multiple_choice.reader import (RaceDataError, RaceExamples, convert_examples,
                                              fill_in_option, race_sources, read_race_examples)
from tests import spm_fixtures
from tests.command_runner import run_command
from tests.shared_setup import EN8K_MODEL, SHARED_DATA_DIR

RACE_DIR = os.path.join(SHARED_DATA_DIR, "race")
PER_FILE_LAYOUT = RACE_DIR
ALL_TXT_LAYOUT = os.path.join(RACE_DIR, "all_txt_layout")
GOLDEN_DIR = os.path.join(RACE_DIR, "reference_golden")
GOLDEN_SETTINGS = [(512, 128), (128, 32)]
LAYOUTS = [PER_FILE_LAYOUT, ALL_TXT_LAYOUT]


def golden(max_seq_length: int, max_qa_length: int) -> list[dict]:
    path = os.path.join(GOLDEN_DIR, f"dev_S{max_seq_length}_qa{max_qa_length}.json")
    with open(path, encoding="utf-8") as handle:
        content = json.load(handle)
    assert content["settings"]["max_seq_length"] == max_seq_length
    assert content["settings"]["max_qa_length"] == max_qa_length
    return content["features"]


def real_articles(level: str) -> list[dict]:
    """The real dev articles of ``level``, parsed independently of the reader (all.txt lines)."""
    with open(os.path.join(ALL_TXT_LAYOUT, "RACE", "dev", level, "all.txt"), encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_race(data_dir, split: str, level: str, articles: list, all_txt: bool) -> list[str]:
    """Writes ``articles`` (dicts, or raw strings written as they are) in one layout; returns the paths."""
    directory = os.path.join(data_dir, "RACE", split, level)
    os.makedirs(directory, exist_ok=True)
    texts = [article if isinstance(article, str) else json.dumps(article) for article in articles]
    if all_txt:
        path = os.path.join(directory, "all.txt")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("".join(text + "\n" for text in texts))
        return [path]
    paths = []
    for index, text in enumerate(texts):
        paths.append(os.path.join(directory, f"{level}{index + 1}.txt"))
        with open(paths[-1], "w", encoding="utf-8") as handle:
            handle.write(text)
    return paths


def assert_equals_golden(examples, features: dict[str, np.ndarray], expected: list[dict]) -> None:
    """Every value of the features (arrays [N, 4, S] and [N]) equals the reference's, in order."""
    assert [(example.example_id.rsplit("-", 1)[0], example.level) for example in examples] == \
        [(feature["example_id"], feature["level"]) for feature in expected]
    for name in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(features[name], np.array([f[name] for f in expected]), err_msg=name)
    np.testing.assert_array_equal(features["label_ids"], [f["label_id"] for f in expected])


# -- golden equality -------------------------------------------------------------------------------

@pytest.mark.parametrize("data_dir", LAYOUTS, ids=["per_file", "all_txt"])
@pytest.mark.parametrize("max_seq_length,max_qa_length", GOLDEN_SETTINGS)
def test_features_equal_the_reference(en8k, data_dir, max_seq_length, max_qa_length):
    examples = read_race_examples(race_sources(data_dir, "dev")).examples
    features = list(convert_examples(examples, en8k, max_seq_length, max_qa_length))
    arrays = {name: np.array([getattr(f, name) for f in features])
              for name in ("input_ids", "input_mask", "segment_ids")}
    arrays["label_ids"] = np.array([f.label_id for f in features])
    assert_equals_golden(examples, arrays, golden(max_seq_length, max_qa_length))


@pytest.mark.parametrize("data_dir", LAYOUTS, ids=["per_file", "all_txt"])
@pytest.mark.parametrize("max_seq_length,max_qa_length", GOLDEN_SETTINGS)
def test_cached_records_parse_back_to_the_reference(en8k, tmp_path, data_dir, max_seq_length,
                                                    max_qa_length):
    feature_file = race_feature_file(data_dir, "dev", en8k,
                                     RaceFeatureSettings(max_seq_length, max_qa_length),
                                     str(tmp_path))
    records = list(tf.data.TFRecordDataset(feature_file.path).as_numpy_iterator())
    parsed = parse_race_record(tf.constant(records), max_seq_length)
    assert all(value.dtype == tf.int32 for value in parsed.values())
    assert parsed["input_ids"].shape == (31, 4, max_seq_length)
    np.testing.assert_array_equal(parsed["is_real_example"], np.ones(31))
    examples = read_race_examples(race_sources(data_dir, "dev")).examples
    assert_equals_golden(examples, {name: value.numpy() for name, value in parsed.items()},
                         golden(max_seq_length, max_qa_length))
    metadata = feature_file.metadata
    assert feature_file.num_records == 31
    assert metadata["example_ids"] == [example.example_id for example in examples]
    assert metadata["levels"] == [f["level"] for f in golden(max_seq_length, max_qa_length)]
    assert metadata["num_examples"] == {"middle": 14, "high": 17}
    assert (metadata["num_skipped_questions"], metadata["num_skipped_articles"]) == (0, 0)


@pytest.mark.requires_shared_data
def test_example_ids_are_unique_article_id_plus_question_index():
    examples = read_race_examples(race_sources(PER_FILE_LAYOUT, "dev")).examples
    ids = [example.example_id for example in examples]
    assert len(set(ids)) == len(ids) == 31
    assert ids[:4] == ["middle1.txt-0", "middle1.txt-1", "middle1.txt-2", "middle2.txt-0"]


# -- reading rules ---------------------------------------------------------------------------------

def test_fill_in_option_replaces_every_blank_or_appends():
    assert fill_in_option("he went _ to _ .", "home") == "he went home to home ."
    assert fill_in_option("where did he go?", "home") == "where did he go? home"


def test_text_is_normalized_as_the_tokenizer_expects(tmp_path):
    article = {"id": "a", "article": "  Café  ÉTÉ ", "questions": ["Who  is _?"],
               "options": [["Él", "B", "c", "D "]], "answers": ["A"]}
    write_race(tmp_path, "dev", "middle", [article], all_txt=True)
    write_race(tmp_path, "dev", "high", [dict(article, id="b")], all_txt=True)
    lowered = read_race_examples(race_sources(str(tmp_path), "dev")).examples[0]
    assert lowered.article == "cafe ete"
    assert lowered.qa_texts == ("who is el?", "who is b?", "who is c?", "who is d?")
    cased = read_race_examples(race_sources(str(tmp_path), "dev"), do_lower_case=False).examples[0]
    assert cased.article == "Cafe ETE" and cased.qa_texts[0] == "Who is El?"
    wordpiece = read_race_examples(race_sources(str(tmp_path), "dev"), use_spm=False).examples[0]
    assert wordpiece.article == article["article"]


@pytest.mark.requires_shared_data
def test_per_file_layout_reads_files_in_sorted_name_order(tmp_path):
    articles = real_articles("middle")[:3]
    directory = tmp_path / "RACE" / "train" / "middle"
    directory.mkdir(parents=True)
    for name, article in zip(["2.txt", "10.txt", "1.txt"], articles):
        (directory / name).write_text(json.dumps(article), encoding="utf-8")
    (directory / "notes.md").write_text("not an article", encoding="utf-8")
    sources = race_sources(str(tmp_path), "train", middle_only=True)
    assert [os.path.basename(source.path) for source in sources] == ["1.txt", "10.txt", "2.txt"]
    examples = read_race_examples(sources).examples
    article_order = list(dict.fromkeys(example.example_id.rsplit("-", 1)[0] for example in examples))
    assert article_order == [articles[2]["id"], articles[1]["id"], articles[0]["id"]]


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("level", ["middle", "high"])
def test_level_restriction_reads_one_level(level):
    only = {"middle_only": level == "middle", "high_only": level == "high"}
    for data_dir in LAYOUTS:
        examples = read_race_examples(race_sources(data_dir, "dev", **only)).examples
        expected = [f["example_id"] for f in golden(128, 32) if f["level"] == level]
        assert [example.example_id.rsplit("-", 1)[0] for example in examples] == expected
        assert {example.level for example in examples} == {level}


def test_missing_directories_and_bad_arguments_are_errors(tmp_path):
    with pytest.raises(RaceDataError, match="middle_only and high_only"):
        race_sources(str(tmp_path), "dev", middle_only=True, high_only=True)
    with pytest.raises(RaceDataError, match="unknown RACE split 'validation'"):
        race_sources(str(tmp_path), "validation")
    with pytest.raises(RaceDataError, match=r"RACE directory not found: .*RACE/train/middle"):
        race_sources(str(tmp_path), "train")
    (tmp_path / "RACE" / "dev" / "middle").mkdir(parents=True)
    with pytest.raises(RaceDataError, match="no all.txt and no \\*.txt"):
        race_sources(str(tmp_path), "dev", middle_only=True)


def test_a_level_in_both_layouts_is_refused_naming_the_directory_and_both_kinds(tmp_path):
    article = {"id": "a", "article": "text", "questions": ["q?"], "options": [["a", "b", "c", "d"]],
               "answers": ["A"]}
    articles = [dict(article, id=f"a{index}") for index in range(5)]
    write_race(tmp_path, "dev", "high", articles, all_txt=False)
    write_race(tmp_path, "dev", "high", articles, all_txt=True)
    directory = os.path.join(str(tmp_path), "RACE", "dev", "high")
    with pytest.raises(RaceDataError, match=re.escape(
            f"{directory}: holds both all.txt (one article per line) and 5 per-article *.txt files "
            "(high1.txt, high2.txt, high3.txt, ...); keep one layout")):
        race_sources(str(tmp_path), "dev", high_only=True)
    os.remove(os.path.join(directory, "all.txt"))
    assert len(race_sources(str(tmp_path), "dev", high_only=True)) == 5


# -- invalid data ----------------------------------------------------------------------------------

def with_question_broken(article: dict, index: int, **broken) -> dict:
    """A copy of ``article`` whose question ``index`` has options and/or answer replaced."""
    article = json.loads(json.dumps(article))
    if "options" in broken:
        article["options"][index] = broken["options"]
    if "answer" in broken:
        article["answers"][index] = broken["answer"]
    return article


BROKEN_QUESTIONS = {
    "three options": ({"options": ["a", "b", "c"]}, "expected 4 options, found 3"),
    "five options": ({"options": ["a", "b", "c", "d", "e"]}, "expected 4 options, found 5"),
    "letter E": ({"answer": "E"}, r"expected an answer letter from \['A', 'B', 'C', 'D'\], found 'E'"),
    "lowercase letter": ({"answer": "b"}, "found 'b'"),
}


@pytest.mark.parametrize("all_txt", [True, False], ids=["all_txt", "per_file"])
@pytest.mark.parametrize("case", sorted(BROKEN_QUESTIONS))
@pytest.mark.requires_shared_data
def test_invalid_question_names_file_line_and_question(tmp_path, all_txt, case):
    broken, message = BROKEN_QUESTIONS[case]
    articles = real_articles("middle")
    articles[1] = with_question_broken(articles[1], 1, **broken)
    paths = write_race(tmp_path, "dev", "middle", articles, all_txt)
    sources = race_sources(str(tmp_path), "dev", middle_only=True)
    place = f"{paths[0]}:2" if all_txt else paths[1]
    with pytest.raises(RaceDataError) as error:
        read_race_examples(sources)
    assert str(error.value).startswith(f"{place}: question 1 of article 'middle2.txt': ")
    assert error.match(message)
    result = read_race_examples(sources, skip_invalid=True)
    assert (result.num_skipped_questions, result.num_skipped_articles) == (1, 0)
    ids = [example.example_id for example in result.examples]
    assert len(ids) == 13 and "middle2.txt-1" not in ids and "middle2.txt-0" in ids


@pytest.mark.parametrize("all_txt", [True, False], ids=["all_txt", "per_file"])
@pytest.mark.requires_shared_data
def test_malformed_json_names_file_and_line(tmp_path, all_txt):
    articles = real_articles("high")
    articles[2] = json.dumps(articles[2])[:-40]  # cut off inside the article
    paths = write_race(tmp_path, "dev", "high", articles, all_txt)
    sources = race_sources(str(tmp_path), "dev", high_only=True)
    place = f"{paths[0]}:3" if all_txt else paths[2]
    with pytest.raises(RaceDataError, match=f"^{re.escape(place)}: malformed JSON: "):
        read_race_examples(sources)
    result = read_race_examples(sources, skip_invalid=True)
    assert (result.num_skipped_questions, result.num_skipped_articles) == (0, 1)
    assert len(result.examples) == 17 - len(real_articles("high")[2]["questions"])
    assert not any(example.example_id.startswith("high3.txt-") for example in result.examples)


@pytest.mark.parametrize("change,message", [
    (lambda a: a.pop("answers"), r"article lacks the keys \['answers'\]"),
    (lambda a: a["answers"].pop(), "article 'middle1.txt' has 3 questions, 3 option lists and 2 answers"),
    (lambda a: a.update(id=7), "'id' must be a string, found int"),
])
@pytest.mark.requires_shared_data
def test_unusable_article_is_an_error_or_skipped_whole(tmp_path, change, message):
    articles = real_articles("middle")
    change(articles[0])
    paths = write_race(tmp_path, "dev", "middle", articles, all_txt=True)
    sources = race_sources(str(tmp_path), "dev", middle_only=True)
    with pytest.raises(RaceDataError, match=f"^{re.escape(paths[0])}:1: {message}"):
        read_race_examples(sources)
    result = read_race_examples(sources, skip_invalid=True)
    assert (result.num_skipped_questions, result.num_skipped_articles) == (0, 1)
    assert len(result.examples) == 14 - 3


@pytest.mark.requires_shared_data
def test_repeated_article_id_names_both_places(tmp_path):
    articles = real_articles("middle")
    write_race(tmp_path, "dev", "middle", articles, all_txt=True)
    high = write_race(tmp_path, "dev", "high", [articles[0]], all_txt=False)
    with pytest.raises(RaceDataError, match=f"^{re.escape(high[0])}: article id 'middle1.txt' was "
                                            f"already read from .*middle/all.txt:1$"):
        read_race_examples(race_sources(str(tmp_path), "dev"))


def test_no_valid_question_left_is_an_error(tmp_path):
    write_race(tmp_path, "dev", "middle", ["{"], all_txt=True)
    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(), do_lower_case=True)
    with pytest.raises(RaceDataError, match="no valid questions"):
        race_feature_file(str(tmp_path), "dev", tokenizer,
                          RaceFeatureSettings(128, 32, middle_only=True, skip_invalid=True),
                          str(tmp_path / "cache"))


# -- feature layout and records --------------------------------------------------------------------

def test_choice_row_keeps_last_qa_pieces_and_cuts_the_article_end():
    article, qa = list(range(100, 110)), list(range(200, 206))
    input_ids, input_mask, segment_ids = choice_row(article, qa, 12, 4, cls_id=2, sep_id=3)
    # qa keeps its last 4 pieces; the article keeps 12 - 3 - 4 = 5 pieces from its start.
    assert input_ids == [2, 100, 101, 102, 103, 104, 3, 202, 203, 204, 205, 3]
    assert segment_ids == [0] * 7 + [1] * 5 and input_mask == [1] * 12
    input_ids, input_mask, segment_ids = choice_row([100], [200], 8, 4, cls_id=2, sep_id=3)
    assert input_ids == [2, 100, 3, 200, 3, 0, 0, 0]
    assert input_mask == [1] * 5 + [0] * 3 and segment_ids == [0, 0, 0, 1, 1, 0, 0, 0]


def test_lengths_that_cannot_hold_the_qa_are_rejected():
    check_lengths(131, 128)
    with pytest.raises(ValueError, match=r"max_seq_length \(130\) must be >= max_qa_length \+ 3"):
        check_lengths(130, 128)
    with pytest.raises(ValueError, match="max_qa_length must be >= 1"):
        check_lengths(128, 0)


def test_record_round_trip_single_and_batch(en8k):
    examples = read_race_examples(race_sources(ALL_TXT_LAYOUT, "dev")).examples[:3]
    features = list(convert_examples(examples, en8k, 64, 16))
    serialized = [serialize_race_features(f) for f in features]
    flat = tf.io.parse_single_example(serialized[0], race_feature_spec(64))
    assert flat["input_ids"].shape == (4 * 64,) and flat["input_ids"].dtype == tf.int64
    np.testing.assert_array_equal(flat["input_ids"], np.concatenate(features[0].input_ids))
    single = parse_race_record(serialized[1], 64)
    assert single["input_ids"].shape == (4, 64) and single["label_ids"].shape == ()
    for name in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(single[name], getattr(features[1], name))
    assert int(single["label_ids"]) == features[1].label_id and int(single["is_real_example"]) == 1
    batch = parse_race_record(tf.constant(serialized), 64)
    assert batch["segment_ids"].shape == (3, 4, 64) and batch["label_ids"].dtype == tf.int32
    np.testing.assert_array_equal(batch["segment_ids"], [f.segment_ids for f in features])
    np.testing.assert_array_equal(batch["label_ids"], [f.label_id for f in features])


def test_question_features_needs_four_options():
    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(), do_lower_case=True)
    with pytest.raises(ValueError, match="expected 4 question\\+option texts, got 3"):
        question_features([5, 6], ["a", "b", "c"], 0, tokenizer, 32, 8)


def test_write_race_records_metadata_counts_levels_and_skips(en8k, tmp_path):
    examples = read_race_examples(race_sources(PER_FILE_LAYOUT, "dev", high_only=True)).examples
    examples = RaceExamples(examples, num_skipped_questions=2, num_skipped_articles=1)
    path = str(tmp_path / "high.tfrecord")
    written = write_feature_file(
        path, lambda sink: write_race_records(sink, examples, en8k, RaceFeatureSettings(128, 32)))
    reread = read_feature_file(path)
    assert reread.num_records == written.num_records == 17
    assert reread.metadata["num_examples"] == {"middle": 0, "high": 17}
    assert reread.metadata["levels"] == ["high"] * 17
    assert (reread.metadata["num_skipped_questions"], reread.metadata["num_skipped_articles"]) == (2, 1)


# -- command line ----------------------------------------------------------------------------------

def run_cli(*arguments: str):
    return run_command("-m data_prep.race", *arguments)


@pytest.mark.requires_shared_data
def test_command_line_writes_the_reference_records(tmp_path):
    output = str(tmp_path / "dev.tfrecord")
    result = run_cli(f"--data_dir={ALL_TXT_LAYOUT}", "--split=dev", f"--spm_model_file={EN8K_MODEL}",
                     "--do_lower_case", "--max_seq_length=128", "--max_qa_length=32",
                     f"--output_file={output}")
    assert result.returncode == 0, result.stderr
    assert "wrote 31 dev questions (middle 14, high 17)" in result.stdout
    records = list(tf.data.TFRecordDataset(output).as_numpy_iterator())
    parsed = parse_race_record(tf.constant(records), 128)
    expected = golden(128, 32)
    np.testing.assert_array_equal(parsed["input_ids"], [f["input_ids"] for f in expected])
    np.testing.assert_array_equal(parsed["segment_ids"], [f["segment_ids"] for f in expected])
    np.testing.assert_array_equal(parsed["label_ids"], [f["label_id"] for f in expected])
    assert read_feature_file(output).metadata["levels"] == [f["level"] for f in expected]


@pytest.mark.requires_shared_data
def test_command_line_bad_input_exits_1_with_one_message(tmp_path):
    articles = real_articles("middle")
    articles[0] = with_question_broken(articles[0], 2, answer="F")
    path = write_race(tmp_path, "dev", "middle", articles, all_txt=True)[0]
    common = ["--split=dev", f"--spm_model_file={EN8K_MODEL}", "--middle_only",
              f"--output_file={tmp_path / 'out.tfrecord'}"]
    result = run_cli(f"--data_dir={tmp_path}", *common)
    assert result.returncode == 1
    assert f"race: error: {path}:1: question 2 of article 'middle1.txt'" in result.stderr
    assert "Traceback" not in result.stderr and not os.path.exists(tmp_path / "out.tfrecord")
    skipping = run_cli(f"--data_dir={tmp_path}", *common, "--skip_invalid")
    assert skipping.returncode == 0, skipping.stderr
    assert "wrote 13 dev questions" in skipping.stdout and "skipped 1 questions" in skipping.stdout


@pytest.mark.requires_shared_data
def test_command_line_failed_rerun_keeps_the_earlier_output(tmp_path):
    articles = real_articles("middle")
    write_race(tmp_path, "dev", "middle", articles, all_txt=True)
    output = tmp_path / "out" / "dev.tfrecord"
    common = [f"--data_dir={tmp_path}", "--split=dev", f"--spm_model_file={EN8K_MODEL}",
              "--middle_only", f"--output_file={output}"]
    assert run_cli(*common).returncode == 0
    before = {name: (output.parent / name).read_bytes() for name in os.listdir(output.parent)}
    articles[3] = with_question_broken(articles[3], 1, options=["a", "b", "c"])
    write_race(tmp_path, "dev", "middle", articles, all_txt=True)
    result = run_cli(*common)
    assert result.returncode == 1 and "expected 4 options, found 3" in result.stderr
    assert {name: (output.parent / name).read_bytes()
            for name in os.listdir(output.parent)} == before


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("case", ["both layouts", "three options"])
def test_command_line_refuses_bad_data_naming_it(tmp_path, case):
    articles = real_articles("middle")
    if case == "both layouts":
        write_race(tmp_path, "dev", "middle", articles, all_txt=False)
        directory = os.path.join(str(tmp_path), "RACE", "dev", "middle")
        message = (f"race: error: {directory}: holds both all.txt (one article per line) and 4 "
                   "per-article *.txt files (middle1.txt, middle2.txt, middle3.txt, ...)")
    else:
        articles[3] = with_question_broken(articles[3], 1, options=["a", "b", "c"])
        message = ("race: error: {path}:4: question 1 of article 'middle4.txt': expected 4 "
                   "options, found 3")
    path = write_race(tmp_path, "dev", "middle", articles, all_txt=True)[0]
    output = tmp_path / "out.tfrecord"
    result = run_cli(f"--data_dir={tmp_path}", "--split=dev", f"--spm_model_file={EN8K_MODEL}",
                     "--middle_only", f"--output_file={output}")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith(message.format(path=path))
    assert "Traceback" not in result.stderr and not os.path.exists(output)
