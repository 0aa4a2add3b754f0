"""Users' real files in every reader: lines end at "\\n" (or "\\r\\n") only, so U+2028, U+2029,
U+0085, "\\x1c"-"\\x1e", "\\v", "\\f" and a lone "\\r" inside a field, word or sentence are
characters of it (albert_tf/files/text_lines.py), and a prediction file keeps one line per input
line; ids and labels that would break a tab-separated line are refused, as are repeated ids; a CSV
cell longer than the csv module's default limit reads; one integer class written two ways is
refused; a missing input or checkpoint shard is named once, in one line."""

from __future__ import annotations

import csv
import io
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints.files import check_data_shards
from albert_tf.checkpoints.run_directory import resolve_checkpoint_path
from albert_tf.checkpoints.warm_start import load_checkpoint, resolve_checkpoint_source
from albert_tf.errors.user_error import MissingFileError, UserError
from albert_tf.files.run_manifest import read_manifest
from albert_tf.files.text_lines import (iter_file_lines, line_number_at, split_lines,
                                        tab_or_line_break)
from albert_tf.tasks.classification.task import write_predictions as write_classifier_predictions
from albert_tf.tasks.multiple_choice.task import write_choice_predictions
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tasks.question_answering.postprocessing import write_prediction_files
from albert_tf.tasks.token_classification.predictions import write_predictions as write_ner
from albert_tf.tokenization.wordpiece import parse_vocab
from data_prep.classification.glue_tasks import get_processor
from data_prep.classification.own_data import Columns, OwnDataError, OwnDataReader
from data_prep.classification.own_data_task import load_own_data
from data_prep.classification.processors import GlueDataError
from data_prep.common.beam_runner import _user_error_message
from data_prep.multiple_choice.reader import RaceSource, read_race_examples
from data_prep.pretraining.beam import _WORKER_USER_ERRORS
from data_prep.pretraining.corpus import CorpusReader
from data_prep.pretraining.vocabulary import _NormalizedLines
from data_prep.question_answering.examples import read_squad_questions
from data_prep.token_classification.reader import NerDataError, read_sentences
from tests import shared_setup, spm_fixtures
from tests.command_runner import run_command
from tests.shared_setup import tiny_config

# Every character str.splitlines breaks a line at besides "\n" and "\r\n".
SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c", "\r"]
SEPARATOR_IDS = ["U+2028", "U+2029", "U+0085", "x1c", "x1d", "x1e", "v", "f", "lone-CR"]


def write(path, text: str, encoding: str = "utf-8") -> str:
    with open(path, "w", encoding=encoding, newline="") as handle:  # the text's line ends kept
        handle.write(text)
    return str(path)


def own_reader(**columns) -> OwnDataReader:
    """A reader that keeps the texts as written (WordPiece mode: no normalization)."""
    return OwnDataReader(Columns(**columns), use_spm=False)


def file_lines(path: str) -> list[bytes]:
    """The lines of a written file, at "\\n" only."""
    with open(path, "rb") as handle:
        return split_lines(handle.read())


# -- the one way of splitting lines ---------------------------------------------------------------

def test_lines_end_at_line_feeds_only_and_old_mac_files_at_carriage_returns():
    odd = "".join(SEPARATORS)
    assert split_lines(f"a{odd}b\r\nc\n\nd") == [f"a{odd}b", "c", "", "d"]
    assert split_lines("a\r\nb\r\n", keepends=True) == ["a\r\n", "b\r\n"]
    assert split_lines("") == [] and split_lines("\n") == [""] and split_lines("a\r") == ["a"]
    assert split_lines("x\ry\rz\r") == ["x", "y", "z"]  # no "\n" anywhere: old Mac
    assert split_lines(b"x\ry\r", keepends=True) == [b"x\r", b"y\r"]
    assert line_number_at(b"a\nb\nc", 4) == 3 and line_number_at("a\rb\rc", 4) == 3
    assert tab_or_line_break("fine name") is None
    assert [tab_or_line_break(f"a{char}b") for char in ["\t", "\n", "\r", "\u2028", "\x85"]] == [
        "a tab", "a line break (\\n)", "a carriage return (\\r)", "U+2028", "U+0085"]


