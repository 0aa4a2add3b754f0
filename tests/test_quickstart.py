"""The README's first command: the quickstart pipeline runs end to end and learns; run again, it
continues (finished steps skipped, nothing rewritten), and --fresh starts over."""

import csv
import hashlib
import json
import os
import re

import pytest

from tests.command_runner import run_subprocess
from tests.shared_setup import REPO_ROOT

LABELLED = os.path.join(REPO_ROOT, "scripts", "quickstart_labelled")
LABELS = ["cooking", "sport", "weather"]


def start_quickstart(output_dir, *args):
    # As a user runs it: the caller's PYTHONPATH (none: its scripts import albert_tf as installed
    # in the environment).
    return run_subprocess("scripts/quickstart.py", f"--output_dir={output_dir}", *args,
                          timeout=1200, PYTHONPATH=os.environ.get("PYTHONPATH"),
                          TF_CPP_MIN_LOG_LEVEL="3")


def run_quickstart(output_dir, *args):
    result = start_quickstart(output_dir, *args)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result.stdout


def accuracies(eval_results):
    return [float(v) for v in re.findall(r"^masked_lm_accuracy = (\S+)$", eval_results, re.M)]


def read_rows(path, delimiter=","):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter=delimiter))


def served_label(stdout):
    match = re.search(r"^predicted label: (\S+)$", stdout, re.M)
    assert match, stdout[-3000:]
    return match.group(1)


@pytest.mark.slow  # the whole quickstart script, about 90 s
@pytest.mark.subprocess  # the user's script, as installed
def test_quickstart_short_run_produces_every_artifact(tmp_path):
    # 173 s on 2 cores busy with other jobs (load 7; 70 s of CPU). The directory holds an earlier
    # version's quickstart output (its plain-text marker, a stale file in one of its
    # sub-directories): --fresh deletes that, nothing else.
    (tmp_path / ".albert_tf-quickstart").write_text("an earlier run\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "stale.txt").write_text("from an earlier run\n")
    counts = ("--num_train_steps=20", "--num_finetune_steps=20")
    out = run_quickstart(tmp_path, *counts, "--fresh")
    assert "Quickstart finished" in out and "step 20/20" in out
    assert not (tmp_path / "model" / "stale.txt").exists()
    assert sorted(os.listdir(tmp_path)) == [".albert_tf-quickstart", "classifier", "data", "model",
                                            "spm"]
    for relative in ("spm/quickstart.model", "spm/quickstart.vocab",
                     "data/pretraining.tfrecord", "data/pretraining.tfrecord.stats.json",
                     "model/model.ckpt-best.index", "model/eval_results.txt",
                     "classifier/model.ckpt-best.index", "classifier/eval_results.txt",
                     "classifier/best_results.json",
                     "classifier/saved_model/ids_only/saved_model.pb",
                     "classifier/saved_model/with_text/saved_model.pb"):
        assert (tmp_path / relative).exists(), relative
    assert os.listdir(tmp_path / "model" / "train")  # TensorBoard events
    assert os.listdir(tmp_path / "classifier" / "train")
    # Predictions: one line per test example, in the test file's order, with the label names.
    test_ids = [row["id"] for row in read_rows(os.path.join(LABELLED, "test.csv"))]
    submitted = read_rows(tmp_path / "classifier" / "submit_results.tsv", delimiter="\t")
    assert [row["index"] for row in submitted] == test_ids
    assert {row["prediction"] for row in submitted} <= set(LABELS)
    probabilities = (tmp_path / "classifier" / "test_results.tsv").read_text().splitlines()
    assert probabilities[0].split("\t") == LABELS and len(probabilities) == 1 + len(test_ids)
    # The served sentence, its label and probabilities, printed by plain TensorFlow; the commands.
    assert "run_classifier.py --train_file=" in out and "tf.saved_model.load(export)" in out
    assert "sentence:        Light rain will turn to snow on the hills tonight." in out
    assert served_label(out) in LABELS
    assert re.search(r"^probabilities:   cooking \d\.\d{3}, sport \d\.\d{3}, weather \d\.\d{3}$",
                     out, re.M)
    assert "dev accuracy " in out and "majority class 0.333" in out
    # Run again, it continues: the four finished steps are skipped, nothing is rewritten, and the
    # sentence is served again.
    before = file_digests(tmp_path)
    again = run_quickstart(tmp_path, *counts)
    assert again.count("finished by an earlier run: ") == 4 and "$ " not in again.split("5/5")[0]
    assert served_label(again) == served_label(out) and "Quickstart finished" in again
    assert file_digests(tmp_path) == before
    # Other step counts would not fit its checkpoints: refused, naming both; nothing touched.
    other = start_quickstart(tmp_path, "--num_train_steps=30", "--num_finetune_steps=20")
    assert other.returncode == 1 and "holds a quickstart run of --num_finetune_steps=20 " \
        "--num_train_steps=20; this one asks for --num_finetune_steps=20 --num_train_steps=30" \
        in other.stderr
    assert file_digests(tmp_path) == before


def file_digests(directory) -> dict[str, str]:
    """{path relative to ``directory``: sha256} of every file under it."""
    return {os.path.relpath(os.path.join(root, name), directory):
            hashlib.sha256(open(os.path.join(root, name), "rb").read()).hexdigest()
            for root, _, names in os.walk(directory) for name in names}


@pytest.mark.subprocess  # the user's script, as installed
def test_a_rerun_with_other_step_counts_or_an_earlier_versions_marker_is_refused(tmp_path):
    """Before any work: a quickstart directory of other step counts, or an earlier version's
    (which kept no record of its steps), needs --fresh; nothing is deleted or written."""
    marker = tmp_path / ".albert_tf-quickstart"
    marker.write_text(json.dumps({"counts": {"num_train_steps": 300, "num_finetune_steps": 300},
                                  "finished": ["1/5 train a SentencePiece model (reference "
                                               "recipe)"]}))
    (tmp_path / "spm").mkdir()
    (tmp_path / "spm" / "quickstart.model").write_text("its model\n")
    before = file_digests(tmp_path)
    result = start_quickstart(tmp_path, "--num_train_steps=30")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0] == (f"quickstart: error: --output_dir {tmp_path} holds a quickstart run of "
                        "--num_finetune_steps=300 --num_train_steps=300; this one asks for "
                        "--num_finetune_steps=300 --num_train_steps=30. Give those, another "
                        "--output_dir, or --fresh to delete that run and start over.")
    assert file_digests(tmp_path) == before
    marker.write_text("an earlier run\n")
    result = start_quickstart(tmp_path)
    assert result.returncode == 1 and "kept no record of its steps: run with --fresh" in \
        result.stderr
    assert (tmp_path / "spm" / "quickstart.model").read_text() == "its model\n"


