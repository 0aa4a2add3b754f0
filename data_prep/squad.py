"""TODO(split) SQuAD v1.1 / v2.0 data preparation: a SQuAD JSON file -> a feature file (TFRecord + JSON sidecar).

The features are the reference's (``squad_features``: windows, max-context map, p_mask, labels,
unique ids from 1000000000) with its character alignment (``squad_alignment``), in the input's
question order. Unlike the reference, which logs "MISMATCH DETECTED!" and silently drops a question
whose paragraph does not align, the dropped questions are counted, logged and listed in the sidecar
(post-processing still writes a prediction for them: no features, so v1 "empty" and v2 "").

Sidecar metadata (``FeatureFile.metadata``)::

    is_training, max_seq_length, doc_stride, max_query_length, do_lower_case
    num_questions, num_features
    dropped_qas_ids       ids of the questions without features, in file order
    eval files only (what post-processing needs, so it never re-reads the input):
    paragraphs            [raw context text]
    examples              per question, in file order (example_index = position):
                          {qas_id, paragraph_index, answers: [gold answer texts]}
    features              per record, in file order: {unique_id, example_index, doc_span_index,
                          doc_offset, paragraph_len, tok_start_to_orig_index,
                          tok_end_to_orig_index, token_is_max_context}: the reference's fields
                          (token_is_max_context: {"input position": bool}, one per piece of the
                          window), plus doc_offset, the input position of the window's first piece

Training files carry no per-question or per-feature lists (their labels are in the records), which
keeps memory bounded by a chunk of questions however large the file.

API: ``squad_feature_file`` (the cached file run_squad reads), ``write_squad_feature_file`` (to a
given path), ``build_squad_features`` (the builder both use); the readers and converters are
re-exported from their modules. Command line::

    python -m data_prep.squad --input_file=dev-v2.0.json --output_file=dev.tfrecord \\
        --spm_model_file=30k-clean.model --do_lower_case --max_seq_length=384 --doc_stride=128 \\
        --max_query_length=64 --nois_training [--num_workers=2]
"""

from __future__ import annotations

import os
import time
from typing import Sequence

from absl import flags

from albert_tf.cli import error_boundary, flag_definitions
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.model_files import TokenizerError
from data_prep.common.feature_cache import FeatureCacheError, sidecar_path
from data_prep.question_answering.examples import SquadDataError
from data_prep.question_answering.feature_file import write_squad_feature_file

# -- command line ------------------------------------------------------------------------------------

FLAGS = flags.FLAGS


def _define_flags() -> None:
    flags.DEFINE_string("input_file", None, "SQuAD v1.1 or v2.0 JSON file.")
    flags.DEFINE_string("output_file", None, "Feature TFRecord to write; its sidecar is "
                        "<output_file>.json.")
    flags.DEFINE_bool("is_training", False, "Training features: one answer per answerable question, "
                      "records with start_positions, end_positions and is_impossible.")
    flag_definitions.define("spm_model_file", "do_lower_case", "max_seq_length", "doc_stride",
                            "max_query_length", "num_workers", max_seq_length=384,
                            num_workers=os.cpu_count() or 1)
    flags.mark_flags_as_required(["input_file", "output_file", "spm_model_file"])


def main(argv: Sequence[str]) -> None:
    if len(argv) > 1:
        raise SystemExit(f"squad: error: unexpected arguments: {' '.join(argv[1:])}")
    start = time.time()
    try:
        tokenizer = FullTokenizer(spm_model_file=FLAGS.spm_model_file,
                                  do_lower_case=FLAGS.do_lower_case)
        features = write_squad_feature_file(
            FLAGS.input_file, FLAGS.output_file, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride,
            FLAGS.max_query_length, FLAGS.is_training, FLAGS.num_workers)
    except (SquadDataError, TokenizerError, FeatureCacheError, OSError) as err:
        # A bad input is the user's to fix: its message, without a traceback, and exit status 1.
        raise SystemExit(f"squad: error: {err}") from err
    metadata = features.metadata
    seconds = time.time() - start
    dropped = metadata["dropped_qas_ids"]
    print(f"questions: {metadata['num_questions']}  features: {features.num_records}  "
          f"dropped (paragraph does not align): {len(dropped)}"
          + (f" ({', '.join(dropped[:10])}{', ...' if len(dropped) > 10 else ''})" if dropped else ""))
    print(f"records: {features.path}\nsidecar: {sidecar_path(features.path)}")
    print(f"{seconds:.1f} s, {metadata['num_questions'] / max(seconds, 1e-9):.0f} questions/s")


if __name__ == "__main__":
    _define_flags()
    error_boundary.run(main)
