"""The one driver of every fine-tuning script: a script declares its task as ``FineTuningHooks``
and calls ``run_fine_tuning(settings, hooks)``.

The driver runs the procedure every script used to spell itself:

1. before any work: --init_checkpoint resolved once; everything the run reads and writes declared
   (albert_tf/cli/training_run.py's ``run_files`` plus the task's ``files``) and checked in one
   pre-flight check (albert_tf/files/run_files.py); a run that predicts or exports without its own
   sweep needs an earlier run's model.ckpt-best; the locks of --output_dir taken;
2. the config and the tokenizer; the task's data read and checked (``load_data``); its label set,
   config and what else the task records (``records``) checked against the run manifest of
   --output_dir (albert_tf/files/run_manifest.py) and recorded by the first run; every feature
   file the run reads built (or found in the cache) before the first training step;
3. --do_train: a run whose training is finished says so in one line and trains nothing; else warm
   start from --init_checkpoint (or resume from the last trained step), train on the training
   features,
   every epoch in a new order drawn from --input_seed (albert_tf/training/input_pipeline.py),
   each batch cut to its longest example (--length_buckets, the task's ``sequence_features``;
   with --use_xla to the shortest of a fixed set of lengths that holds it, XLA compiling once per
   shape; albert_tf/training/length_buckets.py), grouped by length with
   --group_by_length; the evaluation and prediction batches are cut the same way;
   the sweep (the reference's: every checkpoint evaluated, the best kept as model.ckpt-best); then,
   from model.ckpt-best, the predictions, the SavedModel export and the TFLite export the flags
   ask for.

A task plugs in through hooks (features, parse, evaluation sets, predictions, exports); it writes
only declared outputs (``FineTuningRun.output_path``). albert_tf never imports data_prep: a script
hands its data_prep feature builders to the driver inside its hooks.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import tensorflow as tf

from albert_tf.checkpoints.files import BEST_CHECKPOINT_NAME
from albert_tf.checkpoints.label_set import LABEL_SET, LabelSet, recorded_label_set
from albert_tf.checkpoints.warm_start import CheckpointSource
from albert_tf.cli import error_boundary, training_run
from albert_tf.cli.settings import RunSettings
from albert_tf.errors.user_error import UserError
from albert_tf.evaluation.best_checkpoint import (eval_data_of, restore_best_checkpoint,
                                                  run_checkpoint_sweep)
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy, check_eval_data
from albert_tf.files.run_files import (Input, RunFiles, WorkDirectory, check_run_files,
                                       fixed_outputs)
from albert_tf.files.run_manifest import Record, read_manifest, require_record
from albert_tf.models.config import AlbertConfig
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.training.input_pipeline import (ParseFn, needs_static_batches,
                                               record_eval_dataset, record_train_dataset_fn)
from albert_tf.training.length_buckets import LengthBuckets, LengthSplit
from albert_tf.training.task import EvalSet, Task
from albert_tf.training.trainer import Trainer


@dataclasses.dataclass(frozen=True)
class TrainingData:
    """The records a run trains on: the feature file's path, how to parse its records, and a line
    saying what it holds (e.g. "rte train: 2490 examples")."""

    path: str
    parse: ParseFn
    description: str


@dataclasses.dataclass
class FineTuningRun:
    """What the steps of one run share, handed to the hooks: the settings, the declared files, the
    config, the tokenizer, the checkpoint to start from, the trainer (built after ``load_data``)
    and the length buckets its batches are cut to (None: every batch keeps length S)."""

    settings: RunSettings
    files: RunFiles
    config: AlbertConfig
    tokenizer: FullTokenizer
    init_checkpoint: CheckpointSource | None
    trainer: Trainer | None = None
    buckets: LengthBuckets | None = None

    def output_path(self, name: str) -> str:
        """The path of the fixed output ``name`` in --output_dir (KeyError unless declared)."""
        return self.files.declared(os.path.join(self.settings.output_dir, name))

    def eval_dataset(self, record_path: str, parse: ParseFn, batch_size: int) -> tf.data.Dataset:
        """The records of ``record_path`` once (full batches on a TPU); with the run's length
        buckets sorted by length chunk by chunk and cut (``Trainer.predict`` returns the outputs
        in file order either way)."""
        return record_eval_dataset(record_path, parse, batch_size,
                                   needs_static_batches(self.trainer.strategy), self.buckets)


class FineTuningHooks:
    """What a fine-tuning script declares: its task's files, data, model, evaluation and outputs.

    Subclasses set ``run_outputs`` (the fixed names they write in --output_dir) and implement
    ``files``, ``load_data``, ``training_task``, ``prepare_features``, ``training_data``,
    ``eval_sets``, ``selection_metric`` and the outputs their flags offer (``predict``, ``export``,
    ``export_tflite``).
    """

    run_outputs: tuple[str, ...] = ()
    # The features of the task's records whose last axis is the sequence (its records'
    # SEQUENCE_FEATURES): what a batch cut to its length bucket cuts.
    sequence_features: tuple[str, ...] = ()
    # The flag of the run's sweep, named when a prediction or export finds no model.ckpt-best.
    evaluation_flag = "--do_eval"
    selection_metric = "eval_accuracy"

    def files(self, settings: RunSettings) -> RunFiles:
        """The task's inputs and outputs besides the shared ones (its data files, its features)."""
        return RunFiles()

    def evaluates(self, settings: RunSettings) -> bool:
        """Whether the run sweeps the checkpoints (--do_eval)."""
        return settings.do_eval

    def reads_init_checkpoint(self, settings: RunSettings) -> bool:
        """Whether the run uses --init_checkpoint (to train from)."""
        return settings.do_train

    def length_invariant(self, settings: RunSettings) -> bool:
        """Whether the task's results of a real example do not depend on the padding after it
        (then its batches may be cut to their length bucket). SQuAD v1.1's do: its loss and
        n-best lists rank all S positions, as the reference's."""
        return True

    def check(self, settings: RunSettings, init_checkpoint: CheckpointSource | None) -> None:
        """The task's checks before any work, after the pre-flight check of its files (e.g.
        something to evaluate)."""

    def load_data(self, run: FineTuningRun, stored: LabelSet | None) -> tuple[LabelSet, str]:
        """Reads and checks every data file the run uses; returns the task's label set and where
        it comes from (named in a mismatch). ``stored``: the one --output_dir recorded, if any."""
        raise NotImplementedError

    def training_task(self, run: FineTuningRun, label_set: LabelSet) -> Task:
        raise NotImplementedError

    def records(self, run: FineTuningRun) -> dict[Record, tuple[object, str]]:
        """What the task's checkpoints are besides the config and the label set, recorded in the
        run manifest of --output_dir ({record: (value, where it comes from)}; run_classifier: its
        kind of classifier); checked, then recorded where absent, on every run."""
        return {}

    def schedule(self, run: FineTuningRun) -> tuple[int, int]:
        """(training steps, warmup steps); by default the flags'."""
        return run.settings.num_train_steps, run.settings.num_warmup_steps

    def prepare_features(self, run: FineTuningRun) -> None:
        """Builds (or finds in the cache) every feature file the run reads, before any step."""

    def training_data(self, run: FineTuningRun) -> TrainingData:
        raise NotImplementedError

    def eval_sets(self, run: FineTuningRun) -> Sequence[EvalSet]:
        raise NotImplementedError

    def sweep_policy(self, settings: RunSettings) -> SweepPolicy:
        return SweepPolicy(prune=True)

    def before_sweep(self, run: FineTuningRun) -> None:
        """Runs before the sweep (SQuAD: a run without checkpoints evaluates --init_checkpoint)."""

    def after_sweep(self, run: FineTuningRun, best: dict[str, float]) -> None:
        """Runs after the sweep with the best checkpoint's metrics (e.g. prints a report)."""

    def predict(self, run: FineTuningRun, dev_best: dict[str, float] | None) -> None:
        """--do_predict from model.ckpt-best (restored): the task's prediction files."""

    def export(self, run: FineTuningRun) -> None:
        """--export_dir from model.ckpt-best (restored): the task's SavedModels."""

    def export_tflite(self, run: FineTuningRun) -> str:
        """--tflite_file from model.ckpt-best (restored); returns the path written."""
        raise NotImplementedError


