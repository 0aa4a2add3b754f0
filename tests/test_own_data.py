"""Fine-tuning on the user's own files: the CSV / TSV / JSON Lines reader and its one-line errors,
the label set and its file, the per-class report, and run_classifier.py end to end on GLUE's real
SST-2 and STS-B rows rewritten as the user's files (renamed columns, string labels): the same
records and the same dev metrics as through the GLUE path from the same start, predictions and
exports (loaded in fresh processes) and the TFLite model giving the user's label names. The
commands run in this process (tests/command_runner.py)."""

from __future__ import annotations

import csv
import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from albert_tf.checkpoints.label_set import LABEL_SET, LabelSet, recorded_label_set
from albert_tf.files.run_manifest import (RunManifestError, add_facts, read_manifest,
                                          require_fact)
from albert_tf.tasks.classification.metrics import class_key, class_report
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.classification.features import (GlueFeatureSettings, build_features,
                                               cached_glue_features)
from data_prep.classification.own_data import Columns, OwnDataError, OwnDataReader, label_set
from data_prep.classification.own_data_task import load_own_data
from data_prep.classification.processors import InputExample
from tests import shared_setup
from tests.command_runner import run_command, run_command_checked
from tests.shared_setup import EN8K_MODEL, GLUE_DIR, REPO_ROOT, subprocess_env

SEQ = 64
EXAMPLES_DIR = os.path.join(REPO_ROOT, "docs", "examples", "own_data")


def reader(**columns) -> OwnDataReader:
    task_type = columns.pop("task_type", "classification")
    return OwnDataReader(Columns(**columns), task_type)


def write(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


# -- reading the files -----------------------------------------------------------------------------

def test_the_documented_example_files_read_in_every_format():
    files = {"train": os.path.join(EXAMPLES_DIR, "reviews_train.csv"),
             "dev": os.path.join(EXAMPLES_DIR, "reviews_dev.tsv"),
             "test": os.path.join(EXAMPLES_DIR, "reviews_test.jsonl")}
    task = load_own_data(files, reader(id="id"))
    assert task.labels == ["mixed", "negative", "positive"]  # sorted
    assert task.reader.columns.text_a == "text" and task.reader.columns.text_b is None
    assert [e.guid for e in task.examples["dev"]] == ["d1", "d2", "d3"]
    assert task.examples["train"][0].text_a == "a gripping, beautifully acted film."  # lowered
    assert [e.label for e in task.examples["test"]] == [None, None]  # no label column
    pairs = {split: os.path.join(EXAMPLES_DIR, f"similarity_{split}.jsonl")
             for split in ("train", "dev")}
    regression = load_own_data(pairs, reader(task_type="regression"))
    assert regression.labels is None and regression.selection_metric == "pearson"
    first = regression.examples["train"][0]
    assert (first.text_b, first.label, first.guid) == ("a person plays the guitar.", 4.6, "1")


def test_csv_quotes_line_numbers_blank_lines_and_integer_labels(tmp_path):
    path = write(tmp_path / "a.csv", 'text,label\n"one, ""quoted""\nline",10\n\n  two  ,2\n'
                 'three,9\n')
    examples = reader().read(path, "train")
    assert [(e.guid, e.text_a, e.label) for e in examples] == [
        ("2", 'one, "quoted" line', "10"), ("5", "two", "2"), ("6", "three", "9")]
    assert label_set(examples) == ["2", "9", "10"]  # numerically when all are integers
    assert label_set(examples[:1] + [InputExample("x", "t", None, "b")]) == ["10", "b"]


# (file name, content, reader options, split, expected message after the path)
BAD_FILES = [
    ("missing.csv", "text,category\nfine,a\n", {}, "train",
     ":1: no column 'label' in the header; found ['text', 'category']"),
    ("noid.tsv", "text\nfine\n", {"id": "key"}, "test",
     ":1: no column 'key' in the header; found ['text']"),
    ("empty_text.tsv", "text\tlabel\ngood\ta\n  \tb\n", {}, "train",
     ":3: column 'text': expected a non-empty text, found an empty text"),
    ("fields.csv", "text,label\ngood,a\n\"bad, row\",a,extra\n", {}, "train",
     ":3: expected 2 comma-separated fields (as the header), found 3"),
    ("fields.tsv", "text\tlabel\ngood\ta\nbad\n", {}, "dev",
     ":3: expected 2 tab-separated fields (as the header), found 1"),
    ("float.csv", "text,label\ngood,1\nbad,0.5\n", {}, "train",
     ":3: column 'label': label 0.5 is a float"),
    ("float.jsonl", '{"text": "good", "label": 1}\n{"text": "bad", "label": 1.0}\n', {}, "train",
     ":2: column 'label': label 1.0 is a float"),
    ("score.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": "high"}\n',
     {"task_type": "regression"}, "train", ':2: column \'label\': expected a finite number '
     '(--task_type=regression), found "high"'),
    ("json.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": \n', {}, "train",
     ":2: not valid JSON"),
    ("nolabel.jsonl", '{"text": "a", "label": "x"}\n{"text": "b"}\n', {}, "test",
     ":2: no column 'label'"),
    ("header.csv", "text,label\n  \n", {}, "train", ": no examples; expected at least one row"),
    ("commas.csv", "text,label\ngood,a\n,\n", {}, "train",
     ":3: column 'text': expected a non-empty text, found an empty text"),
    ("quote.csv", 'text,label\n"good" film,a\n', {}, "train", ":2: malformed CSV"),
    ("utf8.tsv", "text\tlabel\ngood\ta\n", {}, "train", ":3: not valid UTF-8 (byte 0xff)"),
    ("pair.jsonl", '{"q": "a", "p": "b", "label": "x"}\n{"q": "a", "p": null, "label": "y"}\n',
     {"text_a": "q", "text_b": "p"}, "train", ":2: column 'p': expected a non-empty text, found "
     "NoneType"),
]


