"""Token classification (NER): the readers and their one-line errors, the windows (every word
predicted once, from its max-context window), the head, and run_ner.py end to end (a tiny model
memorises a small file: entity F1 1.0; predictions in the input's format; the exports load in fresh
processes and return tag names)."""

import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.token_classification.model import AlbertTokenClassifierModel
from albert_tf.tasks.token_classification.predictions import write_predictions
from albert_tf.tasks.token_classification.serving import export_token_classifier
from albert_tf.tasks.token_classification.task import word_predictions
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.common.windows import doc_spans, max_context_spans
from data_prep.token_classification.features import sentence_windows, word_pieces
from data_prep.token_classification.reader import NerDataError, read_sentences, tag_set
from tests import shared_setup, spm_fixtures
from tests.command_runner import run_command_checked
from tests.shared_setup import subprocess_env
from tests.task_cases import NER_SEQ, NER_STRIDE, TRAIN_CONLL

SEQ, STRIDE = NER_SEQ, NER_STRIDE

def write(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def as_jsonl(sentences) -> str:
    return "".join(json.dumps({"tokens": list(s.words), "tags": list(s.tags)}) + "\n"
                   for s in sentences)


# -- reading ---------------------------------------------------------------------------------------

def test_conll_reader_skips_docstart_takes_first_and_last_columns(tmp_path):
    sentences = read_sentences(write(tmp_path / "train.txt", TRAIN_CONLL), scheme="IOB2")
    assert len(sentences) == 4
    assert sentences[0].words == ("John", "lives", "in", "Paris", ".")
    assert sentences[0].tags == ("B-PER", "O", "O", "B-LOC", "O")
    assert sentences[0].lines == (3, 4, 5, 6, 7)
    assert sentences[2].words[0] == "Acme" and sentences[2].lines[0] == 20
    assert tag_set(sentences) == ["O", "B-LOC", "B-ORG", "B-PER", "I-PER"]
    jsonl = write(tmp_path / "train.jsonl", as_jsonl(sentences))
    assert read_sentences(jsonl, scheme="IOB2") == [
        type(s)(s.words, s.tags, (number,) * len(s.words)) for number, s in
        enumerate(sentences, start=1)]


@pytest.mark.parametrize("name, text, known, message", [
    ("a.txt", "John B-PER\nParis\n", None, "a.txt:2: 'Paris' has no tag"),
    ("a.txt", "John B-PER\nlives O\nin I-LOC\n", None,
     "a.txt:3: 'I-LOC' after 'O': in IOB2 an I- tag continues"),
    ("a.jsonl", '{"tokens": ["a", "b"], "tags": ["O"]}\n', None, "a.jsonl:1: 2 tokens but 1 tags"),
    ("a.jsonl", '\n{"tokens": [], "tags": []}\n', None, "a.jsonl:2: empty sentence"),
    ("a.jsonl", '{"tokens": ["a", " "], "tags": ["O", "O"]}\n', None, "a.jsonl:1: empty token"),
    ("a.jsonl", '{"tokens": ["a"]\n', None, "a.jsonl:1: not valid JSON"),
    ("a.txt", "John B-PER\n\nRome B-LOC\n", ["O", "B-PER"],
     "a.txt:3: tag 'B-LOC' is not in the training file's tag set"),
    ("a.txt", "-DOCSTART- O\n\n", None, "a.txt: no sentence found"),
])
def test_bad_input_is_one_error_naming_file_and_line(tmp_path, name, text, known, message):
    path = write(tmp_path / name, text)
    with pytest.raises(NerDataError) as error:
        read_sentences(path, scheme="IOB2", known_tags=known)
    assert str(error.value) == f"{tmp_path}/{message}" or str(error.value).startswith(
        f"{tmp_path}/{message}")


def test_prediction_files_keep_the_input_format_and_read_back(tmp_path):
    conll = write(tmp_path / "in.txt", "-DOCSTART- O\n\nJohn NNP B-PER\nruns VBZ O\n\nRome\n")
    sentences = read_sentences(conll, labelled=False)
    assert [s.words for s in sentences] == [("John", "runs"), ("Rome",)]
    out = write_predictions(conll, str(tmp_path / "out.txt"), [["B-PER", "O"], ["B-LOC"]])
    assert open(out).read() == ("-DOCSTART- O\n\nJohn NNP B-PER B-PER\nruns VBZ O O\n\n"
                                "Rome B-LOC\n")
    assert [s.tags for s in read_sentences(out)] == [("B-PER", "O"), ("B-LOC",)]
    jsonl = write(tmp_path / "in.jsonl", '{"tokens": ["a", "b"], "id": 7}\n\n'
                                         '{"tokens": ["c"], "tags": ["O"]}\n')
    out = write_predictions(jsonl, str(tmp_path / "out.jsonl"), [["O", "B-X"], ["B-Y"]])
    records = [json.loads(line) for line in open(out) if line.strip()]
    assert records == [{"tokens": ["a", "b"], "id": 7, "tags": ["O", "B-X"]},
                       {"tokens": ["c"], "tags": ["B-Y"], "gold_tags": ["O"]}]


# -- windows ---------------------------------------------------------------------------------------

def test_a_sentence_three_windows_long_gets_one_prediction_per_word_from_its_best_window():
    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm())
    words = ("the river runs past the old city and then it turns north towards the sea where "
             "boats wait").split()
    pieces = word_pieces(words, tokenizer)
    num_pieces = sum(map(len, pieces))
    windows = sentence_windows(pieces, list(range(len(words))), 3, SEQ, STRIDE, tokenizer.cls_id,
                               tokenizer.sep_id)
    assert len(windows) == 3
    # Fake model outputs: each position "predicts" 100 * window + word of its first piece.
    first_piece = np.cumsum([0] + [len(p) for p in pieces])[:-1]
    best = max_context_spans(doc_spans(num_pieces, SEQ - 2, STRIDE), num_pieces)
    predictions = np.zeros((3, SEQ), np.int32)
    for row, window in enumerate(windows):
        assert window.input_ids[0] == tokenizer.cls_id and window.sentence_index == 3
        for position, (weight, label) in enumerate(zip(window.label_weights, window.label_ids)):
            if weight:
                predictions[row, position] = 100 * row + label
    outputs = {"predictions": predictions,
               "word_index": np.array([w.word_index for w in windows]),
               "sentence_index": np.array([3, 3, 3]), "is_real_example": np.ones(3)}
    predicted = word_predictions(outputs, [0, 0, 0, len(words)])[3]
    assert predicted == [100 * best[first_piece[word]] + word for word in range(len(words))]
    assert {p // 100 for p in predicted} == {0, 1, 2}  # every window contributes
    with pytest.raises(ValueError, match="got no prediction"):
        word_predictions(outputs, [0, 0, 0, len(words) + 1])


def test_token_head_is_sequence_output_times_weights_plus_bias():
    config = shared_setup.tiny_config(vocab_size=500, max_position_embeddings=SEQ)
    model = AlbertTokenClassifierModel(config, num_tags=5)
    model.classifier.output_bias.assign(np.arange(5, dtype=np.float32) / 10)
    inputs = {"input_ids": np.array([[2, 7, 9, 3, 0]], np.int32),
              "input_mask": np.array([[1, 1, 1, 1, 0]], np.int32),
              "segment_ids": np.zeros((1, 5), np.int32)}
    outputs = model(inputs, training=False)
    expected = (outputs["sequence_output"].numpy() @ model.classifier.output_weights.numpy().T
                + model.classifier.output_bias.numpy())
    np.testing.assert_allclose(outputs["logits"].numpy(), expected, atol=1e-5)
    assert sorted(model.tf1_head_variables()) == ["token_classifier/output_bias",
                                                  "token_classifier/output_weights"]


# -- run_ner.py ------------------------------------------------------------------------------------

run_ner = functools.partial(run_command_checked, "run_ner.py")


def common_flags(tmp_path, train_file) -> list[str]:
    config = shared_setup.tiny_config(vocab_size=500, max_position_embeddings=SEQ)
    (tmp_path / "config.json").write_text(config.to_json_string())
    return [f"--albert_config_file={tmp_path / 'config.json'}",
            f"--spm_model_file={spm_fixtures.cached_tiny_spm()}", f"--train_file={train_file}",
            f"--output_dir={tmp_path / 'out'}", f"--max_seq_length={SEQ}", f"--doc_stride={STRIDE}"]


# Loads the exports in a fresh process: ids_only (TensorFlow alone: tensorflow_text not imported),
# then with_text. argv: the export directory and a JSON {"ids", "texts", "words"}.
EXPORT_LOADER = r"""
import json, sys
import tensorflow as tf
export, request = sys.argv[1], json.loads(sys.argv[2])
ids = tf.constant(request["ids"])
outputs = tf.saved_model.load(export + "/ids_only").signatures["serving_default"](
    input_ids=ids, input_mask=tf.cast(ids > 0, tf.int32), segment_ids=tf.zeros_like(ids))
assert "tensorflow_text" not in sys.modules
result = {"ids_tags": outputs["tags"].numpy().astype(str).tolist()}
import tensorflow_text
text = tf.saved_model.load(export + "/with_text")
outputs = text.signatures["serve_text"](text=tf.constant(request["texts"]))
result["text"] = {name: outputs[name].numpy().astype(str).tolist() for name in ("words", "tags")}
result["text"]["truncated"] = outputs["truncated"].numpy().tolist()
outputs = text.signatures["serve_words"](words=tf.constant(request["words"]))
result["words_tags"] = outputs["tags"].numpy().astype(str).tolist()
result["words_tag_ids"] = outputs["tag_ids"].numpy().tolist()
print(json.dumps(result))
"""


def load_exports(export_dir, ids, texts, words) -> dict:
    """The outputs of both exports (EXPORT_LOADER), in a process without the repository."""
    loaded = subprocess.run([sys.executable, "-c", EXPORT_LOADER, str(export_dir),
                             json.dumps({"ids": ids, "texts": texts, "words": words})],
                            capture_output=True, text=True, timeout=600,
                            env=subprocess_env(PYTHONPATH=""), cwd=str(export_dir))
    assert loaded.returncode == 0, loaded.stderr[-4000:]
    return json.loads(loaded.stdout.strip().splitlines()[-1])


@pytest.mark.subprocess  # the exports load in a fresh process
def test_exports_load_in_fresh_processes_and_tag_words_as_the_keras_model(tmp_path):
    """An untrained model (random head): the text signatures' tag per word is the Keras model's
    arg-max at the word's first piece in the features' first window; words past it get ""."""
    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm())
    tf.keras.utils.set_random_seed(4)
    model = AlbertTokenClassifierModel(
        shared_setup.tiny_config(vocab_size=500, max_position_embeddings=SEQ), num_tags=5)
    model.classifier.output_weights.assign(tf.random.normal([5, 32]))
    tags = ["O", "B-LOC", "B-ORG", "B-PER", "I-PER"]
    length = 12  # a window of 10 pieces: the second sentence does not fit
    export_dir = tmp_path / "export"
    export_token_classifier(model, str(export_dir), tags, tokenizer, max_seq_length=length)
    sentences = [["John", "lives", "in", "Paris"], ["the", "river", "runs", "past", "the", "old",
                                                    "city", "and", "then", "north"]]
    expected, rows = [], []
    for words in sentences:
        pieces = word_pieces(words, tokenizer)
        window = sentence_windows(pieces, None, 0, length, length, tokenizer.cls_id,
                                  tokenizer.sep_id)[0]
        rows.append(window.input_ids)
        logits = model({"input_ids": np.array([window.input_ids]),
                        "input_mask": np.array([window.input_mask]),
                        "segment_ids": np.zeros((1, length), np.int32)}, training=False)["logits"]
        predicted = np.argmax(logits.numpy()[0], axis=-1)
        first = np.cumsum([1] + [len(p) for p in pieces])[:-1]
        expected.append([tags[predicted[p]] if p <= length - 2 else "" for p in first])
    assert "" in expected[1] and "" not in expected[0]
    outputs = load_exports(export_dir, rows, [" ".join(words) for words in sentences],
                           [words + [""] for words in sentences[:1]])
    per_position = [[tags[i] for i in np.argmax(model({
        "input_ids": np.array([row]), "input_mask": np.array([[int(i > 0) for i in row]]),
        "segment_ids": np.zeros((1, length), np.int32)}, training=False)["logits"].numpy()[0],
        axis=-1)] for row in rows]
    assert outputs["ids_tags"] == per_position
    width = len(sentences[1])
    assert outputs["text"]["words"] == [sentences[0] + [""] * (width - 4), sentences[1]]
    assert outputs["text"]["tags"] == [expected[0] + [""] * (width - 4), expected[1]]
    assert outputs["text"]["truncated"] == [False, True]
    assert outputs["words_tags"] == [expected[0] + [""]]
    assert outputs["words_tag_ids"] == [[tags.index(tag) for tag in expected[0]] + [-1]]
    assert (export_dir / "with_text" / "assets.extra" / "tags.txt").read_text().split() == tags


