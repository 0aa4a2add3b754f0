"""One run per output directory (albert_tf/files/run_lock.py, run_flags.lock_output_dir): a second
run is refused at start naming the holder, a stale lock of a killed run is taken over (and the run
resumes), the lock goes away when the run ends (normally, on an error, on Ctrl-C), and a separate
evaluation job still runs beside training. The scripts run in the test process
(tests/command_runner.py) against a lock held by a live process (``live_process``); Ctrl-C and a
killed run's resume run the script in a process of its own."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest

from albert_tf.files import run_lock
from albert_tf.files.run_manifest import MANIFEST_NAME, read_manifest
from albert_tf.files.processes import process_start_time
from tests.command_runner import run_command
from tests.shared_setup import (REFERENCE_MAX_PREDICTIONS, REFERENCE_SEQ_LENGTH, REPO_ROOT,
                                ctrl_c_enabled, subprocess_env, tiny_config)

HOST = socket.gethostname()


def dead_pid():
    """The id of a process that has ended (and been reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def write_lock(directory, role="training", host=HOST, pid=None, process_start=None,
               command="python run_classifier.py --output_dir=x", cluster=None):
    """A lock file as another run would have written it; returns its path."""
    path = run_lock.lock_path(str(directory), role)
    holder = dict(host=host, pid=dead_pid() if pid is None else pid, process_start=process_start,
                  started="2024-05-01T12:00:00+00:00", command=command, cluster=cluster,
                  token="theirs")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(holder, handle)
    return path


@pytest.fixture
def live_process():
    """A running process of this machine (standing in for another run) and its start time."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    yield process.pid, process_start_time(process.pid)
    process.kill()
    process.wait()


# -- the lock --------------------------------------------------------------------------------------

def test_a_held_lock_refuses_a_second_run_naming_the_holder(tmp_path):
    lock = run_lock.acquire(str(tmp_path), run_lock.TRAINING)
    with pytest.raises(run_lock.DirectoryInUseError) as refused:
        run_lock.acquire(str(tmp_path), run_lock.TRAINING)
    holder = lock.holder
    assert str(refused.value) == (
        f"{tmp_path} is in use by the run of {HOST} pid {os.getpid()} started {holder.started} "
        f"({holder.command}); wait for it or use another --output_dir")
    # The other role is another lock: an evaluation job beside the training one.
    evaluation = run_lock.acquire(str(tmp_path), run_lock.EVALUATION)
    lock.release()
    assert not os.path.exists(lock.path) and os.path.exists(evaluation.path)
    run_lock.acquire(str(tmp_path), run_lock.TRAINING).release()


def test_a_lock_of_a_process_that_is_gone_is_taken_over(tmp_path, caplog):
    path = write_lock(tmp_path)
    lock = run_lock.acquire(str(tmp_path), run_lock.TRAINING)
    assert json.load(open(path))["token"] == lock.holder.token
    assert "no longer runs" in caplog.text


@pytest.mark.subprocess  # the holder is a live process
def test_a_lock_whose_pid_now_belongs_to_another_process_is_taken_over(tmp_path, live_process):
    pid, started = live_process
    write_lock(tmp_path, pid=pid, process_start=started - 1)  # the id, reused by a later process
    run_lock.acquire(str(tmp_path), run_lock.TRAINING)
    write_lock(tmp_path, role="evaluation", pid=pid, process_start=started)  # that very process
    with pytest.raises(run_lock.DirectoryInUseError, match=f"pid {pid} started"):
        run_lock.acquire(str(tmp_path), run_lock.EVALUATION)


def test_a_lock_of_another_machine_is_never_taken_over_and_says_how_to_remove_it(tmp_path):
    path = write_lock(tmp_path, host="another-host")
    with pytest.raises(run_lock.DirectoryInUseError,
                       match=f"run of another-host pid .*; wait for it or use another "
                             f"--output_dir \\(if that run of another machine no longer runs, "
                             f"which this one cannot check, delete {path}\\)"):
        run_lock.acquire(str(tmp_path), run_lock.TRAINING)
    assert json.load(open(path))["token"] == "theirs"


def test_an_unreadable_lock_is_refused_with_how_to_remove_it(tmp_path):
    path = run_lock.lock_path(str(tmp_path), run_lock.TRAINING)
    open(path, "w").close()
    with pytest.raises(run_lock.DirectoryInUseError, match=f"cannot be read.*delete {path}"):
        run_lock.acquire(str(tmp_path), run_lock.TRAINING)


def test_release_removes_only_this_runs_lock(tmp_path):
    lock = run_lock.acquire(str(tmp_path), run_lock.TRAINING)
    write_lock(tmp_path)  # replaced meanwhile (by hand): not ours any more
    lock.release()
    lock.release()
    assert json.load(open(lock.path))["token"] == "theirs"


def test_two_runs_taking_over_one_stale_lock_at_once_cannot_both_win(tmp_path):
    write_lock(tmp_path)
    barrier, outcomes = threading.Barrier(8), []

    def start():
        barrier.wait()
        try:
            outcomes.append(run_lock.acquire(str(tmp_path), run_lock.TRAINING))
        except run_lock.DirectoryInUseError as error:
            outcomes.append(error)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [outcome for outcome in outcomes if isinstance(outcome, run_lock.RunLock)]
    assert len(outcomes) == 8 and len(won) == 1
    assert json.load(open(won[0].path))["token"] == won[0].holder.token
    assert [name for name in os.listdir(tmp_path) if name.endswith(".tmp")] == []


@pytest.mark.subprocess  # the holder is a live process
def test_the_workers_of_a_multi_worker_job_accept_only_their_chiefs_lock(tmp_path, live_process):
    pid, started = live_process
    ours = {"worker": ["host1:1234", "host2:1234"]}
    write_lock(tmp_path, pid=pid, process_start=started, cluster=ours)
    run_lock.check_lock_of_cluster(str(tmp_path), run_lock.TRAINING, ours)
    with pytest.raises(run_lock.DirectoryInUseError, match=f"pid {pid}"):
        run_lock.check_lock_of_cluster(str(tmp_path), run_lock.TRAINING,
                                       {"worker": ["host3:1234", "host4:1234"]})
    run_lock.check_lock_of_cluster(str(tmp_path), run_lock.EVALUATION, ours)  # no lock: fine


def test_without_atomic_creation_gs_style_paths_still_refuse_and_release():
    directory = "ram://run_lock_test/out"
    import tensorflow as tf
    tf.io.gfile.makedirs(directory)
    lock = run_lock.acquire(directory, run_lock.TRAINING)
    with pytest.raises(run_lock.DirectoryInUseError, match=f"{directory} is in use by the run of"):
        run_lock.acquire(directory, run_lock.TRAINING)
    lock.release()
    assert not tf.io.gfile.exists(lock.path)


def test_a_manifest_update_undone_by_another_machines_write_is_made_again(monkeypatch):
    """gs://-style directories have no flock: a write of another job (read before this one's write)
    that lands right after it undoes this change; the update reads the file back and makes it
    again on what is there, keeping both. A file another job keeps overwriting is refused."""
    import tensorflow as tf
    from albert_tf.files import run_manifest
    directory = "ram://manifest_race/out"
    tf.io.gfile.makedirs(directory)
    run_manifest.update_manifest(directory, lambda content: content.update(trained={
        "step": 10, "checkpoint": "model.ckpt-10"}))
    stale = read_manifest(directory).content  # what the other job read before this update
    real_write = run_manifest.atomic_write_text
    writes = []

    def write_then_other_job(path, text):
        real_write(path, text)
        writes.append(json.loads(text))
        if len(writes) == 1:  # the other job's write, of what it read plus its own change
            other = json.loads(json.dumps(stale))
            other["trained"] = {"step": 20, "checkpoint": "model.ckpt-20"}
            real_write(path, json.dumps(other))

    monkeypatch.setattr(run_manifest, "atomic_write_text", write_then_other_job)
    best = {"step": 10, "selection_metric": "acc", "metrics": {"acc": 0.5}}
    result = run_manifest.update_manifest(directory, lambda content: content.update(best=best))
    assert len(writes) == 2
    assert result.best == best and result.trained["step"] == 20
    assert read_manifest(directory).content == result.content

    def another_job_always(path, text):
        real_write(path, text)
        real_write(path, json.dumps(stale))

    monkeypatch.setattr(run_manifest, "atomic_write_text", another_job_always)
    later = dict(best, step=20)
    with pytest.raises(run_manifest.RunManifestError, match="another job wrote it each of the 5"):
        run_manifest.update_manifest(directory, lambda content: content.update(best=later))


# -- the scripts -----------------------------------------------------------------------------------

def run_script(script, *args):
    return run_command(script, *args)


def last_error_line(result):
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result.stderr.strip().splitlines()[-1]


# Flags that reach the lock: complete (the flag checks come first), naming files that exist (the
# pre-flight check of the declared files comes next); the lock comes before any file is read.
MODEL_FLAGS = ["--albert_config_file={tmp}/cfg.json", "--spm_model_file={tmp}/spm.model"]
SCRIPT_FLAGS = {
    "run_pretraining.py": ["--albert_config_file={tmp}/cfg.json", "--input_file={tmp}/x.tfrecord"],
    "run_classifier.py": [*MODEL_FLAGS, "--do_train", "--train_file={tmp}/x.csv"],
    "run_squad.py": [*MODEL_FLAGS, "--do_train", "--train_file={tmp}/x.json"],
    "run_race.py": [*MODEL_FLAGS, "--do_train", "--do_eval", "--data_dir={tmp}/race"],
    "run_ner.py": [*MODEL_FLAGS, "--do_train", "--train_file={tmp}/x.conll"],
}


def script_inputs(tmp_path) -> None:
    """The files SCRIPT_FLAGS name (never read: the lock stops each script first)."""
    for name in ("x.tfrecord", "x.csv", "x.json", "x.conll", "cfg.json", "spm.model"):
        (tmp_path / name).write_bytes(b"")
    for split in ("train", "dev"):
        for level in ("middle", "high"):
            (tmp_path / "race" / "RACE" / split / level).mkdir(parents=True)
            (tmp_path / "race" / "RACE" / split / level / "1.txt").write_text("{}")


@pytest.mark.subprocess  # the holder is a live process
@pytest.mark.parametrize("script", sorted(SCRIPT_FLAGS))
def test_each_script_refuses_a_directory_another_run_trains_in(tmp_path, script, live_process):
    pid, started = live_process
    script_inputs(tmp_path)
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    path = write_lock(output_dir, pid=pid, process_start=started,
                      command="python run_x.py --output_dir=out")
    before = open(path).read()
    result = run_script(script, f"--output_dir={output_dir}",
                        *[flag.format(tmp=tmp_path) for flag in SCRIPT_FLAGS[script]])
    assert last_error_line(result) == (
        f"{script[:-3]}: error: {output_dir} is in use by the run of {HOST} pid {pid} started "
        "2024-05-01T12:00:00+00:00 (python run_x.py --output_dir=out); wait for it or use "
        "another --output_dir")
    assert open(path).read() == before
    # Nothing written but the run manifest's owned names, which list the names albert_tf runs
    # write there (the holder's run wrote the same): no record of what the checkpoints are.
    assert sorted(set(os.listdir(output_dir)) - {MANIFEST_NAME}) == [os.path.basename(path)]
    if (output_dir / MANIFEST_NAME).exists():
        assert read_manifest(str(output_dir)).content["facts"] == {}


@pytest.mark.subprocess  # the holder is a live process
def test_an_evaluation_job_runs_beside_training_but_not_beside_another_evaluation(tmp_path,
                                                                                  live_process):
    pid, started = live_process
    write_lock(tmp_path, pid=pid, process_start=started)
    # Past the lock: stopped by the config, read after it.
    (tmp_path / "dev.csv").write_text("text,label\na,x\n")
    evaluation = [f"--output_dir={tmp_path}", "--nodo_train", "--do_eval",
                  f"--dev_file={tmp_path / 'dev.csv'}", f"--albert_config_file={tmp_path}/no.json",
                  f"--spm_model_file={tmp_path}/spm.model"]
    beside = run_script("run_classifier.py", *evaluation)
    assert last_error_line(beside) == (
        f"run_classifier: error: ALBERT config file not found: {tmp_path}/no.json")
    assert not os.path.exists(run_lock.lock_path(str(tmp_path), run_lock.EVALUATION))
    write_lock(tmp_path, role="evaluation", pid=pid, process_start=started)
    second = run_script("run_classifier.py", *evaluation)
    assert f"is in use by the run of {HOST} pid {pid}" in last_error_line(second)


def test_the_lock_is_released_after_an_error(tmp_path):
    path = write_lock(tmp_path)  # stale: taken over, so the run did hold it
    (tmp_path / "train.csv").write_text("text,label\na,x\n")
    result = run_script("run_classifier.py", f"--output_dir={tmp_path}", "--do_train",
                        f"--train_file={tmp_path / 'train.csv'}",
                        f"--spm_model_file={tmp_path}/spm.model",
                        f"--albert_config_file={tmp_path}/missing.json")
    assert last_error_line(result) == (
        f"run_classifier: error: ALBERT config file not found: {tmp_path}/missing.json")
    assert "taking over" in result.stderr
    assert not os.path.exists(path)


@pytest.mark.slow
@pytest.mark.subprocess  # Ctrl-C, and a killed run's lock
def test_ctrl_c_releases_the_lock_and_a_killed_runs_lock_does_not_stop_the_resume(
        tmp_path, pretraining_records):
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(tiny_config().to_json_string())
    output_dir = tmp_path / "out"
    command = [sys.executable, os.path.join(REPO_ROOT, "run_pretraining.py"),
               f"--albert_config_file={config_file}", f"--input_file={pretraining_records}",
               f"--output_dir={output_dir}", f"--max_seq_length={REFERENCE_SEQ_LENGTH}",
               f"--max_predictions_per_seq={REFERENCE_MAX_PREDICTIONS}", "--train_batch_size=2",
               "--num_warmup_steps=0", "--save_checkpoints_steps=2", "--iterations_per_loop=2"]
    lock_path = run_lock.lock_path(str(output_dir), run_lock.TRAINING)
    process = subprocess.Popen([*command, "--num_train_steps=1000"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env=subprocess_env(),
                               cwd=REPO_ROOT, preexec_fn=ctrl_c_enabled)
    for line in process.stdout:
        if line.startswith("Saved checkpoint"):
            assert json.load(open(lock_path))["pid"] == process.pid
            process.send_signal(signal.SIGINT)
            break
    process.communicate(timeout=120)
    assert process.returncode != 0 and not os.path.exists(lock_path)

    write_lock(output_dir)  # as left by a run killed with kill -9
    resumed = subprocess.run([*command, "--num_train_steps=4"], capture_output=True, text=True,
                             env=subprocess_env(), cwd=REPO_ROOT, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resumed from" in resumed.stdout and "taking over" in resumed.stderr
    assert (output_dir / "model.ckpt-4.index").exists() and not os.path.exists(lock_path)
