"""Fine-tunes ALBERT on RACE (4-way multiple choice) with the reference's flags and defaults.

The defaults are the paper's recipe for the v2 models (--print_recipe prints it on one line, with
--do_train --do_eval; --print_recipe --recipe_model_version=v1 the v1 models', which differs in the
learning rate); the encoder's dropout comes from the config. --do_train, --do_eval and --do_predict
are off by default, as in the other scripts: give the steps to run (the reference's run_race turns
--do_train and --do_eval on, so that its --do_predict alone would first train on toward
--train_step).

- --do_train trains from --init_checkpoint (resuming from the latest checkpoint in --output_dir);
- --do_eval evaluates every checkpoint on the dev split, reporting accuracy for all questions and
  for middle and high separately in one run (the reference needs a run per level), writes
  eval_results.txt and keeps the best eval_accuracy as model.ckpt-best;
- --do_predict evaluates model.ckpt-best on the test split (labels required, as the reference) and
  writes predict_results.txt and test_predictions.json (question id -> answer letter and the four
  probabilities);
- --middle_only / --high_only restrict every split to one level;
- --export_dir writes SavedModels of model.ckpt-best: ``ids_only`` (signature on ids) and
  ``with_text`` (also on raw article, question and options), see albert_tf/tasks/multiple_choice/serving.py.

Data: <data_dir>/RACE/{train,dev,test}/{middle,high}/, either the official release (one JSON
article per *.txt file) or the reference's all.txt (one JSON article per line). See the README.
"""

from __future__ import annotations

import dataclasses
import functools

from absl import app, flags

from albert_tf.cli import command_line, flag_checks, flag_definitions
from albert_tf.tasks.multiple_choice.recipes import MODEL_VERSIONS, race_recipe

FLAGS = flags.FLAGS

for _name in ("train_file", "eval_file", "predict_file"):
    flags.DEFINE_string(_name, None, "[Reference flag, unused] Feature files are cached in "
                        "--cached_dir (default --output_dir), keyed by their inputs and settings.")
flags.DEFINE_integer("num_keep_checkpoint", 5, "[Reference flag, unused] Every checkpoint is kept "
                     "until the sweep has evaluated it (use --keep_checkpoint_max).")
flag_definitions.define(
    *flag_definitions.FINE_TUNING_FLAGS, "task_name", "train_step", "warmup_step", "dropout_prob",
    "max_qa_length", "middle_only", "high_only", "skip_invalid",
    task_name="race", learning_rate=1e-5, train_step=12000,
    warmup_step=1000, save_checkpoints_steps=100, keep_checkpoint_max=0)
flags.DEFINE_enum("recipe_model_version", "v2", list(MODEL_VERSIONS), "[albert_tf] The recipe "
                  "--print_recipe prints: the paper's for the v1 models (learning rate 2e-5) or "
                  "the v2 models (1e-5, this script's defaults). Read by --print_recipe only.")


def check_flags() -> None:
    """Before TensorFlow loads: what to do, the model's files, RACE's data and at most one level."""
    if FLAGS.task_name.lower() != "race":
        raise app.UsageError(f"--task_name={FLAGS.task_name}: run_race only runs race.")
    flag_checks.fine_tuning_checks("do_train", "do_eval", "do_predict", "export_dir",
                                   required=("data_dir",))
    if FLAGS.middle_only and FLAGS.high_only:
        raise app.UsageError("--middle_only and --high_only exclude each other; give at most one.")
    flag_checks.require_sequence_room(
        FLAGS.max_qa_length + 3,
        f"[CLS], two [SEP] and --max_qa_length={FLAGS.max_qa_length} question+option pieces")


command_line.parse_before_imports(__name__, checks=[
    flag_checks.print_recipe(lambda: race_recipe(FLAGS.recipe_model_version)), check_flags])

from albert_tf.checkpoints.label_set import LabelSet  # noqa: E402
from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.cli.fine_tuning import (  # noqa: E402
    FineTuningHooks, FineTuningRun, TrainingData, feature_cache_files, run_fine_tuning)
from albert_tf.cli.settings import RunSettings  # noqa: E402
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy, format_metrics  # noqa: E402
from albert_tf.files.atomic import atomic_write_text  # noqa: E402
from albert_tf.files.run_files import RunFiles  # noqa: E402
from albert_tf.files.run_files import inputs as declared_inputs  # noqa: E402
from albert_tf.tasks.multiple_choice.records import (  # noqa: E402
    SEQUENCE_FEATURES, parse_race_record)
from albert_tf.tasks.multiple_choice.serving import export_multiple_choice  # noqa: E402
from albert_tf.tasks.multiple_choice.task import (  # noqa: E402
    MultipleChoiceContext, MultipleChoiceTask, write_choice_predictions)
