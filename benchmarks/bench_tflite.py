"""The GLUE classifier as a SavedModel and as TFLite files (float32, int8 dynamic range, float16):
size, CPU latency on one example per call (1 and 2 threads), and the task metric on a dev sample.

Builds an ``AlbertClassifierModel`` from ``--albert_config_file`` (albert base by default) with its
random initial weights, optionally trains it for ``--train_steps`` steps on the task's train split
(so that its accuracy means something; size and speed do not depend on the values), then writes

- the ids SavedModel that run_classifier's ``--export_dir`` writes (``export_classifier`` of
  albert_tf/tasks/classification/serving.py, ``<export_dir>/ids_only``, the one TF Serving serves:
  ``serving_default`` on ids of any batch and sequence length), and
- one TFLite model per ``--quantizations`` value (``export_classifier_tflite``, TensorFlow's
  converter; run here on full-length [1, S] inputs),

in a temporary directory, deleted afterwards. Each is loaded back the way a client loads it
(``tf.saved_model.load`` and its signature; LiteRT's ``Interpreter`` with its signature runner).

Task metric: the first ``--eval_examples`` labelled examples of the dev sample (SST-2: the 872
sentences of the public GLUE dev set, ``SST-2/test.tsv`` of the shared data; RTE: ``RTE/dev.tsv``),
tokenized with ``--spm_model_file`` (en8k) as run_classifier does, at S = ``--max_seq_length``.
Printed per model: accuracy against the gold labels, agreement of the predicted class with the
SavedModel's, and the largest and mean |probability - SavedModel's probability|.

Latency: for each ``--threads`` value, a child process (TensorFlow's intra-op threads can be set
only before it starts) loads every model with that many threads and calls each on the same [1, S]
input (a full-length random sequence, so no padding is skipped): ``--warmup_calls`` untimed calls,
then ``--timed_calls`` timed ones, the models taking turns call by call so that all see the same
load. Printed: latency per call (median, 10th and 90th percentile), median CPU time per call (user
+ system of the process, all threads), and the ratios to the SavedModel. The machine may be
shared: the load average is printed, and CPU time per call (not wall time) is the figure least
disturbed by other processes. Figures only, never pass/fail.

    .venv/bin/python benchmarks/bench_tflite.py
    .venv/bin/python benchmarks/bench_tflite.py --albert_config_file=my_small.json \\
        --train_steps=600 --max_seq_length=64 --eval_examples=872
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf
from absl import app, flags
from ai_edge_litert.interpreter import Interpreter

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from albert_tf.models.config import AlbertConfig  # noqa: E402
from albert_tf.models.encoder import INPUT_NAMES  # noqa: E402
from albert_tf.serving.saved_model import IDS_ONLY  # noqa: E402
from albert_tf.serving.tflite import QUANTIZATIONS, SIGNATURE_KEY  # noqa: E402
from albert_tf.tasks.classification.model import AlbertClassifierModel  # noqa: E402
from albert_tf.tasks.classification.serving import (  # noqa: E402
    export_classifier, export_classifier_tflite)
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from data_prep.classification.features import convert_example  # noqa: E402
from data_prep.classification.processors import RteProcessor, Sst2Processor  # noqa: E402
from benchmarks.base_config import define_config_flag  # noqa: E402
from benchmarks.machine_load import load_average  # noqa: E402
from benchmarks.serving_engines import (Call, Inputs, directory_bytes,  # noqa: E402
                                        saved_model_call)

SHARED_DATA = os.environ.get("ALBERT_TF_SHARED_DATA",
                             os.path.join(os.path.dirname(REPO_ROOT), "shared", "data"))
# The labelled dev sample of each task: (processor, split whose file holds it).
TASKS = {"sst-2": (Sst2Processor, "test"), "rte": (RteProcessor, "dev")}

FLAGS = flags.FLAGS

define_config_flag()
flags.DEFINE_enum("task", "sst-2", list(TASKS), "GLUE task of the dev sample (and of training).")
flags.DEFINE_string("glue_dir", os.path.join(SHARED_DATA, "glue"), "GLUE data root.")
flags.DEFINE_string("spm_model_file", os.path.join(SHARED_DATA, "pretraining", "en8k.model"),
                    "SentencePiece model (its ids must lie below the config's vocab_size).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length S of every input.")
flags.DEFINE_list("quantizations", list(QUANTIZATIONS), "TFLite variants to write and measure.")
flags.DEFINE_list("threads", ["1", "2"], "Thread counts of the latency runs (TensorFlow intra-op "
                  "and LiteRT).")
flags.DEFINE_integer("eval_examples", 200, "Dev examples of the task metric.")
flags.DEFINE_integer("train_steps", 0, "Adam steps on the train split before exporting (0: keep "
                     "the random initialisation).")
flags.DEFINE_integer("train_batch_size", 32, "Train batch.")
flags.DEFINE_float("learning_rate", 2e-4, "Adam learning rate of the training steps (1e-3 left "
                   "a small model at chance).")
flags.DEFINE_integer("warmup_calls", 3, "Untimed calls before timing (tracing, allocation).")
flags.DEFINE_integer("timed_calls", 20, "Timed calls per model and thread count.")
flags.DEFINE_string("time_models_in", None, "Internal: the child's mode; times the models listed "
                    "in this directory's models.json and prints the times as JSON.")


def tflite_call(model_path: str, threads: int | None = None) -> Call:
    """Probabilities [1, num_labels] of LiteRT's interpreter on one example ([1, S] inputs)."""
    interpreter = Interpreter(model_path=model_path, num_threads=threads)
    runner = interpreter.get_signature_runner(SIGNATURE_KEY)
    return lambda inputs: runner(**inputs)["probabilities"]


