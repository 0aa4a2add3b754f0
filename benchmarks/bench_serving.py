"""Serving latency at batch 1 on the CPU: albert_tf's exports beside PyTorch and ONNX Runtime.

One ALBERT classifier (``--albert_config_file``, albert base by default; random initial weights,
``--num_labels`` labels: speed does not depend on the values, but the biases, zero at
initialisation, are drawn at random as a fine-tuned model's are non-zero: tf2onnx drops an
``Add`` of zeros, which would spare albert_tf's ONNX file work that a real model's does) is served
by every engine of benchmarks/serving_engines.py, all holding the same weights:

- albert_tf: the ids SavedModel (``export_classifier``, ``ids_only``), the TFLite file in each
  storage (``export_classifier_tflite``: float32, float16 weights, int8 dynamic range) and the
  ONNX file in float32 and int8 (``export_classifier_onnx``: the rewritten graph of
  albert_tf/serving/onnx_graph.py, run through ``OnnxModel``), whose sequence axes are dynamic,
  so each request computes on its own tokens;
- Hugging Face transformers' ``AlbertForSequenceClassification``, PyTorch eager;
- that PyTorch model exported to ONNX (``torch.onnx.export``, dynamic axes) and run by ONNX
  Runtime with every graph optimization, in float32 and int8 (``quantize_dynamic``).

Each engine runs in a process of its own, and the engines take turns call by call (so that all see
the same load of a shared machine), with a pause of ``--pause_ms`` before each call: the thread
pools of TensorFlow, PyTorch and ONNX Runtime spin for a while after their work, so engines
sharing a process, or called back to back, slow each other down (sharing one, PyTorch's latency
on the tiny model grew a hundredfold). Latency: one example of L real tokens per call (L in
``--lengths``, no padding), ``--warmup_calls`` untimed then ``--timed_calls`` timed calls per
engine and length, timed inside the engine's process, as wall time and as the process's CPU
time (every thread's, ``time.process_time``: on a shared machine the wall time also counts the
waits for a core, which the CPU time does not, though it counts a thread pool's spinning);
printed: the medians per
engine and length, and per length the ratio of the best of the others to albert_tf's best,
float32 (albert_tf's SavedModel, TFLite float32 and float16 and ONNX float32 against PyTorch and
ONNX Runtime float32) and int8 (TFLite int8 and ONNX int8 against ONNX Runtime int8) separately
(> 1: albert_tf faster), by wall time and by CPU time; with more than one thread, the share of
each engine's calls that used one core's time only (``one_core_share``). Agreement: the
largest difference of each engine's batch-1 probabilities from the float32 SavedModel's, over the
lengths. Throughput: examples per second at batch ``--throughput_batches`` of
``--throughput_length`` real tokens each (albert_tf's TFLite and ONNX files: one example per
call, the rows in turn). Every engine uses ``--threads`` threads.

    .venv/bin/python benchmarks/bench_serving.py     # albert base: 13 minutes on 2 quiet cores
    .venv/bin/python benchmarks/bench_serving.py --tiny --timed_calls=5   # a smoke run

Needs requirements-test.txt (torch, transformers, onnx, onnxruntime) and requirements-onnx.txt
(tf2onnx). Figures only, never
pass/fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from albert_tf.serving.saved_model import IDS_ONLY  # noqa: E402
from albert_tf.serving.tflite import QUANTIZATIONS  # noqa: E402
from albert_tf.tasks.classification.model import AlbertClassifierModel  # noqa: E402
from albert_tf.tasks.classification.serving import (export_classifier,  # noqa: E402
                                                    export_classifier_onnx,
                                                    export_classifier_tflite)
from benchmarks.machine_load import load_average  # noqa: E402
from benchmarks.serving_engines import (Call, Inputs, define_model_flags,  # noqa: E402
                                        load_hf_classifier, model_config, onnx_files,
                                        onnx_model_call, onnx_runtime_call, saved_model_call,
                                        tflite_call, torch_call, write_hf_classifier)

FLAGS = flags.FLAGS

define_model_flags()
flags.DEFINE_integer("num_labels", 2, "Classes of the classifier.")
flags.DEFINE_list("lengths", ["16", "48", "128"], "Real tokens per example of the latency runs.")
flags.DEFINE_integer("warmup_calls", 3, "Untimed calls per engine and length before timing.")
flags.DEFINE_integer("timed_calls", 60, "Timed calls per engine and length (20 gave 16-token "
                     "int8 medians that moved between runs by more than the engines differ).")
flags.DEFINE_list("throughput_batches", ["8", "32"], "Batch sizes of the throughput runs.")
flags.DEFINE_integer("throughput_length", 128, "Real tokens per example of the throughput runs.")
flags.DEFINE_integer("throughput_calls", 3, "Timed calls per engine and batch size (after one "
                     "untimed).")
flags.DEFINE_integer("threads", 2, "Threads of every engine (TensorFlow intra-op, LiteRT, "
                     "PyTorch, ONNX Runtime intra-op).")
flags.DEFINE_integer("pause_ms", 100, "Pause before each call, so that the previous engine's "
                     "threads have stopped spinning.")
flags.DEFINE_string("engine", None, "Internal: serve this engine's calls on the files of "
                    "--scratch.")
flags.DEFINE_string("scratch", None, "Internal: the directory of the exported files.")

# (engine, precision): albert_tf's first, then the others'.
TFLITE_NAMES = {"none": "TFLite fp32", "float16": "TFLite fp16", "dynamic_range": "TFLite int8"}
ALBERT_TF = {"SavedModel": "float32", "TFLite fp32": "float32", "TFLite fp16": "float32",
             "TFLite int8": "int8", "ONNX fp32": "float32", "ONNX int8": "int8"}
ONNX_FILES = {"ONNX fp32": ("albert_tf.onnx", "none"), "ONNX int8": ("albert_tf.int8.onnx",
                                                                     "dynamic_range")}
OTHERS = {"HF PyTorch eager": "float32", "ONNX RT fp32": "float32", "ONNX RT int8": "int8"}
REFERENCE = "SavedModel"
# A call whose CPU time is at most this many times its wall time ran on one core's time.
ONE_CORE = 1.15


def random_inputs(vocab_size: int, batch: int, length: int, seed: int = 0) -> Inputs:
    """``batch`` examples of ``length`` real tokens (no padding): ids in [5, vocab_size), the
    second half segment 1."""
    rng = np.random.default_rng(seed)
    segment_ids = np.zeros([batch, length], np.int32)
    segment_ids[:, length // 2:] = 1
    return {"input_ids": rng.integers(5, vocab_size, [batch, length]).astype(np.int32),
            "input_mask": np.ones([batch, length], np.int32), "segment_ids": segment_ids}


def random_biases(model: AlbertClassifierModel, stddev: float = 0.02) -> AlbertClassifierModel:
    """``model`` with every bias drawn from N(0, stddev²) (a fine-tuned model's are not zero; the
    module docstring says why it matters); the other weights keep their random initial values."""
    rng = np.random.default_rng(0)
    for variable in model.weights:
        if variable.path.endswith("bias"):
            variable.assign(rng.normal(0.0, stddev, variable.shape).astype(np.float32))
    return model


def write_files(model: AlbertClassifierModel, scratch: str, max_seq_length: int) -> None:
    """Every engine's files under ``scratch``: albert_tf's exports, the Hugging Face directory and
    its two ONNX files."""
    export_classifier(model, os.path.join(scratch, "export"))
    for quantization in QUANTIZATIONS:
        export_classifier_tflite(model, os.path.join(scratch, f"{quantization}.tflite"),
                                 max_seq_length, quantization)
    for file_name, quantization in ONNX_FILES.values():
        export_classifier_onnx(model, os.path.join(scratch, file_name), max_seq_length,
                               quantization=quantization)
    onnx_files(load_hf_classifier(write_hf_classifier(model, scratch)), scratch)


def load_engine(name: str, scratch: str) -> Call:
    """The call of engine ``name`` on the files ``write_files`` left in ``scratch``."""
    threads = FLAGS.threads
    tflite = {engine: quantization for quantization, engine in TFLITE_NAMES.items()}
    if name == REFERENCE:
        return saved_model_call(os.path.join(scratch, "export", IDS_ONLY))
    if name in tflite:
        return tflite_call(os.path.join(scratch, f"{tflite[name]}.tflite"), threads)
    if name in ONNX_FILES:
        return onnx_model_call(os.path.join(scratch, ONNX_FILES[name][0]), threads)
    if name == "HF PyTorch eager":
        return torch_call(load_hf_classifier(os.path.join(scratch, "huggingface")))
    int8 = name == "ONNX RT int8"
    return onnx_runtime_call(os.path.join(scratch, f"hf_albert{'.int8' if int8 else ''}.onnx"),
                             threads)


RESULT = "RESULT "  # the prefix of the child's answers on stdout (libraries print there too)


def serve_requests(vocab_size: int) -> None:
    """The child: loads ``--engine`` and answers each line of stdin, ``<batch> <length>``, by
    timing one call on ``random_inputs(vocab_size, batch, length, seed=length)`` and printing
    ``RESULT {"seconds": ..., "cpu_seconds": ..., "outputs": [[...]]}``; an empty line ends it."""
    import torch

    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    torch.set_num_threads(FLAGS.threads)
    call = load_engine(FLAGS.engine, FLAGS.scratch)
    print(RESULT + "{}", flush=True)
    for line in sys.stdin:
        if not line.strip():
            return
        batch, length = (int(value) for value in line.split())
        inputs = random_inputs(vocab_size, batch, length, seed=length)
        start, cpu_start = time.perf_counter(), time.process_time()
        outputs = call(inputs)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        print(RESULT + json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds,
                                   "outputs": outputs.tolist()}), flush=True)


class Engine:
    """One engine in a child process of its own (this script with ``--engine``), kept running
    so that the engines can take turns call by call."""

    def __init__(self, name: str, scratch: str):
        self.name = name
        command = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], f"--engine={name}",
                   f"--scratch={scratch}"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True,
                                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        self._answer()  # loaded

    def _answer(self) -> dict:
        for line in self.process.stdout:
            if line.startswith(RESULT):
                return json.loads(line[len(RESULT):])
        raise RuntimeError(f"{self.name} ended (exit status {self.process.wait()}); run it "
                           f"alone with --engine='{self.name}' to see why")

    def call(self, batch: int, length: int) -> tuple[float, float, np.ndarray]:
        """(wall seconds, CPU seconds, probabilities [batch, num_labels]) of one call."""
        self.process.stdin.write(f"{batch} {length}\n")
        self.process.stdin.flush()
        answer = self._answer()
        return answer["seconds"], answer["cpu_seconds"], np.array(answer["outputs"])

    def close(self) -> None:
        self.process.stdin.write("\n")
        self.process.stdin.close()
        self.process.wait()


def take_turns(engines: list[Engine], batch: int, length: int, warmup: int,
               timed: int) -> tuple[dict, dict, dict]:
    """({engine: wall seconds of each timed call}, {engine: CPU seconds of each timed call},
    {engine: last probabilities}): ``warmup`` then ``timed`` calls each, the engines taking
    turns call by call with a pause before each call, so that every engine sees the same load and
    no engine's threads still spin from the last."""
    times = {engine.name: [] for engine in engines}
    cpu_times = {engine.name: [] for engine in engines}
    outputs = {}
    for turn in range(warmup + timed):
        for engine in engines:
            time.sleep(FLAGS.pause_ms / 1e3)
            seconds, cpu_seconds, outputs[engine.name] = engine.call(batch, length)
            if turn >= warmup:
                times[engine.name].append(seconds)
                cpu_times[engine.name].append(cpu_seconds)
    return times, cpu_times, outputs


