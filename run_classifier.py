"""Fine-tunes ALBERT on a GLUE task with the reference's flags and defaults.

--do_train trains from --init_checkpoint (resuming from the latest checkpoint in --output_dir);
--do_eval evaluates every checkpoint on the full dev set (the reference's sweep: eval_results.txt,
best_trial.txt, non-best checkpoints deleted, the best renamed to model.ckpt-best; MNLI evaluates
dev_matched and dev_mismatched); --do_predict writes test_results.tsv and submit_results.tsv from
model.ckpt-best; --export_dir writes a SavedModel of model.ckpt-best, --tflite_file a TFLite model
of it (--tflite_quantization: float32, int8 or float16 weights). See the README.
"""

from __future__ import annotations

import functools
import math

from absl import app, flags

from albert_tf.cli import command_line, flag_definitions

FLAGS = flags.FLAGS

flags.DEFINE_float("threshold_to_export", float("nan"), "If set, a constant 'threshold' output is "
                   "added to the SavedModel's signature.")
flag_definitions.define(*flag_definitions.FINE_TUNING_FLAGS, *flag_definitions.TFLITE_FLAGS,
                        "task_name", "train_step", "warmup_step", keep_checkpoint_max=0)
flag_definitions.check_tflite_flags()

command_line.parse_before_imports(__name__)  # --help, flag mistakes: before TensorFlow loads

import tensorflow as tf  # noqa: E402
from albert_tf.cli import error_boundary, run_flags  # noqa: E402
from albert_tf.evaluation.best_checkpoint import (  # noqa: E402
    best_checkpoint_prefix, restore_best_checkpoint, run_checkpoint_sweep)
from albert_tf.evaluation.checkpoint_sweep import BEST_PREFIX, SweepPolicy  # noqa: E402
from albert_tf.tasks.classification.serving import (  # noqa: E402
    export_classifier, export_classifier_tflite)
from albert_tf.tasks.classification.task import ClassifierTask, write_predictions  # noqa: E402
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from albert_tf.training.input_pipeline import (  # noqa: E402
    needs_static_batches, record_eval_dataset)
from albert_tf.training.task import EvalSet  # noqa: E402
from albert_tf.training.trainer import Trainer  # noqa: E402
from data_prep.classification.features import cached_glue_features, parse_glue_example  # noqa: E402
from data_prep.classification.glue_tasks import GlueTask, glue_task  # noqa: E402
from data_prep.classification.processors import GlueDataError  # noqa: E402
from data_prep.common.feature_cache import FeatureFile  # noqa: E402


class Run:
    """What the steps of one run share: the task, the tokenizer, the trainer and the feature files."""

    def __init__(self, task: GlueTask, tokenizer: FullTokenizer, trainer: Trainer):
        self.task = task
        self.tokenizer = tokenizer
        self.trainer = trainer
        self.static_batches = needs_static_batches(trainer.strategy)
        self.parse = functools.partial(parse_glue_example, max_seq_length=FLAGS.max_seq_length,
                                       is_regression=task.is_regression)

    def features(self, task_key: str, split: str) -> FeatureFile:
        """The cached feature file of one split (on TPU too: the pipeline pads the last batch)."""
        return cached_glue_features(task_key, FLAGS.data_dir, split, self.tokenizer,
                                    FLAGS.max_seq_length, FLAGS.cached_dir or FLAGS.output_dir)

    def dataset(self, path: str, batch_size: int) -> tf.data.Dataset:
        return record_eval_dataset(path, self.parse, batch_size, self.static_batches)


def validate_flags() -> None:
    run_flags.reject_hub_module_handle()
    run_flags.require_action("do_train", "do_eval", "do_predict", "export_dir", "tflite_file")
    run_flags.require_flags("data_dir", "task_name", "output_dir", "albert_config_file")
    if (FLAGS.do_predict or FLAGS.export_dir or FLAGS.tflite_file) and not FLAGS.do_eval:
        best_checkpoint_prefix(FLAGS.output_dir)  # fails before training when there is none


