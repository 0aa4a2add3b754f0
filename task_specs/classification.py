"""Classification and regression: a GLUE task (data_prep/classification/glue_tasks.py) or the
user's own CSV / TSV / JSON Lines files (docs/own_data.md), as run_classifier.py runs them.
task_specs/early_exit.py is its early-exit variant."""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Callable

from albert_tf.checkpoints.label_set import LabelSet, recorded_label_set
from albert_tf.cli.settings import RunSettings
from albert_tf.cli.task_spec import (EVALUATE, PREDICT, TRAIN, Outputs, RunStart, Split,
                                     Sweep, TaskData, TaskRun, TaskSpec, Training)
from albert_tf.files.run_files import inputs as declared_inputs
from albert_tf.files.run_manifest import MANIFEST_NAME
from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.classification.early_exit import (DEFAULT_REGRESSION_THRESHOLD,
                                                       RESULTS_FILE, EarlyExitSettings,
                                                       ExitPolicy)
from albert_tf.tasks.classification.classifier_heads import HEADS, check_heads
from albert_tf.tasks.classification.metrics import (GLUE_METRIC_KEYS, class_key,
                                                    format_class_report)
from albert_tf.tasks.classification.records import SEQUENCE_FEATURES, parse_glue_example
from albert_tf.tasks.classification.serving import (export_classifier, export_classifier_onnx,
                                                    export_classifier_tflite)
from albert_tf.tasks.classification.task import ClassifierTask, write_predictions
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.classification.features import GlueFeatureSettings, cached_glue_features
from data_prep.classification.glue_tasks import GlueTask, glue_task
from data_prep.classification.own_data import Columns, OwnDataReader
from data_prep.classification.own_data_task import (SELECTION_METRICS, TASK_NAME, OwnDataTask,
                                                    load_own_data)
from data_prep.common.feature_cache import cache_file_pattern
from task_specs.common import glue_sweep_policy, split_features

SPLIT_FLAGS = {"train": "--train_file", "dev": "--dev_file", "test": "--test_file"}
# The fixed names a classifier writes in --output_dir, the early-exit variant's among them: the
# pre-flight check records them before the run's kind of classifier is checked against its
# directory's, so a run of the other kind, refused, has recorded no name of its own there.
OUTPUTS = ("test_results*.tsv", "submit_results*.tsv", "exit_layers*.tsv", RESULTS_FILE)


@dataclasses.dataclass(frozen=True)
class ClassifierSettings:
    """run_classifier's own flags: a GLUE task, or your own files and their columns; the
    early-exit flags (None: an ordinary classifier)."""

    task_name: str | None
    data_dir: str | None
    files: dict  # {"train" | "dev" | "test": path} of your own files (empty for a GLUE task)
    file_format: str | None
    columns: Columns
    labels: tuple[str, ...] | None
    task_type: str
    selection_metric: str
    threshold_to_export: float | None
    early_exit: EarlyExitSettings | None

    @property
    def own_files(self) -> bool:
        return bool(self.files)

    @property
    def is_regression(self) -> bool:
        """Your files with --task_type=regression, or the GLUE task STS-B."""
        return (self.task_type == "regression" if self.own_files
                else glue_task(self.task_name).is_regression)


@dataclasses.dataclass(frozen=True)
class ClassifierData:
    """The classification's data as read: the GLUE task or your files' task, and the early-exit
    settings with the regression threshold the run directory records (None: ordinary)."""

    task: GlueTask | OwnDataTask
    early_exit: EarlyExitSettings | None = None


def classification_spec(settings: RunSettings, own: ClassifierSettings) -> TaskSpec:
    """The ordinary classifier of ``own``'s GLUE task or files."""
    parse = functools.partial(parse_glue_example, max_seq_length=settings.max_seq_length,
                              is_regression=own.is_regression)
    splits = _own_file_splits(settings, own, parse) if own.own_files else _glue_splits(
        settings, own, parse)
    selection_metric = (glue_task(own.task_name).selection_metric if not own.own_files
                        else GLUE_METRIC_KEYS["pearson"] if own.is_regression
                        else SELECTION_METRICS.get(own.selection_metric))
    return TaskSpec(
        name=TASK_NAME if own.own_files else own.task_name.lower(), settings=own, splits=splits,
        read_data=functools.partial(read_classifier_data, own, heads=None),
        training=Training(functools.partial(classifier_task, early_exit=None), SEQUENCE_FEATURES),
        sweep=Sweep("do_eval", selection_metric, glue_sweep_policy(settings),
                    settings.eval_batch_size, report=class_report),
        outputs=Outputs(OUTPUTS,
                        predict=functools.partial(predict, exit_layers=None),
                        export=functools.partial(export, threshold=own.threshold_to_export,
                                                 policy=lambda run: None),
                        export_tflite=functools.partial(export_tflite, layers=None),
                        export_onnx=functools.partial(export_onnx, layers=None)))


