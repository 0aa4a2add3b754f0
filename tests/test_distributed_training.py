"""run_pretraining across processes: mirrored == one device (and resumes exactly with dropout),
multi-worker, kill and resume (marked ``subprocess``: logical CPUs are configured before
TensorFlow starts, workers are processes, a kill needs one; the runs around the killed one run in
the test process, tests/command_runner.py).

The records are made from the bundled corpus (the pretraining_records fixture of tests/conftest.py)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training.trainer import DROPOUT_SEED_KEY
from tests.command_runner import run_command
from tests.shared_setup import (DROPOUT, REFERENCE_MAX_PREDICTIONS, REFERENCE_SEQ_LENGTH,
                                REPO_ROOT, free_ports, subprocess_env, tiny_config)
from tests.tolerances import assert_below_defect, sum_tolerance

ENV = subprocess_env()


def pretraining_flags(config_file, records, output_dir, *extra):
    return [f"--albert_config_file={config_file}", f"--input_file={records}",
            f"--output_dir={output_dir}", f"--max_seq_length={REFERENCE_SEQ_LENGTH}",
            f"--max_predictions_per_seq={REFERENCE_MAX_PREDICTIONS}",
            "--train_batch_size=8", "--learning_rate=0.005", "--num_warmup_steps=2", *extra]


def pretraining_command(config_file, records, output_dir, *extra):
    """The command line of run_pretraining in a process of its own."""
    return [sys.executable, os.path.join(REPO_ROOT, "run_pretraining.py"),
            *pretraining_flags(config_file, records, output_dir, *extra)]


def write_config(tmp_path, **overrides):
    path = tmp_path / "albert_config.json"
    path.write_text(tiny_config(**overrides).to_json_string())
    return path


def model_weights(prefix):
    """Model weights of a Trainer checkpoint, keyed by the variable's checkpoint name."""
    reader = tf.train.load_checkpoint(prefix)
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
            if "VARIABLE_VALUE" in n and ("_trainable_variables/" in n or n.startswith("model/"))}


