"""create_pretraining_data never loses data and never hangs: outputs that would replace an input or
each other are refused before any work; SIGTERM, Ctrl-C and kill -9 of a run with worker processes
leave no live worker, and no temporary file beyond the next run. Real processes, bounded waits."""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest
from absl import flags
from absl.testing import flagsaver

from data_prep import create_pretraining_data
from data_prep.pretraining.chunks import ChunkProcessor
from tests import spm_fixtures
from tests.shared_setup import (REPO_ROOT, child_pids, ctrl_c_enabled, is_alive, subprocess_env,
                                wait_for)
from tests.test_create_pretraining_data import bundled_documents, write_corpus

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

FLAGS = flags.FLAGS
SMALL_RUN = dict(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1)


@pytest.fixture(autouse=True, scope="module")
def parsed_flags():
    if not FLAGS.is_parsed():
        FLAGS.mark_as_parsed()


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("A first sentence.\nA second one.\n\nAnother document.\nIts end.\n",
                    encoding="utf-8")
    return path


def run_cli(**flag_values):
    with flagsaver.flagsaver(**{**SMALL_RUN, "spm_model_file": spm_fixtures.cached_tiny_spm(),
                                **flag_values}):
        create_pretraining_data.main(["create_pretraining_data"])


# --- outputs that would lose data ---------------------------------------------------------------------

def test_output_that_is_the_input_is_refused_and_the_input_left(corpus):
    before = corpus.read_bytes()
    message = (f"create_pretraining_data: error: --output_file '{corpus}' is also an input "
               f"(--input_file '{corpus}')")
    with pytest.raises(SystemExit, match="^" + re.escape(message)):
        run_cli(input_file=str(corpus), output_file=str(corpus))
    assert corpus.read_bytes() == before
    assert os.listdir(corpus.parent) == ["corpus.txt"]


@pytest.mark.parametrize("case", ["glob", "symlink", "tokenizer"])
def test_every_spelling_of_an_input_as_output_is_refused(tmp_path, corpus, case):
    model = tmp_path / "tokenizer.model"
    shutil.copy(spm_fixtures.cached_tiny_spm(), model)
    (tmp_path / "old_output.tfrecord").write_bytes(b"records of an earlier run")
    os.symlink(corpus, tmp_path / "link.txt")
    flag_values = {
        # dir/* also matches the output of an earlier run, which this run would overwrite.
        "glob": dict(input_file=f"{tmp_path}/*", output_file=str(tmp_path / "old_output.tfrecord")),
        "symlink": dict(input_file=str(corpus), output_file=str(tmp_path / "link.txt")),
        "tokenizer": dict(input_file=str(corpus), output_file=str(model), spm_model_file=str(model)),
    }[case]
    before = {path: open(path, "rb").read() for path in glob.glob(f"{tmp_path}/*")}
    with pytest.raises(SystemExit, match="is also an input"):
        run_cli(**flag_values)
    assert {path: open(path, "rb").read() for path in glob.glob(f"{tmp_path}/*")} == before
    assert not glob.glob(f"{tmp_path}/.*")  # no temporary file either


def test_statistics_file_is_checked_as_an_output(tmp_path, corpus):
    """The statistics go to '<first output>.stats.json': an input of that name is refused."""
    stats = tmp_path / "out.tfrecord.stats.json"
    stats.write_text("A sentence that is data.\n")
    with pytest.raises(SystemExit, match="the statistics file .* is also an input"):
        run_cli(input_file=f"{corpus},{stats}", output_file=str(tmp_path / "out.tfrecord"))


@pytest.mark.parametrize("second", ["a.tfrecord", "sub/../a.tfrecord", "a.tfrecord.stats.json"])
def test_repeated_output_is_refused_before_any_work(tmp_path, corpus, second):
    (tmp_path / "sub").mkdir()
    outputs = f"{tmp_path}/a.tfrecord,{tmp_path}/{second}"
    with pytest.raises(SystemExit, match="are the same file: every output of a run must be a "
                                         "different file"):
        run_cli(input_file=str(corpus), output_file=outputs)
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "sub"]


