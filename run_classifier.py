"""Fine-tunes ALBERT on a GLUE task with the reference's flags and defaults, or on your own
classification or regression files.

--do_train trains from --init_checkpoint (resuming from the latest checkpoint in --output_dir);
--do_eval evaluates every checkpoint on the full dev set (the reference's sweep: eval_results.txt,
best_trial.txt, non-best checkpoints deleted, the best renamed to model.ckpt-best; MNLI evaluates
dev_matched and dev_mismatched); --do_predict writes test_results.tsv and submit_results.tsv from
model.ckpt-best; --export_dir writes a SavedModel of model.ckpt-best, --tflite_file a TFLite model
of it (--tflite_quantization: float32, int8 or float16 weights). See the README.

Your own files (docs/own_data.md): --train_file, --dev_file, --test_file (CSV, TSV or JSON Lines)
instead of --task_name and --data_dir, with the columns named by --text_column, --text_b_column,
--label_column and --id_column; the same steps, the label set kept in <output_dir>/label_list.json
and the predictions and exports giving your label names.
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
# Your own files instead of a GLUE task (data_prep/classification/own_data.py).
flags.DEFINE_string("train_file", None, "[albert_tf] Your training file (.csv, .tsv or .jsonl) "
                    "instead of --task_name and --data_dir; see docs/own_data.md.")
flags.DEFINE_string("dev_file", None, "[albert_tf] Your dev file, evaluated by --do_eval.")
flags.DEFINE_string("test_file", None, "[albert_tf] Your test file, predicted by --do_predict "
                    "(labels optional).")
flags.DEFINE_enum("file_format", None, ["csv", "tsv", "jsonl"], "[albert_tf] Format of your "
                  "files (default: by extension: .csv, .tsv, .jsonl or .ndjson).")
flags.DEFINE_string("text_column", None, "[albert_tf] Column of the text (default: 'text', or "
                    "'text_a' and 'text_b' for a pair).")
flags.DEFINE_string("text_b_column", None, "[albert_tf] Column of the second text of a pair.")
flags.DEFINE_string("label_column", "label", "[albert_tf] Column of the label.")
flags.DEFINE_string("id_column", None, "[albert_tf] Column naming each example in the predictions "
                    "(default: its line number).")
flags.DEFINE_list("labels", None, "[albert_tf] The class names in class id order (default: the "
                  "training file's labels, sorted).")
flags.DEFINE_enum("task_type", "classification", ["classification", "regression"],
                  "[albert_tf] classification (class names) or regression (a number per example).")
flags.DEFINE_enum("selection_metric", "accuracy", ["accuracy", "macro_f1"], "[albert_tf] "
                  "Classification on your files: the dev metric that chooses model.ckpt-best "
                  "(regression: Pearson's r).")
_OWN_FILE_FLAGS = ("train_file", "dev_file", "test_file")
_OWN_DATA_FLAGS = (*_OWN_FILE_FLAGS, "file_format", "text_column", "text_b_column", "label_column",
                   "id_column", "labels", "task_type", "selection_metric")


def uses_own_files() -> bool:
    return any(FLAGS[name].value for name in _OWN_FILE_FLAGS)


def check_data_flags() -> None:
    """Before TensorFlow loads: either a GLUE task (--task_name, --data_dir) or your own files,
    each action with its file; the own-file flags are refused with a GLUE task."""
    if uses_own_files():
        for name in ("task_name", "data_dir"):
            if FLAGS[name].value:
                raise app.UsageError(f"--{name} names a GLUE task, --train_file, --dev_file and "
                                     "--test_file your own files: give one or the other.")
        for action, name in (("do_train", "train_file"), ("do_eval", "dev_file"),
                             ("do_predict", "test_file")):
            if FLAGS[action].value and not FLAGS[name].value:
                raise app.UsageError(f"--{action} on your own files needs --{name}.")
    else:
        for name in _OWN_DATA_FLAGS:
            if FLAGS[name].present:
                raise app.UsageError(f"--{name} applies to your own files (--train_file, "
                                     "--dev_file, --test_file), not to a GLUE --task_name.")


# --help, flag mistakes: before TensorFlow loads
command_line.parse_before_imports(__name__, checks=[check_data_flags])

import tensorflow as tf  # noqa: E402
from albert_tf.cli import error_boundary, run_flags  # noqa: E402
from albert_tf.evaluation.best_checkpoint import (  # noqa: E402
    best_checkpoint_prefix, restore_best_checkpoint, run_checkpoint_sweep)
from albert_tf.evaluation.checkpoint_sweep import BEST_PREFIX, SweepPolicy  # noqa: E402
from albert_tf.tasks.classification.label_file import (  # noqa: E402
    read_label_file, write_label_file)
from albert_tf.tasks.classification.metrics import class_key, format_class_report  # noqa: E402
from albert_tf.tasks.classification.records import parse_glue_example  # noqa: E402
from albert_tf.tasks.classification.serving import (  # noqa: E402
    export_classifier, export_classifier_tflite)
from albert_tf.tasks.classification.task import ClassifierTask, write_predictions  # noqa: E402
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from albert_tf.training.input_pipeline import (  # noqa: E402
    needs_static_batches, record_eval_dataset)
from albert_tf.training.task import EvalSet  # noqa: E402
from albert_tf.training.trainer import Trainer  # noqa: E402
from data_prep.classification.features import (  # noqa: E402
    GlueFeatureSettings, cached_glue_features)
from data_prep.classification.glue_tasks import GlueTask, glue_task  # noqa: E402
from data_prep.classification.own_data import Columns, OwnDataReader  # noqa: E402
from data_prep.classification.own_data_task import OwnDataTask, load_own_data  # noqa: E402
from data_prep.classification.processors import GlueDataError  # noqa: E402
from data_prep.common.feature_cache import FeatureFile  # noqa: E402


class Run:
    """What the steps of one run share: the task, the tokenizer, the trainer and the feature files."""

    def __init__(self, task: GlueTask | OwnDataTask, tokenizer: FullTokenizer, trainer: Trainer):
        self.task = task
        self.own_files = isinstance(task, OwnDataTask)  # else a GLUE task
        self.tokenizer = tokenizer
        self.trainer = trainer
        self.static_batches = needs_static_batches(trainer.strategy)
        self.parse = functools.partial(parse_glue_example, max_seq_length=FLAGS.max_seq_length,
                                       is_regression=task.is_regression)

    def features(self, task_key: str, split: str) -> FeatureFile:
        """The cached feature file of one split (on TPU too: the pipeline pads the last batch)."""
        if self.own_files:
            return self.task.features(split, self.tokenizer, FLAGS.max_seq_length,
                                      FLAGS.cached_dir or FLAGS.output_dir)
        return cached_glue_features(task_key, FLAGS.data_dir, split, self.tokenizer,
                                    GlueFeatureSettings(FLAGS.max_seq_length),
                                    FLAGS.cached_dir or FLAGS.output_dir)

    def dataset(self, path: str, batch_size: int) -> tf.data.Dataset:
        return record_eval_dataset(path, self.parse, batch_size, self.static_batches)


def validate_flags() -> None:
    run_flags.reject_hub_module_handle()
    run_flags.require_action("do_train", "do_eval", "do_predict", "export_dir", "tflite_file")
    if uses_own_files():
        run_flags.require_flags("output_dir", "albert_config_file")
    else:
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
    if not run.own_files:  # own files: all read and checked when loaded
        for key, split in needed:
            glue_task(key).processor().split_path(FLAGS.data_dir, split)
    for key, split in needed:
        run.features(key, split)


def train(run: Run) -> None:
    train_file = run.features(run.task.name, "train")
    description = f"{run.task.name} train: {train_file.num_records} examples"
    if run.own_files and not run.task.is_regression:
        description += f" ({run.task.label_counts('train')})"
    run_flags.train_from_flags(run.trainer, train_file.path, run.parse, description)


def evaluate(run: Run) -> None:
    """The reference's sweep over every checkpoint on the dev set(s), keeping the best."""
    eval_sets = []
    for suffix, key in run.task.eval_sets:
        path = run.features(key, "dev").path
        eval_sets.append(EvalSet(suffix, functools.partial(run.dataset, path,
                                                           FLAGS.eval_batch_size)))
    policy = SweepPolicy.glue(FLAGS.train_step,
                              max_wait_seconds=0 if FLAGS.do_train else FLAGS.max_eval_wait_secs)
    _, best = run_checkpoint_sweep(run.trainer, eval_sets, run.task.selection_metric, policy)
    labels = run.task.labels
    if run.own_files and labels and class_key(labels[0], "f1") in best:
        print(f"Dev set, best checkpoint:\n{format_class_report(best, labels)}")


