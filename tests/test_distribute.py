"""albert_tf/training/distribute.py: strategies on CPU, logical CPU devices, TF_CONFIG checks, two
local workers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import tensorflow as tf

from albert_tf.training.distribute import configure_logical_cpus, create_strategy
from tests.shared_setup import REPO_ROOT, free_ports, subprocess_env


def _python(script: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """Starts ``script`` in a fresh interpreter (TF devices can only be configured before initialization)."""
    return subprocess.Popen([sys.executable, "-c", script], cwd=REPO_ROOT,
                            env=subprocess_env(**(extra_env or {})), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _result(proc: subprocess.Popen, timeout: float = 240) -> dict:
    stdout, stderr = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, stderr[-3000:]
    line = [ln for ln in stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def test_one_device_on_cpu():
    strategy = create_strategy("one_device")
    assert strategy.num_replicas_in_sync == 1
    assert strategy.extended.worker_devices[0].endswith("CPU:0")
    with strategy.scope():
        variable = tf.Variable(1.0)
    assert variable.device.endswith("CPU:0")


def test_mirrored_on_cpu_uses_every_cpu_device():
    strategy = create_strategy("mirrored")
    assert strategy.num_replicas_in_sync == len(tf.config.list_logical_devices("CPU"))


def test_asking_for_missing_gpus_is_an_error():
    if tf.config.list_logical_devices("GPU"):
        pytest.skip("GPUs are visible")
    with pytest.raises(ValueError, match="num_gpus=2 but only 0 GPU"):
        create_strategy("mirrored", num_gpus=2)


@pytest.mark.parametrize("name", ["mirror", "Mirrored", "tpu ", ""])
def test_unknown_strategy_lists_valid_names(name):
    with pytest.raises(ValueError) as error:
        create_strategy(name)
    assert str(error.value) == (f"Unknown strategy {name!r}; valid names are ['one_device', "
                                "'mirrored', 'multi_worker_mirrored', 'tpu'].")


@pytest.mark.parametrize("tf_config,message", [
    (None, "needs the TF_CONFIG environment variable"),
    ("{cluster: 1", "TF_CONFIG is not valid JSON"),
    ('{"cluster": {"worker": ["localhost:1"]}}', "TF_CONFIG must hold the objects 'cluster' and 'task'"),
    ('{"cluster": {"worker": ["localhost:1"]}, "task": {"type": "chief", "index": 0}}',
     "task type 'chief' has no address list"),
    ('{"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 1}}',
     "task index 1 is not in \\[0, 1\\)"),
])
def test_multi_worker_needs_a_valid_tf_config(monkeypatch, tf_config, message):
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(ValueError, match=message):
        create_strategy("multi_worker_mirrored")


def test_configure_logical_cpus_rejects_bad_counts():
    with pytest.raises(ValueError, match="num_devices"):
        configure_logical_cpus(0)


_LOGICAL_CPUS_SCRIPT = r"""
import json
from albert_tf.training.distribute import configure_logical_cpus, create_strategy
configure_logical_cpus(2)
import tensorflow as tf
strategy = create_strategy("mirrored")
summed = strategy.reduce(
    tf.distribute.ReduceOp.SUM,
    strategy.run(lambda: tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group + 1,
                                 tf.float32)),
    axis=None)
configure_logical_cpus(2)  # already in effect: allowed
try:
    configure_logical_cpus(3)
    late_error = ""
except RuntimeError as err:
    late_error = str(err)
print("RESULT" + json.dumps({"replicas": strategy.num_replicas_in_sync, "sum": float(summed),
                             "devices": list(strategy.extended.worker_devices), "late_error": late_error}))
"""


@pytest.mark.subprocess  # logical CPUs are set before TensorFlow starts
def test_logical_cpus_make_a_two_replica_mirrored_strategy():
    result = _result(_python(_LOGICAL_CPUS_SCRIPT))
    assert result["replicas"] == 2
    assert [d.rsplit("/", 1)[-1] for d in result["devices"]] == ["device:CPU:0", "device:CPU:1"]
    assert result["sum"] == 3.0
    assert "must be called before TensorFlow initializes its devices" in result["late_error"]


_WORKER_SCRIPT = r"""
import json
from albert_tf.training.distribute import create_strategy
strategy = create_strategy("multi_worker_mirrored")
import tensorflow as tf
task = strategy.cluster_resolver.task_id
summed = strategy.reduce(tf.distribute.ReduceOp.SUM,
                         strategy.run(lambda: tf.constant(10.0 ** task)), axis=None)
print("RESULT" + json.dumps({"task": task, "replicas": strategy.num_replicas_in_sync, "sum": float(summed)}))
"""


@pytest.mark.subprocess  # workers are processes
def test_multi_worker_mirrored_with_two_local_workers():
    workers = [f"localhost:{port}" for port in free_ports(2)]
    procs = [_python(_WORKER_SCRIPT, {"TF_CONFIG": json.dumps(
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})}) for index in range(2)]
    try:
        results = [_result(proc) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert sorted(r["task"] for r in results) == [0, 1]
    for result in results:
        assert result["replicas"] == 2
        assert result["sum"] == 11.0
