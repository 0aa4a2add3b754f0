"""Fine-tunes ALBERT on RACE (4-way multiple choice) with the reference's flags and defaults.

The reference's recipe for the v2 models: learning rate 1e-5, 12000 steps, 1000 warmup, batch 32,
S=512, the encoder's dropout from the config, 0.1 dropout before the choice scorer. --do_train and
--do_eval are on by default, as in the reference.

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

import functools
import os

from absl import app, flags

from albert_tf.cli import command_line, flag_definitions

FLAGS = flags.FLAGS

for _name in ("train_file", "eval_file", "predict_file"):
    flags.DEFINE_string(_name, None, "[Reference flag, unused] Feature files are cached in "
                        "--cached_dir (default --output_dir), keyed by their inputs and settings.")
flags.DEFINE_integer("num_keep_checkpoint", 5, "[Reference flag, unused] Every checkpoint is kept "
                     "until the sweep has evaluated it (use --keep_checkpoint_max).")
flag_definitions.define(
    *flag_definitions.FINE_TUNING_FLAGS, "task_name", "train_step", "warmup_step", "dropout_prob",
    "max_qa_length", "middle_only", "high_only", "skip_invalid",
    task_name="race", do_train=True, do_eval=True, learning_rate=1e-5, train_step=12000, warmup_step=1000,
    save_checkpoints_steps=100, keep_checkpoint_max=0)

command_line.parse_before_imports(__name__)  # --help, flag mistakes: before TensorFlow loads

from albert_tf.cli import error_boundary, run_flags  # noqa: E402
from albert_tf.evaluation.best_checkpoint import (  # noqa: E402
    best_checkpoint_prefix, restore_best_checkpoint, run_checkpoint_sweep)
from albert_tf.evaluation.checkpoint_sweep import (  # noqa: E402
    BEST_PREFIX, SweepPolicy, format_metrics)
from albert_tf.files.atomic import atomic_write_text  # noqa: E402
from albert_tf.tasks.multiple_choice.records import parse_race_record  # noqa: E402
from albert_tf.tasks.multiple_choice.serving import export_multiple_choice  # noqa: E402
from albert_tf.tasks.multiple_choice.task import (  # noqa: E402
    MultipleChoiceContext, MultipleChoiceTask, write_choice_predictions)
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from albert_tf.training.input_pipeline import (  # noqa: E402
    needs_static_batches, record_eval_dataset)
from albert_tf.training.task import EvalSet  # noqa: E402
from albert_tf.training.trainer import Trainer  # noqa: E402
from data_prep.common.feature_cache import FeatureFile  # noqa: E402
from data_prep.multiple_choice.feature_file import race_feature_file  # noqa: E402
from data_prep.multiple_choice.features import RaceFeatureSettings  # noqa: E402


class Run:
    """What the steps of one run share: the tokenizer, the trainer and the feature files."""

    def __init__(self, tokenizer: FullTokenizer, trainer: Trainer):
        self.tokenizer = tokenizer
        self.trainer = trainer
        self.parse = functools.partial(parse_race_record, max_seq_length=FLAGS.max_seq_length)

    def features(self, split: str) -> FeatureFile:
        settings = RaceFeatureSettings(FLAGS.max_seq_length, FLAGS.max_qa_length,
                                       middle_only=FLAGS.middle_only, high_only=FLAGS.high_only,
                                       skip_invalid=FLAGS.skip_invalid)
        return race_feature_file(FLAGS.data_dir, split, self.tokenizer, settings,
                                 FLAGS.cached_dir or FLAGS.output_dir)

    def eval_set(self, split: str, batch_size: int) -> EvalSet:
        """The split's records in file order, with each question's level for per-level accuracy."""
        feature_file = self.features(split)
        dataset_fn = functools.partial(record_eval_dataset, feature_file.path, self.parse,
                                       batch_size, needs_static_batches(self.trainer.strategy))
        metadata = feature_file.metadata
        return EvalSet("", dataset_fn,
                       MultipleChoiceContext(metadata["levels"], metadata["example_ids"]))


def validate_flags() -> None:
    run_flags.reject_hub_module_handle()
    if FLAGS.task_name.lower() != "race":
        raise app.UsageError(f"--task_name={FLAGS.task_name}: run_race only runs race.")
    run_flags.require_action("do_train", "do_eval", "do_predict", "export_dir")
    if FLAGS.middle_only and FLAGS.high_only:
        raise app.UsageError("--middle_only and --high_only exclude each other; give at most one.")
    run_flags.require_flags("data_dir", "output_dir", "albert_config_file")
    if (FLAGS.do_predict or FLAGS.export_dir) and not FLAGS.do_eval:
        best_checkpoint_prefix(FLAGS.output_dir)  # fails before training when there is none


def prepare_splits(run: Run) -> None:
    """Checks before work: every split this run reads (dev for --do_eval, test for --do_predict,
    train for --do_train) is read, checked and converted now, the smaller ones first, so that a
    missing or malformed split stops the run before the first training step; later steps read the
    feature cache."""
    needed = [split for split, wanted in (("dev", FLAGS.do_eval), ("test", FLAGS.do_predict),
                                          ("train", FLAGS.do_train)) if wanted]
    for split in needed:
        run.features(split)


def train(run: Run) -> None:
    train_file = run.features("train")
    run_flags.train_from_flags(run.trainer, train_file.path, run.parse,
                               f"race train: {train_file.num_records} questions")


def evaluate(run: Run) -> dict[str, float]:
    """The sweep over the checkpoints on the dev split; returns the best checkpoint's metrics."""
    policy = SweepPolicy(prune=True, until_step=None if FLAGS.do_train else FLAGS.train_step,
                         max_wait_seconds=FLAGS.max_eval_wait_secs)
    _, best = run_checkpoint_sweep(run.trainer, [run.eval_set("dev", FLAGS.eval_batch_size)],
                                   "eval_accuracy", policy)
    return best


