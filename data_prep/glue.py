"""Command line: writes (or reuses) the GLUE feature caches that run_classifier reads.

    python -m data_prep.glue --task_name=rte --data_dir=glue_data --spm_model_file=30k-clean.model \\
        --cached_dir=cache --max_seq_length=512 --splits=train,dev,test
    python -m data_prep.glue --task_name=rte --print_recipe   # the paper's run_classifier flags

Prints one line per split: split, number of records, feature file path. Every split's input file
is checked to exist before any is built.

This module holds the flags and the wiring only. The library is data_prep/classification/: the task
table (glue_tasks.py), the TSV readers (processors.py), the features and their cache
(features.py, ``cached_glue_features``).
"""

from __future__ import annotations

from absl import app, flags, logging

from albert_tf.cli import command_line, flag_definitions

FLAGS = flags.FLAGS

flags.DEFINE_list("splits", ["train", "dev"],
                  f"Splits to prepare, from {list(flag_definitions.DATA_SPLITS)}.")
flags.register_validator("splits", lambda splits: set(splits) <= set(flag_definitions.DATA_SPLITS),
                         f"expected some of {list(flag_definitions.DATA_SPLITS)}")
flags.DEFINE_bool("print_recipe", False,
                  "Only print the paper's run_classifier hyper-parameter flags for --task_name.")
flag_definitions.define("task_name", "data_dir", "cached_dir", "max_seq_length",
                        *flag_definitions.TOKENIZER_FLAGS)

command_line.parse_before_imports(__name__)  # --help, flag mistakes: before TensorFlow loads

from albert_tf.cli import error_boundary, run_flags  # noqa: E402
from albert_tf.files.paths import check_outputs_are_not_inputs  # noqa: E402
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from data_prep.classification.features import (  # noqa: E402
    GlueFeatureSettings, cached_glue_features)
from data_prep.classification.glue_tasks import glue_task  # noqa: E402
from data_prep.classification.processors import GlueDataError  # noqa: E402


def main(argv: list[str]) -> None:
    del argv
    if not FLAGS.task_name:
        raise app.UsageError("--task_name is required")
    try:
        task = glue_task(FLAGS.task_name)
    except GlueDataError as error:
        raise app.UsageError(str(error)) from None
    if FLAGS.print_recipe:
        if task.recipe is None:
            raise app.UsageError(f"task {task.name!r} is predict-only and has no recipe")
        print(" ".join([f"--task_name={task.name}"] + task.recipe.flags()))
        return
    for name in ("data_dir", "cached_dir"):
        if not FLAGS[name].value:
            raise app.UsageError(f"--{name} is required")
    for split in FLAGS.splits:  # every file exists before any is built
        task.processor().split_path(FLAGS.data_dir, split)
    settings = GlueFeatureSettings(FLAGS.max_seq_length)
    tokenizer = FullTokenizer(vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
                              spm_model_file=FLAGS.spm_model_file)
    for split in FLAGS.splits:
        features = cached_glue_features(task.name, FLAGS.data_dir, split, tokenizer, settings,
                                        FLAGS.cached_dir)
        logging.info("%s %s: %d examples in %s", task.name, split, features.num_records,
                     features.path)
        print(f"{split}\t{features.num_records}\t{features.path}")


def _check_paths() -> None:
    """Before any work: --cached_dir is not a file read (a split's TSV, the tokenizer). It may be
    --data_dir: feature files are named <task>_<split>_<digest>.tf_record and replace no TSV."""
    inputs = run_flags.flag_paths("spm_model_file", "vocab_file")
    if FLAGS.task_name and FLAGS.data_dir and not FLAGS.print_recipe:
        processor = glue_task(FLAGS.task_name).processor()
        inputs += [("--data_dir", processor.split_path(FLAGS.data_dir, split))
                   for split in FLAGS.splits]
    check_outputs_are_not_inputs(run_flags.flag_paths("cached_dir"), inputs)


if __name__ == "__main__":
    error_boundary.run(main, checks=[_check_paths])
