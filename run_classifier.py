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
--do_eval adds each layer's, each patience's and each confidence's metrics (the best checkpoint's
in early_exit_results.json, with the rule chosen on dev and its price); --do_predict and
--export_dir stop at --patience or --exit_confidence (default: the rule chosen on dev) or at
--inference_layers. An output
directory holds one kind of classifier (ordinary, or early exit with separate or shared heads,
and its training, recorded in its run manifest): a later run there with other early-exit flags is
refused.
"""

from __future__ import annotations

import math

from absl import app, flags

from albert_tf.cli import (command_line, early_exit_flags, flag_checks, flag_definitions,
                           own_data_flags)
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
own_data_flags.define()  # your own files instead of a GLUE task (data_prep/classification/)
early_exit_flags.define()
_ACTIONS = ("do_train", "do_eval", "do_predict", "export_dir", "tflite_file", "onnx_file")


def check_flags() -> None:
    """Before TensorFlow loads: a GLUE task or your own files (``own_data_flags.check``); what to
    do; the model's files; a known GLUE task; room for the special tokens; the early-exit flags."""
    own_data_flags.check()
    flag_checks.fine_tuning_checks(*_ACTIONS)
    if not own_data_flags.uses_own_files():
        flag_checks.require_flags("data_dir", "task_name")
        if FLAGS.task_name.lower() not in GLUE_TASK_NAMES:
            raise app.UsageError(unknown_task_message(FLAGS.task_name))
    flag_checks.require_sequence_room(3, "the 3 special tokens of [CLS] a [SEP] b [SEP]")
    early_exit_flags.check(is_regression(), "your files are a classification (--task_type="
                           "classification)" if own_data_flags.uses_own_files() else
                           f"--task_name={FLAGS.task_name} is a classification")


def is_regression() -> bool:
    """Whether the run is a regression: your files with --task_type=regression, or the GLUE task
    STS-B."""
    if own_data_flags.uses_own_files():
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
