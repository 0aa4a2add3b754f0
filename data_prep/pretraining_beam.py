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
import logging
import os
import re
import sys
import tempfile
from typing import Any, Iterable, Iterator

import apache_beam as beam
import tensorflow as tf
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.portability.portable_runner import JobServiceHandle
from apache_beam.runners.runner import PipelineState

from albert_tf.io_utils import temporary_path
from data_prep.pretraining_chunks import ChunkProcessor
from data_prep.pretraining_corpus import CorpusError, CorpusReader, DocumentChunk
from data_prep.pretraining_pipeline import check_not_empty, run_summary, stats_path
from data_prep.pretraining_stats import GenerationStats
from data_prep.pretraining_writer import summary_json

DIRECT_RUNNER = "DirectRunner"
# What DirectRunner runs: Beam's DirectRunner would first try PrismRunner, which downloads a binary.
LOCAL_RUNNER = "FnApiRunner"
COUNTERS = "create_pretraining_data"  # namespace of the progress counters a runner's UI shows

# Loggers of the local runner that repeat a worker's error, which reaches the driver as the
# runner's exception anyway (CRITICAL: silent), and its workers' start-up chatter.
_ERROR_ECHOES = ("apache_beam.runners.common", "apache_beam.runners.worker.bundle_processor",
                 "apache_beam.runners.worker.sdk_worker",
                 "apache_beam.runners.portability.local_job_service")
_QUIET_WORKER_LOGGERS = {"__main__": "ERROR", "apache_beam.options.pipeline_options": "ERROR",
                         **{name: "CRITICAL" for name in _ERROR_ECHOES}}

# A user error raised on a worker reaches the driver as text: "<module.Class>: <message>
# [while running '<stage>']" inside the runner's own exception.
_WORKER_USER_ERROR = re.compile(
    r"^(?:[\w.]+\.)?(?:CorpusError|FileNotFoundError|PermissionError|NotFoundError|"
    r"PermissionDeniedError): (?P<message>.+?)(?: \[while running '[^']*'\])?$", re.MULTILINE)
_STAGE_SUFFIX = re.compile(r" \[while running '[^']*'\]$")


def pipeline_options(runner: str, beam_args: list[str], num_workers: int,
                     num_workers_given: bool) -> PipelineOptions:
    """Beam options for ``runner`` from the command line's remaining arguments ``beam_args``.

    DirectRunner: Beam's local runner (FnApiRunner), ``num_workers`` processes (multi-process mode
    when more than one), quiet worker logs. Other runners: ``num_workers`` is passed on when given
    (Dataflow's initial worker count). An option given in ``beam_args`` wins. Raises ValueError for
    an unknown runner or option, ImportError for a runner whose Beam extra is not installed.
    """
    is_direct = runner.lower() in ("direct", DIRECT_RUNNER.lower())
    runner = LOCAL_RUNNER if is_direct else runner
    beam.runners.create_runner(runner)  # fails now on a misspelt runner, not after the set-up
    given = PipelineOptions(beam_args)
    beam_logger = logging.getLogger("apache_beam.options.pipeline_options")
    previous_level = beam_logger.level
    beam_logger.setLevel(logging.ERROR)  # our message below replaces Beam's "Discarding ..." warning
    try:
        known = set(given.get_all_options())
        unknown = sorted(set(given.get_all_options(retain_unknown_options=True)) - known)
        explicit = given.get_all_options(drop_default=True)
    finally:
        beam_logger.setLevel(previous_level)
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join('--' + name for name in unknown)}: neither a "
                         "create_pretraining_data flag nor a Beam pipeline option")
    defaults: dict[str, Any] = {}
    if is_direct:
        defaults = {"direct_num_workers": num_workers,
                    "direct_running_mode": "multi_processing" if num_workers > 1 else "in_memory",
                    "default_sdk_harness_log_level": "WARNING",
                    "sdk_harness_log_level_overrides": _QUIET_WORKER_LOGGERS}
    elif num_workers_given:
        defaults = {"num_workers": num_workers}
    overrides = {name: value for name, value in defaults.items() if name not in explicit}
    return PipelineOptions(beam_args, runner=runner, **overrides)


