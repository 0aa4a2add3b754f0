"""Cost of the in-graph input checks of a serving signature: the GLUE classifier's ids SavedModel
with and without them.

Builds an ``AlbertClassifierModel`` (``--albert_config_file``, albert base by default; ``--tiny``:
the 2-layer test model of tests/shared_setup.py, where the checks weigh most) with its random
initial weights, then writes to a temporary directory, deleted afterwards,

- ``checked``: the ids SavedModel that run_classifier's ``--export_dir`` writes (``export_classifier``,
  ``<export_dir>/ids_only``), whose ``serving_default`` runs the checks of
  albert_tf/serving/input_checks.py (shapes, lengths, id ranges) before the model;
- ``unchecked``: the same outputs (``ClassifierServing.outputs_from_ids``) saved without them.

Both are loaded back with ``tf.saved_model.load`` and their signature called on the same
``--batch_size`` x ``--max_seq_length`` random ids, taking turns call by call so that both see the
same load of a shared machine: ``--warmup_calls`` untimed calls, then ``--timed_calls`` timed ones.

Printed: per model the median, 10th and 90th percentile of the latency per call and the median CPU
time per call (user + system of this process: the figure other jobs disturb least); the
differences checked - unchecked; whether the outputs are identical; the load average. Figures
only, never pass/fail.

    .venv/bin/python benchmarks/bench_serving_checks.py --tiny --max_seq_length=16
    .venv/bin/python benchmarks/bench_serving_checks.py --max_seq_length=128
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from albert_tf.models.config import AlbertConfig  # noqa: E402
from albert_tf.serving.saved_model import IDS_ONLY, ids_specs  # noqa: E402
from albert_tf.tasks.classification.model import AlbertClassifierModel  # noqa: E402
from albert_tf.tasks.classification.serving import (ClassifierServing,  # noqa: E402
                                                    export_classifier)
from benchmarks.machine_load import load_average  # noqa: E402
from benchmarks.serving_engines import Inputs, define_model_flags, model_config  # noqa: E402

FLAGS = flags.FLAGS

define_model_flags()
flags.DEFINE_integer("max_seq_length", 128, "Sequence length S of the timed input.")
flags.DEFINE_integer("batch_size", 1, "Examples per call.")
flags.DEFINE_integer("warmup_calls", 20, "Untimed calls per model before timing.")
flags.DEFINE_integer("timed_calls", 200, "Timed calls per model.")


def save_unchecked(model: AlbertClassifierModel, path: str) -> None:
    """The export's outputs on ids, saved without the checks (what the export computes after them)."""
    module = ClassifierServing(model)
    unchecked = tf.function(lambda ids: module.outputs_from_ids(**ids), autograph=False,
                            input_signature=[{spec.name: spec for spec in ids_specs()}])
    tf.saved_model.save(module, path, signatures={"serving_default": unchecked})


def time_interleaved(signatures: dict, inputs: Inputs) -> dict[str, tuple]:
    """{name: (wall seconds per timed call, CPU seconds per timed call, last probabilities)}."""
    tensors = {name: tf.constant(value) for name, value in inputs.items()}
    for _ in range(FLAGS.warmup_calls):
        for signature in signatures.values():
            signature(**tensors)
    walls = {name: [] for name in signatures}
    cpus = {name: [] for name in signatures}
    last = {}
    for _ in range(FLAGS.timed_calls):
        for name, signature in signatures.items():
            wall_start, cpu_start = time.perf_counter(), time.process_time()
            last[name] = signature(**tensors)["probabilities"].numpy()
            walls[name].append(time.perf_counter() - wall_start)
            cpus[name].append(time.process_time() - cpu_start)
    return {name: (np.array(walls[name]), np.array(cpus[name]), last[name])
            for name in signatures}


def random_inputs(config: AlbertConfig, batch_size: int, seq_length: int) -> Inputs:
    rng = np.random.default_rng(0)
    segment_ids = np.zeros([batch_size, seq_length], np.int32)
    segment_ids[:, seq_length // 2:] = 1
    return {"input_ids": rng.integers(5, config.vocab_size, [batch_size, seq_length], np.int32),
            "input_mask": np.ones([batch_size, seq_length], np.int32),
            "segment_ids": segment_ids}



def main(argv: list[str]) -> None:
    del argv
    config, model_name = model_config()
    seq_length = FLAGS.max_seq_length
    if not 1 <= seq_length <= config.max_position_embeddings:
        raise app.UsageError(f"--max_seq_length must lie in [1, {config.max_position_embeddings}].")
    print(f"{model_name}: classifier, batch "
          f"{FLAGS.batch_size}, S={seq_length}; {os.cpu_count()} CPUs; TensorFlow "
          f"{tf.__version__}; load average {load_average()}", flush=True)
    model = AlbertClassifierModel(config, 2)
    scratch = tempfile.mkdtemp(prefix="bench_serving_checks_")
    try:
        export_dir = export_classifier(model, os.path.join(scratch, "export"))
        save_unchecked(model, os.path.join(scratch, "unchecked"))
        signatures = {
            name: tf.saved_model.load(path).signatures["serving_default"]
            for name, path in (("checked", os.path.join(export_dir, IDS_ONLY)),
                               ("unchecked", os.path.join(scratch, "unchecked")))}
        results = time_interleaved(signatures, random_inputs(config, FLAGS.batch_size, seq_length))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"{'':>10} {'median ms':>9} {'p10 ms':>7} {'p90 ms':>7} {'CPU ms/call':>11}")
    for name, (walls, cpus, _) in results.items():
        p10, median, p90 = np.percentile(walls, [10, 50, 90]) * 1e3
        print(f"{name:>10} {median:9.3f} {p10:7.3f} {p90:7.3f} {np.median(cpus) * 1e3:11.3f}")
    (checked_walls, checked_cpus, checked), (walls, cpus, unchecked) = results.values()
    print(f"checked - unchecked: median latency "
          f"{(np.median(checked_walls) - np.median(walls)) * 1e3:+.3f} ms, CPU per call "
          f"{(np.median(checked_cpus) - np.median(cpus)) * 1e3:+.3f} ms; identical outputs: "
          f"{np.array_equal(checked, unchecked)}; load average {load_average()}")


if __name__ == "__main__":
    app.run(main)
