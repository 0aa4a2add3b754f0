"""TODO(split) RACE reading comprehension: JSON articles -> examples -> feature TFRecords, and a command line.

Input layout: ``<data_dir>/RACE/<split>/<level>/`` for split train/dev/test and level middle/high,
read in the order middle, high (``middle_only`` / ``high_only`` read one level). Each level
directory is read in one of two layouts, chosen per directory:

- ``all.txt`` present (the reference's layout): one JSON article per line, in line order; blank
  lines are ignored.
- otherwise (the official RACE release): every ``*.txt`` file holds one JSON article; files are read
  in sorted file-name order (plain string order: ``10.txt`` comes before ``2.txt``).

An article is ``{"id", "article", "questions", "options", "answers"}``, with one option list of 4 and
one answer letter "A"-"D" per question. Each question is one example (the reference's
``RaceProcessor``): label = answer letter - "A"; article, question and options normalized as the
tokenizer expects (SentencePiece mode: ``preprocess_text`` with ``lower=do_lower_case``); for each
option, the question with every "_" replaced by the option if it has one, else question + " " + option.

Where the reference would crash or read garbage, reading fails with ``RaceDataError`` naming the file
(and line, for all.txt) and the question: malformed JSON, missing keys, a question without exactly 4
options, an answer other than "A"-"D", a repeated article id. With ``skip_invalid=True`` the bad
question (or the whole article, when the article itself is unusable) is skipped, logged and counted.

Features and records: data_prep/race_features.py. Command line::

    python -m data_prep.race --data_dir=data --split=dev --spm_model_file=30k-clean.model \\
        --do_lower_case --max_seq_length=512 --max_qa_length=128 --output_file=dev.tfrecord \\
        [--middle_only | --high_only] [--skip_invalid]
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf
from absl import app, flags

from albert_tf.cli import error_boundary, flag_definitions
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.common.feature_cache import write_feature_file
from data_prep.multiple_choice.feature_file import race_records_builder
from data_prep.multiple_choice.features import check_lengths
from data_prep.multiple_choice.reader import SPLITS, race_sources

# -- command line ----------------------------------------------------------------------------------

FLAGS = flags.FLAGS


def _define_flags() -> None:
    flags.DEFINE_enum("split", None, list(SPLITS), "Split to convert.")
    flags.DEFINE_string("output_file", None, "The TFRecord file to write (a JSON sidecar goes beside it).")
    flag_definitions.define("data_dir", "max_seq_length", "max_qa_length", "middle_only", "high_only",
                            "skip_invalid", *flag_definitions.TOKENIZER_FLAGS)
    flags.mark_flags_as_required(["data_dir", "split", "output_file"])


def main(argv: Sequence[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        if not (FLAGS.spm_model_file or FLAGS.vocab_file):
            raise ValueError("give --spm_model_file (or --vocab_file for a WordPiece model)")
        check_lengths(FLAGS.max_seq_length, FLAGS.max_qa_length)
        tokenizer = FullTokenizer(vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
                                  spm_model_file=FLAGS.spm_model_file)
        sources = race_sources(FLAGS.data_dir, FLAGS.split, middle_only=FLAGS.middle_only,
                               high_only=FLAGS.high_only)
        feature_file = write_feature_file(
            FLAGS.output_file, race_records_builder(sources, tokenizer, FLAGS.max_seq_length,
                                                FLAGS.max_qa_length, FLAGS.skip_invalid))
    except (ValueError, OSError, tf.errors.OpError) as error:
        # A bad input is the user's to fix: its message, without a traceback, and exit status 1.
        raise SystemExit(f"race: error: {error}") from None
    metadata = feature_file.metadata
    per_level = ", ".join(f"{level} {count}" for level, count in metadata["num_examples"].items())
    print(f"wrote {feature_file.num_records} {FLAGS.split} questions ({per_level}) to {feature_file.path}; "
          f"skipped {metadata['num_skipped_questions']} questions and "
          f"{metadata['num_skipped_articles']} articles")


if __name__ == "__main__":
    _define_flags()
    error_boundary.run(main)
