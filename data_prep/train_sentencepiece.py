"""Command line: trains a SentencePiece unigram model with the reference ALBERT recipe.

    python -m data_prep.train_sentencepiece --input_file='corpus/*.txt' \\
        --model_prefix=out/30k-clean --vocab_size=30000 [--do_lower_case]

Writes ``<model_prefix>.model`` and ``<model_prefix>.vocab`` (each through a temporary file, then
renamed): pad 0, unk 1, [CLS] [SEP] [MASK] as control symbols (ids 2-4), the reference's
user-defined symbols, over text normalized as create_pretraining_data and the fine-tuning scripts
normalize it. A bad input is one line ``train_sentencepiece: error: ...`` and exit status 1.

This module holds the flags and the wiring only; the recipe and the training are
data_prep/pretraining/vocabulary.py.
"""

from __future__ import annotations

import os
from typing import Sequence

from absl import app, flags, logging

from albert_tf.cli import command_line, flag_definitions

flags.DEFINE_string("input_file", None, "Comma-separated glob patterns of raw text files, one sentence "
                    "per line (blank lines separate documents and are skipped).")
flags.DEFINE_string("model_prefix", None, "Output prefix: writes <prefix>.model and <prefix>.vocab.")
flags.DEFINE_integer("vocab_size", 30000, "Number of pieces, including the 13 special/user pieces.")
flags.DEFINE_integer("input_sentence_size", 10_000_000,
                     "Use at most this many sentences (a random sample when shuffling); 0 = all. "
                     "SentencePiece rejects values 1-100.")
flags.DEFINE_bool("shuffle_input_sentence", True,
                  "Sample the input_sentence_size sentences at random instead of taking the first ones.")
flags.DEFINE_float("character_coverage", 0.99995,  # vocabulary.DEFAULT_CHARACTER_COVERAGE
                   "Fraction of characters the model covers; rarer characters map to <unk>.")
flag_definitions.define("do_lower_case")
flags.DEFINE_integer("num_threads", min(16, os.cpu_count() or 1), "Training threads.")
flags.DEFINE_bool("hard_vocab_limit", True,
                  "If false, --vocab_size is an upper bound (useful for small corpora).")
flags.mark_flags_as_required(["input_file", "model_prefix"])

_MODEL_SUFFIXES = (".model", ".vocab")


def check_model_prefix() -> None:
    """--model_prefix names the files' stem, not a directory or a file: a prefix ending in '/' (or
    '.', '..') would write the hidden files ``dir/.model`` and ``dir/.vocab``, and one ending in
    .model or .vocab the files ``x.model.model`` and ``x.model.vocab``, which nothing looks for."""
    prefix = flags.FLAGS.model_prefix
    stem = os.path.basename(prefix)
    if stem in ("", ".", ".."):
        example = os.path.join(os.path.normpath(prefix) if prefix else "", "30k-clean")
        raise app.UsageError(
            f"--model_prefix={prefix} names a directory, but it is the start of the file names "
            f"(<prefix>.model and <prefix>.vocab are written): give e.g. --model_prefix={example}")
    for suffix in _MODEL_SUFFIXES:
        if stem.endswith(suffix) and stem != suffix:
            bare = prefix[:-len(suffix)]
            raise app.UsageError(
                f"--model_prefix={prefix} ends with {suffix}, but the command adds the suffixes "
                f"itself ({prefix}.model and {prefix}.vocab would be written): give "
                f"--model_prefix={bare}")


# --help, flag mistakes, the prefix: before TensorFlow loads
command_line.parse_before_imports(__name__, checks=[check_model_prefix])

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.files.paths import expand_input_patterns  # noqa: E402
from albert_tf.files.run_files import Output, RunFiles, check_run_files, inputs  # noqa: E402
from data_prep.pretraining.vocabulary import train_sentencepiece  # noqa: E402


def main(argv: Sequence[str]) -> None:
    del argv
    options = flags.FLAGS
    model_path = train_sentencepiece(
        options.input_file, options.model_prefix, vocab_size=options.vocab_size,
        input_sentence_size=options.input_sentence_size,
        shuffle_input_sentence=options.shuffle_input_sentence,
        character_coverage=options.character_coverage, do_lower_case=options.do_lower_case,
        num_threads=options.num_threads, hard_vocab_limit=options.hard_vocab_limit)
    logging.info("wrote %s and %s.vocab", model_path, options.model_prefix)


def run_files() -> RunFiles:
    """What the command reads (the text) and writes (<model_prefix>.model and .vocab)."""
    prefix = flags.FLAGS.model_prefix
    return RunFiles(inputs(*(("--input_file", path)
                             for path in expand_input_patterns(flags.FLAGS.input_file))),
                    tuple(Output("--model_prefix", f"{prefix}.{suffix}")
                          for suffix in ("model", "vocab")))


if __name__ == "__main__":
    error_boundary.run(main, checks=[lambda: check_run_files(run_files())])