@pytest.mark.parametrize("chunk_bytes", [1, 2, 7, 1 << 20])
def test_a_file_read_lazily_splits_as_the_whole_text(tmp_path, chunk_bytes):
    odd = "".join(SEPARATORS).encode("utf-8")
    contents = [b"a" + odd + b"b\r\nc\n\nlast", b"x\ry\rz\r", b"", b"one line", b"\n\n", b"a\r\n"]
    for number, data in enumerate(contents):
        path = tmp_path / f"f{number}.txt"
        path.write_bytes(data)
        # tf.io.gfile.GFile's own line iteration would drop every "\r": read() keeps them.
        with tf.io.gfile.GFile(str(path), "rb") as handle:
            assert list(iter_file_lines(handle, chunk_bytes)) == split_lines(data), data
        assert list(iter_file_lines(io.BytesIO(data), chunk_bytes)) == split_lines(data)


# -- every reader keeps the separators inside its fields -------------------------------------------

@pytest.mark.parametrize("separator", SEPARATORS, ids=SEPARATOR_IDS)
def test_own_csv_tsv_and_json_lines_keep_separators_in_their_cells(tmp_path, separator):
    texts = [f"one{separator}two", f"{separator}lead", "plain"]
    rows = [(f"t{i}", text, "pos" if i % 2 else "neg") for i, text in enumerate(texts)]
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows([("id", "text", "label"), *rows])
    tsv = "id\ttext\tlabel\n" + "".join("\t".join(row) + "\n" for row in rows)
    jsonl = "".join(json.dumps({"id": i, "text": t, "label": label}, ensure_ascii=False) + "\n"
                    for i, t, label in rows)
    for name, content in (("a.csv", buffer.getvalue()), ("a.tsv", tsv), ("a.jsonl", jsonl)):
        if name == "a.jsonl" and separator in "\x1c\x1d\x1e\x0b\x0c\r":
            assert separator not in content  # json.dumps escapes control characters
        examples = own_reader(id="id").read(write(tmp_path / name, content), "test")
        assert [(e.guid, e.text_a, e.label) for e in examples] == rows, name


def test_own_json_lines_name_a_raw_control_character_and_its_column(tmp_path):
    path = write(tmp_path / "raw.jsonl", '{"text": "ok", "label": "a"}\n'
                                         '{"text": "a\x1cb", "label": "b"}\n')
    with pytest.raises(OwnDataError) as error:
        own_reader().read(path, "train")
    assert str(error.value) == (f"{path}:2: not valid JSON (a raw control character U+001C at "
                                "column 12: inside a JSON string it must be escaped, as \\u001c); "
                                "expected one JSON object per line")


def test_own_csv_refuses_a_lone_carriage_return_in_an_unquoted_cell(tmp_path):
    path = write(tmp_path / "cr.csv", "text,label\nfine,a\nbro\rken,b\n")
    with pytest.raises(OwnDataError, match=r":3: malformed CSV \(a carriage return \(\\r\) not "
                                           r"followed by a line feed in an unquoted cell"):
        own_reader().read(path, "train")
    quoted = write(tmp_path / "quoted.csv", 'text,label\nfine,a\n"quo\rted",b\n')
    assert own_reader().read(quoted, "train")[1].text_a == "quo\rted"


def test_excel_for_mac_csv_with_carriage_return_line_ends_reads(tmp_path):
    path = write(tmp_path / "mac.csv", 'text,label\r"a, b",x\r"multi\rline",y\rlast,x\r')
    examples = own_reader().read(path, "train")
    assert [(e.guid, e.text_a) for e in examples] == [("2", "a, b"), ("3", "multi\rline"),
                                                     ("5", "last")]