def medians(samples: dict[str, list[float]]) -> dict[str, float]:
    """{engine: the median of its samples}."""
    return {name: float(np.median(values)) for name, values in samples.items()}


def one_core_share(walls: list[float], cpus: list[float]) -> float:
    """The share of calls that used one core's time only (CPU time at most ``ONE_CORE`` times
    the wall time) though the engine has more threads: calls whose second thread did not get a
    core of its own in time, which take about a one-thread call's time. Where the share is
    neither near 0 nor near 1, a median falls on either side of the split from run to run."""
    return float(np.mean([cpu <= ONE_CORE * wall for wall, cpu in zip(walls, cpus)]))


def print_one_core_shares(lengths: list[int], shares: dict[str, dict]) -> None:
    """The table of ``one_core_share`` ({engine: {L: share}}), in percent."""
    width = max(len(name) for name in shares) + 2
    print(f"\ncalls on one core's time (CPU time <= {ONE_CORE} x wall time), % of the timed calls")
    print(f"{'engine':<{width}}" + "".join(f"{f'L={length}':>10}" for length in lengths))
    for name, by_length in shares.items():
        print(f"{name:<{width}}" + "".join(f"{by_length[length] * 100:10.0f}"
                                           for length in lengths))


def best(values: dict[str, float], names: dict[str, str], precision: str) -> tuple[str, float]:
    """The engine of ``names`` computing in ``precision`` with the smallest value, and that
    value."""
    name = min((name for name in names if names[name] == precision), key=values.__getitem__)
    return name, values[name]