@pytest.mark.parametrize("name, content, options, split, message", BAD_FILES,
                         ids=[case[0] for case in BAD_FILES])
def test_a_bad_file_is_one_error_naming_the_file_and_line(tmp_path, name, content, options,
                                                          split, message):
    path = write(tmp_path / name, content)
    if name == "utf8.tsv":
        with open(path, "ab") as handle:
            handle.write(b"caf\xff\tb\n")
    with pytest.raises(OwnDataError) as raised:
        reader(**options).resolve_columns(path).read(path, split)
    assert str(raised.value).startswith(path + message)
    assert "\n" not in str(raised.value)


def test_label_sets_from_training_flag_and_output_dir(tmp_path):
    train = write(tmp_path / "train.csv", "text,label\na,pos\nb,neg\nc,pos\n")
    dev = write(tmp_path / "dev.jsonl", '{"text": "d", "label": "pos"}\n'
                '{"text": "e", "label": "neutral"}\n')
    out = str(tmp_path / "out")
    with pytest.raises(OwnDataError, match=r"dev.jsonl:2: column 'label': label 'neutral' is not "
                       r"in the label set \['neg', 'pos'\] \(the labels of .*train.csv\)"):
        load_own_data({"train": train, "dev": dev}, reader())
    with pytest.raises(OwnDataError, match=r"train.csv:3: .* label 'neg' is not in the label set "
                       r"\['pos', 'x'\] \(--labels\)"):
        load_own_data({"train": train}, reader(), given_labels=["pos", "x"])
    # --labels fixes the class id order (not sorted); a fraction it names is a class name.
    task = load_own_data({"train": train}, reader(), given_labels=["pos", "neg"],
                         selection="macro_f1")
    assert task.labels == ["pos", "neg"] and task.selection_metric == "macro_f1"
    assert load_own_data({"train": train}, reader()).selection_metric == "eval_accuracy"
    with pytest.raises(ValueError, match="a regression's best checkpoint is chosen by Pearson"):
        load_own_data({"train": train}, reader(task_type="regression"), selection="macro_f1")
    # Without --train_file the labels are those the output directory recorded.
    label_file = os.path.join(out, "run_manifest.json")
    with pytest.raises(ValueError, match="no label set: .*run_manifest.json records none"):
        load_own_data({"test": dev}, reader(), label_file=label_file)
    recorded = ["neg", "neutral", "pos"]
    assert load_own_data({"test": dev}, reader(), stored_labels=recorded).labels == recorded
    # A label set (or task type) differing from the recorded one is refused.
    os.makedirs(out)
    add_facts(out, {LABEL_SET: (LabelSet("classification", tuple(recorded)).to_fact(), "x")})
    task = load_own_data({"train": train}, reader())

    def check_label_set(label_set, source):
        require_fact(read_manifest(out), LABEL_SET, label_set.to_fact(), source)

    with pytest.raises(RunManifestError, match=r"trained for a classification with labels "
                       r"\['neg', 'neutral', 'pos'\] \(run_manifest.json\); this run has a "
                       r"classification with labels \['neg', 'pos'\] \(the labels of"):
        check_label_set(LabelSet("classification", tuple(task.labels)), task.label_source)
    with pytest.raises(RunManifestError, match="this run has a regression"):
        check_label_set(LabelSet("regression"), "regression")
    assert recorded_label_set(read_manifest(out)) == LabelSet("classification", tuple(recorded))
    with pytest.raises(OwnDataError, match="one class only"):
        load_own_data({"train": write(tmp_path / "one.csv", "text,label\na,x\n")}, reader())


