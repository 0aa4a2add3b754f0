"""A task as one frozen declaration, ``TaskSpec``, that the driver (albert_tf/cli/driver.py) runs.

A spec holds values and pure functions only: the driver calls each function once per run and
hands what one returns to the next (the task's data to the feature builders, the built splits to
the predictions), so no member depends on state another member left behind. The specs themselves
live in task_specs/ (they join albert_tf's tasks with data_prep's feature builders, which
albert_tf never imports).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Mapping

import tensorflow as tf

from albert_tf.checkpoints.label_set import LABEL_SET, LabelSet
from albert_tf.checkpoints.warm_start import CheckpointSource
from albert_tf.cli.settings import RunSettings
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy
from albert_tf.files.run_files import Input, RunFiles
from albert_tf.files.run_manifest import Fact, RunManifest
from albert_tf.models.config import AlbertConfig
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.training.input_pipeline import (DatasetFn, ParseFn, needs_static_batches,
                                               record_eval_dataset, record_train_dataset_fn)
from albert_tf.training.length_buckets import LengthBuckets
from albert_tf.training.task import EvalSet, Task
from albert_tf.training.trainer import Trainer

TRAIN, EVALUATE, PREDICT = "train", "evaluate", "predict"


@dataclasses.dataclass(frozen=True)
class RunStart:
    """What the driver knows when it asks a spec for its data: the run's settings, config,
    tokenizer (None for pretraining, which reads token ids), the checkpoint it starts from and the run manifest of --output_dir as it was."""

    settings: RunSettings
    config: AlbertConfig
    tokenizer: FullTokenizer | None
    init_checkpoint: CheckpointSource | None
    manifest: RunManifest


@dataclasses.dataclass(frozen=True)
class TaskData:
    """The task's data as read and checked: its label set (None: its outputs have no labels, as
    pretraining's) and where it comes from (named in a mismatch), what else its checkpoints are
    (``facts``: {fact: (value, where it comes from)}, kept in the run manifest), and whatever the
    feature builders and the outputs need of it (``content``: the own files' task, NER's
    sentences; None when nothing); ``init_checkpoint``: where training starts instead of
    --init_checkpoint (a two-stage early exit's stage 1, which ``read_data`` trained; None:
    --init_checkpoint)."""

    label_set: LabelSet | None
    label_source: str
    facts: Mapping[Fact, tuple[object, str]] = dataclasses.field(default_factory=dict)
    content: Any = None
    init_checkpoint: CheckpointSource | None = None

    def all_facts(self) -> dict[Fact, tuple[object, str]]:
        """``facts`` and, where the task has one, its label set: all the run checks against its
        directory's manifest and records there."""
        label_set = ({LABEL_SET: (self.label_set.to_fact(), self.label_source)}
                     if self.label_set is not None else {})
        return {**label_set, **self.facts}


@dataclasses.dataclass(frozen=True)
class SplitFeatures:
    """One split's features, built (or found in the cache): the TFRecord file of ``path`` parsed
    by ``parse``; ``description`` says what it holds ("rte train: 2490 examples"); ``metadata``
    is the feature file's sidecar; ``source`` names the data in the sweep's state; ``context``
    is what the task's ``reduce`` needs besides the outputs; an evaluation reads at most
    ``max_steps`` batches of it (None: all). A task whose records need another pipeline
    (pretraining's) overrides ``training_input`` and ``dataset``."""

    path: str
    parse: ParseFn | None
    description: str
    metadata: Mapping = dataclasses.field(default_factory=dict)
    source: str | None = None
    context: Any = None
    max_steps: int | None = None

    def training_input(self, seed: int, buckets: LengthBuckets | None,
                       grouped: bool) -> DatasetFn:
        """The Trainer's input: every epoch in a new order drawn from ``seed``, batches cut to
        ``buckets`` (``grouped``: by length, albert_tf/training/input_pipeline.py)."""
        return record_train_dataset_fn(self.path, self.parse, seed=seed, buckets=buckets,
                                       grouped=grouped)

    def dataset(self, batch_size: int, static_batches: bool,
                buckets: LengthBuckets | None) -> tf.data.Dataset:
        """The records once, in file order (``static_batches``: full batches only, for a TPU);
        with ``buckets``, sorted by length chunk by chunk and cut (``Trainer.predict`` returns
        the outputs in file order either way)."""
        return record_eval_dataset(self.path, self.parse, batch_size, static_batches, buckets)


