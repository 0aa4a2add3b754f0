"""GLUE processors, the task table, features, TFRecords and their cache (data_prep/glue*.py).

Real files: ../shared/data/glue (SST-2, RTE, WNLI re-splits with labels; MRPC and STS-B samples),
for the tests marked requires_shared_data or using en8k. Other tasks, and the RTE and STS-B files the
error tests edit: small files in GLUE's exact layouts, written here. Expected values come from the data
documentation (SOURCES.md counts), a naive independent split of the raw lines, or hand-built lists.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import uuid

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.normalization import preprocess_text
from albert_tf.tasks.classification.records import parse_glue_example
from data_prep.classification.features import (GlueFeatureSettings, build_features,
                                               cached_glue_features, convert_example,
                                               convert_examples_to_features,
                                               serialize_glue_features, write_features)
from data_prep.classification.glue_tasks import GLUE_TASKS, get_processor, glue_task
from data_prep.classification.processors import GlueDataError, InputExample, read_tsv
from data_prep.common import feature_cache
from data_prep.common.feature_cache import read_feature_file, sidecar_path, write_feature_file
from data_prep.common.pair_truncation import truncate_seq_pair
from tests import spm_fixtures
from tests.command_runner import run_command
from tests.shared_setup import EN8K_MODEL, GLUE_DIR

# RTE's train.tsv layout (LF endings) and STS-B's (CRLF endings), rows made up: what the error tests
# edit line by line.
RTE_TRAIN_LINES = [b"index\tsentence1\tsentence2\tlabel"] + [
    f"{index}\tThe baker number {index} kneads the dough for ten minutes.\tA baker kneads dough."
    f"\t{'entailment' if index % 3 else 'not_entailment'}".encode() for index in range(1, 300)]
STSB_HEADER = b"index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
STSB_TRAIN_LINES = [STSB_HEADER] + [
    f"{index}\tmain-captions\tMSRvid\t2012test\t{index:04d}\tnone\tnone\tA man is playing flute "
    f"{index}.\tA man plays a flute.\t{index % 6 * 0.8:.3f}".encode() for index in range(12)] + [b""]


@pytest.fixture(scope="module")
def tiny() -> FullTokenizer:
    """A SentencePiece tokenizer without the shared data (tests/spm_fixtures.py)."""
    return FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(), do_lower_case=True)


def raw_rows(path: str) -> list[list[str]]:
    """Independent reading of a TSV: split each physical line on tabs (no csv module)."""
    with open(path, "rb") as handle:
        return [line.decode("utf-8").rstrip("\r\n").split("\t") for line in handle]


def write_tsv(path, rows: list[list[str]], line_ending: str = "\n") -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write("".join("\t".join(row) + line_ending for row in rows))
    return str(path)


def label_counts(examples) -> dict:
    return dict(collections.Counter(example.label for example in examples))


# -- processors on the real files ------------------------------------------------------------------

@pytest.mark.requires_shared_data
def test_sst2_real_splits_counts_labels_and_text():
    processor = get_processor("SST-2")
    train = processor.get_examples(GLUE_DIR, "train")
    dev = processor.get_examples(GLUE_DIR, "dev")
    test = processor.get_examples(GLUE_DIR, "test")
    # Counts from SOURCES.md.
    assert len(train) == 60614 and label_counts(train) == {"0": 26786, "1": 33828}
    assert len(dev) == 6735 and label_counts(dev) == {"0": 2994, "1": 3741}
    # test.tsv here is labelled ("sentence\tlabel"), so it is read with gold labels.
    assert len(test) == 872 and label_counts(test) == {"0": 428, "1": 444}
    assert test[0] == InputExample("test-1", "it 's a charming and often affecting journey .", None, "1")
    raw = raw_rows(os.path.join(GLUE_DIR, "SST-2", "train.tsv"))
    assert raw[1] == ["when are bears bears and ", "1"]
    # SP mode strips the trailing space and lowercases; guid = "<split>-<line index>".
    assert train[0] == InputExample("train-1", "when are bears bears and", None, "1")
    assert [e.text_a for e in train[:50]] == [" ".join(r[0].split()).lower() for r in raw[1:51]]


@pytest.mark.requires_shared_data
def test_wordpiece_mode_keeps_text_untouched():
    processor = get_processor("sst-2", use_spm=False)
    dev = processor.get_examples(GLUE_DIR, "dev")
    raw = raw_rows(os.path.join(GLUE_DIR, "SST-2", "dev.tsv"))
    assert [e.text_a for e in dev] == [row[0] for row in raw[1:]]


@pytest.mark.parametrize("task, counts", [
    ("rte", {"train": {"entailment": 627, "not_entailment": 617},
             "dev": {"entailment": 70, "not_entailment": 69},
             "test": {"entailment": 698, "not_entailment": 686}}),
    ("wnli", {"train": {"0": 288, "1": 277}, "dev": {"0": 35, "1": 35}, "test": {"0": 40, "1": 31}}),
])
@pytest.mark.requires_shared_data
def test_rte_wnli_real_splits(task, counts):
    processor = get_processor(task)
    directory = {"rte": "RTE", "wnli": "WNLI"}[task]
    for split, expected in counts.items():
        examples = processor.get_examples(GLUE_DIR, split)
        assert label_counts(examples) == expected, split
        raw = raw_rows(os.path.join(GLUE_DIR, directory, f"{split}.tsv"))[1:]
        assert [e.guid for e in examples] == [row[0] for row in raw]
        assert [e.text_a for e in examples] == [preprocess_text(row[1], lower=True) for row in raw]
        assert [e.text_b for e in examples] == [preprocess_text(row[2], lower=True) for row in raw]


@pytest.mark.requires_shared_data
def test_mrpc_literal_quotes_and_crlf():
    processor = get_processor("mrpc", do_lower_case=False)
    train = processor.get_examples(GLUE_DIR, "train")
    dev = processor.get_examples(GLUE_DIR, "dev")
    raw = raw_rows(os.path.join(GLUE_DIR, "MRPC", "dev.tsv"))
    # Line 2: the second sentence starts with a literal quote; with csv quoting it would swallow the
    # following lines. Line 3 has a quoted span in the middle.
    assert raw[1][4].startswith('" The foodservice')
    assert train[0].text_b == '" The foodservice pie business does not fit our long-term growth strategy .'
    assert '" 100 percent behind George Bush "' in train[1].text_b
    assert len(train) == len(dev) == 6
    assert [e.label for e in dev] == [row[0] for row in raw[1:]]
    assert [(e.text_a, e.text_b) for e in dev] == [(row[3], row[4]) for row in raw[1:]]
    # train.tsv is the same content with CRLF endings: no "\r" may leak into the last column.
    assert [(e.text_a, e.text_b, e.label) for e in train] == [(e.text_a, e.text_b, e.label) for e in dev]
    assert [e.guid for e in train] == [f"train-{i}" for i in range(1, 7)]


@pytest.mark.requires_shared_data
def test_stsb_float_labels():
    processor = get_processor("sts-b")
    assert processor.is_regression and processor.get_labels() is None and processor.num_labels() == 1
    for split in ("train", "dev"):
        examples = processor.get_examples(GLUE_DIR, split)
        raw = raw_rows(os.path.join(GLUE_DIR, "STS-B", f"{split}.tsv"))[1:]
        assert [e.label for e in examples] == [float(row[9]) for row in raw]
        assert all(isinstance(e.label, float) for e in examples)
        assert [e.guid for e in examples] == [row[0] for row in raw]
        assert [e.text_b for e in examples] == [row[8].lower() for row in raw]
    assert processor.get_examples(GLUE_DIR, "dev")[1].label == 4.75


# -- processors on small files in GLUE's layouts ---------------------------------------------------

def test_cola_header_only_in_test(tmp_path):
    train_rows = [["gj04", "1", "", "Our friends won't buy this analysis."],
                  ["gj04", "0", "*", "They drank the pub."]]
    write_tsv(tmp_path / "CoLA" / "train.tsv", train_rows)
    write_tsv(tmp_path / "CoLA" / "dev.tsv", train_rows[::-1])
    write_tsv(tmp_path / "CoLA" / "test.tsv", [["index", "sentence"], ["0", "Bill whistled past the house."],
                                                ["1", "The car honked its way."]])
    processor = get_processor("cola", do_lower_case=False)
    train = processor.get_examples(str(tmp_path), "train")
    assert train == [InputExample("train-0", "Our friends won't buy this analysis.", None, "1"),
                     InputExample("train-1", "They drank the pub.", None, "0")]
    assert [e.guid for e in processor.get_examples(str(tmp_path), "dev")] == ["dev-0", "dev-1"]
    assert processor.get_examples(str(tmp_path), "test") == [
        InputExample("0", "Bill whistled past the house.", None, None),
        InputExample("1", "The car honked its way.", None, None)]


def test_sst2_glue_test_layout_is_unlabelled(tmp_path):
    write_tsv(tmp_path / "SST-2" / "test.tsv", [["index", "sentence"], ["0", "uneasy mishmash ."],
                                                 ["1", "a gorgeous film "]])
    examples = get_processor("sst-2").get_examples(str(tmp_path), "test")
    assert examples == [InputExample("0", "uneasy mishmash .", None, None),
                        InputExample("1", "a gorgeous film", None, None)]


def test_qqp_short_rows_skipped_and_counted(tmp_path, caplog):
    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    write_tsv(tmp_path / "QQP" / "train.tsv", [
        header,
        ["201359", "303345", "303346", "Why are African-Americans so beautiful?",
         "Why are hispanics so beautiful?", "0"],
        ["263843", "69383", "380476", "I want to pursue PhD in Computer Science about social network"],
        ["5", "11", "12", "Astrology: I am a Capricorn Sun Cap moon and cap rising...what does that say?",
         "I'm a triple Capricorn (Sun, Moon and ascendant in Capricorn) What does this say about me?", "1"],
    ])
    write_tsv(tmp_path / "QQP" / "test.tsv", [["id", "question1", "question2"],
                                               ["0", "Why do rockets look white?", "Why are rockets white?"]])
    processor = get_processor("qqp")
    with caplog.at_level(logging.WARNING):
        train = processor.get_examples(str(tmp_path), "train")
    assert [(e.guid, e.label) for e in train] == [("201359", "0"), ("5", "1")]
    assert "skipped 1 rows" in caplog.text and "train.tsv" in caplog.text
    assert train[1].text_a.startswith("astrology: i am a capricorn")
    assert processor.get_examples(str(tmp_path), "test") == [
        InputExample("0", "why do rockets look white?", "why are rockets white?", None)]


MNLI_TRAIN_HEADER = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                     "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
                     "sentence2", "label1", "gold_label"]
MNLI_DEV_HEADER = MNLI_TRAIN_HEADER[:11] + ["label2", "label3", "label4", "label5", "gold_label"]


def mnli_row(index, sentence1, sentence2, labels):
    return [str(index), "31193", f"{index}n", "government", "( ... )", "( ... )", "(ROOT ...)",
            "(ROOT ...)", sentence1, sentence2] + labels


def test_mnli_matched_and_mismatched(tmp_path):
    write_tsv(tmp_path / "MNLI" / "train.tsv", [
        MNLI_TRAIN_HEADER,
        mnli_row(0, "Conceptually cream skimming has two basic dimensions.",
                 "Product and geography are what make cream skimming work. ", ["neutral", "neutral"])])
    write_tsv(tmp_path / "MNLI" / "dev_matched.tsv", [
        MNLI_DEV_HEADER,
        mnli_row(7, "The new rights are nice enough", "Everyone really likes the newest benefits ",
                 ["neutral", "entailment", "neutral", "neutral", "neutral", "neutral"])])
    write_tsv(tmp_path / "MNLI" / "dev_mismatched.tsv", [
        MNLI_DEV_HEADER,
        mnli_row(9, "Your contribution helped make it possible", "Your contributions were of no help.",
                 ["contradiction"] * 6)])
    write_tsv(tmp_path / "MNLI" / "test_matched.tsv", [MNLI_TRAIN_HEADER[:10], mnli_row(3, "A b", "C d", [])])
    write_tsv(tmp_path / "MNLI" / "test_mismatched.tsv", [MNLI_TRAIN_HEADER[:10], mnli_row(4, "E", "F", [])])
    data_dir = str(tmp_path)
    matched, mismatched = get_processor("MNLI"), get_processor("mismnli")
    assert matched.get_labels() == mismatched.get_labels() == ["contradiction", "entailment", "neutral"]
    assert matched.get_examples(data_dir, "train") == mismatched.get_examples(data_dir, "train") == [
        InputExample("0", "conceptually cream skimming has two basic dimensions.",
                     "product and geography are what make cream skimming work.", "neutral")]
    assert matched.get_examples(data_dir, "dev")[0].label == "neutral"  # gold_label, not label1
    assert mismatched.get_examples(data_dir, "dev") == [
        InputExample("9", "your contribution helped make it possible", "your contributions were of no help.",
                     "contradiction")]
    assert matched.get_examples(data_dir, "test") == [InputExample("3", "a b", "c d", None)]
    assert mismatched.get_examples(data_dir, "test") == [InputExample("4", "e", "f", None)]


def test_qnli_and_ax(tmp_path):
    write_tsv(tmp_path / "QNLI" / "dev.tsv", [
        ["index", "question", "sentence", "label"],
        ["0", "What came into force after the new constitution was herald?",
         "As of that day, the new constitution heralding the Second Republic came into force.",
         "entailment"]])
    write_tsv(tmp_path / "QNLI" / "test.tsv", [["index", "question", "sentence"], ["0", "Q?", "S."]])
    write_tsv(tmp_path / "diagnostic" / "diagnostic.tsv", [
        ["index", "sentence1", "sentence2"],
        ["0", "The cat sat on the mat.", "The cat did not sit on the mat."]])
    qnli = get_processor("qnli")
    assert qnli.get_labels() == ["entailment", "not_entailment"]
    assert qnli.get_examples(str(tmp_path), "dev")[0].label == "entailment"
    assert qnli.get_examples(str(tmp_path), "test") == [InputExample("0", "q?", "s.", None)]
    ax = get_processor("ax")
    assert ax.get_labels() == ["contradiction", "entailment", "neutral"]
    assert ax.get_examples(str(tmp_path), "test") == [
        InputExample("0", "the cat sat on the mat.", "the cat did not sit on the mat.", None)]
    with pytest.raises(GlueDataError, match="no 'train' split"):
        ax.get_examples(str(tmp_path), "train")


def test_registry():
    assert set(GLUE_TASKS) == {"cola", "sst-2", "mrpc", "sts-b", "qqp", "mnli", "mismnli", "qnli", "rte",
                               "wnli", "ax"}
    with pytest.raises(GlueDataError, match=r"unknown GLUE task_name 'stsb'.*'sts-b'"):
        get_processor("stsb")
    assert glue_task("RTE").recipe.flags()[:5] == [
        "--warmup_step=200", "--learning_rate=3e-05", "--train_step=800", "--save_checkpoints_steps=100",
        "--train_batch_size=32"]


def test_task_table():
    for name, task in GLUE_TASKS.items():
        assert task.name == name and glue_task(name.upper()) is task
        assert all(key in GLUE_TASKS for _, key in task.eval_sets)
        assert task.labels == task.processor.get_labels() and task.num_labels == (len(task.labels or [0]))
    assert glue_task("mnli").eval_sets == (("", "mnli"), ("mismatched", "mismnli"))
    assert glue_task("mismnli").eval_sets == (("", "mismnli"),)
    assert glue_task("mismnli").recipe == glue_task("mnli").recipe
    assert glue_task("sts-b").is_regression and glue_task("sts-b").labels is None
    assert glue_task("sts-b").num_labels == 1 and glue_task("sts-b").metric_kinds == ("pearson", "spearman",
                                                                                        "mse")
    assert glue_task("mrpc").metric_kinds == glue_task("qqp").metric_kinds == ("accuracy", "f1")
    assert glue_task("ax").recipe is None and glue_task("ax").labels == glue_task("mnli").labels
    assert [name for name, task in GLUE_TASKS.items() if task.recipe and task.recipe.encoder_dropout] == [
        "qqp", "rte", "wnli"]
    with pytest.raises(ValueError, match="selection_metric 'pearson' is not one of its metrics"):
        dataclasses.replace(glue_task("rte"), selection_metric="pearson")


# -- malformed input -------------------------------------------------------------------------------

def test_wrong_column_count_names_file_and_line(tmp_path):
    path = write_tsv(tmp_path / "RTE" / "train.tsv", [
        ["index", "sentence1", "sentence2", "label"], ["0", "A.", "B.", "entailment"],
        ["1", "A.", "B.", "entailment", "extra"]])
    with pytest.raises(GlueDataError, match=rf"{path}:3: expected 4 tab-separated columns, found 5"):
        get_processor("rte").get_examples(str(tmp_path), "train")


def test_short_qqp_test_row_is_an_error(tmp_path):
    path = write_tsv(tmp_path / "QQP" / "test.tsv", [["id", "question1", "question2"], ["0", "Only one?"]])
    with pytest.raises(GlueDataError, match=rf"{path}:2: expected 3"):
        get_processor("qqp").get_examples(str(tmp_path), "test")


def test_unknown_label_names_file_and_line(tmp_path):
    path = write_tsv(tmp_path / "RTE" / "dev.tsv", [
        ["index", "sentence1", "sentence2", "label"], ["0", "A.", "B.", "entailment"],
        ["1", "A.", "B.", "contradiction"]])
    with pytest.raises(GlueDataError, match=rf"{path}:3: unknown label 'contradiction'"):
        get_processor("rte").get_examples(str(tmp_path), "dev")


def stsb_lines_with_score(score: str, row: int = 3) -> list[bytes]:
    """STSB_TRAIN_LINES (to join with CRLF) with the score of 1-based line ``row`` replaced."""
    lines = list(STSB_TRAIN_LINES)
    cells = lines[row - 1].split(b"\t")
    lines[row - 1] = b"\t".join(cells[:-1] + [score.encode()])
    return lines


@pytest.mark.parametrize("score", ["nan", "NaN", "-0.5", "5.01", "inf", "-inf", "high", ""])
def test_stsb_score_outside_0_to_5_names_file_and_line(tmp_path, score):
    path = tmp_path / "STS-B" / "train.tsv"
    path.parent.mkdir()
    path.write_bytes(b"\r\n".join(stsb_lines_with_score(score)))
    with pytest.raises(GlueDataError, match=rf"^{path}:3: expected a score from 0 to 5, "
                                            rf"found '{score}'$"):
        get_processor("sts-b").get_examples(str(tmp_path), "train")


def test_stsb_scores_0_and_5_are_valid(tmp_path):
    path = tmp_path / "STS-B" / "train.tsv"
    path.parent.mkdir()
    lines = stsb_lines_with_score("0")
    lines[3] = stsb_lines_with_score("5.000", row=4)[3]
    path.write_bytes(b"\r\n".join(lines))
    labels = [e.label for e in get_processor("sts-b").get_examples(str(tmp_path), "train")]
    expected = [float(line.split(b"\t")[9]) for line in STSB_TRAIN_LINES[1:-1]]
    expected[1], expected[2] = 0.0, 5.0
    assert labels == expected


def test_missing_split_names_the_expected_path(tmp_path):
    with pytest.raises(GlueDataError, match=r"train file .* not found: .*STS-B/train.tsv"):
        get_processor("sts-b").get_examples(str(tmp_path), "train")


def rte_lines(count: int) -> list[bytes]:
    """The first ``count`` lines of RTE_TRAIN_LINES (header first), without their line endings."""
    return RTE_TRAIN_LINES[:count]


def join_lines(lines: list[bytes], endings: dict[int, bytes], default: bytes = b"\n") -> bytes:
    """The lines joined, line i (1-based) ended by ``endings.get(i, default)``."""
    return b"".join(line + endings.get(number, default) for number, line in enumerate(lines, 1))


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_invalid_utf8_is_reported_at_its_line(tmp_path, ending):
    lines = rte_lines(200)
    lines[150] = lines[150].replace(b" ", b" \xff", 1)  # line 151
    path = tmp_path / "RTE" / "train.tsv"
    path.parent.mkdir()
    path.write_bytes(join_lines(lines, {}, default=ending))
    byte = lines[150].index(b"\xff") + 1
    with pytest.raises(GlueDataError, match=rf"^{path}:151: not valid UTF-8 \(byte 0xff at byte "
                                            rf"{byte} of the line"):
        get_processor("rte").get_examples(str(tmp_path), "train")


def test_every_error_counts_lines_at_line_feeds_only(tmp_path):
    """A lone CR, U+2028 and U+0085 inside three lines before line 151 are characters of those
    lines, not line ends: the decoding error and the column-count error name the same line (151),
    the line on which each fault was written."""
    path = tmp_path / "RTE" / "train.tsv"
    path.parent.mkdir()

    def with_separators(lines: list[bytes]) -> list[bytes]:
        for index in (9, 49, 99):
            lines[index] = lines[index].replace(b" ", b" \r\xe2\x80\xa8\xc2\x85 ", 1)
        return lines

    lines = with_separators(rte_lines(200))
    lines[150] += b"\textra"
    path.write_bytes(join_lines(lines, {}))
    with pytest.raises(GlueDataError, match=rf"^{path}:151: expected 4 tab-separated columns, found 5"):
        get_processor("rte").get_examples(str(tmp_path), "train")
    lines = with_separators(rte_lines(200))
    lines[150] = b"\xc3" + lines[150]
    path.write_bytes(join_lines(lines, {}))
    with pytest.raises(GlueDataError, match=rf"^{path}:151: not valid UTF-8 \(byte 0xc3 at byte 1 "):
        get_processor("rte").get_examples(str(tmp_path), "train")
    lines = rte_lines(8)
    lines[5] = lines[5] + b"\xe2\x82"  # a truncated 3-byte sequence on line 6 of an old-Mac file
    path.write_bytes(join_lines(lines, {}, default=b"\r"))
    with pytest.raises(GlueDataError, match=rf"^{path}:6: not valid UTF-8"):
        get_processor("rte").get_examples(str(tmp_path), "train")


def test_old_mac_line_endings_read_like_lf(tmp_path):
    lines = rte_lines(30)
    for name, ending in (("lf", b"\n"), ("cr", b"\r")):
        (tmp_path / name / "RTE").mkdir(parents=True)
        (tmp_path / name / "RTE" / "train.tsv").write_bytes(join_lines(lines, {}, default=ending))
    processor = get_processor("rte")
    from_cr = processor.get_examples(str(tmp_path / "cr"), "train")
    assert len(from_cr) == 29 and from_cr == processor.get_examples(str(tmp_path / "lf"), "train")


@pytest.mark.parametrize("task, content, found", [
    ("rte", "index\tsentence1\tsentence2\tlabel\n", "the file has only its header line"),
    ("sts-b", "\t".join(["index", "genre", "filename", "year", "old_index", "source1", "source2",
                          "sentence1", "sentence2", "score"]) + "\r\n", "the file has only its header line"),
    ("cola", "", "the file is empty"),
    ("qqp", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t2\t3\tWhy?\n",
     "all 1 rows have fewer than 6 columns"),
])
def test_a_split_without_examples_is_an_error(tmp_path, task, content, found):
    processor = get_processor(task)
    path = tmp_path / processor.task_dir / "train.tsv"
    path.parent.mkdir()
    path.write_text(content, encoding="utf-8")
    with pytest.raises(GlueDataError, match=rf"^{path}: no examples \({found}\)"):
        processor.get_examples(str(tmp_path), "train")


def test_header_only_train_file_builds_no_feature_file(tmp_path, tiny):
    (tmp_path / "glue" / "RTE").mkdir(parents=True)
    path = tmp_path / "glue" / "RTE" / "train.tsv"
    path.write_bytes(rte_lines(1)[0] + b"\n")
    with pytest.raises(GlueDataError, match=rf"^{path}: no examples"):
        cached_glue_features("rte", str(tmp_path / "glue"), "train", tiny, GlueFeatureSettings(64),
                             str(tmp_path / "cache"))
    assert not (tmp_path / "cache").exists() or os.listdir(tmp_path / "cache") == []


# -- features --------------------------------------------------------------------------------------

def test_truncate_seq_pair_pops_from_the_longer_end():
    assert truncate_seq_pair([1, 2, 3, 4, 5], [6, 7, 8], 6) == ([1, 2, 3], [6, 7, 8])
    # tie: b loses its last item
    assert truncate_seq_pair([1, 2, 3], [4, 5, 6], 5) == ([1, 2, 3], [4, 5])
    assert truncate_seq_pair([1, 2], [3, 4, 5, 6, 7], 4) == ([1, 2], [3, 4])
    # 4/4 -> b pops, 4/3 -> a pops, 3/3 -> b pops
    assert truncate_seq_pair([1, 2, 3, 4], [5, 6, 7, 8], 5) == ([1, 2, 3], [5, 6])


def test_feature_layout_pair_single_and_truncation():
    pair = build_features([10, 11], [20, 21, 22], 10, cls_id=2, sep_id=3, label_id=1)
    assert pair.input_ids == [2, 10, 11, 3, 20, 21, 22, 3, 0, 0]
    assert pair.segment_ids == [0, 0, 0, 0, 1, 1, 1, 1, 0, 0]
    assert pair.input_mask == [1] * 8 + [0, 0]
    assert pair.label_id == 1 and pair.is_real_example
    single = build_features(list(range(10, 20)), None, 6, cls_id=2, sep_id=3, label_id=0)
    assert single.input_ids == [2, 10, 11, 12, 13, 3]
    assert single.segment_ids == [0] * 6 and single.input_mask == [1] * 6
    truncated = build_features([10, 11, 12, 13], [20, 21, 22, 23], 8, cls_id=2, sep_id=3, label_id=0)
    assert truncated.input_ids == [2, 10, 11, 12, 3, 20, 21, 3]  # 5 pieces: a keeps 3, b keeps 2
    assert truncated.segment_ids == [0, 0, 0, 0, 0, 1, 1, 1]
    empty_b = build_features([10], [], 5, cls_id=2, sep_id=3, label_id=0)  # empty text_b = single
    assert empty_b.input_ids == [2, 10, 3, 0, 0]
    with pytest.raises(ValueError, match="max_seq_length must be >= 3"):
        build_features([1], [2], 2, cls_id=2, sep_id=3, label_id=0)


def test_stsb_features_with_real_sentencepiece(en8k):
    processor = get_processor("sts-b")
    examples = processor.get_examples(GLUE_DIR, "dev")
    features = convert_examples_to_features(examples, processor.get_labels(), 64, en8k)
    sp = spm.SentencePieceProcessor(model_file=EN8K_MODEL)
    cls_id, sep_id = sp.PieceToId("[CLS]"), sp.PieceToId("[SEP]")
    assert (cls_id, sep_id) == (2, 3)
    assert len(features) == len(examples) == 9
    for example, feature in zip(examples, features):
        ids_a, ids_b = sp.EncodeAsIds(example.text_a), sp.EncodeAsIds(example.text_b)
        expected = [cls_id] + ids_a + [sep_id] + ids_b + [sep_id]
        assert len(expected) <= 64
        assert feature.input_ids == expected + [0] * (64 - len(expected))
        padding = [0] * (64 - len(expected))
        assert feature.segment_ids == [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1) + padding
        assert isinstance(feature.label_id, float) and feature.label_id == example.label
        assert feature.is_real_example


def test_label_ids_and_unlabelled_placeholder(tiny):
    labels = ["entailment", "not_entailment"]
    example = InputExample("1", "a man sleeps.", "nobody sleeps.", "not_entailment")
    assert convert_example(example, labels, 16, tiny).label_id == 1
    unlabelled = InputExample("2", "a man sleeps.", "nobody sleeps.", None)
    assert convert_example(unlabelled, labels, 16, tiny).label_id == 0


# -- TFRecords -------------------------------------------------------------------------------------

@pytest.mark.parametrize("is_regression", [False, True])
def test_tfrecord_round_trip(tmp_path, is_regression):
    label = 3.25 if is_regression else 1
    # The second is marked as padding, as the reference's TPU eval files hold (read as such).
    features = [build_features([10, 11], [20], 8, 2, 3, label),
                dataclasses.replace(build_features([12], None, 8, 2, 3, label),
                                    is_real_example=False)]
    path = str(tmp_path / "f.tf_record")
    assert write_feature_file(path, lambda sink: {"n": write_features(sink, features, is_regression)}
                              ).metadata == {"n": 2}
    assert sorted(os.listdir(tmp_path)) == ["f.tf_record", "f.tf_record.json"]  # no temporary file left
    records = list(tf.data.TFRecordDataset(path).as_numpy_iterator())
    # The on-disk schema: int64 lists everywhere except a float label for regression.
    stored = tf.train.Example.FromString(records[0]).features.feature
    # Feature names in sorted order: the same bytes in every process (the default order varies).
    assert records[0] == tf.train.Example.FromString(records[0]).SerializeToString(deterministic=True)
    assert set(stored) == {"input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example"}
    assert list(stored["input_ids"].int64_list.value) == [2, 10, 11, 3, 20, 3, 0, 0]
    assert stored["label_ids"].WhichOneof("kind") == ("float_list" if is_regression else "int64_list")
    dataset = tf.data.TFRecordDataset(path).map(lambda r: parse_glue_example(r, 8, is_regression))
    parsed = list(dataset.as_numpy_iterator())
    for original, record in zip(features, parsed):
        assert record["input_ids"].dtype == np.int32 and record["input_ids"].shape == (8,)
        np.testing.assert_array_equal(record["input_ids"], original.input_ids)
        np.testing.assert_array_equal(record["input_mask"], original.input_mask)
        np.testing.assert_array_equal(record["segment_ids"], original.segment_ids)
        assert record["label_ids"] == original.label_id
        assert record["is_real_example"] == int(original.is_real_example)
    assert parsed[0]["label_ids"].dtype == (np.float32 if is_regression else np.int32)
    batch = parse_glue_example(tf.constant(records), 8, is_regression)
    assert batch["input_ids"].shape == (2, 8) and batch["is_real_example"].numpy().tolist() == [1, 0]


def test_tf_example_matches_reference_field_types():
    example = tf.train.Example.FromString(
        serialize_glue_features(build_features([5], None, 4, 2, 3, 0), is_regression=False))
    feature = example.features.feature
    assert list(feature["input_mask"].int64_list.value) == [1, 1, 1, 0]
    assert list(feature["is_real_example"].int64_list.value) == [1]


# -- the feature cache -----------------------------------------------------------------------------

def count_builds(monkeypatch) -> list[str]:
    """Record paths written by the feature cache from now on (a reused entry writes nothing)."""
    written = []
    real_write = feature_cache.write_feature_file

    def counting_write(path, build, key=None):
        written.append(path)
        return real_write(path, build, key)

    monkeypatch.setattr(feature_cache, "write_feature_file", counting_write)
    return written


def test_cache_reuse_and_invalidation(tmp_path, en8k, monkeypatch):
    cache_dir = str(tmp_path / "cache")
    first = cached_glue_features("RTE", GLUE_DIR, "dev", en8k, GlueFeatureSettings(64), cache_dir)
    assert os.path.dirname(first.path) == cache_dir
    assert os.path.basename(first.path).startswith("rte_dev_") and first.path.endswith(".tf_record")
    assert (first.num_records, first.metadata["num_real_examples"]) == (139, 139)
    assert sum(1 for _ in tf.data.TFRecordDataset(first.path)) == 139
    assert read_feature_file(first.path) == first
    raw = raw_rows(os.path.join(GLUE_DIR, "RTE", "dev.tsv"))[1:]
    assert first.metadata["guids"] == [row[0] for row in raw]
    assert first.metadata["is_regression"] is False

    written = count_builds(monkeypatch)
    # Same key: reused without writing.
    assert cached_glue_features("rte", GLUE_DIR, "dev", en8k, GlueFeatureSettings(64),
                                cache_dir) == first
    assert written == []
    # Another max_seq_length: a new file.
    other_length = cached_glue_features("rte", GLUE_DIR, "dev", en8k, GlueFeatureSettings(32),
                                        cache_dir)
    assert other_length.path != first.path and written == [other_length.path]
    # Another tokenizer (cased): another fingerprint, another file; the old one is untouched.
    cased = FullTokenizer(spm_model_file=EN8K_MODEL, do_lower_case=False)
    assert cased.fingerprint != en8k.fingerprint
    other_tokenizer = cached_glue_features("rte", GLUE_DIR, "dev", cased, GlueFeatureSettings(64),
                                           cache_dir)
    assert other_tokenizer.path not in (first.path, other_length.path)
    assert len(written) == 2


def test_cache_rebuilt_when_source_or_record_changes(tmp_path):
    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(), do_lower_case=True)
    data_dir = tmp_path / "glue"
    rows = [["index", "sentence1", "sentence2", "label"], ["0", "A cat.", "A dog.", "entailment"]]
    write_tsv(data_dir / "RTE" / "train.tsv", rows)
    cache_dir = str(tmp_path / "cache")
    first = cached_glue_features("rte", str(data_dir), "train", tokenizer,
                                 GlueFeatureSettings(16), cache_dir)
    assert first.num_records == 1
    write_tsv(data_dir / "RTE" / "train.tsv", rows + [["1", "B.", "C.", "not_entailment"]])
    second = cached_glue_features("rte", str(data_dir), "train", tokenizer,
                                  GlueFeatureSettings(16), cache_dir)
    assert second.path == first.path and second.num_records == 2
    assert second.metadata["guids"] == ["0", "1"]
    # A truncated record file (size differs from the sidecar) is rebuilt, not trusted.
    with open(second.path, "r+b") as handle:
        handle.truncate(10)
    third = cached_glue_features("rte", str(data_dir), "train", tokenizer,
                                 GlueFeatureSettings(16), cache_dir)
    assert third.num_records == 2 and sum(1 for _ in tf.data.TFRecordDataset(third.path)) == 2
    assert sorted(os.listdir(cache_dir)) == sorted(os.path.basename(p) for p in (
        third.path, sidecar_path(third.path)))


def test_unlabelled_test_split_keeps_guids_and_regression_flag(tmp_path):
    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(), do_lower_case=True)
    header = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
              "sentence2"]
    write_tsv(tmp_path / "STS-B" / "test.tsv", [header] + [
        [str(i), "g", "f", "y", "o", "s", "s", f"A man plays {i}.", "A man plays."] for i in (7, 3, 5)])
    features = cached_glue_features("sts-b", str(tmp_path), "test", tokenizer,
                                    GlueFeatureSettings(16), str(tmp_path / "c"))
    assert features.metadata == {"guids": ["7", "3", "5"], "num_real_examples": 3, "is_regression": True}
    parsed = [parse_glue_example(r, 16, True) for r in tf.data.TFRecordDataset(features.path)]
    assert [float(p["label_ids"]) for p in parsed] == [0.0] * 3  # unlabelled: the placeholder
    assert [int(p["is_real_example"]) for p in parsed] == [1, 1, 1]


def test_gcs_like_paths_go_through_gfile(en8k):
    """A ram:// filesystem, like gs://, is reachable only through tf.io.gfile: TSV, fingerprint, cache."""
    root = f"ram://glue_test_{uuid.uuid4().hex}"
    with open(os.path.join(GLUE_DIR, "MRPC", "train.tsv"), "rb") as handle:
        data = handle.read()  # CRLF line endings and literal quotes
    with tf.io.gfile.GFile(f"{root}/glue/MRPC/train.tsv", "wb") as handle:
        handle.write(data)
    local = get_processor("mrpc").get_examples(GLUE_DIR, "train")
    assert get_processor("mrpc").get_examples(f"{root}/glue", "train") == local
    assert [row for _, row in read_tsv(f"{root}/glue/MRPC/train.tsv")] == raw_rows(
        os.path.join(GLUE_DIR, "MRPC", "train.tsv"))
    features = cached_glue_features("mrpc", f"{root}/glue", "train", en8k, GlueFeatureSettings(32),
                                    f"{root}/cache")
    assert features.path.startswith(f"{root}/cache/mrpc_train_") and features.num_records == len(local)
    assert cached_glue_features("mrpc", f"{root}/glue", "train", en8k, GlueFeatureSettings(32),
                                f"{root}/cache") == features
    tf.io.gfile.rmtree(root)


