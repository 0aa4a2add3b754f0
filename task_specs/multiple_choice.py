"""RACE's 4-way multiple choice (<data_dir>/RACE/{train,dev,test}/{middle,high}/), as run_race.py
runs it."""

from __future__ import annotations

import dataclasses
import functools

from albert_tf.checkpoints.label_set import LabelSet
from albert_tf.cli.settings import RunSettings
from albert_tf.cli.task_spec import (EVALUATE, PREDICT, TRAIN, Outputs, RunStart, Split,
                                     SplitFeatures, Sweep, TaskData, TaskRun, TaskSpec, Training)
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy, format_metrics
from albert_tf.files.atomic import atomic_write_text
from albert_tf.files.run_files import inputs as declared_inputs
from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.multiple_choice.records import SEQUENCE_FEATURES, parse_race_record
from albert_tf.tasks.multiple_choice.serving import export_multiple_choice
from albert_tf.tasks.multiple_choice.task import (MultipleChoiceContext, MultipleChoiceTask,
                                                  write_choice_predictions)
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.common.feature_cache import cache_file_pattern
from data_prep.multiple_choice.feature_file import race_feature_file
from data_prep.multiple_choice.features import RaceFeatureSettings
from data_prep.multiple_choice.reader import ANSWER_LETTERS, race_sources
from task_specs.common import split_features

CACHE_NAME = "race"
PREDICT_RESULTS_FILE = "predict_results.txt"
TEST_PREDICTIONS_FILE = "test_predictions.json"


@dataclasses.dataclass(frozen=True)
class RaceSettings:
    """run_race's own flags: the data, its levels, the lengths and the head's dropout."""

    data_dir: str
    max_qa_length: int
    middle_only: bool
    high_only: bool
    skip_invalid: bool
    dropout_prob: float


def race_spec(settings: RunSettings, own: RaceSettings) -> TaskSpec:
    """RACE's dev, test and train splits; a split's files are declared when the run reads it."""
    wanted = {"dev": settings.do_eval, "test": settings.do_predict, "train": settings.do_train}
    purposes = {"dev": EVALUATE, "test": PREDICT, "train": TRAIN}

    def split(name: str) -> Split:
        files = (("a file of --data_dir", source.path) for source in race_sources(
            own.data_dir, name, own.middle_only, own.high_only)) if wanted[name] else ()
        return Split(name, purposes[name], declared_inputs(("--data_dir", own.data_dir), *files),
                     cache_file_pattern(CACHE_NAME),
                     functools.partial(_features, settings, own, name))

    return TaskSpec(
        name=CACHE_NAME, settings=own, splits=tuple(map(split, ("dev", "test", "train"))),
        read_data=read_race_data,
        training=Training(functools.partial(_task, own.dropout_prob), SEQUENCE_FEATURES),
        sweep=Sweep("do_eval", "eval_accuracy", SweepPolicy(
            prune=True, until_step=None if settings.do_train else settings.num_train_steps,
            max_wait_seconds=settings.max_eval_wait_secs), settings.eval_batch_size),
        outputs=Outputs((PREDICT_RESULTS_FILE, TEST_PREDICTIONS_FILE), predict=predict,
                        export=functools.partial(export, own.max_qa_length)))


def read_race_data(start: RunStart) -> TaskData:
    """The answer letters (RACE's files are read when their features are built)."""
    return TaskData(LabelSet("multiple_choice", tuple(ANSWER_LETTERS)), "RACE's answers")


def _features(settings: RunSettings, own: RaceSettings, split: str, data: TaskData,
              tokenizer: FullTokenizer) -> SplitFeatures:
    """A split's questions (4 rows each), with each question's level for per-level accuracy."""
    feature_settings = RaceFeatureSettings(settings.max_seq_length, own.max_qa_length,
                                           middle_only=own.middle_only, high_only=own.high_only,
                                           skip_invalid=own.skip_invalid)
    features = race_feature_file(own.data_dir, split, tokenizer, feature_settings,
                                 settings.cached_dir)
    metadata = features.metadata
    return split_features(
        features, functools.partial(parse_race_record, max_seq_length=settings.max_seq_length),
        f"race {split}: {features.num_records} questions",
        MultipleChoiceContext(metadata["levels"], metadata["example_ids"]))


def _task(dropout_prob: float, config: AlbertConfig, data: TaskData) -> MultipleChoiceTask:
    return MultipleChoiceTask(config, dropout_prob=dropout_prob)


def predict(run: TaskRun, dev_best: dict[str, float] | None) -> None:
    """Evaluates model.ckpt-best on the test split: predict_results.txt (with the best dev
    accuracy, when known) and test_predictions.json."""
    test_set = run.eval_set("test", run.settings.predict_batch_size)
    outputs = run.trainer.predict(test_set.dataset_fn())
    metrics = run.trainer.task.reduce(outputs, test_set.context)
    results = format_metrics(metrics)
    if dev_best is not None:
        results += f"best = {dev_best['eval_accuracy']}\n"
    results_path = run.output_path(PREDICT_RESULTS_FILE)
    atomic_write_text(results_path, results)
    path = write_choice_predictions(run.output_path(TEST_PREDICTIONS_FILE),
                                    test_set.context.example_ids, outputs)
    print("Test: " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()))
          + f" -> {results_path}, {path}")


def export(max_qa_length: int, run: TaskRun) -> None:
    export_multiple_choice(run.trainer.model, run.settings.export_dir, run.tokenizer,
                           run.settings.max_seq_length, max_qa_length)