@pytest.mark.slow  # two pretraining processes and a resume, about 80 s
@pytest.mark.subprocess
def test_mirrored_on_two_logical_cpus_matches_one_device(tmp_path, pretraining_records):
    result = subprocess.run([sys.executable, "-m", "tests.mirrored_equivalence", str(tmp_path),
                             pretraining_records],
                            capture_output=True, text=True, env=ENV, cwd=REPO_ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["replicas"] == 2
    assert len(report["one_device"]) == len(report["mirrored"]) == 4
    # Per-step losses: sums of 8 x (20 MLM + 1 NSP) positive terms in another order (across
    # replicas, across parts), within sum_tolerance of their number, relative (measured 1e-7).
    # The weights after 4 LAMB steps, which magnify the rounding of near-zero gradients: within
    # DEFECT_FRACTION of the move of a one-example defect (measured 1.2e-7 against 1e-5 fixed).
    rtol = sum_tolerance(8 * (REFERENCE_MAX_PREDICTIONS + 1), 1.0)
    defect, scale = report["defect_weight_max_abs_diff"], report["weight_scale"]
    np.testing.assert_allclose(report["mirrored"], report["one_device"], rtol=rtol)
    assert_below_defect(report["weight_max_abs_diff"], defect, scale, "mirrored weights")
    # Each replica's batch run as two parts sorted by length: the same training.
    np.testing.assert_allclose(report["split"], report["one_device"], rtol=rtol)
    assert_below_defect(report["split_weight_max_abs_diff"], defect, scale, "split weights")
    # With dropout: the replicas draw other masks, and a resume gives the same weights bit for bit.
    first, second = report["replica_dropout_seeds"]
    assert first != second
    assert report["resumed_variables"] > 20 and report["resumed_max_abs_diff"] == 0.0


@pytest.mark.slow  # two worker processes, about 25 s
@pytest.mark.subprocess
def test_multi_worker_mirrored_with_two_local_workers(tmp_path, pretraining_records):
    # Dropout on, no --seed: the chief's random dropout seed is the one every worker uses.
    config_file = write_config(tmp_path, **DROPOUT)
    cluster = {"worker": [f"localhost:{port}" for port in free_ports(2)]}
    output_dir = tmp_path / "out"
    processes = []
    for index in range(2):
        env = dict(ENV, TF_CONFIG=json.dumps({"cluster": cluster,
                                              "task": {"type": "worker", "index": index}}))
        processes.append(subprocess.Popen(
            pretraining_command(config_file, pretraining_records, output_dir,
                                "--strategy=multi_worker_mirrored",
                                "--num_train_steps=6", "--save_checkpoints_steps=6",
                                "--iterations_per_loop=3"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT))
    outputs = [p.communicate(timeout=600) for p in processes]
    # Both workers' ends: when one fails, the other's error only says that its peer went away.
    assert [process.returncode for process in processes] == [0, 0], "\n".join(
        f"worker {index} (exit {process.returncode}):\n{err[-3000:]}"
        for index, (process, (_, err)) in enumerate(zip(processes, outputs)))
    assert "step 6/6" in outputs[0][0]  # the chief reports progress; the other worker is silent
    assert "step 6/6" not in outputs[1][0]
    chief_prefix = str(output_dir / "model.ckpt-6")
    worker_prefix = tf.train.latest_checkpoint(str(output_dir / ".worker_tmp" / "1"))
    seeds = [tf.train.load_checkpoint(prefix).get_tensor(DROPOUT_SEED_KEY)
             for prefix in (chief_prefix, worker_prefix)]
    assert seeds[0] == seeds[1]
    chief, worker = model_weights(chief_prefix), model_weights(worker_prefix)
    assert chief.keys() == worker.keys() and len(chief) > 10
    for name in chief:
        np.testing.assert_array_equal(chief[name], worker[name])


@pytest.mark.slow  # a killed run and its resume, about 15 s
@pytest.mark.subprocess
def test_killed_run_resumes_to_the_same_weights(tmp_path, pretraining_records):
    config_file = write_config(tmp_path, **DROPOUT)

    def run(output_dir, *extra):
        return run_command("run_pretraining.py", *pretraining_flags(
            config_file, pretraining_records, output_dir, *extra))

    flags = ["--num_train_steps=40", "--save_checkpoints_steps=10", "--iterations_per_loop=5",
             "--seed=7"]
    uninterrupted = run(tmp_path / "full", *flags)
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]

    interrupted_dir = tmp_path / "killed"
    process = subprocess.Popen(pretraining_command(config_file, pretraining_records,
                                                   interrupted_dir, *flags),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env=ENV, cwd=REPO_ROOT)
    for line in process.stdout:
        if line.startswith("Saved checkpoint") and line.strip().endswith("model.ckpt-10"):
            process.kill()  # SIGKILL: no clean shutdown
            break
    process.wait(timeout=60)
    latest = tf.train.latest_checkpoint(str(interrupted_dir))
    killed_at = int(latest.rsplit("-", 1)[1])
    assert 10 <= killed_at < 40, latest

    resumed = run(interrupted_dir, *flags)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Resumed from {latest} at step {killed_at}" in resumed.stdout
    want = model_weights(str(tmp_path / "full" / "model.ckpt-40"))
    got = model_weights(str(interrupted_dir / "model.ckpt-40"))
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)

    # An eval job beside training (--nodo_train --do_eval): sweeps every checkpoint, keeps the best.
    eval_flags = ["--nodo_train", "--do_eval", "--eval_batch_size=8", "--max_eval_steps=2"]
    evaluated = run(interrupted_dir, *flags, *eval_flags)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    results = (interrupted_dir / "eval_results.txt").read_text()
    steps = [int(line.split(" = ")[1]) for line in results.splitlines()
             if line.startswith("global_step")]
    assert steps == sorted(steps) and steps[-1] == 40
    assert (interrupted_dir / "model.ckpt-best.index").exists()
    # A step that never comes (no training run holds the directory) is not waited for: the sweep
    # ends at once with the results so far, saying so (a training run there: tests/test_cli_errors).
    waited = run(interrupted_dir, *flags[1:], "--num_train_steps=50", *eval_flags,
                 "--max_eval_wait_secs=300")
    assert waited.returncode == 0, waited.stderr[-3000:]
    output = waited.stdout + waited.stderr
    assert (f"No training run holds {interrupted_dir}: evaluated its checkpoints up to step 40 "
            "(step 50 will not come).") in output
    assert "Waiting for" not in output and "waiting for step 50" not in output