@pytest.mark.parametrize("output, message", [
    ("", "is a directory"),
    ("new_dir/", "--output_file '.*new_dir/' names a directory"),
    ("corpus.txt/o.tfrecord", "corpus.txt' is a file, not a directory"),
])
def test_unwritable_output_is_refused_before_any_work(tmp_path, corpus, output, message):
    with pytest.raises(SystemExit, match=message):
        run_cli(input_file=str(corpus), output_file=os.path.join(str(tmp_path), output))
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt"]


class DyingProcessor(ChunkProcessor):
    """Its worker process dies on its first chunk, as one killed for memory would."""

    def process(self, chunk):
        os._exit(3)


def test_dead_worker_ends_in_a_clear_message(tmp_path, corpus, monkeypatch):
    monkeypatch.setattr(create_pretraining_data, "ChunkProcessor", DyingProcessor)
    with pytest.raises(SystemExit, match="a worker process died .* Try fewer --num_workers"):
        run_cli(input_file=str(corpus), output_file=str(tmp_path / "out" / "o.tfrecord"),
                num_workers=2)
    assert os.listdir(tmp_path / "out") == []


# --- stopping a run with workers -----------------------------------------------------------------------

@pytest.fixture
def running_generator(tmp_path):
    """Starts create_pretraining_data with 2 workers on a corpus that keeps them busy for minutes
    (own session); yields (process, worker pids, output path, stderr path) once they work."""
    output = tmp_path / "out" / "o.tfrecord"
    stderr_path = tmp_path / "stderr.txt"
    corpus = write_corpus(tmp_path / "big.txt", bundled_documents(10_000))  # 30,000 sentences
    with open(stderr_path, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "data_prep.create_pretraining_data", f"--input_file={corpus}",
             f"--output_file={output}", f"--spm_model_file={spm_fixtures.cached_tiny_spm()}",
             "--max_seq_length=128",
             "--dupe_factor=40", "--chunk_documents=50", "--num_workers=2"],
            cwd=REPO_ROOT, env=subprocess_env(), stderr=stderr, stdout=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=ctrl_c_enabled)
    workers = []
    try:
        workers = wait_for(lambda: len(child_pids(process.pid)) == 2 and child_pids(process.pid),
                           120, "two worker processes")
        wait_for(lambda: glob.glob(f"{output.parent}/.o.tfrecord.*.tmp"), 30, "the temporary file")
        yield process, workers, output, stderr_path
    finally:
        for pid in (process.pid, *workers):  # only if the test failed: nothing may outlive it
            if is_alive(pid):
                os.kill(pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.mark.subprocess  # Ctrl-C and SIGTERM
@pytest.mark.parametrize("how, status, cause", [
    ("SIGTERM to the parent", 128 + signal.SIGTERM, "SIGTERM"),
    ("Ctrl-C to the process group", 128 + signal.SIGINT, "Ctrl-C"),
])
def test_stop_ends_workers_and_removes_the_temporary_file(running_generator, how, status, cause):
    process, workers, output, stderr_path = running_generator
    if how.startswith("SIGTERM"):
        process.send_signal(signal.SIGTERM)
    else:
        os.killpg(process.pid, signal.SIGINT)
    assert process.wait(timeout=30) == status
    stderr = stderr_path.read_text()
    assert f"create_pretraining_data: stopped by {cause}; nothing was written" in stderr
    assert "Traceback" not in stderr
    wait_for(lambda: not any(map(is_alive, workers)), 10, "the workers to end")
    assert os.listdir(output.parent) == []


@pytest.mark.subprocess  # kill -9
def test_kill_9_ends_workers_and_the_next_run_removes_the_temporary_file(running_generator, corpus):
    process, workers, output, _ = running_generator
    process.kill()
    assert process.wait(timeout=30) == -signal.SIGKILL
    wait_for(lambda: not any(map(is_alive, workers)), 10, "the workers to end with their parent")
    (temporary,) = os.listdir(output.parent)
    assert temporary.startswith(".o.tfrecord.")
    run_cli(input_file=str(corpus), output_file=str(output))
    assert sorted(os.listdir(output.parent)) == ["o.tfrecord", "o.tfrecord.stats.json"]