def _glue_splits(settings: RunSettings, own: ClassifierSettings, parse) -> tuple[Split, ...]:
    """Each evaluated set's dev and test split (MNLI: matched and mismatched), then train; a
    split's TSV file is declared (and must exist) when the run reads it."""
    task = glue_task(own.task_name)
    wanted = {"dev": settings.do_eval, "test": settings.do_predict, "train": settings.do_train}

    def split(name: str, purpose: str, key: str, file_split: str, suffix: str = "") -> Split:
        files = ((("a file of --data_dir",
                   glue_task(key).processor().split_path(own.data_dir, file_split)),)
                 if wanted[file_split] else ())
        return Split(name, purpose, declared_inputs(("--data_dir", own.data_dir), *files),
                     cache_file_pattern(key),
                     functools.partial(_glue_features, settings, own.data_dir, key, file_split,
                                       parse),
                     eval_name=suffix)

    return (*(split(_name("dev", suffix), EVALUATE, key, "dev", suffix)
              for suffix, key in task.eval_sets),
            *(split(_name("test", suffix), PREDICT, key, "test", suffix)
              for suffix, key in task.eval_sets),
            split("train", TRAIN, task.name, "train"))


def _name(split: str, suffix: str) -> str:
    """The name of an evaluated set's split: "dev", "test", "dev_mismatched"."""
    return f"{split}_{suffix}" if suffix else split


def _glue_features(settings: RunSettings, data_dir: str, key: str, split: str, parse,
                   data: TaskData, tokenizer: FullTokenizer):
    """The cached features of one GLUE TSV file (on TPU too: the pipeline pads the last batch)."""
    features = cached_glue_features(key, data_dir, split, tokenizer,
                                    GlueFeatureSettings(settings.max_seq_length),
                                    settings.cached_dir)
    return split_features(features, parse, f"{key} {split}: {features.num_records} examples")


def _own_file_splits(settings: RunSettings, own: ClassifierSettings,
                     parse) -> tuple[Split, ...]:
    """Your dev, test and train files, each given."""
    purposes = {"dev": EVALUATE, "test": PREDICT, "train": TRAIN}
    return tuple(Split(split, purposes[split], declared_inputs((SPLIT_FLAGS[split], path)),
                       cache_file_pattern(TASK_NAME),
                       functools.partial(_own_features, settings, split, parse))
                 for split in ("dev", "test", "train") if (path := own.files.get(split)))


def _own_features(settings: RunSettings, split: str, parse, data: TaskData,
                  tokenizer: FullTokenizer):
    task: OwnDataTask = data.content.task
    features = task.features(split, tokenizer, settings.max_seq_length, settings.cached_dir)
    description = f"{task.name} {split}: {features.num_records} examples"
    if split == "train" and not task.is_regression:
        description += f" ({task.label_counts('train')})"
    return split_features(features, parse, description)


def read_classifier_data(own: ClassifierSettings, start: RunStart,
                         heads: str | None) -> TaskData:
    """Reads and checks your files (GLUE's TSV files are read when their features are built);
    the label set and the kind of classifier (``heads``: None, ordinary, or the early-exit heads)
    the run directory must record. Before that, a directory without a record of its kind of
    classifier is checked against its checkpoints (albert_tf/tasks/classification/
    classifier_heads.py)."""
    check_heads(start.settings.output_dir, heads)
    if own.own_files:
        reader = OwnDataReader(own.columns, own.task_type, own.file_format,
                               use_spm=start.tokenizer.uses_sentencepiece,
                               do_lower_case=start.tokenizer.do_lower_case)
        stored = recorded_label_set(start.manifest)
        task = load_own_data(own.files, reader, own.labels,
                             stored.labels if stored is not None else None, own.selection_metric,
                             os.path.join(start.settings.output_dir, MANIFEST_NAME))
        source, trained_on = task.label_source, TASK_NAME
    else:
        task = glue_task(own.task_name)
        source, trained_on = f"--task_name={task.name}", task.model_task
    label_set = LabelSet("regression" if task.is_regression else "classification",
                         None if task.is_regression else tuple(task.labels), trained_on)
    return TaskData(label_set, source, {HEADS: (heads, "its early-exit flags")},
                    ClassifierData(task))


