"""The one driver of every training command: ``run_task(settings, spec)`` runs a task declared as a
``TaskSpec`` (albert_tf/cli/task_spec.py; the specs are in task_specs/).

The procedure, in order:

1. before any work: --init_checkpoint resolved; everything the run reads and writes declared (the
   shared files of a training run, albert_tf/cli/training_run.py, plus every split's inputs and
   feature caches and the task's outputs) and checked in one pre-flight check; the locks of
   --output_dir taken, its run manifest read once; a run that predicts or exports without
   sweeping needs an earlier sweep's model.ckpt-best;
2. the config and the tokenizer, once; the task's data read and checked (``read_data``); its label
   set and facts checked against the run manifest of --output_dir, and only then the run's fixed
   names recorded in it (a run refused before writes no manifest, not even in an earlier
   version's directory, whose separate files then stay the ones its messages name); then every
   split the run
   reads built once (or found in the cache), the smaller ones first, before the first step;
3. --do_train: a finished run says so and trains nothing; else warm start (or resume) and train,
   every epoch in a new order drawn from --input_seed, each batch cut to its length bucket
   (albert_tf/training/length_buckets.py) where the task allows it;
4. the sweep (every checkpoint evaluated, the best kept as model.ckpt-best) and the task's report
   of it; then from model.ckpt-best the predictions and exports the flags ask for.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from albert_tf.checkpoints.files import BEST_CHECKPOINT_NAME, list_checkpoints
from albert_tf.cli import error_boundary, training_run
from albert_tf.cli.flag_checks import padded_batches_reason
from albert_tf.cli.settings import RunSettings
from albert_tf.cli.task_spec import (EVALUATE, PREDICT, TRAIN, RunStart, Split, SplitFeatures,
                                     TaskRun, TaskSpec, Training)
from albert_tf.errors.user_error import UserError
from albert_tf.evaluation.best_checkpoint import (best_checkpoint_prefix, eval_data_of,
                                                  restore_best_checkpoint, run_checkpoint_sweep)
from albert_tf.evaluation.checkpoint_sweep import check_eval_data
from albert_tf.files.run_files import check_run_files, record_owned_names
from albert_tf.files.run_manifest import RunManifest, read_manifest, require_facts
from albert_tf.training.input_pipeline import needs_static_batches
from albert_tf.training.length_buckets import LengthBuckets, LengthSplit
from albert_tf.training.task import EvalSet


def run_task(settings: RunSettings, spec: TaskSpec) -> dict[str, float] | None:
    """Runs one command of ``spec`` (see the module doc); returns the best checkpoint's metrics
    (this run's sweep's, else an earlier one's; None when no sweep chose one)."""
    strategy = training_run.strategy_of(settings.strategy)  # multi-worker: before any other op
    sweeps = getattr(settings, spec.sweep.flag)
    init = (training_run.init_checkpoint_source(settings)
            if settings.do_train or (sweeps and spec.sweep.evaluates_init_checkpoint) else None)
    files = training_run.run_files(
        settings, init, sweeps, spec.outputs.files,
        task_inputs=tuple(item for split in spec.splits for item in split.inputs),
        cached_names=tuple(dict.fromkeys(split.cache for split in spec.splits if split.cache)))
    check_run_files(files, record=False)  # recorded once the run's facts are checked
    flag = f"--{spec.sweep.flag}"
    if (sweeps and spec.sweep.evaluates_init_checkpoint and not settings.do_train and init is None
            and not list_checkpoints(settings.output_dir)):
        raise UserError(f"{flag}: no checkpoint in {settings.output_dir} and no "
                        "--init_checkpoint to evaluate.")
    buckets, batch_lengths = _length_buckets(settings, spec.training, strategy)
    outputs = (settings.do_predict or settings.export_dir or settings.tflite_file
               or settings.onnx_file)
    with training_run.output_dir_locks(settings):
        manifest = read_manifest(settings.output_dir)  # the run's state as this run starts
        if outputs and not sweeps:
            best_checkpoint_prefix(manifest, flag)  # an earlier sweep's model.ckpt-best, checked
        config = training_run.load_config(settings, manifest)
        training_run.check_init_checkpoint_config(settings, init, config)
        tokenizer = (training_run.load_tokenizer(settings, config)
                     if settings.spm_model_file or settings.vocab_file else None)
        print(batch_lengths)  # after the quick checks of the config and SentencePiece model
        data = spec.read_data(RunStart(settings, config, tokenizer, init, manifest))
        init = data.init_checkpoint or init
        facts = data.all_facts()
        require_facts(manifest, facts)
        record_owned_names(files)
        features = {split.name: split.build(data, tokenizer)
                    for split in _splits_read(settings, spec.splits, sweeps)}
        steps, warmup = _schedule(settings, spec.training, features.get("train"))
        finished = settings.do_train and training_run.finished_line(
            settings.output_dir, manifest, steps, spec.sweep.selection_metric)
        trainer = training_run.build_trainer(
            settings, spec.training.task(config, data), steps, warmup,
            length_split=LengthSplit(buckets) if buckets is not None else None)
        run = TaskRun(settings, config, tokenizer, init, files, data, features, trainer, buckets)
        eval_sets = [run.eval_set(split.name, spec.sweep.batch_size, split.eval_name)
                     for split in spec.splits if split.purpose == EVALUATE and sweeps]
        if sweeps and trainer.chief:
            check_eval_data(manifest, eval_data_of(eval_sets), spec.sweep.policy)
        if trainer.chief:
            training_run.record_run(settings, manifest, config, facts)
        if finished:
            print(finished)
        elif settings.do_train:
            _train(run, features["train"])
        best = _sweep(run, spec, eval_sets) if sweeps else _recorded_best(manifest)
        if outputs:
            restore_best_checkpoint(trainer)
        _write_outputs(run, spec, best)
    return best


def _splits_read(settings: RunSettings, splits: Sequence[Split], sweeps: bool) -> list[Split]:
    """The splits the run's actions read, in the spec's order (its smaller splits first, so their
    mistakes stop the run before the long build of the training split)."""
    wanted = {TRAIN: settings.do_train, EVALUATE: sweeps, PREDICT: settings.do_predict}
    return [split for split in splits if wanted[split.purpose]]


def _schedule(settings: RunSettings, training: Training,
              train: SplitFeatures | None) -> tuple[int, int]:
    """(training steps, warmup steps): the task's schedule of its training split, else the flags'
    (and those of a run that does not train, where they only name the finished step)."""
    if training.schedule is None or train is None:
        return settings.num_train_steps, settings.num_warmup_steps
    return training.schedule(train)


def _train(run: TaskRun, train: SplitFeatures) -> None:
    """--do_train: warm start from --init_checkpoint (or resume the run in --output_dir), then
    train on the split, every epoch in a new order drawn from --input_seed; a SIGTERM while it
    trains ends the process at once (error_boundary.sigterm_ends_at_once)."""
    settings, trainer = run.settings, run.trainer
    print(f"{train.description}, batch {settings.train_batch_size}, "
          f"{trainer.config.num_train_steps} steps")
    replica_batch = trainer.config.micro_batch_size // trainer.strategy.num_replicas_in_sync
    if trainer.length_split is not None and trainer.length_split.parts_of(replica_batch) > 1:
        print(trainer.length_split.describe(replica_batch))
    trainer.initialize(run.init_checkpoint, settings.init_from_group0,
                       config_file=settings.albert_config_file)
    with error_boundary.sigterm_ends_at_once():
        trainer.train(train.training_input(settings.input_seed, run.buckets,
                                           settings.group_by_length))


def _length_buckets(settings: RunSettings, training: Training,
                    strategy: tf.distribute.Strategy) -> tuple[LengthBuckets | None, str]:
    """The length buckets of the run's batches and the line that says them: every length (a
    batch cut to its longest example) without XLA, the fixed set with --use_xla (one compilation
    per length met); None (every batch of length S) where ``padded_batches_reason`` says why."""
    reason = padded_batches_reason(settings.length_buckets, training.full_length_reason,
                                   needs_static_batches(strategy))
    if reason is not None:
        return None, f"Batches padded to --max_seq_length={settings.max_seq_length} ({reason})."
    buckets = LengthBuckets.of(settings.max_seq_length, training.sequence_features,
                               exact=not settings.use_xla)
    return buckets, buckets.describe() + (" (training batches grouped by length)"
                                          if settings.group_by_length else "")


def _recorded_best(manifest: RunManifest) -> dict[str, float] | None:
    """The metrics of the best checkpoint an earlier sweep chose, as the run's ``manifest`` of
    --output_dir records it (None: none), for a run that predicts from it without sweeping
    (RACE's predict_results.txt reports its dev accuracy); such a run holds the evaluation lock,
    so no sweep changes it meanwhile."""
    return None if manifest.best is None else manifest.best["metrics"]


def _sweep(run: TaskRun, spec: TaskSpec, eval_sets: list[EvalSet]) -> dict[str, float]:
    """The reference's sweep over the checkpoints of --output_dir, keeping the best by the task's
    selection metric, then the task's report; returns the best one's metrics. A directory without
    checkpoints whose task evaluates --init_checkpoint gets it as checkpoint 0 first."""
    trainer = run.trainer
    if spec.sweep.evaluates_init_checkpoint and not list_checkpoints(trainer.config.output_dir):
        print(trainer.warm_start(run.init_checkpoint, config_file=run.settings.albert_config_file))
        trainer.manager.save(checkpoint_number=0)
    _, best = run_checkpoint_sweep(trainer, eval_sets, spec.sweep.selection_metric,
                                   spec.sweep.policy, spec.sweep.results_name)
    if spec.sweep.report is not None:
        spec.sweep.report(run, best)
    return best


def _write_outputs(run: TaskRun, spec: TaskSpec, best: dict[str, float] | None) -> None:
    """The predictions and exports the flags ask for, from model.ckpt-best (restored)."""
    settings, outputs = run.settings, spec.outputs
    if settings.do_predict and outputs.predict is not None:
        outputs.predict(run, best)
    if settings.export_dir:
        outputs.export(run)
        print(f"Exported the SavedModel of {BEST_CHECKPOINT_NAME} to {settings.export_dir}")
    if settings.tflite_file:
        path = outputs.export_tflite(run)
        print(f"Wrote the TFLite model of {BEST_CHECKPOINT_NAME} ({settings.tflite_quantization}, "
              f"S={settings.max_seq_length}) to {path}")
    if settings.onnx_file:
        path = outputs.export_onnx(run)
        weights = "float32" if settings.onnx_quantization == "none" else "int8"
        print(f"Wrote the ONNX model of {BEST_CHECKPOINT_NAME} ({weights}, one example of up to "
              f"{settings.max_seq_length} tokens per call) to {path}")
