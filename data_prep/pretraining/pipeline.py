"""Runs the pretraining-data generator over a corpus: chunks of documents are processed in parallel
worker processes and their records written in chunk order, so the output bytes do not depend on the
number of workers.

Memory: at most ``num_workers + 2`` chunks are in flight (read, processed or waiting to be written);
each holds its documents' tokens and the serialized records of all ``dupe_factor`` passes.
Workers are forked from this process (Linux), so they share the loaded tokenizer and modules and
never run TensorFlow; only this process reads (tf.io.gfile) and writes TFRecords. Workers never
outlive this process: they die with it even when it is killed with SIGKILL, they leave Ctrl-C and
SIGTERM to it, and when the run stops early (an error, an interrupt) they are stopped at once
instead of finishing chunks that nobody will write.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import ctypes
import dataclasses
import multiprocessing
import os
import signal
import sys
import threading
import time
from typing import Any, Iterable, Iterator

from absl import logging

from albert_tf.files.paths import STATISTICS_SUFFIX
from data_prep.pretraining.chunks import ChunkProcessor, ChunkResult, GenerationConfig
from data_prep.pretraining.corpus import CorpusError, CorpusReader, DocumentChunk
from data_prep.pretraining.stats import GenerationStats
from data_prep.pretraining.writer import RoundRobinRecordWriter, write_json

PROGRESS_INTERVAL_S = 5.0


_PR_SET_PDEATHSIG = 1  # Linux prctl option: the signal this process gets when its parent ends


# The processor of a worker process, installed once when the pool starts it.
_worker_processor: ChunkProcessor | None = None


def stats_path(output_file: str) -> str:
    """Where the run's JSON summary goes: beside the first output file."""
    return output_file + STATISTICS_SUFFIX


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(1)


def _die_with_parent(parent_pid: int) -> None:
    """Ends this worker when its parent ends, whatever ended it (kill -9 included).

    Linux: the kernel sends SIGKILL (prctl PR_SET_PDEATHSIG). It fires when the parent thread that
    forked the worker ends: the pool forks from the thread that runs generate_pretraining_data,
    which outlives the pool. Elsewhere, or if prctl fails, a thread watches the parent once a second.
    """
    on_linux = sys.platform.startswith("linux")
    if not on_linux or ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    if os.getppid() != parent_pid:  # the parent ended before the line above took effect
        os._exit(1)


def _start_worker(processor: ChunkProcessor, parent_pid: int) -> None:
    """Pool initializer: ties the worker's life to the parent's and installs the processor.

    Ctrl-C (SIGINT, sent to the whole process group) is ignored: the parent stops the workers.
    SIGTERM gets its default action (end), whatever handler the parent had when it forked.
    """
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    global _worker_processor
    _worker_processor = processor


def _process_in_worker(chunk: DocumentChunk) -> ChunkResult:
    return _worker_processor.process(chunk)


def _ordered_results(chunks: Iterable[DocumentChunk], processor: ChunkProcessor,
                     num_workers: int) -> Iterator[ChunkResult]:
    """Results of ``processor.process`` over ``chunks``, in chunk order; ``num_workers`` processes."""
    if num_workers == 1:
        yield from map(processor.process, chunks)
        return
    # A worker that dies (e.g. killed for memory) makes .result() raise BrokenProcessPool instead of
    # hanging. With "fork", the executor starts all workers from this thread, in the first submit,
    # before any thread of its own.
    executor = concurrent.futures.ProcessPoolExecutor(
        num_workers, mp_context=multiprocessing.get_context("fork"), initializer=_start_worker,
        initargs=(processor, os.getpid()))
    try:
        pending: collections.deque = collections.deque()
        for chunk in chunks:
            pending.append(executor.submit(_process_in_worker, chunk))
            if len(pending) >= num_workers + 2:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BaseException:  # an error, an interrupt, or the consumer stopped early (GeneratorExit)
        _terminate_workers(executor)
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def _terminate_workers(executor: concurrent.futures.ProcessPoolExecutor) -> None:
    """Sends SIGTERM to the pool's live workers, so that shutting it down does not wait for their
    chunks. ProcessPoolExecutor has no public way to do this before Python 3.14."""
    for process in list((executor._processes or {}).values()):
        process.terminate()


class _Progress:
    """Logs documents read, instances written and the rate, at most every PROGRESS_INTERVAL_S."""

    def __init__(self):
        self._start = self._last = time.monotonic()

    def update(self, documents: int, instances: int, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self._last < PROGRESS_INTERVAL_S:
            return
        self._last = now
        elapsed = max(now - self._start, 1e-9)
        logging.info("%s%d documents read, %d instances written, %.0f instances/s",
                     "done: " if final else "", documents, instances, instances / elapsed)


def generate_pretraining_data(input_files: list[str], output_files: list[str], processor: ChunkProcessor,
                              chunk_documents: int, num_workers: int = 1,
                              skip_invalid_lines: bool = False) -> dict[str, Any]:
    """Writes the records of the whole corpus and its statistics; returns the statistics summary.

    input_files: text files (one sentence per line, blank line between documents); output_files:
    TFRecord paths, records written round-robin; the summary goes to ``stats_path(output_files[0])``.
    """
    reader = CorpusReader(input_files, skip_invalid_lines)
    stats = GenerationStats()
    progress = _Progress()
    results = _ordered_results(reader.chunks(chunk_documents), processor, num_workers)
    # Closed before the writer exits, so that on an error the workers stop first.
    with RoundRobinRecordWriter(output_files) as writer, contextlib.closing(results):
        for result in results:
            for record in result.records:
                writer.write(record)
            stats.merge(result.stats)
            progress.update(reader.documents_read, stats.instances)
        check_not_empty(stats.instances, input_files)
    progress.update(reader.documents_read, stats.instances, final=True)
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
