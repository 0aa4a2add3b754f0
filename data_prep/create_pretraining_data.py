r"""Command line: creates masked-LM + sentence-order pretraining TFRecords from raw text (the
reference's create_pretraining_data, streaming, parallel and fully seeded).

    python -m data_prep.create_pretraining_data \
      --input_file='corpus/*.txt' --output_file=out/train-0.tfrecord,out/train-1.tfrecord \
      --spm_model_file=30k-clean.model --max_seq_length=512 --max_predictions_per_seq=20 \
      --dupe_factor=40 --num_workers=8 [--runner=DataflowRunner <Beam pipeline options>]

Flag names and defaults are the reference's, plus --num_workers, --chunk_documents,
--skip_invalid_lines and --runner. The algorithm is the reference's (deliberate differences listed
in data_prep/pretraining/instances.py), applied to chunks of --chunk_documents whole documents: the
document shuffle, the random-document segments B and the final instance shuffle happen within a
chunk. Output: the TFRecords and ``<first output>.stats.json``, each written under a temporary name
and renamed when the whole run succeeded. An output that is also an input (or the tokenizer file),
or named twice, is refused before any work. Ctrl-C, SIGTERM or an error stops the workers and
removes the temporary files; after a kill -9 the workers die too, and the next run writing the same
output removes its temporary files. With --runner the same bytes are computed as an Apache Beam
pipeline.

This module holds the flags and the wiring only. The library is data_prep/pretraining/: local runs
go through pipeline.py, Beam runs through beam.py (runner set-up: data_prep/common/beam_runner.py).
"""

from __future__ import annotations

import logging as logging_module
from concurrent.futures.process import BrokenProcessPool

from absl import app, flags, logging

from albert_tf.cli import command_line, flag_definitions

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None,
                    "Comma-separated glob patterns of raw text files: UTF-8, one sentence per line, a "
                    "blank line between documents (the end of a file also ends a document).")
flags.DEFINE_string("output_file", None,
                    "Comma-separated output TFRecord paths; instances are written round-robin. "
                    "Statistics go to '<first output>.stats.json'.")
flags.DEFINE_string("input_file_mode", "r",
                    "Kept for command-line compatibility with the reference: 'r' or 'rb'. Both read "
                    "the files as UTF-8 (see --skip_invalid_lines).")
flags.DEFINE_bool("do_whole_word_mask", True,
                  "Mask whole words: continuation pieces are grouped with the piece starting their word.")
flags.DEFINE_bool("do_permutation", False,
                  "Not supported: the reference's permutation targets double the length of the "
                  "masked_lm_* features, which run_pretraining cannot read. Setting it is an error.")
flags.DEFINE_bool("favor_shorter_ngram", True,
                  "n-gram length n drawn with p(n) proportional to 1/n; if false, the reversed "
                  "probabilities (longer n-grams more likely).")
flags.DEFINE_bool("random_next_sentence", False,
                  "False: sentence-order prediction (negatives = swapped segments; as in the "
                  "reference, a single-sentence chunk still takes segment B from a random document). "
                  "True: NSP-style negatives (segment B from a random document of the same chunk).")
flags.DEFINE_integer("ngram", 3, "Maximum number of words of a masked n-gram.")
flags.DEFINE_integer("random_seed", 12345,
                     "Seed of every random decision: the same input, seed, --chunk_documents and "
                     "output files give byte-identical output, whatever --num_workers.")
flags.DEFINE_integer("dupe_factor", 40,
                     "Number of passes over each chunk's documents, with different splits and masks.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of tokens to predict (before the cap).")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Per document and pass, probability of a random shorter target length.")
flags.DEFINE_integer("chunk_documents", 1000,
                     "Documents per chunk. The corpus is processed chunk by chunk: memory per worker "
                     "is about one chunk's tokens plus its records of all dupe_factor passes. Unlike "
                     "the reference (one corpus-wide shuffle), documents are shuffled, random-document "
                     "segments B drawn and instances shuffled within a chunk, so a corpus sorted by "
                     "topic should be shuffled by document first or use large chunks. Changing it "
                     "changes the output.")
flag_definitions.define("max_seq_length", "max_predictions_per_seq", "num_workers",
                        *flag_definitions.TOKENIZER_FLAGS)
