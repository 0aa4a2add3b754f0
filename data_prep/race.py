"""Command line: RACE reading comprehension: JSON articles -> one feature file (TFRecord + JSON
sidecar) at a given path.

    python -m data_prep.race --data_dir=data --split=dev --spm_model_file=30k-clean.model \\
        --do_lower_case --max_seq_length=512 --max_qa_length=128 --output_file=dev.tfrecord \\
        [--middle_only | --high_only] [--skip_invalid]

Reads ``<data_dir>/RACE/<split>/<level>/`` (both of RACE's layouts), writes one record per question
and ``<output_file>.json``, and prints the number of questions per level and of skipped questions
and articles. A missing or malformed input is one line ``race: error: ...`` and exit status 1.
(run_race.py does not need this command: it builds the same records in its feature cache.)

This module holds the flags and the wiring only. The library is data_prep/multiple_choice/: reading
the articles (reader.py), the features (features.py), the feature file (feature_file.py).
"""

from __future__ import annotations

from typing import Sequence

from absl import app, flags

from albert_tf.cli import command_line, flag_checks, flag_definitions

# -- command line ----------------------------------------------------------------------------------

FLAGS = flags.FLAGS

flags.DEFINE_enum("split", None, list(flag_definitions.DATA_SPLITS), "Split to convert.")
flags.DEFINE_string("output_file", None, "The TFRecord file to write (a JSON sidecar goes beside it).")
flag_definitions.define("data_dir", "max_seq_length", "max_qa_length", "middle_only", "high_only",
                        "skip_invalid", *flag_definitions.TOKENIZER_FLAGS)
flags.mark_flags_as_required(["data_dir", "split", "output_file"])



def check_flags() -> None:
    """Before TensorFlow loads: a tokenizer, at most one level, room for the question and option."""
    flag_checks.require_tokenizer()
    if FLAGS.middle_only and FLAGS.high_only:
        raise app.UsageError("--middle_only and --high_only exclude each other; give at most one.")
    flag_checks.require_sequence_room(
        FLAGS.max_qa_length + 3,
        f"[CLS], two [SEP] and --max_qa_length={FLAGS.max_qa_length} question+option pieces")


# --help, flag mistakes and the checks of the flags: before TensorFlow loads
command_line.parse_before_imports(__name__, checks=[check_flags])

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.files.run_files import Output, RunFiles, check_run_files, inputs  # noqa: E402
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from data_prep.common.feature_cache import sidecar_path, write_feature_file  # noqa: E402
from data_prep.multiple_choice.feature_file import race_records_builder  # noqa: E402
from data_prep.multiple_choice.features import RaceFeatureSettings  # noqa: E402
from data_prep.multiple_choice.reader import race_sources  # noqa: E402


def main(argv: Sequence[str]) -> None:
    del argv
    settings = RaceFeatureSettings(FLAGS.max_seq_length, FLAGS.max_qa_length,
                                   middle_only=FLAGS.middle_only, high_only=FLAGS.high_only,
                                   skip_invalid=FLAGS.skip_invalid)
    tokenizer = FullTokenizer(vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
                              spm_model_file=FLAGS.spm_model_file)
    sources = race_sources(FLAGS.data_dir, FLAGS.split, middle_only=settings.middle_only,
                           high_only=settings.high_only)
    feature_file = write_feature_file(FLAGS.output_file,
                                      race_records_builder(sources, tokenizer, settings))
    metadata = feature_file.metadata
    per_level = ", ".join(f"{level} {count}" for level, count in metadata["num_examples"].items())
    print(f"wrote {feature_file.num_records} {FLAGS.split} questions ({per_level}) to {feature_file.path}; "
          f"skipped {metadata['num_skipped_questions']} questions and "
          f"{metadata['num_skipped_articles']} articles")


def run_files() -> RunFiles:
    """What the command reads (the article files of --split under --data_dir, the tokenizer) and
    writes (--output_file and its sidecar)."""
    output = FLAGS.output_file
    articles = race_sources(FLAGS.data_dir, FLAGS.split, middle_only=FLAGS.middle_only,
                            high_only=FLAGS.high_only)
    return RunFiles(inputs(*(("a file of --data_dir", source.path) for source in articles),
                           ("--spm_model_file", FLAGS.spm_model_file),
                           ("--vocab_file", FLAGS.vocab_file)),
                    (Output("--output_file", output), Output("its sidecar", sidecar_path(output))))


if __name__ == "__main__":
    error_boundary.run(main, checks=[lambda: check_run_files(run_files())])
