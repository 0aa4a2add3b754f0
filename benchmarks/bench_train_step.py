"""Pretraining train-step throughput of the real Trainer loop, beside the machine's matmul peak.

For each requested (dtype, XLA) combination this builds ``Trainer`` + ``PretrainingTask`` +
``create_optimizer("lamb", ...)`` as run_pretraining.py does and feeds ``Trainer.train`` a synthetic
in-memory dataset: ``--num_cached_batches`` random batches shaped like the pretraining TFRecords
(input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights,
next_sentence_labels [B, 1]), cached and ``.repeat()``ed, so input costs ~0. The first loop
(``--warmup_steps`` steps: tracing, XLA compilation) is not timed; then ``--num_loops`` loops of
``--iterations_per_loop`` steps are. ``num_train_steps`` and ``save_checkpoints_steps`` are huge, so no
checkpoint is written; ``output_dir`` is a temporary directory, deleted afterwards (the TensorBoard
summaries the loop writes there are part of its real cost).

Printed per combination: examples/s over all timed loops and in the best loop, seconds per step,
"cores" (the process's CPU seconds, user + system over all threads, per wall second), achieved FLOP/s
and its fraction of the measured matmul peak of float32 and of the step's own dtype, and "per CPU s":
the step's FLOP per CPU second as a fraction of the matmul's FLOP per CPU second. On a machine shared
with other processes, "cores" well below the core count means they took the rest: the wall-clock
figures then understate the machine, while "per CPU s" stays close to the quiet-machine ratio. (On a
GPU only the wall-clock columns mean anything.) Figures and ratios only, never pass/fail.

FLOPs per training step: 6 x (matmul weights in use) x (tokens they apply to), i.e. 2 for the forward
and 4 for the backward multiply-add, plus attention; biases, LayerNorm, softmax, GELU, embedding
lookups and the optimizer are not counted. With B batch, S max_seq_length, M max_predictions_per_seq,
V vocab, E embedding, H hidden, I intermediate, L num_hidden_layers, K inner_group_num:

    per_token  = E*H + L*K*(4*H*H + 2*H*I)   embedding projection (absent when E == H) + the shared
                                             block's query, key, value, output and FFN kernels, used L*K times
    per_mask   = H*E + V*E                   MLM transform + the tied V x E output matmul, masked
                                             positions only
    per_seq    = H*H + 2*H                   pooler + SOP output, first token only
    attention  = 3 * L*K * 2*2*S*S*H         QK^T and AV per sequence, x3 for forward + backward
    flops/step = 6*(per_token*B*S + per_mask*B*M + per_seq*B) + attention*B

The matmul peak of a dtype is the best FLOP/s over ``--matmul_sizes`` of the best of
``--matmul_repeats`` runs of an N x N ``tf.matmul`` (2*N^3 FLOPs), for float32 and each requested lower
precision. The best size counts: the largest squares fall out of cache on small machines and would
understate what the model's own matmuls get.

    python benchmarks/bench_train_step.py                           # all four combinations
    python benchmarks/bench_train_step.py --dtypes=float32 --xla=false --num_loops=5
    python benchmarks/bench_train_step.py --device=/gpu:0 --train_batch_size=64
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf
from absl import app, flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from albert_tf.models.config import AlbertConfig  # noqa: E402
from albert_tf.tasks.pretraining.task import PretrainingTask  # noqa: E402
from albert_tf.training.input_pipeline import DatasetFn  # noqa: E402
from albert_tf.training.optimization import create_optimizer  # noqa: E402
from albert_tf.training.trainer import DTYPE_POLICIES, RunConfig, Trainer  # noqa: E402
from benchmarks.base_config import define_config_flag  # noqa: E402
from benchmarks.machine_load import load_average  # noqa: E402

HUGE_STEPS = 10 ** 9

FLAGS = flags.FLAGS

define_config_flag()
flags.DEFINE_integer("max_seq_length", 128, "Sequence length S.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence M.")
flags.DEFINE_integer("train_batch_size", 8, "Global batch B.")
flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "Compute dtypes to run (float32, bfloat16, float16).")
flags.DEFINE_list("xla", ["false", "true"], "use_xla values to run (false, true).")
flags.DEFINE_integer("iterations_per_loop", 3, "Steps per timed loop (one tf.function call).")
flags.DEFINE_integer("num_loops", 3, "Timed loops per combination.")
flags.DEFINE_integer("warmup_steps", 1, "Steps of the untimed first loop (tracing, XLA compilation).")
flags.DEFINE_integer("num_cached_batches", 4, "Distinct random batches the synthetic dataset cycles.")
flags.DEFINE_integer("threads", 0, "Intra-op threads (0: TensorFlow's default, every core).")
flags.DEFINE_integer("inter_op_threads", 0, "Inter-op threads (0: TensorFlow's default).")
flags.DEFINE_list("matmul_sizes", ["1024", "2048", "4096"],
                  "Sides N of the square matmuls measuring the peak (the best counts; empty: skip).")
flags.DEFINE_integer("matmul_repeats", 5, "Timed repetitions of each peak matmul (the best counts).")
flags.DEFINE_string("device", None, "Run on this device (e.g. /gpu:0); default: TensorFlow's choice.")


@dataclasses.dataclass
class StepFlops:
    """Matmul weights in use (see the module docstring) and the FLOPs of one training step."""

    per_token: int
    per_mask: int
    per_seq: int
    dense: float  # 6 x weights in use x the tokens they apply to
    attention: float  # QK^T and AV, forward + backward

    @property
    def total(self) -> float:
        return self.dense + self.attention


def train_step_flops(config: AlbertConfig, batch: int, seq_length: int,
                     predictions: int) -> StepFlops:
    """The module docstring's formula for one pretraining step of ``config``."""
    e, h, i, v = config.embedding_size, config.hidden_size, config.intermediate_size, config.vocab_size
    blocks = config.num_hidden_layers * config.inner_group_num
    per_token = (e * h if e != h else 0) + blocks * (4 * h * h + 2 * h * i)
    per_mask = h * e + v * e
    per_seq = h * h + 2 * h
    dense = 6.0 * (per_token * batch * seq_length + per_mask * batch * predictions + per_seq * batch)
    attention = 3.0 * blocks * 2 * 2 * seq_length * seq_length * h * batch
    return StepFlops(per_token, per_mask, per_seq, dense, attention)