def write_with_beam(input_files: list[str], output_files: list[str], processor: ChunkProcessor,
                    chunk_documents: int, skip_invalid_lines: bool,
                    options: PipelineOptions) -> dict[str, Any]:
    """Runs the pipeline to completion and renames its outputs; returns the statistics summary.

    Same arguments and result as ``pretraining_pipeline.generate_pretraining_data``, which writes the
    same bytes on one machine; ``options`` picks the runner and its settings.
    """
    targets = [stats_path(output_files[0])] + output_files
    with contextlib.ExitStack() as stack:
        # Renamed in reverse order on success: the outputs first, the statistics file last.
        stats_temporary, *output_temporaries = [stack.enter_context(temporary_path(path))
                                                for path in targets]
        runner = _runner(options)
        stack.enter_context(_quiet_beam_logs(local=runner is not None))
        if runner is not None:
            stack.enter_context(_stderr_shown_only_for_bugs())
        pipeline = beam.Pipeline(runner=runner, options=options)
        build_pipeline(pipeline, input_files, output_temporaries, stats_temporary, processor,
                       chunk_documents, skip_invalid_lines,
                       summary_settings=(input_files, output_files))
        _run_to_completion(pipeline)
        with tf.io.gfile.GFile(stats_temporary, "r") as handle:
            summary = json.load(handle)
        check_not_empty(summary["instances"], input_files)
    return summary


def _runner(options: PipelineOptions) -> beam.runners.PipelineRunner | None:
    """The local runner, given the options its worker processes read; None (the options' runner)
    for the others."""
    if options.view_as(StandardOptions).runner != LOCAL_RUNNER:
        return None
    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    return fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))


@contextlib.contextmanager
def _quiet_beam_logs(local: bool) -> Iterator[None]:
    """Within the block Beam does not log how it reads this module's type hints; the local runner
    logs warnings only, and no echo of a worker's error."""
    levels = {"apache_beam.typehints": logging.WARNING}
    if local:
        levels.update({"apache_beam": logging.WARNING,
                       **{name: logging.CRITICAL for name in _ERROR_ECHOES}})
    previous = {name: logging.getLogger(name).level for name in levels}
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, level in previous.items():
            logging.getLogger(name).setLevel(level)


@contextlib.contextmanager
def _stderr_shown_only_for_bugs() -> Iterator[None]:
    """Captures what is written to the standard error (file descriptor 2, which the local runner's
    worker processes inherit and print their errors' tracebacks on) within the block, and shows it
    afterwards only if the block raised an error that is not the user's (not a CorpusError)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        except CorpusError:
            raise
        except BaseException:
            sys.stderr.flush()
            captured.seek(0)
            os.write(saved, captured.read())
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


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


def _run_to_completion(pipeline: beam.Pipeline) -> None:
    """Runs ``pipeline`` and waits for it. A user error on a worker (a bad input line, a missing
    file) is raised again here as CorpusError with its message; an interrupt cancels a remote job."""
    result = None
    try:
        result = pipeline.run()
        state = result.wait_until_finish()
    except BaseException as error:
        if result is not None:
            with contextlib.suppress(Exception):
                result.cancel()
        message = _worker_user_error(error)
        if message is not None:
            raise CorpusError(message) from error
        raise
    if state != PipelineState.DONE:
        raise RuntimeError(f"the Beam pipeline ended in state {state}; nothing was written")


def _worker_user_error(error: BaseException) -> str | None:
    """The message of a user error raised on a worker, from the runner's exception; else None."""
    if isinstance(error, (CorpusError, OSError)):  # an in-process runner re-raises the same class
        return _STAGE_SUFFIX.sub("", str(error))
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        return None
    match = _WORKER_USER_ERROR.search(str(error))
    return match["message"] if match else None