def test_class_report_counts_and_macro_f1():
    labels = np.array([0, 0, 0, 0, 1, 1, 2, 2])
    predictions = np.array([0, 0, 0, 1, 1, 0, 0, 0])
    weights = np.array([1, 1, 1, 1, 1, 1, 1, 0])  # the last one is padding
    report = class_report(predictions, labels, ["a", "b", "c"], weights)
    # a: tp 3, predicted 5, true 4; b: tp 1, predicted 2, true 2; c: tp 0, predicted 0, true 1
    # (c counts in macro-F1: it occurs among the labels).
    expected = {"a": (3 / 5, 3 / 4, 6 / 9, 4, 5), "b": (0.5, 0.5, 0.5, 2, 2),
                "c": (0.0, 0.0, 0.0, 1, 0)}
    for name, values in expected.items():
        got = [report[class_key(name, field)] for field in
               ("precision", "recall", "f1", "support", "predicted")]
        np.testing.assert_allclose(got, values)
    assert report["macro_f1"] == pytest.approx((6 / 9 + 0.5 + 0) / 3)
    # A class that occurs neither among the labels nor the predictions is left out of macro-F1.
    assert class_report([0, 1], [0, 1], ["a", "b", "c"])["macro_f1"] == 1.0


# -- run_classifier.py on the user's files ---------------------------------------------------------

run_classifier = functools.partial(run_command_checked, "run_classifier.py")


def model_flags(tmp_path, output_dir):
    """The tiny model, its tokenizer and output_dir."""
    config = tmp_path / "config.json"
    if not config.exists():
        config.write_text(shared_setup.tiny_config(max_position_embeddings=SEQ).to_json_string())
    return [f"--albert_config_file={config}", f"--spm_model_file={EN8K_MODEL}",
            f"--output_dir={output_dir}", f"--max_seq_length={SEQ}"]


# Train from the same random start (--seed) and sweep 2 checkpoints.
TRAIN_FLAGS = ["--learning_rate=1e-3", "--seed=7", "--do_train", "--do_eval", "--train_step=4",
               "--save_checkpoints_steps=2", "--train_batch_size=8", "--eval_batch_size=16"]