@pytest.mark.parametrize("separator", SEPARATORS, ids=SEPARATOR_IDS)
def test_ner_words_keep_separators_and_predictions_keep_one_line_per_input_line(tmp_path,
                                                                                 separator):
    word = f"Pa{separator}ris"
    conll = write(tmp_path / "a.conll",
                  f"-DOCSTART- O\n\n{word} B-LOC\nis O\r\n\nnice\u00a0day O\n")
    sentences = read_sentences(conll, scheme="IOB2")
    assert [s.words for s in sentences] == [(word, "is"), ("nice\u00a0day",)]
    output = write_ner(conll, str(tmp_path / "p.conll"), [["B-LOC", "O"], ["O"]])
    assert len(file_lines(output)) == len(file_lines(conll)) == 6
    assert file_lines(output)[2] == f"{word} B-LOC B-LOC".encode("utf-8")
    assert read_sentences(output, scheme="IOB2")[0].words == (word, "is")

    record = {"id": f"s{separator}1", "tokens": [word, "is"], "tags": ["B-LOC", "O"]}
    jsonl = write(tmp_path / "a.jsonl", json.dumps(record, ensure_ascii=False) + "\n\n"
                  + json.dumps({"tokens": ["x"]}) + "\n")
    assert [s.words for s in read_sentences(jsonl, labelled=False)] == [(word, "is"), ("x",)]
    output = write_ner(jsonl, str(tmp_path / "p.jsonl"), [["B-LOC", "O"], ["O"]])
    text = open(output, encoding="utf-8").read()
    assert len(text.splitlines()) == len(file_lines(jsonl)) == 3  # even for str.splitlines
    written = json.loads(text.split("\n")[0])
    assert (written["id"], written["tokens"], written["gold_tags"]) == (record["id"],
                                                                        record["tokens"],
                                                                        record["tags"])


def test_ner_refuses_a_tag_that_would_break_tags_txt_and_names_raw_control_characters(tmp_path):
    path = write(tmp_path / "t.jsonl", json.dumps({"tokens": ["a"], "tags": ["B-X\u2028"]}) + "\n")
    with pytest.raises(NerDataError, match=r"t.jsonl:1: tag 'B-X\\u2028' holds U\+2028"):
        read_sentences(path, scheme="IOB2")
    path = write(tmp_path / "raw.jsonl", '{"tokens": ["a\x1eb"], "tags": ["O"]}\n')
    with pytest.raises(NerDataError, match=r"raw.jsonl:1: not valid JSON \(a raw control "
                                           r"character U\+001E at column 15"):
        read_sentences(path)
    bom = write(tmp_path / "bom.conll", "\ufeffParis B-LOC\n")
    assert read_sentences(bom, scheme="IOB2")[0].words == ("Paris",)


@pytest.mark.parametrize("separator", SEPARATORS, ids=SEPARATOR_IDS)
def test_glue_cells_keep_separators(tmp_path, separator):
    directory = tmp_path / "RTE"
    directory.mkdir()
    rows = [f"{i}\tfirst{separator}sentence\tsecond\tentailment" for i in range(3)]
    write(directory / "train.tsv", "index\tsentence1\tsentence2\tlabel\n" + "\n".join(rows) + "\n")
    examples = get_processor("rte", use_spm=False).get_examples(str(tmp_path), "train")
    assert [(e.guid, e.text_a) for e in examples] == [(str(i), f"first{separator}sentence")
                                                     for i in range(3)]


def test_race_all_txt_and_squad_keep_separators_inside_their_json(tmp_path):
    odd = "".join(SEPARATORS[:3])  # raw in JSON strings; the control characters are escaped
    article = {"id": "a1", "article": f"Once{odd}upon a time.", "questions": ["Who?", "When?"],
               "options": [["A", "B", "C", "D"]] * 2, "answers": ["A", "B"]}
    path = write(tmp_path / "all.txt", json.dumps(article, ensure_ascii=False) + "\r\n\n"
                 + json.dumps(dict(article, id="a2"), ensure_ascii=False) + "\n")
    examples = read_race_examples([RaceSource("middle", path, True)], use_spm=False).examples
    assert [e.example_id for e in examples] == ["a1-0", "a1-1", "a2-0", "a2-1"]
    assert examples[0].article == article["article"]
    squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
        "context": f"Paris{odd}is nice.", "qas": [{"id": f"q{odd}1", "question": "What?",
                                                  "answers": [{"text": "Paris",
                                                               "answer_start": 0}]}]}]}]}
    path = write(tmp_path / "squad.json", json.dumps(squad, ensure_ascii=False))
    [example] = read_squad_questions(path, is_training=False).examples
    assert example.qas_id == f"q{odd}1" and example.paragraph_text == f"Paris{odd}is nice."


