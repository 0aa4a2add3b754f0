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
--label_column and --id_column; the same steps, the label set kept in <output_dir>/run_manifest.json
and the predictions and exports giving your label names.

Early exit (docs/early_exit.md): --early_exit trains an internal classifier after every layer,
by default in two stages (the ordinary classifier first, in <output_dir>/ordinary unless
--init_checkpoint holds one, then the internal classifiers alone, the rest frozen: the full depth
is the ordinary model), or jointly with PABEE's weighted loss (--early_exit_training=joint);
--do_eval adds each layer's and each patience's metrics (the best checkpoint's in
early_exit_results.json, with the patience chosen on dev and its price); --do_predict and
--export_dir stop at --patience (default: the chosen one) or at --inference_layers. An output
directory holds one kind of classifier (ordinary, or early exit with separate or shared heads,
and its training, recorded in its run manifest): a later run there with other early-exit flags is
refused.
"""

from __future__ import annotations

import math

from absl import app, flags

from albert_tf.cli import command_line, early_exit_flags, flag_checks, flag_definitions
from albert_tf.tasks.classification.recipes import (GLUE_TASK_NAMES, REGRESSION_TASKS,
                                                    glue_recipe, unknown_task_message)

FLAGS = flags.FLAGS

flags.DEFINE_float("threshold_to_export", float("nan"), "If set, a constant 'threshold' output is "
                   "added to the SavedModel's signature.")
flag_definitions.define(*flag_definitions.FINE_TUNING_FLAGS, *flag_definitions.TFLITE_FLAGS,
                        *flag_definitions.ONNX_FLAGS, "task_name", "train_step", "warmup_step",
                        keep_checkpoint_max=0)
flag_definitions.check_tflite_flags()
flag_definitions.check_onnx_flags()
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
early_exit_flags.define()
_OWN_FILE_FLAGS = ("train_file", "dev_file", "test_file")
_OWN_DATA_FLAGS = (*_OWN_FILE_FLAGS, "file_format", "text_column", "text_b_column", "label_column",
                   "id_column", "labels", "task_type", "selection_metric")
_ACTIONS = ("do_train", "do_eval", "do_predict", "export_dir", "tflite_file", "onnx_file")


def uses_own_files() -> bool:
    return any(FLAGS[name].value for name in _OWN_FILE_FLAGS)


def check_own_labels() -> None:
    """Your own files: --labels (distinct, non-empty class names) and --selection_metric fit
    --task_type (a regression has no classes and is selected by Pearson's r)."""
    if FLAGS.task_type == "regression":
        if FLAGS.labels:
            raise app.UsageError("--labels names the classes of a classification; a regression "
                                 "(--task_type=regression) has none")
        if FLAGS.selection_metric != "accuracy":
            raise app.UsageError(f"--selection_metric={FLAGS.selection_metric}: a regression's "
                                 "best checkpoint is chosen by Pearson's r")
    elif FLAGS.labels:
        labels = [label.strip() for label in FLAGS.labels]
        if "" in labels or len(set(labels)) < len(labels):
            raise app.UsageError(f"--labels={','.join(FLAGS.labels)}: expected distinct "
                                 "non-empty class names")


def check_flags() -> None:
    """Before TensorFlow loads: either a GLUE task (--task_name, --data_dir) or your own files,
    each action with its file (the own-file flags are refused with a GLUE task), --labels that fit
    --task_type; what to do; the model's files; a known GLUE task; room for the special tokens."""
    if uses_own_files():
        for name in ("task_name", "data_dir"):
            if FLAGS[name].value:
                raise app.UsageError(f"--{name} names a GLUE task, --train_file, --dev_file and "
                                     "--test_file your own files: give one or the other.")
        for action, name in (("do_train", "train_file"), ("do_eval", "dev_file"),
                             ("do_predict", "test_file")):
            if FLAGS[action].value and not FLAGS[name].value:
                raise app.UsageError(f"--{action} on your own files needs --{name}.")
        check_own_labels()
    else:
        for name in _OWN_DATA_FLAGS:
            if FLAGS[name].present:
                raise app.UsageError(f"--{name} applies to your own files (--train_file, "
                                     "--dev_file, --test_file), not to a GLUE --task_name.")
    flag_checks.fine_tuning_checks(*_ACTIONS)
    if not uses_own_files():
        flag_checks.require_flags("data_dir", "task_name")
        if FLAGS.task_name.lower() not in GLUE_TASK_NAMES:
            raise app.UsageError(unknown_task_message(FLAGS.task_name))
    flag_checks.require_sequence_room(3, "the 3 special tokens of [CLS] a [SEP] b [SEP]")
    early_exit_flags.check(is_regression(), "your files are a classification (--task_type="
                           "classification)" if uses_own_files() else
                           f"--task_name={FLAGS.task_name} is a classification")


def is_regression() -> bool:
    """Whether the run is a regression: your files with --task_type=regression, or the GLUE task
    STS-B."""
    if uses_own_files():
        return FLAGS.task_type == "regression"
    return FLAGS.task_name.lower() in REGRESSION_TASKS


# --help, flag mistakes: before TensorFlow loads
command_line.parse_before_imports(__name__, checks=[
    flag_checks.print_recipe(lambda: glue_recipe(FLAGS.task_name)), check_flags])

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.cli.driver import run_task  # noqa: E402
from albert_tf.cli.settings import RunSettings  # noqa: E402
from albert_tf.tasks.classification.early_exit import EarlyExitSettings  # noqa: E402
from data_prep.classification.own_data import Columns  # noqa: E402
from task_specs.classification import ClassifierSettings  # noqa: E402
from task_specs.early_exit import classifier_run  # noqa: E402


def settings_from_flags() -> ClassifierSettings:
    """run_classifier's own flags, read once."""
    files = {split: FLAGS[f"{split}_file"].value for split in ("train", "dev", "test")
             if FLAGS[f"{split}_file"].value}
    threshold = FLAGS.threshold_to_export
    return ClassifierSettings(
        FLAGS.task_name, FLAGS.data_dir, files, FLAGS.file_format,
        Columns(FLAGS.text_column, FLAGS.text_b_column, FLAGS.label_column, FLAGS.id_column),
        tuple(FLAGS.labels) if FLAGS.labels else None, FLAGS.task_type, FLAGS.selection_metric,
        None if math.isnan(threshold) else threshold, early_exit_flags.read(EarlyExitSettings))


def main(argv):
    del argv
    settings = RunSettings.from_flags()
    run_task(*classifier_run(settings, settings_from_flags(), FLAGS.early_exit_learning_rate,
                             FLAGS.early_exit_train_step))


if __name__ == "__main__":
    error_boundary.run(main, when_stopped=error_boundary.TRAINING_STOPPED)