def feature_cache_files(settings: RunSettings, inputs: tuple[Input, ...],
                        cache_patterns: Sequence[str]) -> RunFiles:
    """The task's part of a declaration: its data files (``inputs``) and the feature files it
    caches in --cached_dir (--output_dir by default), named by the glob ``cache_patterns``."""
    cache = WorkDirectory("--cached_dir" if settings.cached_dir != settings.output_dir
                          else "--output_dir", settings.cached_dir)
    return RunFiles(inputs, fixed_outputs(cache, cache_patterns, needs_record=False))


def run_fine_tuning(settings: RunSettings, hooks: FineTuningHooks) -> dict[str, float] | None:
    """Runs one fine-tuning command (see the module doc); returns the best checkpoint's metrics
    (this run's sweep's, else an earlier one's; None when no sweep chose one)."""
    strategy = training_run.strategy_of(settings.strategy)  # multi-worker: before any other op
    init = (training_run.init_checkpoint_source(settings)
            if hooks.reads_init_checkpoint(settings) else None)
    files = (training_run.run_files(settings, init, hooks.evaluates(settings), hooks.run_outputs)
             + hooks.files(settings))
    check_run_files(files)
    hooks.check(settings, init)
    buckets, batch_lengths = _length_buckets(settings, hooks, strategy)
    evaluates = hooks.evaluates(settings)
    if (settings.do_predict or settings.export_dir or settings.tflite_file) and not evaluates:
        training_run.require_best_checkpoint(settings, hooks.evaluation_flag)
    with training_run.output_dir_locks(settings):
        config = training_run.load_config(settings)
        training_run.check_init_checkpoint_config(settings, init, config)
        tokenizer = training_run.load_tokenizer(settings, config)
        print(batch_lengths)  # after the quick checks of the config and SentencePiece model
        run = FineTuningRun(settings, files, config, tokenizer, init, buckets=buckets)
        manifest = read_manifest(settings.output_dir)
        label_set, source = hooks.load_data(run, recorded_label_set(manifest))
        records = {LABEL_SET: (label_set.to_record(), source), **hooks.records(run)}
        for record, (value, where) in records.items():
            require_record(manifest, record, value, where)
        steps, warmup = hooks.schedule(run)
        finished = settings.do_train and training_run.finished_line(
            settings.output_dir, steps, hooks.selection_metric)
        run.trainer = training_run.build_trainer(
            settings, hooks.training_task(run, label_set), steps, warmup, evaluates,
            length_split=LengthSplit(buckets) if buckets is not None else None)
        hooks.prepare_features(run)
        if evaluates and run.trainer.chief:
            check_eval_data(settings.output_dir, eval_data_of(hooks.eval_sets(run)),
                            hooks.sweep_policy(settings))
        if run.trainer.chief:
            training_run.record_run(settings, config, records)
        if finished:
            print(finished)
        elif settings.do_train:
            _train(run, hooks.training_data(run))
        best = _sweep(run, hooks) if evaluates else _recorded_best(settings.output_dir)
        if settings.do_predict or settings.export_dir or settings.tflite_file:
            restore_best_checkpoint(run.trainer)
        if settings.do_predict:
            hooks.predict(run, best)
        if settings.export_dir:
            hooks.export(run)
            print(f"Exported the SavedModel of {BEST_CHECKPOINT_NAME} to {settings.export_dir}")
        if settings.tflite_file:
            path = hooks.export_tflite(run)
            print(f"Wrote the TFLite model of {BEST_CHECKPOINT_NAME} "
                  f"({settings.tflite_quantization}, S="
                  f"{settings.max_seq_length}) to {path}")
    return best


