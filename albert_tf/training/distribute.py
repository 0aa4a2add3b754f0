"""One ``tf.distribute.Strategy`` from a name: one device, mirrored, multi-worker mirrored or TPU.

The reference runs only on TPUEstimator (or one CPU/GPU); here every strategy drives the same training
loop. Scripts define the flags and call ``create_strategy``; this module defines no flags.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from albert_tf.errors.user_error import UserError

STRATEGY_NAMES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


class StrategyError(UserError, ValueError):
    """The strategy asked for cannot run here: more GPUs than are visible, a missing or malformed
    TF_CONFIG, a TPU that cannot be found (the message names the setting)."""


def configure_logical_cpus(num_devices: int) -> None:
    """Splits the physical CPU into ``num_devices`` logical CPU devices (for tests, or mirrored without GPUs).

    Must run before TensorFlow initializes its devices (before the first op, tensor or strategy).
    Calling it again with the number already in effect is allowed; any other late call raises
    RuntimeError.
    """
    if isinstance(num_devices, bool) or not isinstance(num_devices, int) or num_devices < 1:
        raise ValueError(f"num_devices must be an integer >= 1, got {num_devices!r}.")
    physical_cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            physical_cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)])
    except RuntimeError as err:
        if len(tf.config.list_logical_devices("CPU")) == num_devices:
            return
        raise RuntimeError(
            f"configure_logical_cpus({num_devices}) must be called before TensorFlow initializes its "
            "devices (before creating any tensor, variable or strategy); "
            f"{len(tf.config.list_logical_devices('CPU'))} CPU device(s) are already in use.") from err


def create_strategy(strategy: str, num_gpus: int = 0, tpu_name: str | None = None,
                    tpu_zone: str | None = None, gcp_project: str | None = None) -> tf.distribute.Strategy:
    """Builds the named strategy (one of ``STRATEGY_NAMES``).

    - "one_device": "/gpu:0" if a GPU is visible, else "/cpu:0" (``num_gpus`` is not needed).
    - "mirrored": ``num_gpus`` GPUs (all visible GPUs if 0); without GPUs, every logical CPU device
      (see ``configure_logical_cpus``). Asking for more GPUs than are visible is an error.
    - "multi_worker_mirrored": cluster from the TF_CONFIG environment variable; every local GPU (or the
      CPU) of each worker. Create it before any other TensorFlow op.
    - "tpu": ``TPUClusterResolver(tpu=tpu_name, zone=tpu_zone, project=gcp_project)``, connect and
      initialize the TPU system, then ``TPUStrategy``.
    """
    if strategy not in STRATEGY_NAMES:
        raise ValueError(f"Unknown strategy {strategy!r}; valid names are {list(STRATEGY_NAMES)}.")
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 0:
        raise ValueError(f"num_gpus must be an integer >= 0, got {num_gpus!r}.")
    if strategy == "one_device":
        use_gpu = bool(tf.config.list_logical_devices("GPU"))
        return tf.distribute.OneDeviceStrategy("/gpu:0" if use_gpu else "/cpu:0")
    if strategy == "mirrored":
        return tf.distribute.MirroredStrategy(devices=_mirrored_devices(num_gpus))
    if strategy == "multi_worker_mirrored":
        _check_tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()
    return _tpu_strategy(tpu_name, tpu_zone, gcp_project)


def _mirrored_devices(num_gpus: int) -> list[str]:
    gpus = tf.config.list_logical_devices("GPU")
    if num_gpus > len(gpus):
        raise StrategyError(f"num_gpus={num_gpus} but only {len(gpus)} GPU(s) are visible.")
    if gpus:
        return [gpu.name for gpu in gpus[:num_gpus or len(gpus)]]
    return [cpu.name for cpu in tf.config.list_logical_devices("CPU")]


def _check_tf_config() -> None:
    """Fails early, naming TF_CONFIG, where the multi-worker cluster description is missing or
    malformed (StrategyError)."""
    example = ('{"cluster": {"worker": ["host1:port", "host2:port"]}, '
               '"task": {"type": "worker", "index": 0}}')
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise StrategyError("Strategy multi_worker_mirrored needs the TF_CONFIG environment "
                            "variable, which is not set; set it on every worker, e.g. "
                            f"TF_CONFIG='{example}'.")
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as err:
        raise StrategyError(f"TF_CONFIG is not valid JSON ({err}); expected e.g. "
                            f"'{example}'.") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise StrategyError(f"TF_CONFIG must hold the objects 'cluster' and 'task'; got {raw!r}; "
                            f"expected e.g. '{example}'.")
    task_type, task_index = task.get("type"), task.get("index")
    members = cluster.get(task_type)
    if not isinstance(members, list) or not members:
        raise StrategyError(f"TF_CONFIG task type {task_type!r} has no address list in "
                            f"'cluster' (cluster keys: {sorted(cluster)}).")
    if (isinstance(task_index, bool) or not isinstance(task_index, int)
            or not 0 <= task_index < len(members)):
        raise StrategyError(f"TF_CONFIG task index {task_index!r} is not in [0, {len(members)}) "
                            f"for task type {task_type!r}.")


def _tpu_strategy(tpu_name: str | None, tpu_zone: str | None,
                  gcp_project: str | None) -> tf.distribute.Strategy:
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=tpu_name, zone=tpu_zone, project=gcp_project)
    except (ValueError, RuntimeError) as err:
        raise StrategyError(f"Could not find the TPU (tpu_name={tpu_name!r}, "
                            f"tpu_zone={tpu_zone!r}, gcp_project={gcp_project!r}): {err}") from err
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
