"""Pretraining (MLM + a sentence objective), as run_pretraining.py runs it: records of
data_prep/create_pretraining_data.py (or the reference's) read by the reference's pipeline."""

from __future__ import annotations

import dataclasses
import functools

import tensorflow as tf

from albert_tf.cli.settings import RunSettings
from albert_tf.cli.task_spec import (EVALUATE, TRAIN, Outputs, RunStart, Split, SplitFeatures,
                                     Sweep, TaskData, TaskSpec, Training)
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy
from albert_tf.files.records import require_records
from albert_tf.files.run_files import inputs as declared_inputs
from albert_tf.files.run_manifest import require_fact
from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.pretraining.objective import OBJECTIVE, evaluation_name
from albert_tf.tasks.pretraining.records import check_pretraining_files
from albert_tf.tasks.pretraining.task import PretrainingTask, pretraining_dataset_fn
from albert_tf.training.input_pipeline import DatasetFn
from albert_tf.training.length_buckets import LengthBuckets

SELECTION_METRIC = "masked_lm_accuracy"


@dataclasses.dataclass(frozen=True)
class PretrainingSettings:
    """run_pretraining's own flags: the records (expanded; the flag that named the evaluation
    records), their geometry, the objective."""

    train_files: tuple[str, ...]
    eval_files: tuple[str, ...]
    eval_files_flag: str
    max_predictions_per_seq: int
    max_eval_steps: int
    sentence_objective: str
    eval_sentence_task: str | None


@dataclasses.dataclass(frozen=True)
class PretrainingRecords(SplitFeatures):
    """A split's record files, read by the reference's pipeline (files shuffled and interleaved
    for training; in order for evaluation), not by the feature files' pipeline."""

    files: tuple[str, ...] = ()
    max_seq_length: int = 0
    max_predictions_per_seq: int = 0

    def _pipeline(self, is_training: bool, seed: int | None = None) -> DatasetFn:
        return pretraining_dataset_fn(list(self.files), self.max_seq_length,
                                      self.max_predictions_per_seq, is_training=is_training,
                                      seed=seed)

    def training_input(self, seed: int, buckets: LengthBuckets | None,
                       grouped: bool) -> DatasetFn:
        return self._pipeline(True, seed)

    def dataset(self, batch_size: int, static_batches: bool,
                buckets: LengthBuckets | None) -> tf.data.Dataset:
        return self._pipeline(False)(batch_size, 0)


def pretraining_spec(settings: RunSettings, own: PretrainingSettings) -> TaskSpec:
    """The training and evaluation records; batches keep length S (the reference's pipeline)."""
    splits = (Split("eval", EVALUATE, declared_inputs(*((own.eval_files_flag, path)
                                                        for path in own.eval_files)),
                    None, functools.partial(_records, settings, own, own.eval_files, True)),
              Split("train", TRAIN, declared_inputs(*(("--input_file", path)
                                                      for path in own.train_files)),
                    None, functools.partial(_records, settings, own, own.train_files, False)))
    return TaskSpec(
        name="pretraining", settings=own, splits=splits,
        read_data=functools.partial(read_pretraining_data, own),
        training=Training(functools.partial(_task, own.sentence_objective), (),
                          full_length_reason="the pretraining records' pipeline keeps them whole"),
        sweep=Sweep("do_eval", SELECTION_METRIC, SweepPolicy() if settings.do_train else
                    SweepPolicy(until_step=settings.num_train_steps,
                                max_wait_seconds=settings.max_eval_wait_secs),
                    settings.eval_batch_size,
                    results_name=evaluation_name(own.sentence_objective,
                                                 own.eval_sentence_task)),
        outputs=Outputs((), predict=None, export=None))


def read_pretraining_data(own: PretrainingSettings, start: RunStart) -> TaskData:
    """No labels; the objective --output_dir was trained with must be this run's. Only a
    training run records it: an evaluation job started before its training job must not record
    the default objective, which would refuse that job's own."""
    if start.settings.do_train:
        return TaskData(None, "", {OBJECTIVE: (own.sentence_objective, "--sentence_objective")},
                        start.config)
    require_fact(start.manifest, OBJECTIVE, own.sentence_objective, "--sentence_objective")
    return TaskData(None, "", content=start.config)


def _records(settings: RunSettings, own: PretrainingSettings, files: tuple[str, ...],
             evaluated: bool, data: TaskData, tokenizer: None) -> PretrainingRecords:
    """The first records of every file checked against --max_seq_length,
    --max_predictions_per_seq and the config's vocab_size (data.content); ``evaluated`` files
    hold one --eval_batch_size batch at least, of which a checkpoint's evaluation reads
    --max_eval_steps."""
    config: AlbertConfig = data.content
    check_pretraining_files(list(files), settings.max_seq_length, own.max_predictions_per_seq,
                            config.vocab_size, settings.albert_config_file)
    if evaluated:
        require_records(list(files), settings.eval_batch_size)
    source = (f"{', '.join(files)} ({own.max_eval_steps} batches of "
              f"{settings.eval_batch_size})")
    return PretrainingRecords(
        path=files[0], parse=None, description=f"pretraining records: {len(files)} files",
        source=source, context=own.eval_sentence_task, max_steps=own.max_eval_steps,
        files=files, max_seq_length=settings.max_seq_length,
        max_predictions_per_seq=own.max_predictions_per_seq)


def _task(objective: str, config: AlbertConfig, data: TaskData) -> PretrainingTask:
    return PretrainingTask(config, objective)
