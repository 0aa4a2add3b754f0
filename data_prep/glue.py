"""Command line: writes (or reuses) the GLUE feature caches that run_classifier reads.

    python -m data_prep.glue --task_name=rte --data_dir=glue_data --spm_model_file=30k-clean.model \\
        --cached_dir=cache --max_seq_length=512 --splits=train,dev,test
    python -m data_prep.glue --task_name=rte --print_recipe   # the paper's run_classifier flags

(--print_recipe: the same line as run_classifier.py --task_name=rte --print_recipe, printed before
TensorFlow loads.)

Prints one line per split: split, number of records, feature file path. Every split's input file
is checked to exist before any is built.

This module holds the flags and the wiring only. The library is data_prep/classification/: the task
table (glue_tasks.py), the TSV readers (processors.py), the features and their cache
(features.py, ``cached_glue_features``).
"""

from __future__ import annotations

from absl import app, flags, logging

from albert_tf.cli import command_line, flag_checks, flag_definitions
from albert_tf.tasks.classification.recipes import (GLUE_TASK_NAMES, glue_recipe,
                                                    unknown_task_message)

FLAGS = flags.FLAGS

flags.DEFINE_list("splits", ["train", "dev"],
                  f"Splits to prepare, from {list(flag_definitions.DATA_SPLITS)}.")
flags.register_validator("splits", lambda splits: set(splits) <= set(flag_definitions.DATA_SPLITS),
                         f"expected some of {list(flag_definitions.DATA_SPLITS)}")
flag_definitions.define("task_name", "data_dir", "cached_dir", "max_seq_length", "print_recipe",
                        *flag_definitions.TOKENIZER_FLAGS)


def check_flags() -> None:
    """Before TensorFlow loads: a known GLUE task, the data and cache directories, a tokenizer and
    room for the special tokens."""
    flag_checks.require_flags("task_name")
    if FLAGS.task_name.lower() not in GLUE_TASK_NAMES:
        raise app.UsageError(unknown_task_message(FLAGS.task_name))
    flag_checks.require_flags("data_dir", "cached_dir")
    flag_checks.require_tokenizer()
    flag_checks.require_sequence_room(3, "the 3 special tokens of [CLS] a [SEP] b [SEP]")


# --help, flag mistakes, --print_recipe and the checks of the flags: before TensorFlow loads
command_line.parse_before_imports(__name__, checks=[
    flag_checks.print_recipe(lambda: glue_recipe(FLAGS.task_name)), check_flags])

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.files.run_files import (  # noqa: E402
    RunFiles, WorkDirectory, check_run_files, fixed_outputs, inputs)
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from data_prep.classification.features import (  # noqa: E402
    GlueFeatureSettings, cached_glue_features)
from data_prep.common.feature_cache import cache_file_pattern  # noqa: E402
from data_prep.classification.glue_tasks import glue_task  # noqa: E402


def main(argv: list[str]) -> None:
    del argv
    task = glue_task(FLAGS.task_name)
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


def run_files() -> RunFiles:
    """What the command reads (each split's TSV, the tokenizer) and writes (the task's feature
    files in --cached_dir, named <task>_<split>_<digest>.tf_record: they replace no TSV, so
    --cached_dir may be --data_dir)."""
    read = inputs(("--spm_model_file", FLAGS.spm_model_file), ("--vocab_file", FLAGS.vocab_file))
    if not (FLAGS.task_name and FLAGS.data_dir and FLAGS.cached_dir):
        return RunFiles(read)
    task = glue_task(FLAGS.task_name)
    read += inputs(*(("--data_dir", task.processor().split_path(FLAGS.data_dir, split))
                     for split in FLAGS.splits))
    cache = WorkDirectory("--cached_dir", FLAGS.cached_dir)
    return RunFiles(read, fixed_outputs(cache, [cache_file_pattern(task.name)],
                                        listed_as_owned=False), (cache,))


if __name__ == "__main__":
    error_boundary.run(main, checks=[lambda: check_run_files(run_files())])