from albert_tf.training.task import EvalSet  # noqa: E402
from data_prep.common.feature_cache import (  # noqa: E402
    FeatureFile, cache_file_pattern, feature_file_source)
from data_prep.multiple_choice.feature_file import race_feature_file  # noqa: E402
from data_prep.multiple_choice.features import RaceFeatureSettings  # noqa: E402
from data_prep.multiple_choice.reader import ANSWER_LETTERS, race_sources  # noqa: E402

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

    @classmethod
    def from_flags(cls) -> "RaceSettings":
        return cls(FLAGS.data_dir, FLAGS.max_qa_length, FLAGS.middle_only, FLAGS.high_only,
                   FLAGS.skip_invalid, FLAGS.dropout_prob)


class RaceHooks(FineTuningHooks):
    """RACE's 4-way multiple choice (<data_dir>/RACE/{train,dev,test}/{middle,high}/)."""

    run_outputs = (PREDICT_RESULTS_FILE, TEST_PREDICTIONS_FILE)
    sequence_features = SEQUENCE_FEATURES

    def __init__(self, own: RaceSettings):
        self.own = own

    @staticmethod
    def splits(settings: RunSettings) -> list[str]:
        """The splits the run reads (dev for --do_eval, test for --do_predict, train for
        --do_train), the smaller ones first."""
        return [split for split, wanted in (("dev", settings.do_eval), ("test", settings.do_predict),
                                            ("train", settings.do_train)) if wanted]

    def files(self, settings: RunSettings) -> RunFiles:
        own = self.own
        read = declared_inputs(("--data_dir", own.data_dir), *(
            ("a file of --data_dir", source.path) for split in self.splits(settings)
            for source in race_sources(own.data_dir, split, own.middle_only, own.high_only)))
        return feature_cache_files(settings, read, [cache_file_pattern(CACHE_NAME)])

    def load_data(self, run: FineTuningRun, stored: LabelSet | None) -> tuple[LabelSet, str]:
        return LabelSet("multiple_choice", tuple(ANSWER_LETTERS)), "RACE's answers"

    def training_task(self, run: FineTuningRun, label_set: LabelSet) -> MultipleChoiceTask:
        return MultipleChoiceTask(run.config, dropout_prob=self.own.dropout_prob)

    def parse(self, run: FineTuningRun):
        return functools.partial(parse_race_record, max_seq_length=run.settings.max_seq_length)

    def features(self, run: FineTuningRun, split: str) -> FeatureFile:
        own = self.own
        settings = RaceFeatureSettings(run.settings.max_seq_length, own.max_qa_length,
                                       middle_only=own.middle_only, high_only=own.high_only,
                                       skip_invalid=own.skip_invalid)
        return race_feature_file(own.data_dir, split, run.tokenizer, settings,
                                 run.settings.cached_dir)

    def prepare_features(self, run: FineTuningRun) -> None:
        """Every split read, checked and converted now, the smaller ones first, so that a missing
        or malformed split stops the run before the first training step."""
        for split in self.splits(run.settings):
            self.features(run, split)

    def training_data(self, run: FineTuningRun) -> TrainingData:
        train_file = self.features(run, "train")
        return TrainingData(train_file.path, self.parse(run),
                            f"race train: {train_file.num_records} questions")

    def eval_set(self, run: FineTuningRun, split: str, batch_size: int) -> EvalSet:
        """The split's records in file order, with each question's level for per-level accuracy."""
        feature_file = self.features(run, split)
        metadata = feature_file.metadata
        return EvalSet("", functools.partial(run.eval_dataset, feature_file.path, self.parse(run),
                                             batch_size),
                       MultipleChoiceContext(metadata["levels"], metadata["example_ids"]),
                       source=feature_file_source(feature_file))

    def eval_sets(self, run: FineTuningRun) -> list[EvalSet]:
        return [self.eval_set(run, "dev", run.settings.eval_batch_size)]

    def sweep_policy(self, settings: RunSettings) -> SweepPolicy:
        return SweepPolicy(prune=True,
                           until_step=None if settings.do_train else settings.num_train_steps,
                           max_wait_seconds=settings.max_eval_wait_secs)

    def predict(self, run: FineTuningRun, dev_best: dict[str, float] | None) -> None:
        """Evaluates model.ckpt-best on the test split: predict_results.txt and
        test_predictions.json."""
        test_set = self.eval_set(run, "test", run.settings.predict_batch_size)
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

    def export(self, run: FineTuningRun) -> None:
        export_multiple_choice(run.trainer.model, run.settings.export_dir, run.tokenizer,
                               run.settings.max_seq_length, self.own.max_qa_length)


def main(argv):
    del argv
    run_fine_tuning(RunSettings.from_flags(), RaceHooks(RaceSettings.from_flags()))


if __name__ == "__main__":
    error_boundary.run(main, when_stopped=error_boundary.TRAINING_STOPPED)