def _train(run: FineTuningRun, data: TrainingData) -> None:
    """--do_train: warm start from --init_checkpoint (or resume the run in --output_dir), then
    train on the records, every epoch in a new order drawn from --input_seed; a SIGTERM while it
    trains ends the process at once (error_boundary.sigterm_ends_at_once)."""
    settings, trainer = run.settings, run.trainer
    print(f"{data.description}, batch {settings.train_batch_size}, "
          f"{trainer.config.num_train_steps} steps")
    replica_batch = trainer.config.micro_batch_size // trainer.strategy.num_replicas_in_sync
    if trainer.length_split is not None and trainer.length_split.parts_of(replica_batch) > 1:
        print(trainer.length_split.describe(replica_batch))
    trainer.initialize(run.init_checkpoint, settings.init_from_group0,
                       config_file=settings.albert_config_file)
    with error_boundary.sigterm_ends_at_once():
        trainer.train(record_train_dataset_fn(data.path, data.parse, seed=settings.input_seed,
                                              buckets=run.buckets,
                                              grouped=settings.group_by_length))


def _length_buckets(settings: RunSettings, hooks: FineTuningHooks,
                    strategy: tf.distribute.Strategy) -> tuple[LengthBuckets | None, str]:
    """The length buckets of the run's batches and the line that says them: every length (a
    batch cut to its longest example) without XLA, the fixed set with --use_xla (one compilation
    per length met); None (every batch of length S, the line says why) with --nolength_buckets,
    for a task whose results depend on the padding, and on a TPU, whose training loop compiles
    one program for one input shape. --group_by_length without buckets is refused here."""
    if not settings.length_buckets:
        reason = "--nolength_buckets"
    elif not hooks.length_invariant(settings):
        reason = "this task's results depend on the padding"
    elif needs_static_batches(strategy):
        reason = "a TPU compiles its loop for one shape"
    else:
        buckets = LengthBuckets.of(settings.max_seq_length, hooks.sequence_features,
                                   exact=not settings.use_xla)
        return buckets, buckets.describe() + (" (training batches grouped by length)"
                                              if settings.group_by_length else "")
    if settings.group_by_length:
        raise UserError(f"--group_by_length needs batches of several lengths, which this run does "
                        f"not have ({reason}).")
    return None, f"Batches padded to --max_seq_length={settings.max_seq_length} ({reason})."


def _recorded_best(output_dir: str) -> dict[str, float] | None:
    """The metrics of the best checkpoint an earlier sweep of ``output_dir`` chose (None: none
    recorded), for a run that predicts from it without sweeping (RACE's predict_results.txt
    reports its dev accuracy)."""
    best = read_manifest(output_dir).best
    return None if best is None else best["metrics"]


def _sweep(run: FineTuningRun, hooks: FineTuningHooks) -> dict[str, float]:
    """The reference's sweep over the checkpoints of --output_dir on the task's evaluation sets,
    keeping the best by the task's selection metric; returns the best one's metrics."""
    hooks.before_sweep(run)
    _, best = run_checkpoint_sweep(run.trainer, hooks.eval_sets(run), hooks.selection_metric,
                                   hooks.sweep_policy(run.settings))
    hooks.after_sweep(run, best)
    return best
