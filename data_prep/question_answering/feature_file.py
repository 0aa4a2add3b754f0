"""The SQuAD feature file: a SQuAD JSON file -> a feature file (TFRecord + JSON sidecar).

The features are the reference's (data_prep/question_answering/features.py: windows, max-context
map, p_mask, labels, unique ids from 1000000000) with its character alignment
(data_prep/question_answering/alignment.py), in the input's question order. Unlike the reference,
which logs "MISMATCH DETECTED!" and silently drops a question whose paragraph does not align, the
dropped questions are counted, logged and listed in the sidecar (post-processing still writes a
prediction for them: no features, so v1 "empty" and v2 ""). The reader's checks (repeated question
ids, SQuAD 2.0 questions read as v1.1, training answers not found at their answer_start:
data_prep/question_answering/examples.py) run before any conversion; the training questions it
skips are listed in the sidecar too.

Sidecar metadata (``FeatureFile.metadata``)::

    is_training, max_seq_length, doc_stride, max_query_length, do_lower_case
    num_questions, num_features
    dropped_qas_ids       ids of the questions without features, in file order
    skipped_qas_ids       training questions left out because their answer text is not found at
                          answer_start (data_prep/question_answering/examples.py), in file order
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

API: ``squad_feature_file`` (the cached file run_squad reads, in the shared feature cache
data_prep/common/feature_cache.py, keyed by its ``SquadFeatureSettings``),
``write_squad_feature_file`` (to a given path; the command ``python -m data_prep.squad``),
``build_squad_features`` (the builder both use). Both read the file as their settings say
(training or not, the SQuAD version accepted, the shuffle).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
from typing import Sequence

from absl import logging

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.common.feature_cache import (FeatureFile, RecordSink, cached_feature_file,
                                            write_feature_file)
from data_prep.common.progress import Progress
from data_prep.question_answering.examples import (SquadDataError, SquadExample, SquadQuestions,
                                                   read_squad_questions)
from data_prep.question_answering.features import (FIRST_UNIQUE_ID, SquadFeatureSettings,
                                                   convert_questions, with_unique_id)


def _sentencepiece_model(tokenizer: FullTokenizer):
    if tokenizer.sp_model is None:
        raise SquadDataError(f"SQuAD features need a SentencePiece model (--spm_model_file); "
                             f"{tokenizer.source_file} is a WordPiece vocabulary")
    return tokenizer.sp_model


def _eval_examples_metadata(examples: Sequence[SquadExample]) -> dict:
    """The paragraphs (each once) and the per-question fields post-processing reads."""
    positions: dict[int, int] = {}  # the reader's paragraph index -> position in ``paragraphs``
    paragraphs: list[str] = []
    rows = []
    for example in examples:
        position = positions.setdefault(example.paragraph_index, len(paragraphs))
        if position == len(paragraphs):
            paragraphs.append(example.paragraph_text)
        rows.append({"qas_id": example.qas_id, "paragraph_index": position,
                     "answers": list(example.answers)})
    return {"paragraphs": paragraphs, "examples": rows}


def build_squad_features(sink: RecordSink, questions: SquadQuestions, tokenizer: FullTokenizer,
                         settings: SquadFeatureSettings, num_workers: int = 1) -> dict:
    """Writes every feature record of the questions' examples to ``sink`` in question order, with
    the reference's unique ids; returns the sidecar metadata (see the module doc)."""
    is_training = settings.is_training
    examples = questions.examples
    features: list[dict] = []
    dropped: list[str] = []
    unique_id = FIRST_UNIQUE_ID
    progress = Progress("questions", "converted", total=len(examples))

    def counts() -> str:
        return f"{unique_id - FIRST_UNIQUE_ID} features, {len(dropped)} dropped"

    converted = convert_questions(examples, _sentencepiece_model(tokenizer), tokenizer.do_lower_case,
                                  settings, num_workers, with_metadata=not is_training)
    # Closed on the way out, so that an error or Ctrl-C while writing stops the workers at once.
    with contextlib.closing(converted):
        for done, question in enumerate(converted, start=1):
            if question.windows is None:
                qas_id = examples[question.example_index].qas_id
                logging.warning("question %s dropped: its paragraph does not align with its pieces "
                                "(the reference's MISMATCH DETECTED)", qas_id)
                dropped.append(qas_id)
            for record, metadata in question.windows or ():
                sink.write(with_unique_id(record, unique_id))
                if metadata is not None:
                    features.append({"unique_id": unique_id, **metadata})
                unique_id += 1
            progress.update(done, counts)
    progress.update(len(examples), counts, final=True)
    metadata = {
        "is_training": is_training, "max_seq_length": settings.max_seq_length,
        "doc_stride": settings.doc_stride, "max_query_length": settings.max_query_length,
        "do_lower_case": tokenizer.do_lower_case, "num_questions": len(examples),
        "num_features": unique_id - FIRST_UNIQUE_ID, "dropped_qas_ids": dropped,
        "skipped_qas_ids": questions.skipped_qas_ids,
    }
    if not is_training:
        metadata.update(_eval_examples_metadata(examples), features=features)
    return metadata


def read_questions(input_file: str, settings: SquadFeatureSettings) -> SquadQuestions:
    """The questions of ``input_file`` read as ``settings`` say (training or not, the SQuAD version
    accepted), shuffled with ``random.Random(settings.shuffle_seed)`` unless it is None."""
    questions = read_squad_questions(input_file, settings.is_training,
                                     settings.version_2_with_negative)
    if settings.shuffle_seed is not None:
        random.Random(settings.shuffle_seed).shuffle(questions.examples)
    return questions


def write_squad_feature_file(input_file: str, output_file: str, tokenizer: FullTokenizer,
                             settings: SquadFeatureSettings = SquadFeatureSettings(),
                             num_workers: int = 1) -> FeatureFile:
    """Features of a SQuAD JSON file written to ``output_file`` (+ ``.json`` sidecar), atomically
    (the file is read and checked before any previous output is replaced)."""
    questions = read_questions(input_file, settings)
    return write_feature_file(
        output_file,
        lambda sink: build_squad_features(sink, questions, tokenizer, settings, num_workers))


def squad_feature_file(input_file: str, tokenizer: FullTokenizer, settings: SquadFeatureSettings,
                       cache_dir: str, num_workers: int = 1) -> FeatureFile:
    """The cached feature file of a SQuAD JSON file: reused when its input file, tokenizer and
    ``settings`` are unchanged, else rebuilt (data_prep/common/feature_cache.py).

    Every setting is part of the cache key: a file built for one SQuAD version is never reused
    unchecked for the other. ``settings.shuffle_seed``: the reference shuffles its training
    questions (seed 12345), so that the small shuffle buffer of the training input does not see
    the questions of one paragraph together.
    """
    split = ("train" if settings.is_training else "eval") + "-" + re.sub(
        r"[^A-Za-z0-9_.-]", "_", os.path.basename(input_file))

    def build(sink: RecordSink) -> dict:
        return build_squad_features(sink, read_questions(input_file, settings), tokenizer,
                                    settings, num_workers)

    return cached_feature_file(cache_dir, "squad", split, settings, tokenizer.fingerprint,
                               [input_file], build)