def test_the_pretraining_corpus_and_sentencepiece_input_keep_one_sentence_per_line(tmp_path):
    odd = "".join(SEPARATORS)
    corpus = write(tmp_path / "corpus.txt", f"first{odd}sentence\r\nsecond\n\nnext document\n")
    mac = write(tmp_path / "mac.txt", "one\rtwo\r\rthree\r")
    reader = CorpusReader([corpus, mac])
    assert list(reader.documents()) == [[f"first{odd}sentence", "second"], ["next document"],
                                        ["one", "two"], ["three"]]
    lines = list(_NormalizedLines([corpus, mac], do_lower_case=True))
    assert lines == ["first sentence", "second", "next document", "one", "two", "three"]


def test_a_wordpiece_vocab_keeps_one_token_per_line():
    data = "[PAD]\n[UNK]\nwei\u0085rd\nnext\u2028one\r\nlast\n".encode("utf-8")
    # The first whitespace-separated field of each line: one id per line, none shifted.
    assert list(parse_vocab(data, "vocab.txt").values()) == [0, 1, 2, 3, 4]
    assert list(parse_vocab(data, "vocab.txt"))[-1] == "last"


# -- ids and prediction files ----------------------------------------------------------------------

@pytest.mark.parametrize("cell, found", [
    ('"a\tb"', "a tab"), ('"a\nb"', "a line break (\\n)"), ('"a\r\nb"', "a carriage return (\\r)"),
    ("a\u2028b", "U+2028"), ("a\x85b", "U+0085"), ("a\x0cb", "U+000C")])
def test_own_test_ids_that_would_break_submit_results_are_refused(tmp_path, cell, found):
    path = write(tmp_path / "test.csv", f"id,text\nfine,good\n{cell},bad\n")
    with pytest.raises(OwnDataError) as error:
        own_reader(id="id").read(path, "test")
    assert str(error.value).startswith(f"{path}:3: column 'id': id ")
    assert f" holds {found}; an id is a cell of submit_results.tsv" in str(error.value)


@pytest.mark.parametrize("content, message", [
    ("id,text\nt1,a\nt2,b\nt1,c\n", ":4: column 'id': id 't1' appears twice, on lines 2 and 4; "
     "ids must be unique: they name the predictions in submit_results.tsv"),
    ('{"id": 7, "text": "a"}\n{"id": "7", "text": "b"}\n', ":2: column 'id': id '7' appears "
     "twice, on lines 1 and 2"),
    ('{"id": null, "text": "a"}\n', ":1: column 'id': expected an id (a string or an integer), "
     "found null"),
    ("id,text\n  ,a\n", ":2: column 'id': empty id"),
])
def test_own_test_ids_repeated_empty_or_not_names_are_refused(tmp_path, content, message):
    path = write(tmp_path / ("test.jsonl" if content.startswith("{") else "test.csv"), content)
    with pytest.raises(OwnDataError) as error:
        own_reader(id="id").read(path, "test")
    assert str(error.value).startswith(f"{path}{message}")


def test_own_ids_are_checked_where_they_name_predictions_only(tmp_path):
    path = write(tmp_path / "train.csv", "id,text,label\nx,a,p\nx,b,n\n")
    assert [e.guid for e in own_reader(id="id").read(path, "train")] == ["x", "x"]


def test_glue_test_guids_repeated_or_with_a_line_break_are_refused(tmp_path):
    directory = tmp_path / "RTE"
    directory.mkdir()
    header = "index\tsentence1\tsentence2\n"
    write(directory / "test.tsv", header + "0\ta\tb\n1\tc\td\n0\te\tf\n")
    with pytest.raises(GlueDataError, match=r"test.tsv:4: guid '0' appears twice, on lines 2 and "
                                            r"4; guids must be unique"):
        get_processor("rte").get_examples(str(tmp_path), "test")
    write(directory / "test.tsv", header + "0\ta\tb\n1\x0b2\tc\td\n")
    with pytest.raises(GlueDataError, match=r"test.tsv:3: guid '1\\x0b2' holds U\+000B"):
        get_processor("rte", use_spm=False).get_examples(str(tmp_path), "test")
    # SentencePiece mode normalizes the guid as the reference does: the whitespace collapses.
    assert [e.guid for e in get_processor("rte").get_examples(str(tmp_path), "test")] == [
        "0", "1 2"]