def predict(run: Run, dev_best: dict[str, float] | None) -> None:
    """Evaluates model.ckpt-best on the test split: predict_results.txt and test_predictions.json."""
    restore_best_checkpoint(run.trainer)
    test_set = run.eval_set("test", FLAGS.predict_batch_size)
    outputs = run.trainer.predict(test_set.dataset_fn())
    metrics = run.trainer.task.reduce(outputs, test_set.context)
    output_dir = run.trainer.config.output_dir
    results = format_metrics(metrics)
    if dev_best is not None:
        results += f"best = {dev_best['eval_accuracy']}\n"
    atomic_write_text(os.path.join(output_dir, "predict_results.txt"), results)
    path = write_choice_predictions(os.path.join(output_dir, "test_predictions.json"),
                                    test_set.context.example_ids, outputs)
    print("Test: " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()))
          + f" -> {os.path.join(output_dir, 'predict_results.txt')}, {path}")


def export_saved_model(run: Run) -> None:
    restore_best_checkpoint(run.trainer)
    export_multiple_choice(run.trainer.model, FLAGS.export_dir, run.tokenizer,
                           FLAGS.max_seq_length, FLAGS.max_qa_length)
    print(f"Exported the SavedModels of {BEST_PREFIX} to {FLAGS.export_dir}")


def main(argv):
    del argv
    validate_flags()
    config = run_flags.load_config(FLAGS.albert_config_file, FLAGS.max_seq_length)
    tokenizer = run_flags.tokenizer_from_flags(config)
    if FLAGS.do_train:
        run_flags.check_init_checkpoint(FLAGS.init_checkpoint)
    task = MultipleChoiceTask(config, dropout_prob=FLAGS.dropout_prob)
    run = Run(tokenizer, run_flags.trainer_from_flags(task, FLAGS.train_step, FLAGS.warmup_step))
    prepare_splits(run)
    if FLAGS.do_train:
        train(run)
    dev_best = evaluate(run) if FLAGS.do_eval else None
    if FLAGS.do_predict:
        predict(run, dev_best)
    if FLAGS.export_dir:
        export_saved_model(run)


if __name__ == "__main__":
    error_boundary.run(main, checks=[run_flags.check_outputs_spare_inputs,
                                     run_flags.check_output_directories,
                                     run_flags.lock_output_dir],
                       when_stopped=error_boundary.TRAINING_STOPPED, catch_sigterm=False)
