"""The README's first command: the quickstart pipeline runs end to end and learns."""

import os
import re
import subprocess
import sys

import pytest

from tests.shared_setup import REPO_ROOT

# As a user runs it: no PYTHONPATH, so its scripts import albert_tf as installed in the environment.
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")


def start_quickstart(output_dir, *args):
    return subprocess.run([sys.executable, os.path.join(REPO_ROOT, "scripts", "quickstart.py"),
                           f"--output_dir={output_dir}", *args],
                          capture_output=True, text=True, env=ENV, cwd=REPO_ROOT, timeout=1200)


def run_quickstart(output_dir, *args):
    result = start_quickstart(output_dir, *args)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result.stdout


def accuracies(eval_results):
    return [float(v) for v in re.findall(r"^masked_lm_accuracy = (\S+)$", eval_results, re.M)]


def test_quickstart_short_run_produces_every_artifact(tmp_path):
    out = run_quickstart(tmp_path, "--num_train_steps=20")
    assert "Quickstart finished" in out and "step 20/20" in out
    for relative in ("spm/quickstart.model", "spm/quickstart.vocab",
                     "data/pretraining.tfrecord", "data/pretraining.tfrecord.stats.json",
                     "model/model.ckpt-best.index", "model/eval_results.txt"):
        assert (tmp_path / relative).exists(), relative
    assert os.listdir(tmp_path / "model" / "train")  # TensorBoard events


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
    (tmp_path / ".albert_tf-quickstart").write_text("an earlier run\n")
    result = start_quickstart(tmp_path)
    assert result.returncode == 1 and "(notes.txt)" in result.stderr
    assert (tmp_path / "model" / "mine.txt").exists() and (tmp_path / "notes.txt").exists()


@pytest.mark.slow
def test_quickstart_default_run_learns(tmp_path):
    run_quickstart(tmp_path)
    values = accuracies((tmp_path / "model" / "eval_results.txt").read_text())
    assert len(values) == 3  # checkpoints 100, 200, 300
    assert values[-1] > values[0] + 0.01