def predict(run: Run) -> None:
    """test_results.tsv and submit_results.tsv of the best checkpoint, per test set."""
    for suffix, key in run.task.eval_sets:
        test_file = run.features(key, "test")
        outputs = run.trainer.predict(run.dataset(test_file.path, FLAGS.predict_batch_size))
        guids = test_file.metadata["guids"]
        paths = write_predictions(run.trainer.config.output_dir, guids, outputs, run.task.labels,
                                  suffix=f"_{suffix}" if suffix else "",
                                  header=(run.task.labels or ["score"]) if run.own_files else None)
        print(f"Predicted {len(guids)} {key} test examples -> {', '.join(paths)}")


def export_saved_model(run: Run) -> None:
    threshold = None if math.isnan(FLAGS.threshold_to_export) else FLAGS.threshold_to_export
    labels = run.task.labels
    export_classifier(run.trainer.model, FLAGS.export_dir, threshold,
                      assets={"labels.txt": "\n".join(labels) + "\n"} if labels else None,
                      tokenizer=run.tokenizer, max_seq_length=FLAGS.max_seq_length,
                      label_names=labels if run.own_files else None)
    print(f"Exported the SavedModel of {BEST_PREFIX} to {FLAGS.export_dir}")


def load_own_files(tokenizer: FullTokenizer) -> OwnDataTask:
    """Your files, read and checked, with their label set (see own_data_task.load_own_data)."""
    columns = Columns(FLAGS.text_column, FLAGS.text_b_column, FLAGS.label_column, FLAGS.id_column)
    reader = OwnDataReader(columns, FLAGS.task_type, FLAGS.file_format,
                           use_spm=tokenizer.uses_sentencepiece,
                           do_lower_case=tokenizer.do_lower_case)
    files = {"train": FLAGS.train_file, "dev": FLAGS.dev_file, "test": FLAGS.test_file}
    return load_own_data(files, reader, FLAGS.output_dir, FLAGS.labels, FLAGS.selection_metric)


def main(argv):
    del argv
    validate_flags()
    own_files = uses_own_files()
    if not own_files:
        try:
            task = glue_task(FLAGS.task_name)
        except GlueDataError as error:
            raise app.UsageError(str(error)) from None
    config = run_flags.load_config(FLAGS.albert_config_file, FLAGS.max_seq_length)
    tokenizer = run_flags.tokenizer_from_flags(config)
    if own_files:
        task = load_own_files(tokenizer)
    if FLAGS.do_train:
        run_flags.check_init_checkpoint(FLAGS.init_checkpoint)
    classifier_task = ClassifierTask(config, task.metric_kinds, task.num_labels, task.is_regression,
                                     class_names=task.labels if own_files else None)
    run = Run(task, tokenizer,
              run_flags.trainer_from_flags(classifier_task, FLAGS.train_step, FLAGS.warmup_step))
    check_input_splits(run)
    if own_files and run.trainer.chief and read_label_file(FLAGS.output_dir) is None:
        write_label_file(FLAGS.output_dir, FLAGS.task_type, task.labels)
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
