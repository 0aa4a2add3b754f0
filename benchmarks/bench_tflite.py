"""Model size and CPU latency of the GLUE classifier: SavedModel vs TFLite, one example per call.

Builds an ``AlbertClassifierModel`` from ``--albert_config_file`` (albert base by default) with its
random initial weights (size and speed do not depend on the values), then writes

- the ids SavedModel that run_classifier's ``--export_dir`` writes (``export_classifier`` of
  albert_tf/tasks/classification/serving.py, ``<export_dir>/ids_only``, the one TF Serving serves:
  ``serving_default`` on ids of any batch and sequence length), and
- the TFLite model of ``export_classifier_tflite`` (float32, [1, S] inputs),

both in a temporary directory, deleted afterwards. Each is loaded back the way a client loads it
(``tf.saved_model.load`` and its signature; ``tf.lite.Interpreter`` with ``--threads`` threads and
its signature runner) and called on the same [1, S] input (a full-length random sequence, so no
padding is skipped): ``--warmup_calls`` untimed calls, then ``--timed_calls`` timed ones.

The two models take turns call by call, so that both see the same load.

Printed: size on disk (SavedModel: the whole directory), latency per call (median, 10th and 90th
percentile), median CPU time per call (user + system of this process, all threads), the largest
difference between the two models' probabilities, and the ratios TFLite / SavedModel. The machine
may be shared: the load average is printed before and after, and CPU time per call (not wall
time) is the figure least disturbed by other processes. Figures and ratios only, never pass/fail.

    .venv/bin/python benchmarks/bench_tflite.py
    .venv/bin/python benchmarks/bench_tflite.py --max_seq_length=384 --threads=1
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Callable

import numpy as np
import tensorflow as tf
from absl import app, flags

from albert_tf.models.config import AlbertConfig
from albert_tf.serving.saved_model import IDS_ONLY
from albert_tf.serving.tflite import SIGNATURE_KEY
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.serving import export_classifier, export_classifier_tflite

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLAGS = flags.FLAGS

flags.DEFINE_string("albert_config_file", os.path.join(REPO_ROOT, "configs", "albert_base_v2.json"),
                    "ALBERT config JSON.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length S of the timed input.")
flags.DEFINE_integer("num_labels", 2, "Classes of the classifier head.")
flags.DEFINE_integer("threads", 0, "Threads of TensorFlow (intra-op) and of the TFLite interpreter "
                     "(0: every core).")
flags.DEFINE_integer("warmup_calls", 3, "Untimed calls before timing (tracing, allocation).")
flags.DEFINE_integer("timed_calls", 30, "Timed calls per model.")

Inputs = dict[str, np.ndarray]


def directory_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def time_interleaved(calls: dict[str, Callable[[Inputs], np.ndarray]], inputs: Inputs
                     ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """{name: (wall seconds per timed call, CPU seconds per timed call, last probabilities)}.

    The models take turns call by call, so that both see the same load of a shared machine. CPU
    seconds: ``time.process_time`` (user + system of every thread of this process).
    """
    for _ in range(FLAGS.warmup_calls):
        for call in calls.values():
            call(inputs)
    walls = {name: [] for name in calls}
    cpus = {name: [] for name in calls}
    last = {}
    for _ in range(FLAGS.timed_calls):
        for name, call in calls.items():
            wall_start, cpu_start = time.perf_counter(), time.process_time()
            last[name] = call(inputs)
            walls[name].append(time.perf_counter() - wall_start)
            cpus[name].append(time.process_time() - cpu_start)
    return {name: (np.array(walls[name]), np.array(cpus[name]), last[name]) for name in calls}


def saved_model_call(export_dir: str) -> Callable[[Inputs], np.ndarray]:
    signature = tf.saved_model.load(export_dir).signatures["serving_default"]
    return lambda inputs: signature(**{k: tf.constant(v) for k, v in inputs.items()})[
        "probabilities"].numpy()


def tflite_call(model_path: str, threads: int) -> Callable[[Inputs], np.ndarray]:
    interpreter = tf.lite.Interpreter(model_path=model_path, num_threads=threads)
    runner = interpreter.get_signature_runner(SIGNATURE_KEY)
    return lambda inputs: runner(**inputs)["probabilities"]


def random_inputs(config: AlbertConfig, seq_length: int) -> Inputs:
    rng = np.random.default_rng(0)
    segment_ids = np.zeros([1, seq_length], np.int32)
    segment_ids[:, seq_length // 2:] = 1
    return {"input_ids": rng.integers(5, config.vocab_size, [1, seq_length]).astype(np.int32),
            "input_mask": np.ones([1, seq_length], np.int32), "segment_ids": segment_ids}


def _load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str]) -> None:
    del argv
    threads = FLAGS.threads or os.cpu_count()
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    seq_length = FLAGS.max_seq_length
    if not 1 <= seq_length <= config.max_position_embeddings:
        raise app.UsageError(f"--max_seq_length must lie in [1, {config.max_position_embeddings}].")
    print(f"{FLAGS.albert_config_file}: classifier, {FLAGS.num_labels} labels, batch 1, "
          f"S={seq_length}; {threads} threads; {os.cpu_count()} CPUs; TensorFlow {tf.__version__}; "
          f"load average {_load_average()}", flush=True)
    model = AlbertClassifierModel(config, FLAGS.num_labels)
    inputs = random_inputs(config, seq_length)
    scratch = tempfile.mkdtemp(prefix="bench_tflite_")
    try:
        export_dir = export_classifier(model, os.path.join(scratch, "export"))
        saved_model_dir = os.path.join(export_dir, IDS_ONLY)
        start = time.perf_counter()
        tflite_path = export_classifier_tflite(model, os.path.join(scratch, "model.tflite"), seq_length)
        print(f"TFLite conversion: {time.perf_counter() - start:.1f} s", flush=True)
        sizes = {"SavedModel": directory_bytes(saved_model_dir),
                 "TFLite": os.path.getsize(tflite_path)}
        calls = {"SavedModel": saved_model_call(saved_model_dir),
                 "TFLite": tflite_call(tflite_path, threads)}
        results = time_interleaved(calls, inputs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"{'':>10} {'size MiB':>9} {'median ms':>9} {'p10 ms':>7} {'p90 ms':>7} "
          f"{'CPU ms/call':>11}  (medians)")
    for name, (walls, cpus, _) in results.items():
        p10, median, p90 = np.percentile(walls, [10, 50, 90]) * 1e3
        print(f"{name:>10} {sizes[name] / 2 ** 20:9.1f} {median:9.1f} {p10:7.1f} {p90:7.1f} "
              f"{np.median(cpus) * 1e3:11.1f}")
    (saved_walls, saved_cpus, saved_probs), (lite_walls, lite_cpus, lite_probs) = results.values()
    print(f"TFLite / SavedModel: size {sizes['TFLite'] / sizes['SavedModel']:.2f}, median latency "
          f"{np.median(lite_walls) / np.median(saved_walls):.2f}, CPU per call "
          f"{np.median(lite_cpus) / np.median(saved_cpus):.2f}")
    print(f"max |probabilities difference|: {np.abs(lite_probs - saved_probs).max():.2e}; "
          f"load average {_load_average()}")


if __name__ == "__main__":
    app.run(main)
