"""run_classifier's flags for your own files (docs/own_data.md): defined and checked before
TensorFlow loads, here, so that the script keeps only its GLUE flags and its ``main``.

``define()`` registers them; ``uses_own_files()`` says whether a run reads your files instead of a
GLUE task; ``check()`` refuses a mix of the two, an action without its file and --labels or
--selection_metric that do not fit --task_type. TensorFlow-free, as every check before the
command's imports.
"""

from __future__ import annotations

from absl import app, flags

FLAGS = flags.FLAGS

# Each action of run_classifier and the file of yours it reads.
FILE_OF_ACTION = {"do_train": "train_file", "do_eval": "dev_file", "do_predict": "test_file"}
# The flags that only a run on your own files takes.
OWN_DATA_FLAGS = (*FILE_OF_ACTION.values(), "file_format", "text_column", "text_b_column",
                  "label_column", "id_column", "labels", "task_type", "selection_metric")


def define() -> None:
    """Registers the flags of ``OWN_DATA_FLAGS``."""
    flags.DEFINE_string("train_file", None, "[albert_tf] Your training file (.csv, .tsv or "
                        ".jsonl) instead of --task_name and --data_dir; see docs/own_data.md.")
    flags.DEFINE_string("dev_file", None, "[albert_tf] Your dev file, evaluated by --do_eval.")
    flags.DEFINE_string("test_file", None, "[albert_tf] Your test file, predicted by "
                        "--do_predict (labels optional).")
    flags.DEFINE_enum("file_format", None, ["csv", "tsv", "jsonl"], "[albert_tf] Format of your "
                      "files (default: by extension: .csv, .tsv, .jsonl or .ndjson).")
    flags.DEFINE_string("text_column", None, "[albert_tf] Column of the text (default: 'text', "
                        "or 'text_a' and 'text_b' for a pair).")
    flags.DEFINE_string("text_b_column", None, "[albert_tf] Column of the second text of a pair.")
    flags.DEFINE_string("label_column", "label", "[albert_tf] Column of the label.")
    flags.DEFINE_string("id_column", None, "[albert_tf] Column naming each example in the "
                        "predictions (default: its line number).")
    flags.DEFINE_list("labels", None, "[albert_tf] The class names in class id order (default: "
                      "the training file's labels, sorted).")
    flags.DEFINE_enum("task_type", "classification", ["classification", "regression"],
                      "[albert_tf] classification (class names) or regression (a number per "
                      "example).")
    flags.DEFINE_enum("selection_metric", "accuracy", ["accuracy", "macro_f1"], "[albert_tf] "
                      "Classification on your files: the dev metric that chooses model.ckpt-best "
                      "(regression: Pearson's r).")


def uses_own_files() -> bool:
    return any(FLAGS[name].value for name in FILE_OF_ACTION.values())


def check() -> None:
    """Either a GLUE task (--task_name, --data_dir) or your own files, each action with its file
    (the own-file flags are refused with a GLUE task); --labels and --selection_metric that fit
    --task_type (UsageError)."""
    if not uses_own_files():
        for name in OWN_DATA_FLAGS:
            if FLAGS[name].present:
                raise app.UsageError(f"--{name} applies to your own files (--train_file, "
                                     "--dev_file, --test_file), not to a GLUE --task_name.")
        return
    for name in ("task_name", "data_dir"):
        if FLAGS[name].value:
            raise app.UsageError(f"--{name} names a GLUE task, --train_file, --dev_file and "
                                 "--test_file your own files: give one or the other.")
    for action, name in FILE_OF_ACTION.items():
        if FLAGS[action].value and not FLAGS[name].value:
            raise app.UsageError(f"--{action} on your own files needs --{name}.")
    _check_labels()


def _check_labels() -> None:
    """--labels (distinct, non-empty class names) and --selection_metric fit --task_type (a
    regression has no classes and is selected by Pearson's r)."""
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