def test_own_predictions_keep_one_line_per_test_example(tmp_path):
    odd = "".join(SEPARATORS)
    rows = "".join(f'r{i},"text {odd} {i}"\n' for i in range(4))
    examples = own_reader(id="id").read(write(tmp_path / "test.csv", "id,text\n" + rows), "test")
    outputs = {"probabilities": np.full([5, 2], 0.5), "predictions": np.array([0, 1, 0, 1, 0]),
               "is_real_example": np.array([1, 1, 1, 1, 0])}
    results, submit = write_classifier_predictions(
        str(tmp_path / "test_results.tsv"), str(tmp_path / "submit_results.tsv"),
        [e.guid for e in examples], outputs, ["neg", "pos"], header=["neg", "pos"])
    assert open(submit, encoding="utf-8").read().splitlines() == [
        "index\tprediction", "r0\tneg", "r1\tpos", "r2\tneg", "r3\tpos"]
    assert len(open(results, encoding="utf-8").read().splitlines()) == 5


def test_race_and_squad_prediction_ids_are_json_escaped(tmp_path):
    """RACE and SQuAD write their ids as JSON keys with every non-ASCII and control character
    escaped: an id holding a tab or U+2028 keeps the file's lines and reads back."""
    ids = ["a\tb-0", "c\u2028d-1", "e\x85f-2"]
    outputs = {"probabilities": np.full([3, 4], 0.25), "predictions": np.array([0, 1, 2]),
               "is_real_example": np.ones(3)}
    path = write_choice_predictions(str(tmp_path / "race.json"), ids, outputs)
    text = open(path, encoding="utf-8").read()
    assert text.isascii() and "\t" not in text and list(json.loads(text)) == ids
    paths = write_prediction_files(str(tmp_path), {i: "answer" for i in ids},
                                   {i: [{"text": "answer"}] for i in ids})
    for path in paths:
        text = open(path, encoding="utf-8").read()
        assert text.isascii() and "\t" not in text and list(json.loads(text)) == ids


# -- labels ----------------------------------------------------------------------------------------

def test_one_integer_class_written_two_ways_is_refused_naming_both_lines(tmp_path):
    path = write(tmp_path / "train.csv", "text,label\na,1\nb,2\nc,01\n")
    with pytest.raises(OwnDataError) as error:
        own_reader().read(path, "train")
    assert str(error.value) == (f"{path}:4: column 'label': label '01' is the integer of label "
                                "'1' (line 2) written another way; they would be two classes: "
                                "write each class one way")
    json_path = write(tmp_path / "train.jsonl", '{"text": "a", "label": 1}\n'
                                                '{"text": "b", "label": "+1"}\n')
    with pytest.raises(OwnDataError, match=r":2: column 'label': label '\+1' is the integer of "
                                           r"label '1' \(line 1\)"):
        own_reader().read(json_path, "train")
    # A dev label that writes a class of the set another way is told so.
    train = write(tmp_path / "ok.csv", "text,label\na,1\nb,2\n")
    dev = write(tmp_path / "dev.csv", "text,label\na,02\n")
    with pytest.raises(OwnDataError, match=r"dev.csv:2: column 'label': label '02' is not in the "
                                           r"label set \['1', '2'\] \(the labels of .*ok.csv\); "
                                           r"the set has '2', the same integer written another "
                                           r"way: write each class one way$"):
        load_own_data({"train": train, "dev": dev}, own_reader())
    with pytest.raises(UserError, match=r"--labels=01,1: '01' and another label are one integer"):
        load_own_data({"train": train}, own_reader(), given_labels=["01", "1"])
    # The same spelling everywhere stays as written: "01" and "02" are two classes named so.
    padded = write(tmp_path / "padded.csv", "text,label\na,01\nb,02\nc,01\n")
    assert load_own_data({"train": padded}, own_reader()).labels == ["01", "02"]