def classifier_task(config: AlbertConfig, data: TaskData, early_exit: str | None,
                    internal_only: bool = False, distillation: float = 0.0) -> ClassifierTask:
    """The classifier of the data's task; ``early_exit``: its early-exit heads (None: none);
    ``internal_only``: two-stage training's stage 2, ``distillation`` its weight of the full
    depth's answers (``ClassifierTask``)."""
    content: ClassifierData = data.content
    task = content.task
    return ClassifierTask(config, task.metric_kinds, task.num_labels, task.is_regression,
                          class_names=task.labels if isinstance(task, OwnDataTask) else None,
                          early_exit=early_exit,
                          regression_threshold=(content.early_exit.threshold if content.early_exit
                                                else DEFAULT_REGRESSION_THRESHOLD),
                          internal_only=internal_only, distillation=distillation)


def class_report(run: TaskRun, best: dict[str, float]) -> None:
    """Your files' classification: the best checkpoint's per-class report on dev."""
    task = run.data.content.task
    labels = task.labels
    if isinstance(task, OwnDataTask) and labels and class_key(labels[0], "f1") in best:
        print(f"Dev set, best checkpoint:\n{format_class_report(best, labels)}")


ExitLayers = Callable[[TaskRun, dict, str, str, list], dict]


def predict(run: TaskRun, dev_best: dict[str, float] | None,
            exit_layers: ExitLayers | None) -> None:
    """test_results.tsv and submit_results.tsv of the best checkpoint, per test set (your files:
    with a header of your label names); ``exit_layers`` (the run, the outputs, the file suffix,
    the set's key, its guids -> the outputs at each example's exit layer) for early exit."""
    task = run.data.content.task
    labels = task.labels
    for suffix, key in task.eval_sets:
        features = run.features[_name("test", suffix)]
        outputs = run.trainer.predict(run.dataset(features, run.settings.predict_batch_size))
        guids = features.metadata["guids"]
        suffix = f"_{suffix}" if suffix else ""
        if exit_layers is not None:
            outputs = exit_layers(run, outputs, suffix, key, guids)
        paths = write_predictions(run.output_path(f"test_results{suffix}.tsv"),
                                  run.output_path(f"submit_results{suffix}.tsv"),
                                  guids, outputs, labels,
                                  header=(labels or ["score"]) if isinstance(task, OwnDataTask)
                                  else None)
        print(f"Predicted {len(guids)} {key} test examples -> {', '.join(paths)}")


def export(run: TaskRun, threshold: float | None,
           policy: Callable[[TaskRun], ExitPolicy | None]) -> None:
    """The SavedModel of the best checkpoint (labels.txt beside a classification's; your files'
    label names in its outputs; ``threshold``: --threshold_to_export); ``policy``: how an
    early-exit export stops (None: ordinary)."""
    task = run.data.content.task
    labels = task.labels
    export_classifier(run.trainer.model, run.settings.export_dir, threshold,
                      assets={"labels.txt": "\n".join(labels) + "\n"} if labels else None,
                      tokenizer=run.tokenizer, max_seq_length=run.settings.max_seq_length,
                      label_names=labels if isinstance(task, OwnDataTask) else None,
                      policy=policy(run))


def export_tflite(run: TaskRun, layers: int | None) -> str:
    """The TFLite model of the best checkpoint; ``layers``: an early-exit model's fixed depth."""
    settings = run.settings
    return export_classifier_tflite(run.trainer.model, settings.tflite_file,
                                    settings.max_seq_length, settings.tflite_quantization,
                                    layers=layers)


def export_onnx(run: TaskRun, layers: int | None) -> str:
    """The ONNX model of the best checkpoint; ``layers``: an early-exit model's fixed depth."""
    return export_classifier_onnx(run.trainer.model, run.settings.onnx_file,
                                  run.settings.max_seq_length, layers=layers,
                                  quantization=run.settings.onnx_quantization)