def synthetic_dataset_fn(config: AlbertConfig, seq_length: int, predictions: int,
                         num_batches: int, seed: int = 0) -> DatasetFn:
    """A DatasetFn cycling ``num_batches`` cached random batches of the pretraining features."""

    def dataset_fn(batch_size: int, batches_to_skip: int) -> tf.data.Dataset:
        rng = np.random.default_rng(seed)
        n = batch_size * num_batches
        positions = np.sort([rng.choice(np.arange(1, seq_length), predictions, replace=False)
                             for _ in range(n)], axis=1)
        segment_ids = np.zeros((n, seq_length), np.int32)
        segment_ids[:, seq_length // 2:] = 1
        features = {
            "input_ids": rng.integers(0, config.vocab_size, (n, seq_length), dtype=np.int32),
            "input_mask": np.ones((n, seq_length), np.int32),
            "segment_ids": segment_ids,
            "masked_lm_positions": positions.astype(np.int32),
            "masked_lm_ids": rng.integers(0, config.vocab_size, (n, predictions), dtype=np.int32),
            "masked_lm_weights": np.ones((n, predictions), np.float32),
            "next_sentence_labels": rng.integers(0, 2, (n, 1), dtype=np.int32),
        }
        dataset = tf.data.Dataset.from_tensor_slices(features).batch(batch_size, drop_remainder=True)
        return dataset.cache().repeat().skip(batches_to_skip).prefetch(2)

    return dataset_fn


def matmul_flops_per_second(dtype: str, size: int, repeats: int) -> tuple[float, float]:
    """Best (FLOP per wall second, FLOP per CPU second) of ``repeats`` timed runs of N x N tf.matmul.

    Each run repeats the product (2*size^3 FLOPs) for at least ~0.25 s so that CPU time, counted in
    clock ticks, is measurable.
    """
    a = tf.cast(tf.random.normal([size, size]), dtype)
    b = tf.cast(tf.random.normal([size, size]), dtype)

    @tf.function
    def product_corner(x, y):  # fetching one element waits for the product without copying it
        return tf.matmul(x, y)[0, 0]

    product_corner(a, b).numpy()
    started = time.perf_counter()
    product_corner(a, b).numpy()
    products = max(1, int(0.25 / max(time.perf_counter() - started, 1e-6)))
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        started, cpu_started = time.perf_counter(), cpu_seconds()
        for _ in range(products):
            product_corner(a, b).numpy()
        best_wall = min(best_wall, time.perf_counter() - started)
        best_cpu = min(best_cpu, cpu_seconds() - cpu_started)
    flops = 2.0 * size ** 3 * products
    return flops / best_wall, flops / max(best_cpu, 1e-9)


def cpu_seconds() -> float:
    """User + system CPU time of this process (all threads)."""
    times = os.times()
    return times.user + times.system


class _TimedLoopsDone(Exception):
    """Raised from the Trainer's log callback once every timed loop has run."""


class LoopTimer:
    """The Trainer's log callback: times the loops between progress lines, then stops the run.

    The first progress line ends the warm-up loop (not timed); it then switches the run's
    ``iterations_per_loop`` to the timed length. Records (steps, wall s, CPU s) per timed loop.
    """

    def __init__(self, run_config: RunConfig, timed_iterations: int, num_loops: int):
        self.run_config = run_config
        self.timed_iterations = timed_iterations
        self.num_loops = num_loops
        self.trainer: Trainer | None = None
        self.loops: list[tuple[int, float, float]] = []
        self._last: tuple[float, float, int] | None = None

    def __call__(self, message: str) -> None:
        del message
        now = (time.perf_counter(), cpu_seconds(), self.trainer.global_step)
        if self._last is not None:
            self.loops.append((now[2] - self._last[2], now[0] - self._last[0], now[1] - self._last[1]))
        self._last = now
        if len(self.loops) == self.num_loops:
            raise _TimedLoopsDone()
        self.run_config.iterations_per_loop = self.timed_iterations


def time_train_loops(config: AlbertConfig, dtype: str, use_xla: bool) -> list[tuple[int, float, float]]:
    """(steps, wall seconds, CPU seconds) of each timed loop of ``Trainer.train``."""
    keras.backend.clear_session()
    output_dir = tempfile.mkdtemp(prefix="bench_train_step_")
    try:
        run_config = RunConfig(output_dir=output_dir, train_batch_size=FLAGS.train_batch_size,
                               num_train_steps=HUGE_STEPS, save_checkpoints_steps=HUGE_STEPS,
                               iterations_per_loop=FLAGS.warmup_steps, use_xla=use_xla, dtype=dtype)
        strategy = (tf.distribute.OneDeviceStrategy(FLAGS.device) if FLAGS.device
                    else tf.distribute.get_strategy())
        timer = LoopTimer(run_config, FLAGS.iterations_per_loop, FLAGS.num_loops)
        timer.trainer = Trainer(
            strategy, PretrainingTask(config),
            lambda: create_optimizer("lamb", learning_rate=1e-4, num_train_steps=HUGE_STEPS,
                                     num_warmup_steps=0),
            run_config, log=timer)
        try:
            timer.trainer.train(synthetic_dataset_fn(config, FLAGS.max_seq_length,
                                                     FLAGS.max_predictions_per_seq,
                                                     FLAGS.num_cached_batches))
        except _TimedLoopsDone:
            pass
        return timer.loops
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)