@pytest.mark.parametrize("label, found", [("a\u2028b", "U+2028"), ('"a\tb"', "a tab")])
def test_labels_that_would_break_submit_results_are_refused(tmp_path, label, found):
    path = write(tmp_path / "train.csv", f"text,label\nx,fine\ny,{label}\n")
    with pytest.raises(OwnDataError,
                       match=rf":3: column 'label': label .* holds {re.escape(found)}"):
        own_reader().read(path, "train")


def test_a_csv_cell_larger_than_the_csv_default_limit_reads(tmp_path):
    limit = csv.field_size_limit()
    big = "word " * (200 * 1024 // 5)  # 200 KiB, over csv's default 128 KiB
    path = write(tmp_path / "big.csv", f'text,label\n"{big}",a\nsmall,b\n')
    examples = own_reader().read(path, "train")
    assert [len(e.text_a) for e in examples] == [len(big), 5]
    assert csv.field_size_limit() == limit  # the process's limit is left as it was


# -- missing inputs named once ---------------------------------------------------------------------

def test_a_checkpoint_file_or_another_file_given_as_checkpoint_is_named_for_what_it_is(tmp_path):
    # --init_checkpoint=out/model.ckpt-best.index (or a data shard, or a TFRecord) used to say
    # "<path> does not exist", about a file the user can see.
    prefix = tf.train.Checkpoint(v=tf.Variable([1.0])).write(str(tmp_path / "model.ckpt"))
    for given in (prefix + ".index", prefix + ".data-00000-of-00001"):
        with pytest.raises(MissingFileError) as error:
            resolve_checkpoint_path(given)
        assert str(error.value) == (f"{given} is a file of the checkpoint {prefix}: a checkpoint "
                                    "is named by its prefix, without .index, .data-* or .meta: give "
                                    f"{prefix}")
    other = tmp_path / "train.tfrecord"
    other.write_bytes(b"records")
    with pytest.raises(MissingFileError) as error:
        resolve_checkpoint_path(str(other))
    assert str(error.value) == (f"{other} is not a checkpoint: there is no train.tfrecord.index "
                                "beside it (a checkpoint is named by its prefix, e.g. "
                                "<output_dir>/model.ckpt-best, or by its directory)")


def test_a_checkpoint_without_its_data_shards_is_named_once(tmp_path):
    """Resolving a path looks at names only (the pre-flight check of a run's files comes first);
    the data shards are checked before the checkpoint is read, by every loader."""
    prefix = tf.train.Checkpoint(v=tf.Variable([1.0, 2.0])).write(str(tmp_path / "model.ckpt"))
    assert resolve_checkpoint_path(prefix) == prefix
    check_data_shards(prefix)
    os.remove(prefix + ".data-00000-of-00001")
    assert resolve_checkpoint_path(prefix) == prefix
    with pytest.raises(MissingFileError) as error:
        check_data_shards(prefix)
    assert str(error.value) == (f"{prefix}: the checkpoint has its .index but no .data-* shard "
                                "(an incomplete copy or download?); copy its data shards beside it")
    with pytest.raises(MissingFileError, match="has its .index but no .data-"):
        load_checkpoint(AlbertPretrainingModel(tiny_config()), resolve_checkpoint_source(prefix))
    with pytest.raises(MissingFileError) as error:
        resolve_checkpoint_path(str(tmp_path / "nothing"))
    assert str(error.value) == f"{tmp_path / 'nothing'} does not exist (no .index file with this " \
                               "prefix)"
    for name in ("two.data-00000-of-00003", "two.data-00002-of-00003", "two.index"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(MissingFileError, match=r"two.data-00001-of-00003 does not exist: the "
                                               r"checkpoint has 2 of its 3 data shards"):
        check_data_shards(str(tmp_path / "two"))


def test_a_beam_workers_missing_input_gives_the_single_machine_message():
    """A multi-process runner raises its own error holding the worker's traceback: the last user
    error in it, without the stage, is the message (not TensorFlow's "<path>; <reason>")."""
    traceback_text = (
        "Traceback (most recent call last):\n"
        "tensorflow.python.framework.errors_impl.NotFoundError: /c/x.txt; No such file or "
        "directory\n\nThe above exception was the direct cause of the following exception:\n\n"
        "albert_tf.errors.user_error.MissingFileError: /c/x.txt: No such file or directory "
        "[while running 'ReadDocuments/ParDo(_ReadDocuments)']\n")
    assert _user_error_message(RuntimeError(traceback_text), _WORKER_USER_ERRORS) == (
        "/c/x.txt: No such file or directory")


def test_train_sentencepiece_names_a_missing_or_broken_input_in_one_line(tmp_path):
    (tmp_path / "a.txt").write_text("hello world\n", encoding="utf-8")
    os.symlink(tmp_path / "gone.txt", tmp_path / "b.txt")  # matched by the glob, then missing
    result = run_command("-m data_prep.train_sentencepiece", f"--input_file={tmp_path}/*.txt",
                         f"--model_prefix={tmp_path / 'out' / 'm'}", "--vocab_size=100")
    assert result.error_line() == (f"train_sentencepiece: error: {tmp_path / 'b.txt'}: No such "
                                   "file or directory")
    assert result.stderr.count(str(tmp_path / "b.txt")) == 1
    os.remove(tmp_path / "b.txt")
    (tmp_path / "c.txt").write_bytes(b"fine\nbro\xffken\n")
    result = run_command("-m data_prep.train_sentencepiece", f"--input_file={tmp_path}/*.txt",
                         f"--model_prefix={tmp_path / 'out' / 'm'}", "--vocab_size=100")
    assert result.error_line() == (f"train_sentencepiece: error: {tmp_path / 'c.txt'}:2: not "
                                   "valid UTF-8 (invalid start byte at byte 3); fix or remove the "
                                   "line")


# -- the commands ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model_flags(tmp_path_factory) -> list[str]:
    """A tiny config over the tiny SentencePiece model (the run stops before it builds a model)."""
    config = tmp_path_factory.mktemp("model") / "config.json"
    config.write_text(shared_setup.tiny_config(vocab_size=500, max_position_embeddings=32)
                      .to_json_string())
    return [f"--albert_config_file={config}", f"--spm_model_file={spm_fixtures.cached_tiny_spm()}",
            "--max_seq_length=32"]


def test_run_classifier_refuses_repeated_test_ids_before_any_work(tmp_path, model_flags):
    train = write(tmp_path / "train.csv", "id,text,label\nx,good,pos\ny,bad,neg\n")
    test = write(tmp_path / "test.jsonl", '{"id": "a", "text": "fine"}\n{"id": "b", "text": '
                 '"so\u2028so"}\n{"id": "a", "text": "meh"}\n')
    out = tmp_path / "out"
    result = run_command("run_classifier.py", f"--train_file={train}", f"--dev_file={train}",
                         f"--test_file={test}", "--id_column=id", f"--output_dir={out}",
                         "--do_train", "--do_eval", "--do_predict", *model_flags)
    assert result.error_line() == (f"run_classifier: error: {test}:3: column 'id': id 'a' appears "
                                   "twice, on lines 1 and 3; ids must be unique: they name the "
                                   "predictions in submit_results.tsv")
    assert not read_manifest(str(out)).has_fact("label_set")


def test_run_ner_reads_a_raw_line_separator_in_a_token(tmp_path, model_flags):
    """The training file with U+2028 inside a token is read (the run goes on to the next file,
    whose raw control character it refuses, naming line and column)."""
    train = write(tmp_path / "train.jsonl", json.dumps(
        {"tokens": ["Pa\u2028ris", "is", "nice"], "tags": ["B-LOC", "O", "O"]},
        ensure_ascii=False) + "\n")
    dev = write(tmp_path / "dev.jsonl", '{"tokens": ["Ro\x0bme"], "tags": ["B-LOC"]}\n')
    result = run_command("run_ner.py", f"--train_file={train}", f"--eval_file={dev}",
                         f"--output_dir={tmp_path / 'out'}", "--do_train", "--do_eval",
                         *model_flags)
    assert result.error_line() == (f"run_ner: error: {dev}:1: not valid JSON (a raw control "
                                   "character U+000B at column 16: inside a JSON string it must be "
                                   "escaped, as \\u000b); expected one object {\"tokens\": [...], "
                                   "\"tags\": [...]} per line")