def load_calls(models: dict[str, str], threads: int | None = None) -> dict[str, Call]:
    return {name: saved_model_call(path) if name == "SavedModel" else tflite_call(path, threads)
            for name, path in models.items()}



# -- the child: latency at one thread count ------------------------------------------------------

def random_inputs(vocab_size: int, seq_length: int) -> Inputs:
    rng = np.random.default_rng(0)
    segment_ids = np.zeros([1, seq_length], np.int32)
    segment_ids[:, seq_length // 2:] = 1
    return {"input_ids": rng.integers(5, vocab_size, [1, seq_length]).astype(np.int32),
            "input_mask": np.ones([1, seq_length], np.int32), "segment_ids": segment_ids}


def time_models(directory: str) -> None:
    """Prints {name: [wall seconds per timed call, CPU seconds per timed call]} as JSON; the models
    take turns call by call."""
    with open(os.path.join(directory, "models.json")) as handle:
        manifest = json.load(handle)
    threads = int(FLAGS.threads[0])
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    calls = load_calls(manifest["models"], threads)
    inputs = random_inputs(manifest["vocab_size"], manifest["seq_length"])
    for _ in range(FLAGS.warmup_calls):
        for call in calls.values():
            call(inputs)
    times = {name: [[], []] for name in calls}
    for _ in range(FLAGS.timed_calls):
        for name, call in calls.items():
            wall_start, cpu_start = time.perf_counter(), time.process_time()
            call(inputs)
            times[name][0].append(time.perf_counter() - wall_start)
            times[name][1].append(time.process_time() - cpu_start)
    print(json.dumps({"times": times, "load": load_average()}))


def latencies(directory: str, threads: int) -> dict:
    command = [sys.executable, os.path.abspath(__file__), f"--time_models_in={directory}",
               f"--threads={threads}", f"--warmup_calls={FLAGS.warmup_calls}",
               f"--timed_calls={FLAGS.timed_calls}"]
    done = subprocess.run(command, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if done.returncode:
        raise RuntimeError(f"the latency run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the parent: models, sizes, task metric -------------------------------------------------------

def features(tokenizer: FullTokenizer, split: str, count: int | None) -> tuple[Inputs, np.ndarray]:
    """The first ``count`` examples of ``split`` as run_classifier's features, and their labels."""
    processor_class, _ = TASKS[FLAGS.task]
    processor = processor_class()
    examples = processor.get_examples(FLAGS.glue_dir, split)[:count]
    rows = [convert_example(example, processor.get_labels(), FLAGS.max_seq_length, tokenizer)
            for example in examples]
    inputs = {name: np.array([getattr(row, name) for row in rows], np.int32)
              for name in INPUT_NAMES}
    return inputs, np.array([row.label_id for row in rows])


def train(model: AlbertClassifierModel, tokenizer: FullTokenizer) -> None:
    """``--train_steps`` Adam steps on shuffled batches of the train split (no dropout schedule or
    warmup: just enough for the dev metric to mean something)."""
    inputs, labels = features(tokenizer, "train", None)
    optimizer = keras.optimizers.Adam(FLAGS.learning_rate)
    rng = np.random.default_rng(0)

    @tf.function
    def step(batch: Inputs, batch_labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(batch, training=True)["logits"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(batch_labels,
                                                                                 logits))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return loss

    start = time.perf_counter()
    for number in range(1, FLAGS.train_steps + 1):
        rows = rng.choice(len(labels), FLAGS.train_batch_size, replace=False)
        loss = step({name: value[rows] for name, value in inputs.items()}, labels[rows])
        if number % 100 == 0 or number == FLAGS.train_steps:
            print(f"train step {number}: loss {float(loss):.3f}", flush=True)
    print(f"training: {time.perf_counter() - start:.0f} s", flush=True)


def task_metric(calls: dict[str, Call], inputs: Inputs, labels: np.ndarray) -> dict[str, dict]:
    """Probabilities of every model on every example (the SavedModel by batches of 32, TFLite one
    example per call), compared with the gold labels and with the SavedModel's."""
    count = len(labels)
    probabilities = {}
    for name, call in calls.items():
        size = 32 if name == "SavedModel" else 1
        probabilities[name] = np.concatenate([
            call({key: value[i:i + size] for key, value in inputs.items()})
            for i in range(0, count, size)])
    reference = probabilities["SavedModel"]
    return {name: {"accuracy": float(np.mean(probs.argmax(-1) == labels)),
                   "agreement": float(np.mean(probs.argmax(-1) == reference.argmax(-1))),
                   "max_diff": float(np.abs(probs - reference).max()),
                   "mean_diff": float(np.abs(probs - reference).mean())}
            for name, probs in probabilities.items()}


def main(argv: list[str]) -> None:
    del argv
    if FLAGS.time_models_in:
        time_models(FLAGS.time_models_in)
        return
    unknown = sorted(set(FLAGS.quantizations) - set(QUANTIZATIONS))
    if unknown:
        raise app.UsageError(f"--quantizations: unknown {unknown}; expected some of "
                             f"{list(QUANTIZATIONS)}.")
    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    seq_length = FLAGS.max_seq_length
    if not 1 <= seq_length <= config.max_position_embeddings:
        raise app.UsageError(f"--max_seq_length must lie in [1, {config.max_position_embeddings}].")
    print(f"{FLAGS.albert_config_file}: classifier on {FLAGS.task}, batch 1, S={seq_length}; "
          f"{os.cpu_count()} CPUs; TensorFlow {tf.__version__}; load average {load_average()}",
          flush=True)
    tokenizer = FullTokenizer(spm_model_file=FLAGS.spm_model_file, do_lower_case=True)
    processor_class, eval_split = TASKS[FLAGS.task]
    model = AlbertClassifierModel(config, processor_class.num_labels())
    if FLAGS.train_steps:
        train(model, tokenizer)
    scratch = tempfile.mkdtemp(prefix="bench_tflite_")
    try:
        export_dir = export_classifier(model, os.path.join(scratch, "export"))
        models = {"SavedModel": os.path.join(export_dir, IDS_ONLY)}
        for quantization in FLAGS.quantizations:
            start = time.perf_counter()
            models[f"TFLite {quantization}"] = export_classifier_tflite(
                model, os.path.join(scratch, f"{quantization}.tflite"), seq_length, quantization)
            print(f"TFLite {quantization} conversion: {time.perf_counter() - start:.1f} s",
                  flush=True)
        sizes = {name: directory_bytes(path) if name == "SavedModel" else os.path.getsize(path)
                 for name, path in models.items()}
        inputs, labels = features(tokenizer, eval_split, FLAGS.eval_examples)
        metric = task_metric(load_calls(models), inputs, labels)
        print(f"\nSize and task metric ({FLAGS.task} dev sample, {len(labels)} examples; "
              "differences are of the probabilities, against the SavedModel's):")
        print(f"{'':>22} {'size MiB':>9} {'x SavedModel':>12} {'accuracy':>8} {'agreement':>9} "
              f"{'max diff':>9} {'mean diff':>9}")
        for name in models:
            row = metric[name]
            print(f"{name:>22} {sizes[name] / 2 ** 20:9.1f} "
                  f"{sizes[name] / sizes['SavedModel']:12.2f} {row['accuracy']:8.3f} "
                  f"{row['agreement']:9.3f} {row['max_diff']:9.2e} {row['mean_diff']:9.2e}",
                  flush=True)
        with open(os.path.join(scratch, "models.json"), "w") as handle:
            json.dump({"models": models, "vocab_size": config.vocab_size,
                       "seq_length": seq_length}, handle)
        timed = {int(threads): latencies(scratch, int(threads)) for threads in FLAGS.threads}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    for threads, run in timed.items():
        print(f"\nLatency, {threads} thread(s), {FLAGS.timed_calls} calls per model (load average "
              f"after: {run['load']}):")
        print(f"{'':>22} {'median ms':>9} {'p10 ms':>7} {'p90 ms':>7} {'CPU ms/call':>11} "
              f"{'latency x SavedModel':>20} {'CPU x SavedModel':>16}")
        saved_wall, saved_cpu = (np.median(values) for values in run["times"]["SavedModel"])
        for name, (walls, cpus) in run["times"].items():
            p10, median, p90 = np.percentile(walls, [10, 50, 90]) * 1e3
            print(f"{name:>22} {median:9.1f} {p10:7.1f} {p90:7.1f} {np.median(cpus) * 1e3:11.1f} "
                  f"{np.median(walls) / saved_wall:20.2f} {np.median(cpus) / saved_cpu:16.2f}")


if __name__ == "__main__":
    app.run(main)
