"""Command line: SQuAD v1.1 / v2.0 data preparation: a SQuAD JSON file -> a feature file (TFRecord +
JSON sidecar) at a given path.

    python -m data_prep.squad --input_file=dev-v2.0.json --output_file=dev.tfrecord \\
        --spm_model_file=30k-clean.model --do_lower_case --max_seq_length=384 --doc_stride=128 \\
        --max_query_length=64 --nois_training --version_2_with_negative [--num_workers=2]

Writes ``<output_file>`` and ``<output_file>.json`` and prints the numbers of questions, features
and dropped questions (a paragraph that does not align with its pieces), of training questions
skipped (answer text not found at answer_start), and the speed. A bad input (a repeated question
id; an unanswerable question without --version_2_with_negative) is one line
``squad: error: ...`` and exit status 1, before any conversion. (run_squad.py does not need this
command: it builds the same file in its feature cache.)

This module holds the flags and the wiring only. The library is data_prep/question_answering/: the
reader (examples.py), the alignment (alignment.py), the features (features.py), the feature file
and its sidecar (feature_file.py).
"""

from __future__ import annotations

import os
import time
from typing import Sequence

from absl import flags

from albert_tf.cli import command_line, flag_checks, flag_definitions

# -- command line ------------------------------------------------------------------------------------

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "SQuAD v1.1 or v2.0 JSON file.")
flags.DEFINE_string("output_file", None, "Feature TFRecord to write; its sidecar is "
                    "<output_file>.json.")
flags.DEFINE_bool("is_training", False, "Training features: one answer per answerable question, "
                  "records with start_positions, end_positions and is_impossible.")
flag_definitions.define("spm_model_file", "do_lower_case", "max_seq_length", "doc_stride",
                        "max_query_length", "version_2_with_negative", "num_workers",
                        max_seq_length=384, num_workers=os.cpu_count() or 1)
flags.mark_flags_as_required(["input_file", "output_file", "spm_model_file"])

# --help, flag mistakes and room for the question in a window: before TensorFlow loads
command_line.parse_before_imports(__name__, checks=[flag_checks.require_room_for_the_question])

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.files.run_files import Output, RunFiles, check_run_files, inputs  # noqa: E402
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from data_prep.common.feature_cache import sidecar_path  # noqa: E402
from data_prep.question_answering.feature_file import write_squad_feature_file  # noqa: E402
from data_prep.question_answering.features import SquadFeatureSettings  # noqa: E402


def _some(qas_ids: Sequence[str]) -> str:
    """The first ten ids as " (id, id, ...)", or "" when there is none."""
    if not qas_ids:
        return ""
    return f" ({', '.join(qas_ids[:10])}{', ...' if len(qas_ids) > 10 else ''})"


def main(argv: Sequence[str]) -> None:
    del argv
    start = time.time()
    settings = SquadFeatureSettings(FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.max_query_length,
                                    FLAGS.is_training,
                                    version_2_with_negative=FLAGS.version_2_with_negative)
    tokenizer = FullTokenizer(spm_model_file=FLAGS.spm_model_file,
                              do_lower_case=FLAGS.do_lower_case)
    features = write_squad_feature_file(FLAGS.input_file, FLAGS.output_file, tokenizer, settings,
                                        FLAGS.num_workers)
    metadata = features.metadata
    seconds = time.time() - start
    dropped, skipped = metadata["dropped_qas_ids"], metadata["skipped_qas_ids"]
    print(f"questions: {metadata['num_questions']}  features: {features.num_records}  "
          f"dropped (paragraph does not align): {len(dropped)}{_some(dropped)}")
    if skipped:
        print(f"skipped {len(skipped)} training questions whose answer text is not found at "
              f"answer_start{_some(skipped)}")
    print(f"records: {features.path}\nsidecar: {sidecar_path(features.path)}")
    print(f"{seconds:.1f} s, {metadata['num_questions'] / max(seconds, 1e-9):.0f} questions/s")


def run_files() -> RunFiles:
    """What the command reads (the SQuAD file, the tokenizer) and writes (--output_file and its
    sidecar)."""
    output = FLAGS.output_file
    return RunFiles(inputs(("--input_file", FLAGS.input_file),
                           ("--spm_model_file", FLAGS.spm_model_file)),
                    (Output("--output_file", output), Output("its sidecar", sidecar_path(output))))


if __name__ == "__main__":
    error_boundary.run(main, checks=[lambda: check_run_files(run_files())])