def print_latency(lengths: list[int], medians: dict[str, dict],
                  differences: dict[str, float], what: str) -> None:
    """The latency table ({engine: {L: seconds}}; ``what``: wall or CPU time), the largest
    probability difference of each engine from the SavedModel's, and the float32 and int8
    ratios."""
    width = max(len(name) for name in medians) + 2
    print(f"\nlatency ({what}), batch 1, median of {FLAGS.timed_calls} calls (ms)")
    print(f"{'engine':<{width}}" + "".join(f"{f'L={length}':>10}" for length in lengths)
          + f"{'max |p - SavedModel|':>24}")
    for name, times in medians.items():
        print(f"{name:<{width}}" + "".join(f"{times[length] * 1e3:10.1f}" for length in lengths)
              + f"{differences[name]:24.2e}")
    for precision in ("float32", "int8"):
        print(f"{precision}: the others' best / albert_tf's best (> 1: albert_tf faster)")
        for length in lengths:
            at_length = {name: times[length] for name, times in medians.items()}
            ours, our_time = best(at_length, ALBERT_TF, precision)
            theirs, their_time = best(at_length, OTHERS, precision)
            print(f"  L={length:<4} {ours} {our_time * 1e3:.1f} ms vs {theirs} "
                  f"{their_time * 1e3:.1f} ms: {their_time / our_time:.2f}x")