def _check_flags() -> None:
    for name in ("iterations_per_loop", "num_loops", "warmup_steps", "num_cached_batches",
                 "train_batch_size", "matmul_repeats", "max_seq_length", "max_predictions_per_seq"):
        if getattr(FLAGS, name) < 1:
            raise app.UsageError(f"--{name} must be >= 1, got {getattr(FLAGS, name)}.")
    for name in ("threads", "inter_op_threads"):
        if getattr(FLAGS, name) < 0:
            raise app.UsageError(f"--{name} must be >= 0, got {getattr(FLAGS, name)}.")
    for dtype in FLAGS.dtypes:
        if dtype not in DTYPE_POLICIES:
            raise app.UsageError(f"--dtypes: {dtype!r} is not one of {sorted(DTYPE_POLICIES)}.")
    for value in FLAGS.xla:
        if value.lower() not in ("true", "false"):
            raise app.UsageError(f"--xla takes true/false values, got {value!r}.")
    for size in FLAGS.matmul_sizes:
        if not size.isdigit() or int(size) < 1:
            raise app.UsageError(f"--matmul_sizes takes positive integers, got {size!r}.")



def main(argv: list[str]) -> None:
    del argv
    _check_flags()
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_op_threads)
    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    if FLAGS.max_seq_length > config.max_position_embeddings:
        raise app.UsageError(f"--max_seq_length={FLAGS.max_seq_length} exceeds "
                             f"max_position_embeddings={config.max_position_embeddings} of "
                             f"{FLAGS.albert_config_file}.")
    batch, seq, preds = FLAGS.train_batch_size, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq
    flops = train_step_flops(config, batch, seq, preds)
    print(f"{FLAGS.albert_config_file}: B={batch} S={seq} M={preds}; devices "
          f"{[d.name for d in tf.config.list_logical_devices()]}; threads intra "
          f"{FLAGS.threads or 'default'} inter {FLAGS.inter_op_threads or 'default'}; "
          f"{os.cpu_count()} CPUs; load average {load_average()}")
    print(f"weights in use: {flops.per_token:,} per token, {flops.per_mask:,} per masked position, "
          f"{flops.per_seq:,} per sequence")
    print(f"FLOPs per step: {flops.total / 1e9:.1f} GFLOP = 6 x weights x tokens "
          f"{flops.dense / 1e9:.1f} + attention {flops.attention / 1e9:.1f}")

    peaks, cpu_peaks = {}, {}
    for dtype in dict.fromkeys(["float32"] + FLAGS.dtypes) if FLAGS.matmul_sizes else []:
        with tf.device(FLAGS.device or ""):
            rates = {n: matmul_flops_per_second(dtype, int(n), FLAGS.matmul_repeats)
                     for n in FLAGS.matmul_sizes}
        peaks[dtype] = max(wall for wall, _ in rates.values())
        cpu_peaks[dtype] = max(cpu for _, cpu in rates.values())
        print(f"matmul {dtype:>8}: " + "  ".join(f"N={n} {w / 1e9:.1f}" for n, (w, _) in rates.items())
              + f" GFLOP/s -> peak {peaks[dtype] / 1e9:.1f} GFLOP/s "
              f"({cpu_peaks[dtype] / 1e9:.1f} GFLOP per CPU second)", flush=True)

    print(f"{'dtype':>8} {'xla':>5} {'examples/s':>10} {'best':>7} {'s/step':>7} {'cores':>5} "
          f"{'GFLOP/s':>8} {'of f32 peak':>11} {'of dtype peak':>13} {'per CPU s':>9}", flush=True)
    for dtype in FLAGS.dtypes:
        for xla in FLAGS.xla:
            use_xla = xla.lower() == "true"
            loops = time_train_loops(config, dtype, use_xla)
            steps = sum(s for s, _, _ in loops)
            seconds = sum(t for _, t, _ in loops)
            cpu = sum(c for _, _, c in loops)
            best = max(s / t for s, t, _ in loops) * batch
            achieved = flops.total * steps / seconds
            of_f32 = f"{achieved / peaks['float32']:.1%}" if "float32" in peaks else "-"
            of_dtype = f"{achieved / peaks[dtype]:.1%}" if dtype in peaks else "-"
            per_cpu = (f"{flops.total * steps / cpu / cpu_peaks[dtype]:.1%}" if dtype in cpu_peaks
                       else "-")
            print(f"{dtype:>8} {str(use_xla).lower():>5} {steps * batch / seconds:10.2f} {best:7.2f} "
                  f"{seconds / steps:7.3f} {cpu / seconds:5.2f} {achieved / 1e9:8.1f} {of_f32:>11} "
                  f"{of_dtype:>13} {per_cpu:>9}", flush=True)
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    app.run(main)