def check_input_splits(run: Run) -> None:
    """Checks before work: every TSV split this run will read exists and parses, before any step.

    The splits: every dev set for --do_eval and every test set for --do_predict (MNLI: matched and
    mismatched), train for --do_train. First every file must exist, so that a missing dev.tsv stops
    the run before training rather than after it; then each split's feature file is built (or found
    in the cache), the smaller evaluation and prediction sets first, which reads and checks every row
    now; the later steps read the cache.
    """
    needed = []
    if FLAGS.do_eval:
        needed += [(key, "dev") for _, key in run.task.eval_sets]
    if FLAGS.do_predict:
        needed += [(key, "test") for _, key in run.task.eval_sets]
    if FLAGS.do_train:
        needed.append((run.task.name, "train"))
    for key, split in needed:
        glue_task(key).processor().split_path(FLAGS.data_dir, split)
    for key, split in needed:
        run.features(key, split)


def train(run: Run) -> None:
    train_file = run.features(run.task.name, "train")
    run_flags.train_from_flags(run.trainer, train_file.path, run.parse,
                               f"{run.task.name} train: {train_file.num_records} examples")


def evaluate(run: Run) -> None:
    """The reference's sweep over every checkpoint on the dev set(s), keeping the best."""
    eval_sets = []
    for suffix, key in run.task.eval_sets:
        path = run.features(key, "dev").path
        eval_sets.append(EvalSet(suffix, functools.partial(run.dataset, path,
                                                           FLAGS.eval_batch_size)))
    policy = SweepPolicy.glue(FLAGS.train_step,
                              max_wait_seconds=0 if FLAGS.do_train else FLAGS.max_eval_wait_secs)
    run_checkpoint_sweep(run.trainer, eval_sets, run.task.selection_metric, policy)


def predict(run: Run) -> None:
    """test_results.tsv and submit_results.tsv of the best checkpoint, per test set."""
    for suffix, key in run.task.eval_sets:
        test_file = run.features(key, "test")
        outputs = run.trainer.predict(run.dataset(test_file.path, FLAGS.predict_batch_size))
        guids = test_file.metadata["guids"]
        paths = write_predictions(run.trainer.config.output_dir, guids, outputs, run.task.labels,
                                  suffix=f"_{suffix}" if suffix else "")
        print(f"Predicted {len(guids)} {key} test examples -> {', '.join(paths)}")


def export_saved_model(run: Run) -> None:
    threshold = None if math.isnan(FLAGS.threshold_to_export) else FLAGS.threshold_to_export
    labels = run.task.labels
    export_classifier(run.trainer.model, FLAGS.export_dir, threshold,
                      assets={"labels.txt": "\n".join(labels) + "\n"} if labels else None,
                      tokenizer=run.tokenizer, max_seq_length=FLAGS.max_seq_length)
    print(f"Exported the SavedModel of {BEST_PREFIX} to {FLAGS.export_dir}")


def main(argv):
    del argv
    validate_flags()
    try:
        task = glue_task(FLAGS.task_name)
    except GlueDataError as error:
        raise app.UsageError(str(error)) from None
    config = run_flags.load_config(FLAGS.albert_config_file, FLAGS.max_seq_length)
    tokenizer = run_flags.tokenizer_from_flags(config)
    if FLAGS.do_train:
        run_flags.check_init_checkpoint(FLAGS.init_checkpoint)
    classifier_task = ClassifierTask(config, task.metric_kinds, task.num_labels, task.is_regression)
    run = Run(task, tokenizer,
              run_flags.trainer_from_flags(classifier_task, FLAGS.train_step, FLAGS.warmup_step))
    check_input_splits(run)
    if FLAGS.do_train:
        train(run)
    if FLAGS.do_eval:
        evaluate(run)
    if FLAGS.do_predict or FLAGS.export_dir or FLAGS.tflite_file:
        restore_best_checkpoint(run.trainer)
    if FLAGS.do_predict:
        predict(run)
    if FLAGS.export_dir:
        export_saved_model(run)
    if FLAGS.tflite_file:
        run_flags.write_tflite_from_flags(run.trainer.model, export_classifier_tflite)


if __name__ == "__main__":
    error_boundary.run(main, checks=[run_flags.check_outputs_spare_inputs,
                                     run_flags.check_output_directories,
                                     run_flags.lock_output_dir],
                       when_stopped=error_boundary.TRAINING_STOPPED, catch_sigterm=False)