flags.DEFINE_bool("skip_invalid_lines", False,
                  "Skip and count input lines that are not valid UTF-8 instead of stopping with an "
                  "error naming the file and line.")
flags.DEFINE_string("runner", None,
                    "Run as an Apache Beam pipeline on this runner (DirectRunner, DataflowRunner, "
                    "FlinkRunner, SparkRunner, ...) instead of local processes: the same output "
                    "bytes. Every other Beam pipeline option (--project, --region, --temp_location, "
                    "--flink_master, --direct_num_workers, ...) is passed on to Beam. Needs "
                    "`pip install -r requirements-beam.txt`.")
flag_definitions.check_ranges(
    ngram=flag_definitions.AT_LEAST_ONE, dupe_factor=flag_definitions.AT_LEAST_ONE,
    chunk_documents=flag_definitions.AT_LEAST_ONE, masked_lm_prob=flag_definitions.FRACTION,
    short_seq_prob=flag_definitions.FRACTION)


def _parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing, except that with --runner the flags it does not know are left in the
    returned arguments, as Beam pipeline options. Without --runner an unknown flag is an error."""
    try:
        remaining = FLAGS(argv, known_only=True)
    except flags.Error:
        remaining = None  # command_line.parse_flags reports it
    if remaining is None or not FLAGS.runner:
        return command_line.parse_flags(argv)
    return remaining


def _output_files() -> list[str]:
    return [path.strip() for path in (FLAGS.output_file or "").split(",") if path.strip()]


def _validate_flags() -> None:
    """Fails with a message naming the flag whenever a value cannot work."""
    checks = [
        (FLAGS.input_file, "--input_file is required"),
        (_output_files(), "--output_file is required (comma-separated TFRecord paths)"),
        (FLAGS.vocab_file or FLAGS.spm_model_file,
         "give --spm_model_file (SentencePiece) or --vocab_file (WordPiece)"),
        (not FLAGS.do_permutation,
         "--do_permutation is not supported: the reference's permutation targets double the "
         "masked_lm_* feature length, which run_pretraining cannot parse"),
        (FLAGS.input_file_mode in ("r", "rb"),
         f"--input_file_mode must be 'r' or 'rb', got {FLAGS.input_file_mode!r}"),
        (FLAGS.max_seq_length >= 5,
         f"--max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP]), got {FLAGS.max_seq_length}"),
    ]
    for ok, message in checks:
        if not ok:
            raise app.UsageError(message)


# --help and flag mistakes are answered here, before TensorFlow loads.
command_line.parse_before_imports(__name__, _parse_flags, checks=[_validate_flags])

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.files.paths import OutputPathError, expand_input_patterns  # noqa: E402
from albert_tf.files.run_files import Output, RunFiles, check_run_files, inputs  # noqa: E402
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from albert_tf.tokenization.model_files import TokenizerError  # noqa: E402
from data_prep.pretraining.chunks import ChunkProcessor, GenerationConfig  # noqa: E402
from data_prep.pretraining.corpus import CorpusError, check_local_text_files  # noqa: E402
from data_prep.pretraining.instances import (  # noqa: E402
    InstanceConfig, MaskingConfig, longest_whole_sentence)
from data_prep.pretraining.pipeline import generate_pretraining_data, stats_path  # noqa: E402
from data_prep.pretraining.stats import empty_outputs_warning, sentence_order_warning  # noqa: E402


def _generation_config() -> GenerationConfig:
    masking = MaskingConfig(masked_lm_prob=FLAGS.masked_lm_prob,
                            max_predictions_per_seq=FLAGS.max_predictions_per_seq, ngram=FLAGS.ngram,
                            favor_shorter_ngram=FLAGS.favor_shorter_ngram,
                            do_whole_word_mask=FLAGS.do_whole_word_mask)
    instance = InstanceConfig(max_seq_length=FLAGS.max_seq_length, short_seq_prob=FLAGS.short_seq_prob,
                              random_next_sentence=FLAGS.random_next_sentence, masking=masking)
    return GenerationConfig(instance=instance, dupe_factor=FLAGS.dupe_factor,
                            random_seed=FLAGS.random_seed, do_lower_case=FLAGS.do_lower_case)


def run_files(input_files: list[str], output_files: list[str]) -> RunFiles:
    """What the command reads (the text, the tokenizer) and writes (the records, the statistics
    file beside the first)."""
    read = inputs(*(("--input_file", path) for path in input_files),
                  ("--spm_model_file", FLAGS.spm_model_file), ("--vocab_file", FLAGS.vocab_file))
    written = tuple(Output("--output_file", path) for path in output_files)
    return RunFiles(read, written + (Output("the statistics file",
                                            stats_path(output_files[0])),))


def _beam_options(beam_args: list[str]):
    """The Beam pipeline options of --runner and ``beam_args`` (UsageError when unusable)."""
    try:
        # Beam warns on import about Google Cloud libraries it does not need here.
        with error_boundary.logger_levels({"": logging_module.ERROR}):
            from data_prep.common import beam_runner  # pylint: disable=import-outside-toplevel
    except ModuleNotFoundError as err:
        raise app.UsageError(f"--runner needs Apache Beam, which is not installed ({err}): "
                             "pip install -r requirements-beam.txt") from err
    try:
        return beam_runner.pipeline_options(FLAGS.runner, beam_args, FLAGS.num_workers,
                                            FLAGS["num_workers"].present)
    except (ValueError, ImportError) as err:
        raise app.UsageError(f"--runner={FLAGS.runner}: {err}") from err


def _run(beam_options) -> None:
    """Checks the paths, loads the tokenizer and writes the records and their statistics, on local
    processes or, given ``beam_options``, as a Beam pipeline."""
    input_files = expand_input_patterns(FLAGS.input_file)
    output_files = _output_files()
    check_run_files(run_files(input_files, output_files))
    check_local_text_files(input_files)
    tokenizer = FullTokenizer(vocab_file=None if FLAGS.spm_model_file else FLAGS.vocab_file,
                              do_lower_case=FLAGS.do_lower_case, spm_model_file=FLAGS.spm_model_file)
    processor = ChunkProcessor(tokenizer, _generation_config())
    logging.info("reading %d input files, writing %s%s", len(input_files), ", ".join(output_files),
                 f" (Beam {FLAGS.runner})" if beam_options else "")
    if beam_options is None:
        summary = generate_pretraining_data(
            input_files, output_files, processor, chunk_documents=FLAGS.chunk_documents,
            num_workers=FLAGS.num_workers, skip_invalid_lines=FLAGS.skip_invalid_lines)
    else:
        from data_prep.pretraining import beam  # pylint: disable=import-outside-toplevel
        summary = beam.write_with_beam(
            input_files, output_files, processor, FLAGS.chunk_documents, FLAGS.skip_invalid_lines,
            beam_options)
    logging.info("wrote %d instances (mean %.1f tokens, %.1f%% masked, %.1f%% sentence-order "
                 "label 1; %d of %d sentences longer than %d pieces, cut in every instance that "
                 "holds them); statistics in %s", summary["instances"], summary["mean_tokens"],
                 100 * summary["masked_fraction"], 100 * summary["sop_label1_fraction"],
                 summary["sentences_too_long"], summary["sentences"],
                 longest_whole_sentence(FLAGS.max_seq_length), stats_path(output_files[0]))
    for warning in (sentence_order_warning(summary, FLAGS.random_next_sentence),
                    empty_outputs_warning(summary["instances"], output_files)):
        if warning:
            logging.warning("%s", warning)


def main(argv: list[str]) -> None:
    beam_options = _beam_options(argv[1:]) if FLAGS.runner else None
    if FLAGS.spm_model_file and FLAGS.vocab_file:
        logging.info("--vocab_file is not used: --spm_model_file is given")
    # Every way the run can stop early ends in one line and leaves no output and no temporary file
    # (Ctrl-C and SIGTERM: the error boundary).
    try:
        _run(beam_options)
    except (CorpusError, TokenizerError, OutputPathError, OSError) as err:
        # A bad input is the user's to fix: its message, without a traceback, and exit status 1.
        raise SystemExit(f"create_pretraining_data: error: {err}") from err
    except BrokenProcessPool as err:
        raise SystemExit("create_pretraining_data: error: a worker process died (killed for "
                         "lack of memory?); nothing was written. Try fewer --num_workers or a "
                         "smaller --chunk_documents") from err


if __name__ == "__main__":
    error_boundary.run(main, flags_parser=_parse_flags, when_stopped="nothing was written")