# -- command line ----------------------------------------------------------------------------------

@pytest.mark.requires_shared_data
def test_command_line_writes_caches_and_prints_recipe(tmp_path):
    result = run_command("-m data_prep.glue", "--task_name=WNLI", f"--data_dir={GLUE_DIR}",
                         f"--spm_model_file={EN8K_MODEL}", f"--cached_dir={tmp_path}",
                         "--max_seq_length=128", "--splits=dev,test")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line.split("\t") for line in result.stdout.splitlines()]
    assert [(split, count) for split, count, _ in lines] == [("dev", "70"), ("test", "71")]
    assert all(os.path.isfile(path) and path.startswith(str(tmp_path)) for _, _, path in lines)
    recipe = run_command("-m data_prep.glue", "--task_name=sts-b", "--print_recipe")
    assert recipe.returncode == 0, recipe.stderr[-3000:]
    assert recipe.stdout.split() == ["--task_name=sts-b", "--warmup_step=214", "--learning_rate=2e-05",
                                     "--train_step=3598", "--save_checkpoints_steps=100",
                                     "--train_batch_size=16", "--max_seq_length=512", "--optimizer=adamw",
                                     "--do_lower_case"]


def test_command_line_checks_every_split_exists_before_building(tmp_path):
    (tmp_path / "glue" / "RTE").mkdir(parents=True)
    (tmp_path / "glue" / "RTE" / "train.tsv").write_bytes(b"\n".join(rte_lines(9)) + b"\n")
    result = run_command("-m data_prep.glue", "--task_name=rte", f"--data_dir={tmp_path / 'glue'}",
                         f"--spm_model_file={spm_fixtures.cached_tiny_spm()}",
                         f"--cached_dir={tmp_path / 'cache'}", "--max_seq_length=64",
                         "--splits=train,dev")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"dev file of task directory 'RTE' not found: {tmp_path / 'glue'}/RTE/dev.tsv" in result.stderr
    assert not (tmp_path / "cache").exists()  # the train split was not built first