def print_throughput(rates: dict[str, dict]) -> None:
    """The throughput table ({engine: {batch: examples per second}})."""
    width = max(len(name) for name in rates) + 2
    print(f"\nthroughput, L={FLAGS.throughput_length} (examples per second; albert_tf's TFLite and "
          "ONNX: one example per call)")
    batches = list(next(iter(rates.values())))
    print(f"{'engine':<{width}}" + "".join(f"{f'batch {batch}':>10}" for batch in batches))
    for name, by_batch in rates.items():
        print(f"{name:<{width}}" + "".join(f"{by_batch[batch]:10.1f}" for batch in batches))



def main(argv: list[str]) -> None:
    del argv
    import torch

    config, model_name = model_config()
    if FLAGS.engine:
        serve_requests(config.vocab_size)
        return
    lengths = [int(length) for length in FLAGS.lengths]
    max_seq_length = max(lengths + [FLAGS.throughput_length])
    if not 1 <= min(lengths) <= max_seq_length <= config.max_position_embeddings:
        raise app.UsageError(f"lengths must lie in [1, {config.max_position_embeddings}].")
    print(f"{model_name}: classifier, "
          f"{FLAGS.num_labels} labels, random weights; {os.cpu_count()} CPUs, {FLAGS.threads} "
          f"threads per engine; TensorFlow {tf.__version__}, PyTorch {torch.__version__}; load "
          f"average {load_average()}", flush=True)
    scratch = tempfile.mkdtemp(prefix="bench_serving_")
    engines = []
    try:
        write_files(random_biases(AlbertClassifierModel(config, FLAGS.num_labels)), scratch,
                    max_seq_length)
        for name in (*ALBERT_TF, *OTHERS):
            engines.append(Engine(name, scratch))
        latency, cpu_latency, shares = {}, {}, {}
        differences = dict.fromkeys(ALBERT_TF | OTHERS, 0.0)
        for length in lengths:
            walls, cpus, outputs = take_turns(engines, 1, length, FLAGS.warmup_calls,
                                              FLAGS.timed_calls)
            cpu_medians = medians(cpus)
            for name, median in medians(walls).items():
                latency.setdefault(name, {})[length] = median
                cpu_latency.setdefault(name, {})[length] = cpu_medians[name]
                shares.setdefault(name, {})[length] = one_core_share(walls[name], cpus[name])
                differences[name] = max(differences[name], float(np.abs(
                    outputs[name] - outputs[REFERENCE]).max()))
            print(f"  L={length}: done; load average {load_average()}", flush=True)
        throughput = {}
        for batch in (int(batch) for batch in FLAGS.throughput_batches):
            walls, _, _ = take_turns(engines, batch, FLAGS.throughput_length, 1,
                                     FLAGS.throughput_calls)
            for name, median in medians(walls).items():
                throughput.setdefault(name, {})[batch] = batch / median
    finally:
        for engine in engines:
            engine.close()
        shutil.rmtree(scratch, ignore_errors=True)
    print_latency(lengths, latency, differences, "wall time")
    print_latency(lengths, cpu_latency, differences, "CPU time of the engine's process")
    if FLAGS.threads > 1:
        print_one_core_shares(lengths, shares)
    print_throughput(throughput)
    print(f"\nload average {load_average()}")


if __name__ == "__main__":
    app.run(main)
