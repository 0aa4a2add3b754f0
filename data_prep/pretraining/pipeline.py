"""Runs the pretraining-data generator over a corpus: chunks of documents are processed in parallel
worker processes (``data_prep.common.worker_pool``) and their records written in chunk order, so the
output bytes do not depend on the number of workers.

Memory: at most ``num_workers + 2`` chunks are in flight (read, processed or waiting to be written);
each holds its documents' tokens and the serialized records of all ``dupe_factor`` passes.
Workers are forked from this process, so they share the loaded tokenizer and modules and never run
TensorFlow; only this process reads (tf.io.gfile) and writes TFRecords. As every worker of the pool,
they die with this process even when it is killed with SIGKILL, they leave Ctrl-C and SIGTERM to
it, and when the run stops early (an error, an interrupt) they are stopped at once instead of
finishing chunks that nobody will write.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from albert_tf.files.paths import STATISTICS_SUFFIX
from data_prep.common.progress import Progress
from data_prep.common.worker_pool import ordered_map
from data_prep.pretraining.chunks import ChunkProcessor, GenerationConfig
from data_prep.pretraining.corpus import CorpusError, CorpusReader
from data_prep.pretraining.stats import GenerationStats
from data_prep.pretraining.writer import RoundRobinRecordWriter, write_json


def stats_path(output_file: str) -> str:
    """Where the run's JSON summary goes: beside the first output file."""
    return output_file + STATISTICS_SUFFIX


def generate_pretraining_data(input_files: list[str], output_files: list[str], processor: ChunkProcessor,
                              chunk_documents: int, num_workers: int = 1,
                              skip_invalid_lines: bool = False) -> dict[str, Any]:
    """Writes the records of the whole corpus and its statistics; returns the statistics summary.

    input_files: text files (one sentence per line, blank line between documents); output_files:
    TFRecord paths, records written round-robin; the summary goes to ``stats_path(output_files[0])``.
    """
    reader = CorpusReader(input_files, skip_invalid_lines)
    stats = GenerationStats()
    progress = Progress("instances", "written")

    def documents_read() -> str:
        return f"{reader.documents_read} documents read"

    results = ordered_map(lambda: processor.process, reader.chunks(chunk_documents), num_workers)
    # Closed before the writer exits, so that on an error the workers stop first.
    with RoundRobinRecordWriter(output_files) as writer, contextlib.closing(results):
        for result in results:
            for record in result.records:
                writer.write(record)
            stats.merge(result.stats)
            progress.update(stats.instances, documents_read)
        check_not_empty(stats.instances, input_files)
    progress.update(stats.instances, documents_read, final=True)
    stats.invalid_lines_skipped = reader.invalid_lines_skipped
    summary = run_summary(stats, processor.config, chunk_documents, input_files, output_files)
    write_json(stats_path(output_files[0]), summary)
    return summary


def check_not_empty(instances: int, input_files: list[str]) -> None:
    """Raises CorpusError when the corpus gave no instance at all."""
    if instances == 0:
        more = len(input_files) - 3
        shown = ", ".join(input_files[:3]) + (f" and {more} more" if more > 0 else "")
        raise CorpusError(f"no documents in {shown}: every line is blank or empty "
                          "after cleaning (expected one sentence per line, blank lines between "
                          "documents)")


def run_summary(stats: GenerationStats, config: GenerationConfig, chunk_documents: int,
                input_files: list[str], output_files: list[str]) -> dict[str, Any]:
    """The statistics file's content: ``stats.summary()`` plus the run's settings."""
    summary = stats.summary()
    summary["settings"] = {**dataclasses.asdict(config), "chunk_documents": chunk_documents,
                           "input_files": input_files, "output_files": output_files}
    return summary