@dataclasses.dataclass(frozen=True)
class Split:
    """One split of the task's data: ``name`` ("train", "dev", "test", "dev_mismatched"), its
    ``purpose`` (TRAIN, EVALUATE by the sweep, PREDICT; the driver builds it when the run does
    that), the ``inputs`` it reads, the glob ``cache`` of its feature files in --cached_dir (None:
    its files are read where they are, as pretraining's records),
    ``build`` (the task's data and the tokenizer -> its features) and, for an evaluated split,
    ``eval_name`` (prefixes its metric keys; MNLI's mismatched set)."""

    name: str
    purpose: str
    inputs: tuple[Input, ...]
    cache: str | None
    build: Callable[[TaskData, FullTokenizer], SplitFeatures]
    eval_name: str = ""


@dataclasses.dataclass(frozen=True)
class Training:
    """How the task trains: ``task`` (config, data -> the Task the Trainer runs), the features
    whose last axis is the sequence (``sequence_features``: what a batch cut to its length bucket
    cuts), why its batches keep length S where a real example's results depend on the padding
    after it (``full_length_reason``; None: batches may be cut), and ``schedule`` (the training
    split's
    features -> (steps, warmup); None: --train_step and --warmup_step)."""

    task: Callable[[AlbertConfig, TaskData], Task]
    sequence_features: tuple[str, ...]
    full_length_reason: str | None = None
    schedule: Callable[[SplitFeatures], tuple[int, int]] | None = None


@dataclasses.dataclass(frozen=True)
class Sweep:
    """The reference's sweep over the checkpoints: the ``flag`` that runs it ("do_eval";
    run_squad's "do_predict"), the metric that chooses model.ckpt-best, its ``policy``, the
    ``batch_size`` of its evaluation batches, whether a
    sweep of a directory without checkpoints evaluates --init_checkpoint as checkpoint 0
    (``evaluates_init_checkpoint``), ``report`` (the run and the best checkpoint's metrics ->
    what the task writes or prints of them) and ``results_name``, which names its results files
    (best_checkpoint.results_file_names; "": eval_results.txt, best_results.json)."""

    flag: str
    selection_metric: str
    policy: SweepPolicy
    batch_size: int
    evaluates_init_checkpoint: bool = False
    report: Callable[["TaskRun", dict[str, float]], None] | None = None
    results_name: str = ""


@dataclasses.dataclass(frozen=True)
class Outputs:
    """What the task writes from model.ckpt-best: the fixed ``files`` names in --output_dir,
    ``predict`` (--do_predict; the run and the best checkpoint's dev metrics, None when unknown),
    ``export`` (--export_dir), ``export_tflite`` (--tflite_file) and ``export_onnx`` (--onnx_file;
    each returns the path written; None: the task has no such export)."""

    files: tuple[str, ...]
    predict: Callable[["TaskRun", dict[str, float] | None], None] | None
    export: Callable[["TaskRun"], None] | None
    export_tflite: Callable[["TaskRun"], str] | None = None
    export_onnx: Callable[["TaskRun"], str] | None = None


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A task: its ``name``, its own frozen ``settings`` (from its script's flags), the ``splits``
    of its data, ``read_data`` (reads and checks the data before any long work; returns its label
    set and records), ``training``, ``sweep`` and ``outputs``."""

    name: str
    settings: Any
    splits: tuple[Split, ...]
    read_data: Callable[[RunStart], TaskData]
    training: Training
    sweep: Sweep
    outputs: Outputs


@dataclasses.dataclass(frozen=True)
class TaskRun:
    """What the report, predictions and exports of a run receive: its settings, config, tokenizer,
    the checkpoint it starts from, its declared files, the task's data, every split's features the run built (``features``, by
    split name), the trainer (model.ckpt-best restored before predictions and exports) and the
    length buckets of its batches (None: every batch keeps length S)."""

    settings: RunSettings
    config: AlbertConfig
    tokenizer: FullTokenizer | None
    init_checkpoint: CheckpointSource | None
    files: RunFiles
    data: TaskData
    features: Mapping[str, SplitFeatures]
    trainer: Trainer
    buckets: LengthBuckets | None

    def output_path(self, name: str) -> str:
        """The path of the fixed output ``name`` in --output_dir (KeyError unless declared)."""
        return self.files.declared(os.path.join(self.settings.output_dir, name))

    def dataset(self, features: SplitFeatures, batch_size: int) -> tf.data.Dataset:
        """The records of ``features`` once, in file order, in the run's batches
        (``SplitFeatures.dataset``; full batches on a TPU)."""
        return features.dataset(batch_size, needs_static_batches(self.trainer.strategy),
                                self.buckets)

    def eval_set(self, split: str, batch_size: int, eval_name: str = "") -> EvalSet:
        """The evaluation set of the built split ``split`` (``eval_name``: ``Split.eval_name``)."""
        features = self.features[split]
        return EvalSet(eval_name, lambda: self.dataset(features, batch_size), features.context,
                       features.max_steps, features.source)
