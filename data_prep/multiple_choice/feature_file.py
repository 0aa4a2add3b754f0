"""The RACE feature file of a split: its records plus a JSON sidecar, cached or written to a given path.

- ``race_feature_file``: the file run_race reads, in the shared feature cache
  (data_prep/common/feature_cache.py): reused only when its ``RaceFeatureSettings`` (with
  ``FEATURES_VERSION``), the tokenizer and the bytes of every file read are unchanged, else
  rebuilt.
- ``race_records_builder``: reads the sources and writes their records; the ``build`` callback of
  the cache and of ``python -m data_prep.race``, which writes to a given path.
- ``write_race_records``: one record per question (data_prep/multiple_choice/features.py) and the
  sidecar metadata: ``example_ids`` and ``levels`` per record in record order, ``num_examples`` per
  level, the numbers of skipped questions and articles, ``max_seq_length``, ``max_qa_length``.

Reading the articles and their rules: data_prep/multiple_choice/reader.py.
"""

from __future__ import annotations

import collections
from typing import Callable, Sequence

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.common.feature_cache import FeatureFile, RecordSink, cached_feature_file
from data_prep.common.progress import Progress
from data_prep.multiple_choice.features import RaceFeatureSettings, serialize_race_features
from data_prep.multiple_choice.reader import (LEVELS, RaceDataError, RaceExamples, RaceSource,
                                              convert_examples, race_sources, read_race_examples)


def write_race_records(sink: RecordSink, examples: RaceExamples, tokenizer: FullTokenizer,
                       settings: RaceFeatureSettings) -> dict:
    """Writes one record per example to ``sink``, logging the progress
    (data_prep/common/progress.py); returns the metadata of the file.

    Metadata: ``example_ids`` and ``levels`` (one entry per record, in record order), ``num_examples``
    per level, ``num_skipped_questions``, ``num_skipped_articles``, ``max_seq_length``, ``max_qa_length``.
    """
    progress = Progress("questions", "converted", total=len(examples.examples))
    for done, features in enumerate(convert_examples(examples.examples, tokenizer,
                                                     settings.max_seq_length,
                                                     settings.max_qa_length), start=1):
        sink.write(serialize_race_features(features))
        progress.update(done)
    progress.update(len(examples.examples), final=True)
    levels = [example.level for example in examples.examples]
    per_level = collections.Counter(levels)
    return {
        "example_ids": [example.example_id for example in examples.examples],
        "levels": levels,
        "num_examples": {level: per_level[level] for level in LEVELS},
        "num_skipped_questions": examples.num_skipped_questions,
        "num_skipped_articles": examples.num_skipped_articles,
        "max_seq_length": settings.max_seq_length,
        "max_qa_length": settings.max_qa_length,
    }


def race_records_builder(sources: Sequence[RaceSource], tokenizer: FullTokenizer,
                         settings: RaceFeatureSettings) -> Callable[[RecordSink], dict]:
    """The ``build`` callback of the feature-file writers: reads ``sources`` and writes their records."""
    def build(sink: RecordSink) -> dict:
        examples = read_race_examples(sources, use_spm=tokenizer.uses_sentencepiece,
                                      do_lower_case=tokenizer.do_lower_case,
                                      skip_invalid=settings.skip_invalid)
        if not examples.examples:
            raise RaceDataError(f"no valid questions in {[source.path for source in sources]}")
        return write_race_records(sink, examples, tokenizer, settings)
    return build


def race_feature_file(data_dir: str, split: str, tokenizer: FullTokenizer,
                      settings: RaceFeatureSettings, cache_dir: str) -> FeatureFile:
    """The records of ``split`` in ``cache_dir``: reused when nothing that determines them changed
    (settings, tokenizer, the bytes of the files read), else written (metadata: ``write_race_records``).

    Raises RaceDataError for missing or invalid data (see ``read_race_examples``).
    """
    sources = race_sources(data_dir, split, middle_only=settings.middle_only,
                           high_only=settings.high_only)
    return cached_feature_file(cache_dir, "race", split, settings, tokenizer.fingerprint,
                               [source.path for source in sources],
                               race_records_builder(sources, tokenizer, settings))
