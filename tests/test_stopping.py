"""Ctrl-C and SIGTERM end every command the same way (albert_tf/cli/error_boundary.py): the
cleanup runs (no temporary output stays), one line ``<program>: stopped by ...; <what is left>``,
exit status 130 or 143, no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Callable, TypeVar

import pytest

from albert_tf.cli.error_boundary import TRAINING_STOPPED
from albert_tf.files.atomic import is_temporary_path
from tests.shared_setup import (EN8K_MODEL, REPO_ROOT, SHARED_DATA_DIR, child_pids,
                                ctrl_c_enabled, is_alive, subprocess_env, tiny_config, wait_for,
                                write_repeated_squad)

SQUAD_SAMPLE = os.path.join(SHARED_DATA_DIR, "squad", "dev-v1.1-sample.json")
SST2_DIR = os.path.join(SHARED_DATA_DIR, "glue", "SST-2")
T = TypeVar("T")


def start(arguments: list[str]) -> subprocess.Popen:
    """``python <arguments>`` in a session of its own, as a terminal starts a command (Ctrl-C's
    default action set), its stderr piped."""
    return subprocess.Popen(
        [sys.executable, *arguments], cwd=REPO_ROOT, env=subprocess_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=ctrl_c_enabled)


def stop_when(process: subprocess.Popen, ready: Callable[[], T], timeout: float, what: str,
              how: str) -> tuple[T, int, str]:
    """Once ``ready()`` is true (within ``timeout`` seconds, ``what`` naming it), sends SIGTERM to
    the process, or Ctrl-C's SIGINT to its process group (as a terminal does); returns what
    ``ready()`` gave, the exit status and stderr. The process is killed if that fails."""
    try:
        value = wait_for(ready, timeout, what)
        if how == "SIGTERM":
            process.send_signal(signal.SIGTERM)
        else:
            os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
        return value, process.returncode, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


@pytest.mark.subprocess  # Ctrl-C and SIGTERM
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("how, status", [("SIGTERM", 143), ("Ctrl-C", 130)])
def test_a_stopped_squad_conversion_leaves_nothing(tmp_path, how, status):
    source = tmp_path / "squad.json"
    write_repeated_squad([SQUAD_SAMPLE], str(source), copies=500)
    output_dir = tmp_path / "out"
    process = start(["-m", "data_prep.squad", f"--input_file={source}",
                     f"--output_file={output_dir / 'features.tfrecord'}",
                     f"--spm_model_file={EN8K_MODEL}", "--num_workers=2"])
    workers, returncode, stderr = stop_when(
        process, lambda: len(child_pids(process.pid)) == 2 and child_pids(process.pid), 120,
        "two worker processes", how)
    assert returncode == status, stderr
    assert stderr.strip().splitlines() == [f"squad: stopped by {how}; no partial output was left"]
    wait_for(lambda: not any(map(is_alive, workers)), 10, "the workers to end")
    assert not output_dir.exists() or not os.listdir(output_dir)


def loading_tensorflow(pid: int) -> bool:
    """Whether the process has mapped a library of TensorFlow: its import has begun, and takes
    seconds more."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
            return f"{os.sep}tensorflow{os.sep}" in maps.read()
    except OSError:  # not started yet, or ended
        return False


@pytest.mark.subprocess  # Ctrl-C and SIGTERM
@pytest.mark.parametrize("how, status", [("SIGTERM", 143), ("Ctrl-C", 130)])
@pytest.mark.parametrize("program, command", [
    ("glue", ["-m", "data_prep.glue", "--task_name=rte", "--data_dir={tmp}/glue",
              "--spm_model_file={tmp}/x.model", "--cached_dir={tmp}/out"]),
    ("run_classifier", ["run_classifier.py", "--task_name=rte", "--data_dir={tmp}/glue",
                        "--albert_config_file={tmp}/x.json", "--spm_model_file={tmp}/x.model",
                        "--output_dir={tmp}/out", "--do_train"]),
])
def test_a_stop_while_tensorflow_loads_is_one_line(tmp_path, how, status, program, command):
    # It used to end silently (SIGTERM, status 143) or with the traceback of the import (Ctrl-C).
    process = start([part.format(tmp=tmp_path) for part in command])
    _, returncode, stderr = stop_when(process, lambda: loading_tensorflow(process.pid), 60,
                                      "TensorFlow's import to begin", how)
    assert returncode == status, stderr
    assert stderr.splitlines() == [
        f"{program}: stopped by {how} while starting; nothing was written"]
    assert not (tmp_path / "out").exists()


