"""The estimator-style loop every script shares: train / evaluate / predict, checkpoints, resume.

A ``Task`` (albert_tf/training/task.py) supplies the model and its losses; ``Trainer`` runs it under
any tf.distribute strategy:

- training runs ``iterations_per_loop`` steps per ``tf.function`` call (``strategy.run`` inside),
  optionally XLA-compiling the forward/backward pass, with gradient accumulation and mixed precision
  (``DTYPE_POLICIES``, ``set_dtype_policy``);
- the loss of every replica is normalised by *global* totals (all-reduced, ``replica_sum``), so the
  summed gradient equals the single-device gradient of the same global batch, and the optimizer
  (which sums over replicas and then clips) reproduces the reference's single-device update;
- with a ``LengthSplit`` (albert_tf/training/length_buckets.py), a training batch whose examples
  differ much in length runs as parts sorted by length, each cut to its own length; their
  gradients add up to the batch's (the same normalizers), with less work on padding;
- checkpoints (model, optimizer, step, dropout seed) every ``save_checkpoints_steps`` in
  ``output_dir`` as ``model.ckpt-<step>``, each recorded as the last trained one in the run
  manifest; a run restarts from that one (never from random weights where a trained model is),
  replaying the (seeded) input up to the step it reached so the data order is that of an
  uninterrupted run;
  dropout masks are stateless, a function of the run's dropout seed, the step, the replica and the
  micro-batch (``dropout_seed``), so a resumed run ends with the same weights, bit for bit, as an
  uninterrupted one;
- a non-finite loss stops the run with ``NonFiniteLossError``; nothing is saved after it, so the
  last good checkpoint stays the latest;
- a corrupt record, or one the parse function refuses, met inside a step is a ``RecordFileError``
  naming its file (albert_tf/files/records.py, ``reading_records``);
- ``evaluate_checkpoint``: restore one checkpoint, predict every ``EvalSet``, reduce to metrics
  (the sweep over all checkpoints is albert_tf/evaluation/checkpoint_sweep.py);
- TensorBoard summaries and a console progress line (step, loss, examples/s, time left), written
  by the chief worker only (``is_chief``).

``RunConfig`` holds the run's settings; albert_tf/cli/training_run.py fills it from a command's.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import secrets
import time
from typing import Callable, Iterator, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from albert_tf.checkpoints.files import TF2_CHECKPOINT_NAME
from albert_tf.checkpoints.object_format import require_same_model, require_same_optimizer
from albert_tf.checkpoints.run_directory import (holds_trained_model, record_trained,
                                                 trained_checkpoint)
from albert_tf.checkpoints.warm_start import CheckpointSource, load_checkpoint
from albert_tf.errors.user_error import UserError
from albert_tf.files.records import reading_records
from albert_tf.files.run_manifest import read_manifest
from albert_tf.models.layers import dropout_seed_scope
from albert_tf.training.input_pipeline import RECORD_INDEX, DatasetFn
from albert_tf.training.length_buckets import LengthSplit
from albert_tf.training.task import EvalSet, Features, Task

DTYPE_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


# TensorBoard's scalar-plugin metadata: written with tf.summary.write, which needs no tensorboard
# package (TF 2.21 no longer installs it), and read by TensorBoard as ordinary scalars.
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    data_class=summary_pb2.DATA_CLASS_SCALAR)


# What a Trainer writes into its output_dir besides the checkpoint state file: the checkpoints
# (a glob pattern), the TensorBoard logs of training and of evaluation, and the other workers'
# scratch checkpoints of a multi-worker run.
CHECKPOINTS = TF2_CHECKPOINT_NAME + "-*"
TRAIN_LOGS, EVAL_LOGS = "train", "eval"
WORKER_DIR = ".worker_tmp"

# Where a Trainer checkpoint saves the run's dropout seed (the edge ``dropout_seed`` of its root).
DROPOUT_SEED_KEY = "dropout_seed/.ATTRIBUTES/VARIABLE_VALUE"


class NonFiniteLossError(UserError, RuntimeError):
    """Training produced a NaN or infinite loss; the run stops keeping the last good checkpoint.

    A user error: the user's settings (learning rate, warmup, precision) or data cause it, and the
    message says which to change; its traceback would show only the training loop."""


class TrainedModelError(UserError, RuntimeError):
    """The output directory holds a trained model but nothing to resume its training from."""


class RunConfigError(UserError, ValueError):
    """The loop settings do not go together (e.g. --train_batch_size is not divisible by
    --gradient_accumulation_steps)."""


@dataclasses.dataclass
class RunConfig:
    """Loop settings (the reference's RunConfig plus the new flags)."""

    output_dir: str
    train_batch_size: int = 32
    num_train_steps: int = 1000
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int | None = 5  # None or 0: keep all
    iterations_per_loop: int = 1000
    gradient_accumulation_steps: int = 1
    use_xla: bool = False
    dtype: str = "float32"
    replay_input_on_resume: bool = True
    seed: int | None = None  # model initialisation and dropout; None: random (see Trainer)

    def __post_init__(self):
        if self.dtype not in DTYPE_POLICIES:
            raise ValueError(f"dtype must be one of {sorted(DTYPE_POLICIES)}, got {self.dtype!r}.")
        for name in ("train_batch_size", "num_train_steps", "save_checkpoints_steps",
                     "iterations_per_loop", "gradient_accumulation_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if self.train_batch_size % self.gradient_accumulation_steps:
            raise RunConfigError(
                f"train_batch_size ({self.train_batch_size}) must be divisible by "
                f"gradient_accumulation_steps ({self.gradient_accumulation_steps}).")

    @property
    def micro_batch_size(self) -> int:
        """Examples per forward pass: the global batch split into accumulation steps."""
        return self.train_batch_size // self.gradient_accumulation_steps


def set_dtype_policy(dtype: str) -> None:
    """float32 / bfloat16 / float16 -> Keras global policy (mixed: float32 variables)."""
    if dtype not in DTYPE_POLICIES:
        raise ValueError(f"--dtype must be one of {sorted(DTYPE_POLICIES)}, got {dtype!r}.")
    keras.mixed_precision.set_global_policy(DTYPE_POLICIES[dtype])


def replica_sum(values: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """Sums a dict of scalars over all replicas (identity without a strategy)."""
    context = tf.distribute.get_replica_context()
    values = {k: tf.cast(v, tf.float32) for k, v in values.items()}
    return dict(context.all_reduce(tf.distribute.ReduceOp.SUM, values))


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the worker that writes checkpoints, summaries and results."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def dropout_seed(run_seed: tf.Tensor, step: tf.Tensor, replica: tf.Tensor,
                 micro_batch: int) -> tf.Tensor:
    """int32 [2]: the seed of the dropout masks of one forward pass in training, a function of the
    run's dropout seed, the global step (before its update), the replica's id in the sync group and
    the micro-batch index of gradient accumulation, so that every step, replica and micro-batch
    draws other masks and a resumed run draws the masks of an uninterrupted one."""
    seed = tf.stack([tf.cast(run_seed, tf.int32), tf.cast(step, tf.int32)])
    seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(replica, tf.int32))
    return tf.random.experimental.stateless_fold_in(seed, micro_batch)


def _summed(dicts: Sequence[Mapping[str, tf.Tensor]]) -> dict[str, tf.Tensor]:
    """The key-wise sum of dicts of tensors (a key missing from a dict counts 0)."""
    total: dict[str, tf.Tensor] = {}
    for values in dicts:
        for key, value in values.items():
            total[key] = total[key] + value if key in total else value
    return total


def _added(grads: list, more: list) -> list:
    """Two lists of gradients summed element-wise (None: a variable the loss does not reach)."""
    return [a if b is None else b if a is None else a + b for a, b in zip(grads, more)]


def format_duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Trainer:
    """Runs a Task under a strategy: ``initialize``, ``train``, ``evaluate``, ``predict``.

    The run's dropout seed is ``config.seed`` (modulo 2**31), or drawn at random when it is None; it
    is saved in the checkpoints, so a resumed run keeps the seed of the run it continues.
    """

    def __init__(self, strategy: tf.distribute.Strategy, task: Task,
                 optimizer_fn: Callable[[], keras.optimizers.Optimizer], config: RunConfig,
                 log: Callable[[str], None] = functools.partial(print, flush=True),
                 length_split: LengthSplit | None = None):
        self.strategy = strategy
        self.task = task
        self.length_split = length_split
        self.config = config
        self.chief = is_chief(strategy)
        self._log = log if self.chief else (lambda message: None)
        set_dtype_policy(config.dtype)
        if config.seed is not None:
            keras.utils.set_random_seed(config.seed)
        with strategy.scope():
            self.model = task.build_model()
            optimizer = optimizer_fn()
            self.base_optimizer = optimizer
            if config.dtype == "float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.optimizer.build(self.model.trainable_variables)
            run_seed = secrets.randbelow(2**31) if config.seed is None else config.seed % 2**31
            self.dropout_seed = tf.Variable(run_seed, dtype=tf.int64, trainable=False,
                                            name="dropout_seed")
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                              dropout_seed=self.dropout_seed)
        checkpoint_dir = config.output_dir if self.chief else os.path.join(
            config.output_dir, WORKER_DIR, str(strategy.cluster_resolver.task_id))
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, checkpoint_dir, max_to_keep=config.keep_checkpoint_max or None,
            checkpoint_name=TF2_CHECKPOINT_NAME)
        self._train_loop = None
        self._predict_step = None
        self._writers: dict[str, tf.summary.SummaryWriter] = {}
        self.history: list[dict[str, float]] = []  # one entry per training loop, with its "step"

    @property
    def global_step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    # ----------------------------------------------------------------------------- initialization
    def initialize(self, init_checkpoint: CheckpointSource | None = None,
                   init_from_group0: bool = False, config_file: str | None = None) -> str:
        """Resumes from the latest checkpoint in output_dir, else warm-starts from ``init_checkpoint``
        (resolved by ``resolve_checkpoint_source``; None: a random initialisation).

        ``config_file`` (the model's config) is named in the errors of a checkpoint that does not
        fit the model: on resume, the checkpoint must hold exactly the model's variables and shapes
        and the state of the same optimizer (CheckpointMismatchError otherwise).
        Returns a one-line description.
        """
        latest = self.latest_checkpoint()
        if latest is not None:
            require_same_model(self.model, latest, config_file)
            require_same_optimizer(self.optimizer, latest)
            root, note = self.checkpoint, ""
            if not tf.train.load_checkpoint(latest).has_tensor(DROPOUT_SEED_KEY):
                root = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
                note = (" It holds no dropout seed (an older albert_tf wrote it): dropout goes on "
                        "with this run's seed, so with dropout on the weights will differ from an "
                        "uninterrupted run's.")
            # expect_partial: the save counter is not restored (checkpoints are numbered by step).
            root.read(latest).assert_existing_objects_matched().expect_partial()
            message = f"Resumed from {latest} at step {self.global_step}.{note}"
            if init_checkpoint:
                message += " (--init_checkpoint is used only when output_dir has no checkpoint.)"
        elif (held := holds_trained_model(self.config.output_dir)) is not None:
            raise TrainedModelError(
                f"{self.config.output_dir} holds {held}, but no checkpoint to continue its "
                "training from: training here would start again from other weights. Restore the "
                "run's checkpoints, or train in another --output_dir")
        elif init_checkpoint:
            message = self.warm_start(init_checkpoint, init_from_group0, config_file)
        else:
            message = "Training from a random initialisation (no checkpoint, no --init_checkpoint)."
        self._log(message)
        return message

    def latest_checkpoint(self) -> str | None:
        """The checkpoint to resume from: the last trained one the run manifest records (its
        ``model.ckpt-<step>``, or model.ckpt-best where the sweep renamed it), None when there is
        none (albert_tf/checkpoints/run_directory.py)."""
        trained = trained_checkpoint(read_manifest(self.config.output_dir))
        return trained[1] if trained else None

    def warm_start(self, init_checkpoint: CheckpointSource, init_from_group0: bool = False,
                   config_file: str | None = None) -> str:
        """Loads model weights only (optimizer fresh, step 0), from any checkpoint format.

        Logs the load report (loaded / missing / unused variables; a WARNING for heads left at
        their random initial values) and raises CheckpointMismatchError when an encoder variable is
        missing, a shape differs, or the checkpoint holds encoder variables the model has no place
        for (a config of fewer groups would fine-tune part of the pretrained encoder) (naming
        ``config_file``).
        """
        report = load_checkpoint(self.model, init_checkpoint, init_from_group0, config_file)
        self._log(report.format())
        report.require_same_encoder(config_file)
        return f"Initialised the model from {report.kind} checkpoint {report.checkpoint}."

    def restore_weights(self, path: str) -> None:
        """Loads only the model weights of one of our checkpoints (for evaluation / prediction);
        CheckpointMismatchError when it was written by another model (e.g. an edited config)."""
        require_same_model(self.model, path)
        self.checkpoint_for_model().read(path).expect_partial().assert_existing_objects_matched()

    def checkpoint_for_model(self) -> tf.train.Checkpoint:
        return tf.train.Checkpoint(model=self.model)

    # ----------------------------------------------------------------------------------- training
    def _replica_train_step(self, batches: tuple[Features, ...]) -> dict[str, tf.Tensor]:
        """Runs on each replica: accumulate gradients over the micro-batches, apply once."""
        variables = self.model.trainable_variables
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        step = tf.convert_to_tensor(self.optimizer.iterations)
        accumulated, logs_total = None, {}
        for micro_batch, features in enumerate(batches):
            dependencies = [] if accumulated is None else [g for g in accumulated if g is not None]
            with tf.control_dependencies(dependencies):
                seed = dropout_seed(self.dropout_seed, step, replica, micro_batch)
                grads, logs = self._batch_gradients(features, seed)
            accumulated = grads if accumulated is None else _added(accumulated, grads)
            logs_total = _summed([logs_total, logs])
        micro_steps = float(len(batches))
        if micro_steps > 1:
            accumulated = [None if g is None else g / micro_steps for g in accumulated]
            logs_total = {k: v / micro_steps for k, v in logs_total.items()}
        # Variables the loss does not reach (the pooler, for SQuAD) are skipped, as the reference's
        # optimizers skip a None gradient.
        self.optimizer.apply_gradients([(g, v) for g, v in zip(accumulated, variables)
                                        if g is not None])
        return logs_total

    def _batch_gradients(self, features: Features, seed: tf.Tensor):
        """Gradients and logs of one (micro-)batch: run whole, or, with ``length_split`` and when
        it saves work, as its parts sorted by length (``LengthSplit``). The normalizers are the
        whole batch's, summed over the replicas before the choice (each replica may choose
        differently; no collective runs inside it)."""
        normalizers = replica_sum(self.task.loss_normalizers(features))
        whole = functools.partial(self._parts_gradients, [features], normalizers, seed)
        if self.length_split is None or not self.length_split.can_split(features):
            return whole()
        saves_work, make_parts = self.length_split.plan(features)
        return tf.cond(saves_work,
                       lambda: self._parts_gradients(make_parts(), normalizers, seed), whole)

    def _parts_gradients(self, parts: Sequence[Features], normalizers: Mapping[str, tf.Tensor],
                         seed: tf.Tensor):
        """Gradients and logs of a batch given as parts run one after another. Every task's loss
        contribution is a sum over examples divided by the batch's ``normalizers``, so the parts'
        gradients add up to those of the batch run whole. Part 0 draws its dropout masks from
        ``seed``, part i from ``seed`` folded with i."""
        grads, logs = None, {}
        for index, part in enumerate(parts):
            part_seed = tf.random.experimental.stateless_fold_in(seed, index) if index else seed
            part_grads, part_logs = self._compute_gradients(part, normalizers, part_seed)
            grads = part_grads if grads is None else _added(grads, part_grads)
            logs = _summed([logs, part_logs])
        return grads, logs

    def _gradients(self, features: Features, normalizers: Mapping[str, tf.Tensor],
                   seed: tf.Tensor):
        """Gradients and logs of one micro-batch, dropout masks drawn from ``seed`` (int32 [2])."""
        with tf.GradientTape() as tape, dropout_seed_scope(seed):
            loss, logs = self.task.train_loss(self.model, features, normalizers)
            scaled = (self.optimizer.scale_loss(loss)
                      if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer) else loss)
        grads = tape.gradient(scaled, self.model.trainable_variables)
        grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
        logs = dict(logs, loss=loss)
        return grads, logs

    def _build_train_loop(self):
        self._compute_gradients = (tf.function(self._gradients, jit_compile=True)
                                   if self.config.use_xla else self._gradients)
        strategy, micro_steps = self.strategy, self.config.gradient_accumulation_steps

        @tf.function
        def train_loop(iterator, num_steps):
            totals = None
            nonfinite = tf.constant(0, tf.int32)
            for _ in tf.range(num_steps):
                batches = tuple(next(iterator) for _ in range(micro_steps))
                logs = strategy.run(self._replica_train_step, args=(batches,))
                logs = {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                        for k, v in logs.items()}
                nonfinite += tf.cast(~tf.math.is_finite(logs["loss"]), tf.int32)
                totals = logs if totals is None else {k: totals[k] + logs[k] for k in logs}
            return {k: v / tf.cast(num_steps, tf.float32) for k, v in totals.items()}, nonfinite

        return train_loop

    def _distributed(
            self, dataset: tf.data.Dataset) -> tf.data.Dataset | tf.distribute.DistributedDataset:
        """``dataset`` as the strategy's replicas read it. On one device (OneDeviceStrategy) the
        dataset itself: the strategy's distributed dataset would add a per-device iterator with
        tf.data's autotuning on, whose deletion at the end of every pass and training run waits
        for the autotuning thread's next tick (up to a minute; see ``without_autotuning``), and
        ``strategy.run`` places the step on the device either way."""
        if isinstance(self.strategy, tf.distribute.OneDeviceStrategy):
            return dataset
        return self.strategy.experimental_distribute_dataset(dataset)

    def _distributed_iterator(self, dataset_fn: DatasetFn, batch_size: int,
                              skip_batches: int) -> Iterator:
        return iter(self._distributed(dataset_fn(batch_size, skip_batches)))

    def train(self, dataset_fn: DatasetFn) -> dict[str, float]:
        """Trains until ``num_train_steps``; returns the logs of the last loop."""
        config = self.config
        start_step = self.global_step
        if start_step >= config.num_train_steps:
            self._log(f"Already at step {start_step} >= num_train_steps; nothing to train.")
            return {}
        skip = start_step * config.gradient_accumulation_steps if config.replay_input_on_resume else 0
        iterator = self._distributed_iterator(dataset_fn, config.micro_batch_size, skip)
        if self._train_loop is None:
            self._train_loop = self._build_train_loop()
        step, logs = start_step, {}
        started = time.time()
        while step < config.num_train_steps:
            next_save = (step // config.save_checkpoints_steps + 1) * config.save_checkpoints_steps
            num_steps = min(config.iterations_per_loop, next_save - step,
                            config.num_train_steps - step)
            loop_started = time.time()
            with reading_records():  # a corrupt or unparsable record: named by its file
                tensors, nonfinite = self._train_loop(iterator, tf.constant(num_steps))
            logs = {k: float(v) for k, v in tensors.items()}
            previous, step = step, self.global_step
            if int(nonfinite):
                raise NonFiniteLossError(
                    f"Non-finite loss ({logs['loss']}) in {int(nonfinite)} of the steps "
                    f"{previous + 1}..{previous + num_steps}; stopped without saving. "
                    f"{self._kept_checkpoint_sentence()} Lower --learning_rate, use warmup, or "
                    "check the input data.")
            elapsed = time.time() - loop_started
            logs["learning_rate"] = float(self._current_learning_rate())
            logs["gradient_norm"] = float(self.base_optimizer.gradient_norm.numpy())
            logs["examples_per_second"] = num_steps * config.train_batch_size / max(elapsed, 1e-9)
            self._write_summaries(TRAIN_LOGS, logs, step)
            self.history.append(dict(logs, step=step))
            rate = (step - start_step) / max(time.time() - started, 1e-9)
            left = (config.num_train_steps - step) / max(rate, 1e-9)
            self._log(f"step {step}/{config.num_train_steps}  loss {logs['loss']:.4f}  "
                      + "  ".join(f"{k} {v:.4g}" for k, v in sorted(logs.items())
                                  if k not in ("loss", "examples_per_second"))
                      + f"  {logs['examples_per_second']:.1f} examples/s  "
                        f"time left {format_duration(left)}")
            if step % config.save_checkpoints_steps == 0 or step >= config.num_train_steps:
                saved = self.manager.save(checkpoint_number=step)
                if self.chief:
                    record_trained(config.output_dir, step, saved)
                self._log(f"Saved checkpoint {saved}")
        self._log(f"Graphs traced for the training loop: "
                  f"{self._train_loop.experimental_get_tracing_count()} (every batch length)")
        return logs

    def _kept_checkpoint_sentence(self) -> str:
        """What a rerun resumes from after a divergence: the latest checkpoint, or none yet."""
        latest = self.manager.latest_checkpoint
        if latest:
            return f"The last good checkpoint, {latest}, is kept; a rerun resumes from it."
        return (f"No checkpoint was saved yet (the first is at step "
                f"{self.config.save_checkpoints_steps}), so {self.config.output_dir} holds no "
                "checkpoint; a rerun starts again from the beginning (or from --init_checkpoint).")

    def _current_learning_rate(self) -> float:
        learning_rate = self.base_optimizer.learning_rate
        return float(learning_rate.numpy() if hasattr(learning_rate, "numpy") else learning_rate)

    # --------------------------------------------------------------------- evaluation / prediction
    def predict(self, dataset: tf.data.Dataset,
                max_steps: int | None = None) -> dict[str, np.ndarray]:
        """Concatenated per-example outputs of ``task.predict_outputs`` over ``dataset``.

        The step is traced once for the dataset's element spec, whose batch and length axes are
        open where the batches differ (the last batch; length buckets), so batches of every
        length run in one graph. Batches whose examples carry ``RECORD_INDEX`` (sorted by length)
        have their outputs put back in that order. Logs the examples and examples/s of the pass
        and the step's traces so far."""
        strategy = self.strategy
        if self._predict_step is None:
            def replica_outputs(features):
                features = dict(features)
                index = features.pop(RECORD_INDEX, None)
                outputs = self.task.predict_outputs(self.model, features)
                return outputs if index is None else {**outputs, RECORD_INDEX: index}

            @tf.function
            def predict_step(features):
                outputs = strategy.run(replica_outputs, args=(features,))
                return {k: strategy.gather(v, axis=0) for k, v in outputs.items()}

            self._predict_step = predict_step
        distributed = self._distributed(dataset)
        step = self._predict_step.get_concrete_function(distributed.element_spec)
        collected: dict[str, list[np.ndarray]] = {}
        started = time.time()
        with reading_records():  # a corrupt or unparsable record: named by its file
            for index, features in enumerate(distributed):
                if max_steps is not None and index >= max_steps:
                    break
                for key, value in step(features).items():
                    collected.setdefault(key, []).append(value.numpy())
        if not collected:
            raise ValueError("The evaluation/prediction dataset produced no batch.")
        outputs = {k: np.concatenate(v, axis=0) for k, v in collected.items()}
        index = outputs.pop(RECORD_INDEX, None)
        if index is not None:
            order = np.argsort(index, kind="stable")
            outputs = {k: v[order] for k, v in outputs.items()}
        self._log_pass(outputs, time.time() - started)
        return outputs

    def _log_pass(self, outputs: Mapping[str, np.ndarray], seconds: float) -> None:
        """One line on a prediction pass: its real examples, their rate, the step's traces."""
        real = outputs.get("is_real_example")
        count = int(np.sum(real)) if real is not None else len(next(iter(outputs.values())))
        self._log(f"predicted {count} examples in {seconds:.1f} s "
                  f"({count / max(seconds, 1e-9):.1f} examples/s; graphs traced for the "
                  f"prediction step: {self._predict_step.experimental_get_tracing_count()})")

    def evaluate(self, eval_set: EvalSet) -> dict[str, float]:
        """``task.reduce`` of the outputs over one evaluation set, keys prefixed by its name."""
        outputs = self.predict(eval_set.dataset_fn(), eval_set.max_steps)
        metrics = self.task.reduce(outputs, eval_set.context)
        return {(f"{eval_set.name}_{key}" if eval_set.name else key): value
                for key, value in metrics.items()}

    def evaluate_checkpoint(self, prefix: str, eval_sets: Sequence[EvalSet]) -> dict[str, float]:
        """Restores the model weights of checkpoint ``prefix`` and evaluates every set.

        This is what every script's checkpoint sweep calls; the sweep adds ``global_step``.
        """
        self.restore_weights(prefix)
        metrics: dict[str, float] = {}
        for eval_set in eval_sets:
            metrics.update(self.evaluate(eval_set))
        return metrics

    # ---------------------------------------------------------------------------------- summaries
    def _write_summaries(self, name: str, values: Mapping[str, float], step: int) -> None:
        if not self.chief:
            return
        if name not in self._writers:
            self._writers[name] = tf.summary.create_file_writer(
                os.path.join(self.config.output_dir, name))
        with self._writers[name].as_default(step=step):
            for key, value in values.items():
                if isinstance(value, (int, float)) and math.isfinite(value):
                    tf.summary.write(key, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)
        self._writers[name].flush()

    def write_eval_summaries(self, metrics: Mapping[str, float], step: int) -> None:
        self._write_summaries(EVAL_LOGS, metrics, step)