def glue_rows(task_dir, split, rows):
    """The header and the first ``rows`` records of a shared GLUE file, split at tabs."""
    with open(os.path.join(GLUE_DIR, task_dir, f"{split}.tsv"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()[:rows + 1]
    return [line.split("\t") for line in lines]


def glue_copy(root, task_dir, rows):
    (root / task_dir).mkdir(parents=True)
    for split in ("train", "dev"):
        text = "".join("\t".join(row) + "\n" for row in glue_rows(task_dir, split, rows))
        (root / task_dir / f"{split}.tsv").write_text(text, encoding="utf-8")
    return root


def eval_blocks(output_dir):
    text = (output_dir / "eval_results.txt").read_text()
    return [dict(line.split(" = ") for line in block.strip().splitlines() if " = " in line)
            for block in text.split("=" * 50) if block.strip()]


def records(output_dir, split):
    """The bytes of the (one) feature file of ``split`` in output_dir."""
    names = [n for n in os.listdir(output_dir) if f"_{split}_" in n and n.endswith(".tf_record")]
    assert len(names) == 1, names
    return (output_dir / names[0]).read_bytes()


LOADER = r"""
import json, sys
import numpy as np
import tensorflow as tf
if sys.argv[2] == "text":
    import tensorflow_text  # registers the SentencePiece op of the text signature
call = json.loads(sys.argv[1])
signature = tf.saved_model.load(call["export"]).signatures[call["signature"]]
inputs = {name: tf.constant(value) for name, value in call["inputs"].items()}
outputs = signature(**inputs)
print(json.dumps({"labels": [v.decode() for v in outputs["labels"].numpy()],
                  "probabilities": outputs["probabilities"].numpy().tolist()}))
assert not {name.split(".")[0] for name in sys.modules} & {"albert_tf", "data_prep", "tests"}
"""


def serve(export, signature, inputs, with_text):
    result = subprocess.run([sys.executable, "-c", LOADER,
                             json.dumps({"export": str(export), "signature": signature,
                                         "inputs": inputs}), "text" if with_text else "ids"],
                            capture_output=True, text=True, env=subprocess_env(), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


SST2_ROWS = 32
SST2_NAMES = {"0": "negative", "1": "positive"}


@pytest.fixture(scope="module")
def sst2_own(tmp_path_factory):
    """The first SST-2 rows as the user's CSV files (other column names, string labels, a test
    file without labels: the dev sentences), trained, swept, predicted and exported; returns
    (directory, {split: path}, stdout)."""
    shared_setup.require_shared_data()
    tmp_path = tmp_path_factory.mktemp("sst2_own")
    files = {}
    for split in ("train", "dev", "test"):
        path = tmp_path / f"{split}.csv"
        columns = 2 if split != "test" else 1
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["review", "sentiment"][:columns])
            for sentence, label in glue_rows("SST-2", "dev" if split == "test" else split,
                                             SST2_ROWS)[1:]:
                writer.writerow([sentence, SST2_NAMES[label]][:columns])
        files[split] = str(path)
    result = run_classifier(*[f"--{split}_file={path}" for split, path in files.items()],
                            "--text_column=review", "--label_column=sentiment", "--do_predict",
                            f"--export_dir={tmp_path / 'export'}",
                            *model_flags(tmp_path, tmp_path / "out"), *TRAIN_FLAGS)
    return tmp_path, files, result.stdout


@pytest.mark.requires_shared_data
def test_sst2_as_csv_equals_the_glue_path(tmp_path, sst2_own):
    own_dir, _, _ = sst2_own
    own_out = own_dir / "out"
    glue_dir, glue_out = glue_copy(tmp_path / "glue", "SST-2", SST2_ROWS), tmp_path / "glue_out"
    run_classifier("--task_name=sst-2", f"--data_dir={glue_dir}", *model_flags(tmp_path, glue_out),
                   *TRAIN_FLAGS)
    # Same records, same dev metrics at every checkpoint, same best checkpoint.
    for split in ("train", "dev"):
        assert records(own_out, split) == records(glue_out, split)
    glue_blocks, own_blocks = eval_blocks(glue_out), eval_blocks(own_out)
    assert len(own_blocks) == 2
    for glue_block, own_block in zip(glue_blocks, own_blocks):
        for key in ("global_step", "eval_accuracy", "eval_loss"):
            assert own_block[key] == glue_block[key]
    assert (own_out / "best_trial.txt").read_text() == (glue_out / "best_trial.txt").read_text()
    own_sweep, glue_sweep = (read_manifest(str(out)).sweep() for out in (own_out, glue_out))
    for key in ("last_step", "best_step", "best_value"):
        assert own_sweep[key] == glue_sweep[key]


@pytest.mark.subprocess  # the exports load in fresh processes
@pytest.mark.requires_shared_data
def test_sst2_csv_predictions_and_exports_give_the_label_names(sst2_own):
    own_dir, files, stdout = sst2_own
    own_out, export_dir = own_dir / "out", own_dir / "export"
    assert "own_data train: 32 examples (negative " in stdout
    assert "macro-F1" in stdout  # the best checkpoint's class table
    assert read_manifest(str(own_out)).fact("label_set") == {
        "task_type": "classification", "labels": ["negative", "positive"], "task": "own_data"}
    # eval_results.txt: per-class counts of the real dev set; macro-F1 from the per-class F1s.
    dev_labels = [row[1] for row in glue_rows("SST-2", "dev", SST2_ROWS)[1:]]
    for block in eval_blocks(own_out):
        for label, name in SST2_NAMES.items():
            assert float(block[class_key(name, "support")]) == dev_labels.count(label)
        f1s = [float(block[class_key(name, "f1")]) for name in SST2_NAMES.values()]
        assert float(block["macro_f1"]) == pytest.approx(np.mean(f1s), abs=1e-6)

    # Predictions: the user's label names, the probabilities under a header naming them.
    results = (own_out / "test_results.tsv").read_text().splitlines()
    assert results[0] == "negative\tpositive"
    probabilities = np.array([[float(v) for v in line.split("\t")] for line in results[1:]])
    submit = [line.split("\t") for line in (own_out / "submit_results.tsv").read_text()
              .splitlines()[1:]]
    assert [guid for guid, _ in submit] == [str(line) for line in range(2, SST2_ROWS + 2)]
    predicted = [label for _, label in submit]
    assert predicted == [["negative", "positive"][i] for i in probabilities.argmax(-1)]

    # Exports, each in a fresh process: the ids signature with TensorFlow only, the text
    # signature with tensorflow_text; both answer with the user's label names.
    sentences = [row[0] for row in glue_rows("SST-2", "dev", SST2_ROWS)[1:]][:6]
    from_text = serve(export_dir / "with_text", "serve_text",
                      {"text_a": sentences, "text_b": [""] * 6}, with_text=True)
    assert from_text["labels"] == predicted[:6]
    np.testing.assert_allclose(from_text["probabilities"], probabilities[:6], atol=1e-5)
    tokenizer = FullTokenizer(spm_model_file=EN8K_MODEL)
    features = [build_features(tokenizer.encode_text(s), None, SEQ, tokenizer.cls_id,
                               tokenizer.sep_id, 0) for s in sentences]
    ids = {name: [getattr(f, name) for f in features]
           for name in ("input_ids", "input_mask", "segment_ids")}
    from_ids = serve(export_dir / "ids_only", "serving_default", ids, with_text=False)
    assert from_ids["labels"] == predicted[:6]
    np.testing.assert_allclose(from_ids["probabilities"], probabilities[:6], atol=1e-5)
    for variant in ("ids_only", "with_text"):
        assert (export_dir / variant / "assets.extra" / "labels.txt").read_text() == \
            "negative\npositive\n"

    # A later predict-only run takes the recorded label set: the same predictions.
    submitted = (own_out / "submit_results.tsv").read_text()
    (own_out / "submit_results.tsv").unlink()
    run_classifier(f"--test_file={files['test']}", "--text_column=review", "--do_predict",
                   *model_flags(own_dir, own_out))
    assert (own_out / "submit_results.tsv").read_text() == submitted


@pytest.mark.requires_shared_data
def test_stsb_as_json_lines_equals_the_glue_path(tmp_path):
    rows = 9
    glue_dir, glue_out = glue_copy(tmp_path / "glue", "STS-B", rows), tmp_path / "glue_out"
    run_classifier("--task_name=sts-b", f"--data_dir={glue_dir}", *model_flags(tmp_path, glue_out),
                   *TRAIN_FLAGS)
    files = {}
    for split in ("train", "dev"):
        path = tmp_path / f"{split}.jsonl"
        lines = [json.dumps({"first": row[7], "second": row[8], "similarity": float(row[9])})
                 for row in glue_rows("STS-B", split, rows)[1:]]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files[split] = str(path)
    own_out = tmp_path / "own_out"
    run_classifier(f"--train_file={files['train']}", f"--dev_file={files['dev']}",
                   "--text_column=first", "--text_b_column=second", "--label_column=similarity",
                   "--task_type=regression", *model_flags(tmp_path, own_out), *TRAIN_FLAGS)
    for split in ("train", "dev"):
        assert records(own_out, split) == records(glue_out, split)
    glue_blocks, own_blocks = eval_blocks(glue_out), eval_blocks(own_out)
    assert len(own_blocks) == 2 and sorted(own_blocks[0]) == sorted(glue_blocks[0])
    for glue_block, own_block in zip(glue_blocks, own_blocks):
        for key in ("global_step", "pearson", "spearman", "MSE", "eval_loss"):
            assert own_block[key] == glue_block[key]
    assert (own_out / "best_trial.txt").read_text() == (glue_out / "best_trial.txt").read_text()
    assert read_manifest(str(own_out)).fact("label_set") == {
        "task_type": "regression", "labels": None, "task": "own_data"}


@pytest.mark.requires_shared_data
def test_bad_input_and_label_set_changes_stop_before_training(tmp_path):
    train = write(tmp_path / "train.csv", "text,label\ngood film,pos\nbad film,neg\n")
    dev = write(tmp_path / "dev.tsv", "text\tlabel\nfine\tpos\nawful\tterrible\n")
    output_dir = tmp_path / "out"
    flags = [*model_flags(tmp_path, output_dir), *TRAIN_FLAGS]
    result = run_classifier(f"--train_file={train}", f"--dev_file={dev}", *flags, check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (f"run_classifier: error: {dev}:3: column 'label': label 'terrible' is not in the "
            f"label set ['neg', 'pos'] (the labels of {train})") in result.stderr
    assert not output_dir.exists()  # nothing written: the directory it made is gone too
    # A run in a directory trained with another label set is refused, naming both.
    output_dir.mkdir()
    add_facts(str(output_dir), {LABEL_SET: (
        LabelSet("classification", ("neg", "neutral", "pos")).to_fact(), "x")})
    result = run_classifier(f"--train_file={train}", *flags, "--nodo_eval", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (f"run_classifier: error: --output_dir={output_dir} holds checkpoints trained for a "
            "classification with labels ['neg', 'neutral', 'pos'] (run_manifest.json); this run "
            "has a classification with labels ['neg', 'pos']") in result.stderr
    assert not [n for n in os.listdir(output_dir) if n.startswith("model.ckpt")]


@pytest.mark.parametrize("arguments, message", [
    (["--train_file=t.csv", "--task_name=sst-2", "--do_train"],
     "--task_name names a GLUE task, --train_file, --dev_file and --test_file your own files"),
    (["--train_file=t.csv", "--do_train", "--do_eval"], "--do_eval on your own files needs "
     "--dev_file."),
    (["--task_name=sst-2", "--label_column=y", "--do_train"],
     "--label_column applies to your own files"),
])
def test_own_file_flags_and_glue_flags_do_not_mix(arguments, message):
    result = run_command("run_classifier.py", *arguments)
    assert result.returncode == 1
    assert result.stderr.startswith(f"run_classifier: error: {message}")
    assert result.stderr.count("\n") == 1
    assert "tensorflow" not in result.stderr.lower()


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("task_dir, task_name", [("SST-2", "sst-2"), ("STS-B", "sts-b")])
def test_own_files_give_the_glue_records(tmp_path, task_dir, task_name):
    """The GLUE rows rewritten as the user's files (CSV with string labels; JSON Lines pairs with
    float scores) give byte-identical feature records: training on them from the same start is
    training on the same data (the slow tests above train both)."""
    rows = 20
    glue_dir = glue_copy(tmp_path / "glue", task_dir, rows)
    tokenizer = FullTokenizer(spm_model_file=EN8K_MODEL)
    files = {}
    for split in ("train", "dev"):
        table = glue_rows(task_dir, split, rows)[1:]
        if task_name == "sst-2":
            quoted = ['"' + row[0].replace('"', '""') + '"' for row in table]
            files[split] = write(tmp_path / f"{split}.csv", "review,sentiment\n" + "".join(
                f"{text},{SST2_NAMES[row[1]]}\n" for text, row in zip(quoted, table)))
        else:
            files[split] = write(tmp_path / f"{split}.jsonl", "".join(
                json.dumps({"s1": row[7], "s2": row[8], "score": float(row[9])}) + "\n"
                for row in table))
    columns = ({"text_a": "review", "label": "sentiment"} if task_name == "sst-2"
               else {"text_a": "s1", "text_b": "s2", "label": "score",
                     "task_type": "regression"})
    task = load_own_data(files, reader(**columns))
    for split in ("train", "dev"):
        own = task.features(split, tokenizer, SEQ, str(tmp_path / "own_cache"))
        glue = cached_glue_features(task_name, str(glue_dir), split, tokenizer,
                                    GlueFeatureSettings(SEQ), str(tmp_path / "glue_cache"))
        assert own.num_records == glue.num_records == len(glue_rows(task_dir, split, rows)) - 1
        with open(own.path, "rb") as mine, open(glue.path, "rb") as theirs:
            assert mine.read() == theirs.read()


@pytest.mark.requires_shared_data
def test_tflite_model_of_a_run_on_own_files(tmp_path, sst2_own):
    """The TFLite model of the best checkpoint gives the run's probabilities; its class ids map to
    the user's names through the recorded label set (the TFLite model itself carries no
    strings)."""
    import tensorflow as tf

    from albert_tf.tasks.classification.model import AlbertClassifierModel
    from albert_tf.tasks.classification.serving import export_classifier_tflite
    own_dir, _, _ = sst2_own
    out = own_dir / "out"
    labels = recorded_label_set(read_manifest(str(out))).labels
    model = AlbertClassifierModel(shared_setup.tiny_config(max_position_embeddings=SEQ),
                                  len(labels))
    tf.train.Checkpoint(model=model).read(str(out / "model.ckpt-best")).expect_partial()
    path = export_classifier_tflite(model, str(tmp_path / "model.tflite"), SEQ)
    runner = Interpreter(model_path=path).get_signature_runner("serving_default")
    tokenizer = FullTokenizer(spm_model_file=EN8K_MODEL)
    sentences = [row[0] for row in glue_rows("SST-2", "dev", SST2_ROWS)[1:]][:4]
    results = (out / "test_results.tsv").read_text().splitlines()[1:5]
    submit = (out / "submit_results.tsv").read_text().splitlines()[1:5]
    for sentence, result, line in zip(sentences, results, submit):
        feature = build_features(tokenizer.encode_text(sentence), None, SEQ, tokenizer.cls_id,
                                 tokenizer.sep_id, 0)
        outputs = runner(**{name: np.array([getattr(feature, name)], np.int32)
                            for name in ("input_ids", "input_mask", "segment_ids")})
        probabilities = outputs["probabilities"][0]
        np.testing.assert_allclose(probabilities, [float(v) for v in result.split("\t")],
                                   atol=1e-4)
        assert labels[int(np.argmax(probabilities))] == line.split("\t")[1]


def test_the_flag_choices_are_the_readers():
    """run_classifier defines its own-file flags before importing the library (answers in 0.1 s),
    so it spells their choices out: they must be the reader's and the task's."""
    from data_prep.classification.own_data import FILE_FORMATS, TASK_TYPES
    from data_prep.classification.own_data_task import SELECTION_METRICS
    result = run_command("run_classifier.py", "--help")
    help_text = " ".join(result.stdout.split())
    for flag, values in (("file_format", FILE_FORMATS), ("task_type", TASK_TYPES),
                         ("selection_metric", tuple(SELECTION_METRICS))):
        assert f"--{flag}: <{'|'.join(values)}>" in help_text