def endless_training(tmp_path) -> list[str]:
    """run_classifier's flags (but --output_dir) of a tiny SST-2 training run that saves a
    checkpoint every 2 steps and would go on for 100,000 (its data and config made in
    ``tmp_path``)."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    os.symlink(SST2_DIR, data_dir / "SST-2")
    config = tmp_path / "config.json"
    config.write_text(tiny_config(max_position_embeddings=64).to_json_string())
    return ["--task_name=sst-2", f"--data_dir={data_dir}", f"--albert_config_file={config}",
            f"--spm_model_file={EN8K_MODEL}", "--max_seq_length=64", "--do_train",
            "--train_step=100000", "--save_checkpoints_steps=2", "--iterations_per_loop=1",
            "--train_batch_size=2"]


def temporaries(directory) -> list[str]:
    """The temporary files of unfinished writes in ``directory`` (albert_tf/files/atomic.py)."""
    return [name for name in (os.listdir(directory) if os.path.isdir(directory) else [])
            if is_temporary_path(name)]


@pytest.mark.subprocess  # SIGTERM
@pytest.mark.requires_shared_data
def test_sigterm_while_a_training_script_loads_is_one_line_and_leaves_no_temporary(tmp_path):
    """A training script stopped after TensorFlow loaded but before its training loop (here while
    it writes SST-2's 60,614 training features) stops as on Ctrl-C: the temporary feature file
    removed, one line, status 143. It used to end silently, the temporary left behind: the error
    boundary gave SIGTERM its default action from its start, not from the training loop's."""
    output_dir = tmp_path / "out"
    process = start(["run_classifier.py", *endless_training(tmp_path),
                     f"--output_dir={output_dir}"])
    written, returncode, stderr = stop_when(
        process, lambda: temporaries(output_dir), 300, "the training features' temporary file",
        "SIGTERM")
    assert written[0].startswith(".sst-2_train_")
    assert returncode == 143, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == (
        f"run_classifier: stopped by SIGTERM; {TRAINING_STOPPED}")
    assert temporaries(output_dir) == [] and not list(output_dir.glob("model.ckpt-*"))


@pytest.mark.subprocess  # SIGTERM
@pytest.mark.requires_shared_data
def test_sigterm_ends_a_training_run_at_once_keeping_its_checkpoints(tmp_path):
    """SIGTERM ends the process at once (its default action; a handler would wait for the running
    TensorFlow loop), exit -15. (Ctrl-C is not tested here: a KeyboardInterrupt landing inside a
    TensorFlow op crashed the process once in three runs.)"""
    output_dir = tmp_path / "out"
    process = start(["run_classifier.py", *endless_training(tmp_path),
                     f"--output_dir={output_dir}"])
    _, returncode, stderr = stop_when(
        process, lambda: (output_dir / "model.ckpt-2.index").exists(), 300,
        "the first checkpoint", "SIGTERM")
    assert "Traceback" not in stderr
    assert returncode == -signal.SIGTERM, stderr
    assert (output_dir / "model.ckpt-2.index").exists()


@pytest.mark.slow  # run_seeds' processes stopped, about 15 s
@pytest.mark.subprocess  # SIGTERM
@pytest.mark.requires_shared_data
def test_a_stopped_run_seeds_ends_its_seed_and_says_what_is_kept(tmp_path):
    """A stop of the driver (a scheduler's SIGTERM) ends the seed it runs too, and says that the
    seeds' checkpoints are kept for a rerun (it said "no partial output was left")."""
    output_dir = tmp_path / "seeds"
    process = start(["-m", "albert_tf.run_seeds", "--seeds=1,2", f"--output_dir={output_dir}",
                     "--", "run_classifier.py", *endless_training(tmp_path), "--do_eval"])
    seed_runs, returncode, stderr = stop_when(
        process, lambda: (output_dir / "seed_1" / "model.ckpt-2.index").exists()
        and child_pids(process.pid), 300, "the first seed's first checkpoint", "SIGTERM")
    assert returncode == 143, stderr
    assert stderr.strip().splitlines()[-1] == (
        "run_seeds: stopped by SIGTERM; the finished seeds and the checkpoints of the stopped one "
        "are kept; rerun the same command to resume")
    wait_for(lambda: not any(map(is_alive, seed_runs)), 10, "the seed's run to end")
    assert (output_dir / "seed_1" / "model.ckpt-2.index").exists()