@pytest.mark.subprocess  # the user's script, as installed
def test_quickstart_refuses_a_directory_holding_a_foreign_file(tmp_path):
    # Refused before any work, in a fraction of a second: nothing is deleted or written there.
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "model").mkdir()  # a name the quickstart writes, but not its output (no marker)
    (tmp_path / "model" / "mine.txt").write_text("mine too\n")
    result = start_quickstart(tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("quickstart: error: --output_dir ")
    assert "(model, notes.txt)" in lines[0]
    assert sorted(os.listdir(tmp_path)) == ["model", "notes.txt"]
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
    assert (tmp_path / "model" / "mine.txt").read_text() == "mine too\n"
    # A quickstart's own directory (marker) that also holds a foreign file is refused as well.
    (tmp_path / ".albert_tf-quickstart").write_text('{"counts": {}, "finished": []}')
    result = start_quickstart(tmp_path)
    assert result.returncode == 1 and "(notes.txt)" in result.stderr
    assert (tmp_path / "model" / "mine.txt").exists() and (tmp_path / "notes.txt").exists()


@pytest.mark.subprocess  # the user's script, as installed
@pytest.mark.slow
def test_quickstart_default_run_learns(tmp_path):
    out = run_quickstart(tmp_path)
    values = accuracies((tmp_path / "model" / "eval_results.txt").read_text())
    assert len(values) == 3  # checkpoints 100, 200, 300
    assert values[-1] > values[0] + 0.01
    # Fine-tuning: the best checkpoint's dev accuracy is well above the majority class's share.
    dev_labels = [row["label"] for row in read_rows(os.path.join(LABELLED, "dev.csv"))]
    majority = max(dev_labels.count(label) for label in LABELS) / len(dev_labels)
    best = json.loads((tmp_path / "classifier" / "best_results.json").read_text())
    assert best["metrics"]["eval_accuracy"] > majority + 0.2, best
    assert served_label(out) == "weather"