@pytest.mark.slow  # a memorising run and fresh processes, about 20 s
@pytest.mark.subprocess  # the exports load in a fresh process
def test_run_ner_memorises_predicts_in_input_format_and_exports_tag_names(tmp_path):
    train = write(tmp_path / "train.txt", TRAIN_CONLL)
    sentences = read_sentences(train)
    dev = write(tmp_path / "dev.jsonl", as_jsonl(sentences))
    predict = write(tmp_path / "test.txt", "\n\n".join("\n".join(s.words) for s in sentences))
    export_dir = tmp_path / "export"
    result = run_ner(*common_flags(tmp_path, train), f"--eval_file={dev}",
                     f"--predict_file={predict}", "--do_train", "--do_eval", "--do_predict",
                     f"--export_dir={export_dir}", "--train_step=120", "--learning_rate=2e-3",
                     "--save_checkpoints_steps=120", "--train_batch_size=8", "--seed=1")
    assert "NER train: 4 sentences, 6 windows" in result.stdout  # the last one is 3 windows
    best = json.loads((tmp_path / "out" / "best_results.json").read_text())["metrics"]
    assert best["f1"] == 1.0 and best["accuracy"] == 1.0 and best["PER_f1"] == 1.0, best

    predicted = read_sentences(str(tmp_path / "out" / "predictions.conll"))
    assert [s.words for s in predicted] == [s.words for s in sentences]
    assert [s.tags for s in predicted] == [s.tags for s in sentences]

    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm())
    pieces = [i for word in sentences[0].words for i in tokenizer.encode_text(word)]
    ids = [[tokenizer.cls_id] + pieces + [tokenizer.sep_id]]
    outputs = load_exports(export_dir, ids, ["John lives in Paris .", "Acme"],
                           [["Acme", "hired", "Peter", "in", "Berlin", ""]])
    # "John lives in Paris .": John's first piece is position 1, Paris's 1 + 5 + 3 + 1.
    assert [outputs["ids_tags"][0][i] for i in (1, 10)] == ["B-PER", "B-LOC"]
    assert outputs["text"]["words"] == [["John", "lives", "in", "Paris", "."],
                                        ["Acme", "", "", "", ""]]
    assert outputs["text"]["tags"] == [["B-PER", "O", "O", "B-LOC", "O"],
                                       [outputs["text"]["tags"][1][0], "", "", "", ""]]
    assert outputs["text"]["tags"][1][0] in tag_set(sentences)
    assert outputs["words_tags"] == [["B-ORG", "O", "B-PER", "O", "B-LOC", ""]]
    assert (export_dir / "ids_only" / "assets.extra" / "tags.txt").read_text().split() == \
        tag_set(sentences)


