"""create_pretraining_data as an Apache Beam pipeline: the single-machine command's output, byte for
byte, computed by any Beam runner (DirectRunner, Dataflow, Flink, Spark) over many machines.

The stages, each parallel over its elements:

1. read: each input file -> its documents, numbered within the file, and its document count;
2. chunk: the counts give each file's first corpus-wide document number g0; document g goes to chunk
   ``g // chunk_documents``: the chunks, and chunk indices, of the single-machine command;
3. process: ``ChunkProcessor.process`` (seeded by --random_seed and the chunk index) -> the chunk's
   records and statistics;
4. place: the record counts give each chunk's first corpus-wide record number k0; record k goes to
   output file ``k % n`` at position ``k // n``, as the single-machine round-robin writer puts it
   (a chunk's records are split by j % n in stage 3, so each part goes whole to one file);
5. write: each output file's records, in chunk order, to the temporary name the driver chose; the
   statistics of every chunk, summed by a combiner, to the statistics file's temporary name.

The driver (``write_with_beam``) renames the temporaries to the outputs when the whole pipeline
succeeded and removes them otherwise, so no output is ever half-written.

Memory: a worker holds one chunk (stages 2-3, as a single-machine worker does) or, while writing,
one output file's records. Choose enough output files for one to fit in a worker's memory.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Iterable, Iterator

import apache_beam as beam
import tensorflow as tf
from apache_beam.options.pipeline_options import PipelineOptions

from albert_tf.files.atomic import temporary_path
from data_prep.common.beam_runner import (check_paths_reach_workers, is_local, new_pipeline,
                                          quiet_beam_logs, run_to_completion)
from data_prep.pretraining.chunks import ChunkProcessor
from data_prep.pretraining.corpus import CorpusError, CorpusReader, DocumentChunk
from data_prep.pretraining.pipeline import check_not_empty, run_summary, stats_path
from data_prep.pretraining.stats import GenerationStats
from data_prep.pretraining.writer import summary_json

COUNTERS = "create_pretraining_data"  # namespace of the progress counters a runner's UI shows
# Errors of a worker that are the user's to fix (a bad input line, a missing or unreadable file).
_WORKER_USER_ERRORS = ("CorpusError", "UserFileError", "MissingFileError", "FileNotFoundError",
                       "PermissionError", "NotFoundError", "PermissionDeniedError")


def write_with_beam(input_files: list[str], output_files: list[str], processor: ChunkProcessor,
                    chunk_documents: int, skip_invalid_lines: bool,
                    options: PipelineOptions) -> dict[str, Any]:
    """Runs the pipeline to completion and renames its outputs; returns the statistics summary.

    Same arguments and result as ``generate_pretraining_data`` (data_prep/pretraining/pipeline.py),
    which writes the same bytes on one machine; ``options`` (``pipeline_options``) pick the runner.
    """
    check_paths_reach_workers(
        options, [("--input_file", path) for path in input_files]
        + [("--output_file", path) for path in output_files])
    targets = [stats_path(output_files[0])] + output_files
    local = is_local(options)
    with contextlib.ExitStack() as stack:
        # Renamed in reverse order on success: the outputs first, the statistics file last.
        stats_temporary, *output_temporaries = [stack.enter_context(temporary_path(path))
                                                for path in targets]
        stack.enter_context(quiet_beam_logs(local))
        pipeline = new_pipeline(options)
        build_pipeline(pipeline, input_files, output_temporaries, stats_temporary, processor,
                       chunk_documents, skip_invalid_lines,
                       summary_settings=(input_files, output_files))
        run_to_completion(pipeline, local, CorpusError, _WORKER_USER_ERRORS)
        with tf.io.gfile.GFile(stats_temporary, "r") as handle:
            summary = json.load(handle)
        check_not_empty(summary["instances"], input_files)
    return summary


def build_pipeline(pipeline: beam.Pipeline, input_files: list[str], output_paths: list[str],
                   stats_file: str, processor: ChunkProcessor, chunk_documents: int,
                   skip_invalid_lines: bool, summary_settings: tuple[list[str], list[str]]) -> None:
    """Adds the stages to ``pipeline``: records to ``output_paths``, statistics JSON to ``stats_file``.

    ``summary_settings``: the input and output files the statistics file names (the final paths,
    while ``output_paths`` may be temporary names).
    """
    read = (pipeline
            | "ListFiles" >> beam.Create(list(enumerate(input_files)))
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadDocuments" >> beam.ParDo(_ReadDocuments(skip_invalid_lines)).with_outputs(
                _ReadDocuments.COUNTS, main="documents"))
    file_counts = read[_ReadDocuments.COUNTS]
    first_documents = beam.pvalue.AsSingleton(
        file_counts
        | "DocumentCounts" >> beam.Map(lambda counts: (counts[0], counts[1]))
        | "FirstDocuments" >> _FirstNumbers())
    chunks = (read.documents
              | "KeyByChunk" >> beam.Map(_key_by_chunk, first_documents, chunk_documents)
              | "GroupChunks" >> beam.GroupByKey()
              | "AssembleChunks" >> beam.MapTuple(_assemble_chunk))
    num_files = len(output_paths)
    results = chunks | "ProcessChunks" >> beam.ParDo(_ProcessChunk(processor, num_files)).with_outputs(
        _ProcessChunk.PARTS, main="summaries")

    first_records = beam.pvalue.AsSingleton(
        results.summaries
        | "RecordCounts" >> beam.MapTuple(lambda index, count, stats: (index, count))
        | "FirstRecords" >> _FirstNumbers())
    every_file = pipeline | "ListOutputs" >> beam.Create([(index, None) for index in range(num_files)])
    placed = results[_ProcessChunk.PARTS] | "PlaceParts" >> beam.Map(_place_part, first_records,
                                                                     num_files)
    _ = ((placed, every_file)
         | "AllParts" >> beam.Flatten()
         | "GroupByFile" >> beam.GroupByKey()
         | "WriteFiles" >> beam.Map(_write_output_file, output_paths))

    skipped = file_counts | "SkippedLines" >> beam.MapTuple(
        lambda index, documents, invalid: GenerationStats(invalid_lines_skipped=invalid))
    chunk_stats = results.summaries | "ChunkStats" >> beam.MapTuple(lambda index, count, stats: stats)
    settings = (processor.config, chunk_documents, *summary_settings)
    _ = ((chunk_stats, skipped)
         | "AllStats" >> beam.Flatten()
         | "SumStats" >> beam.CombineGlobally(_SumStats())
         | "WriteStats" >> beam.Map(_write_stats, stats_file, settings))


class _ReadDocuments(beam.DoFn):
    """(file index, path) -> (file index, document number in the file, document), and on the output
    ``COUNTS``: (file index, documents, invalid lines skipped)."""

    COUNTS = "counts"

    def __init__(self, skip_invalid_lines: bool):
        self._skip_invalid_lines = skip_invalid_lines
        self._documents = beam.metrics.Metrics.counter(COUNTERS, "documents_read")

    def process(self, element: tuple[int, str]) -> Iterator[Any]:
        file_index, path = element
        reader = CorpusReader([path], self._skip_invalid_lines)
        for number, document in enumerate(reader.documents()):
            yield file_index, number, document
        self._documents.inc(reader.documents_read)
        yield beam.pvalue.TaggedOutput(
            self.COUNTS, (file_index, reader.documents_read, reader.invalid_lines_skipped))


class _FirstNumbers(beam.PTransform):
    """(index, count) pairs -> one dict: index -> sum of the counts of all smaller indices."""

    def expand(self, counts):
        return (counts
                | "Collect" >> beam.combiners.ToList()
                | "PrefixSums" >> beam.Map(_prefix_sums))


def _prefix_sums(counts: list[tuple[int, int]]) -> dict[int, int]:
    first, total = {}, 0
    for index, count in sorted(counts):
        first[index] = total
        total += count
    return first


def _key_by_chunk(element: tuple[int, int, list[str]], first_documents: dict[int, int],
                  chunk_documents: int) -> tuple[int, tuple[int, list[str]]]:
    file_index, number, document = element
    position = first_documents[file_index] + number  # in the whole corpus
    return position // chunk_documents, (position, document)


def _assemble_chunk(index: int, documents: Iterable[tuple[int, list[str]]]) -> DocumentChunk:
    return DocumentChunk(index, [document for _, document in sorted(documents, key=_first)])


def _first(pair: tuple) -> Any:
    return pair[0]


class _ProcessChunk(beam.DoFn):
    """DocumentChunk -> (chunk index, number of records, GenerationStats), and on the output
    ``PARTS``: (chunk index, r, the records j with j % num_files == r, in order) for each r.

    Record j of the chunk will be record k0 + j of the run (k0: the records of all earlier chunks),
    so part r goes whole to output file (k0 + r) % num_files.
    """

    PARTS = "parts"

    def __init__(self, processor: ChunkProcessor, num_files: int):
        self._processor = processor
        self._num_files = num_files
        self._chunks = beam.metrics.Metrics.counter(COUNTERS, "chunks_processed")
        self._instances = beam.metrics.Metrics.counter(COUNTERS, "instances")

    def process(self, chunk: DocumentChunk) -> Iterator[Any]:
        result = self._processor.process(chunk)
        self._chunks.inc()
        self._instances.inc(len(result.records))
        for residue in range(min(self._num_files, len(result.records))):
            yield beam.pvalue.TaggedOutput(
                self.PARTS, (chunk.index, residue, result.records[residue::self._num_files]))
        yield chunk.index, len(result.records), result.stats


def _place_part(part: tuple[int, int, list[bytes]], first_records: dict[int, int],
                num_files: int) -> tuple[int, tuple[int, list[bytes]]]:
    """(chunk index, r, records) -> (output file, (chunk index, records))."""
    index, residue, records = part
    return (first_records[index] + residue) % num_files, (index, records)


def _write_output_file(grouped: tuple[int, Iterable[tuple[int, list[bytes]] | None]],
                       output_paths: list[str]) -> None:
    """Writes one output file: its parts in chunk order (``None`` marks a file with no part)."""
    file_index, parts = grouped
    with tf.io.TFRecordWriter(output_paths[file_index]) as writer:
        for _, records in sorted((part for part in parts if part is not None), key=_first):
            for record in records:
                writer.write(record)


class _SumStats(beam.CombineFn):
    """Adds GenerationStats: the counters are sums, so the result is independent of the order."""

    def create_accumulator(self) -> GenerationStats:
        return GenerationStats()

    def add_input(self, total: GenerationStats, stats: GenerationStats) -> GenerationStats:
        total.merge(stats)
        return total

    def merge_accumulators(self, totals: Iterable[GenerationStats]) -> GenerationStats:
        merged = GenerationStats()
        for total in totals:
            merged.merge(total)
        return merged

    def extract_output(self, total: GenerationStats) -> GenerationStats:
        return total


def _write_stats(stats: GenerationStats, path: str, settings: tuple) -> None:
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(summary_json(run_summary(stats, *settings)))