def test_run_ner_short_run_on_json_lines_sweeps_and_predicts_every_word(task_runs):
    """The harness's NER run, two steps (no memorising): the sweep's keys on JSON Lines, a
    prediction per word in JSON Lines."""
    run = task_runs.get("ner")
    output_dir = run.output_dir
    sentences = read_sentences(run.flags["train_file"])
    results = "\n" + (output_dir / "eval_results.txt").read_text()
    for key in ("global_step", "f1", "precision", "recall", "accuracy", "eval_loss", "PER_f1",
                "LOC_support"):
        assert f"\n{key} = " in results, key
    assert "\nglobal_step = 2\n" in results
    records = [json.loads(line) for line in open(output_dir / "predictions.jsonl")]
    assert [record["id"] for record in records] == [0, 1, 2, 3]
    tags = tag_set(sentences)
    for record, sentence in zip(records, sentences):
        assert record["tokens"] == list(sentence.words)
        assert len(record["tags"]) == len(sentence.words) and set(record["tags"]) <= set(tags)


def test_run_ner_refuses_a_broken_eval_file_before_training(tmp_path):
    train = write(tmp_path / "train.txt", TRAIN_CONLL)
    dev = write(tmp_path / "dev.txt", "John B-PER\nlives O\nhere I-LOC\n")
    result = run_ner(*common_flags(tmp_path, train), f"--eval_file={dev}", "--do_train",
                     "--do_eval", "--train_step=5", check=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"run_ner: error: {dev}:3: 'I-LOC' after 'O': in IOB2 an I- tag continues an entity "
        "of its type (B-LOC or I-LOC before it)"]
    assert not list((tmp_path / "out").glob("model.ckpt*"))


def test_run_ner_refuses_an_output_dir_that_is_its_eval_file(tmp_path):
    train = write(tmp_path / "train.txt", TRAIN_CONLL)
    dev = write(tmp_path / "dev.txt", TRAIN_CONLL)
    os.symlink(dev, tmp_path / "out")
    result = run_ner(*common_flags(tmp_path, train), f"--eval_file={dev}", "--do_eval",
                     check=False)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"run_ner: error: --output_dir '{tmp_path / 'out'}' is also an input (--eval_file "
        f"'{dev}'): writing it would replace that input; choose another output path")
    assert open(dev).read() == TRAIN_CONLL
