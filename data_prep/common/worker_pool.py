"""The one process pool of data preparation: ``ordered_map`` applies a function to a stream of tasks
in worker processes and yields the results in task order.

Every job that fans work out to processes (pretraining chunks, SQuAD questions) goes through it, so
they all get the same guarantees:

- Output independent of the number of workers: results come back in submission order.
- Bounded memory: at most ``num_workers + 2`` tasks are in flight (taken from ``tasks`` and not yet
  handed back, the result being consumed included), however long the stream.
- Per-process set-up: ``make_worker()`` builds the function that a process applies to its tasks
  (e.g. loads a tokenizer into a converter), once per worker process, on its first task. Workers
  are forked (Linux): ``make_worker`` and what it refers to are inherited, not pickled (a closure
  is fine); tasks and results are pickled.
- Workers never outlive this process: they die with it even when it is killed with SIGKILL
  (prctl PR_SET_PDEATHSIG on Linux, else a thread watching the parent). They ignore Ctrl-C (SIGINT
  reaches the whole process group) and get SIGTERM's default action: stopping is this process's
  decision, not each worker's. They are forked with SIGINT and SIGTERM blocked, and unblock them
  only once their own handlers are set: a Ctrl-C or a stop landing while a worker starts must not
  run this process's handlers in the worker (a traceback on the terminal, a broken pool).
- Stopping early: an exception raised by a worker (``make_worker`` included) is raised again here,
  the same type with the same message, the worker's traceback as its ``__cause__``; that, an
  exception or interrupt in this process, or the caller closing the generator terminates the
  workers at once instead of letting them finish tasks whose results nobody will read. A worker
  that dies (e.g. killed for lack of memory) makes the generator raise BrokenProcessPool.
- ``num_workers == 1`` runs in this process, without any child.

A caller that may stop before the end of the results should close the generator
(``contextlib.closing``): an exception raised in the caller's own loop keeps the generator alive in
its traceback, and with it the workers, until the exception is handled.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from typing import Callable, Iterable, Iterator, TypeVar

Task = TypeVar("Task")
Result = TypeVar("Result")


# Tasks in flight beyond one per worker: one waiting in the queue and one being consumed.
_EXTRA_IN_FLIGHT = 2


_PR_SET_PDEATHSIG = 1  # Linux prctl option: the signal this process gets when its parent ends


# In a worker process: what builds its function, installed when the pool starts the process, and
# the function itself, built on the first task.
_make_worker: Callable[[], Callable] | None = None
_worker_function: Callable | None = None


def ordered_map(make_worker: Callable[[], Callable[[Task], Result]], tasks: Iterable[Task],
                num_workers: int) -> Iterator[Result]:
    """``make_worker()(task)`` for every task, in task order, computed by ``num_workers`` processes
    (see the module doc). The workers are forked from the thread that takes the first result; they
    die when that thread ends, so it must outlive the generator."""
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    if num_workers == 1:
        yield from map(make_worker(), tasks)
        return
    # A worker that dies makes .result() raise BrokenProcessPool instead of hanging. With "fork",
    # the executor starts all workers from this thread, in the first submit, before any thread of
    # its own.
    executor = concurrent.futures.ProcessPoolExecutor(
        num_workers, mp_context=multiprocessing.get_context("fork"), initializer=_start_worker,
        initargs=(make_worker, os.getpid()))
    stopped = False
    try:
        pending: collections.deque[concurrent.futures.Future] = collections.deque()
        for task in tasks:
            with _stop_signals_blocked():  # the first submit forks the workers
                pending.append(executor.submit(_run_task, task))
            if len(pending) >= num_workers + _EXTRA_IN_FLIGHT:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BaseException:  # an error, an interrupt, or the consumer stopped early (GeneratorExit)
        stopped = True
        _terminate_workers(executor)
        raise
    finally:
        # After a stop the workers are gone: the executor's own shutdown is not waited for (an
        # interrupt landing inside the executor's bookkeeping could leave it waiting forever).
        executor.shutdown(wait=not stopped, cancel_futures=True)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _stop_signals_blocked() -> Iterator[None]:
    """Blocks SIGINT and SIGTERM in this thread for the block, so that processes forked in it start
    with them blocked; one that arrived meanwhile is handled here when the block ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _terminate_workers(executor: concurrent.futures.ProcessPoolExecutor,
                       grace_seconds: float = 5.0) -> None:
    """Sends SIGTERM to the pool's live workers and waits for them to end (SIGKILL after
    ``grace_seconds``), so that stopping never waits for their tasks. ProcessPoolExecutor has no
    public way to do this before Python 3.14."""
    processes = list((executor._processes or {}).values())
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(grace_seconds)
        if process.is_alive():
            process.kill()
            process.join(grace_seconds)


def _start_worker(make_worker: Callable[[], Callable], parent_pid: int) -> None:
    """Pool initializer: ties the worker's life to the parent's, leaves Ctrl-C and SIGTERM to the
    parent (SIGINT ignored, SIGTERM's default action whatever handler the parent had when it
    forked) and keeps ``make_worker`` for the first task. ``make_worker`` runs in a task, not here,
    so that its exceptions reach the parent with their message (the executor reports an
    initializer's exception only as a broken pool)."""
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # Forked with both blocked (_stop_signals_blocked): a SIGINT sent meanwhile is now discarded, a
    # SIGTERM ends the worker.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    global _make_worker
    _make_worker = make_worker


def _run_task(task):
    global _worker_function
    if _worker_function is None:
        _worker_function = _make_worker()
    return _worker_function(task)


def _die_with_parent(parent_pid: int) -> None:
    """Ends this worker when its parent ends, whatever ended it (kill -9 included).

    Linux: the kernel sends SIGKILL (prctl PR_SET_PDEATHSIG). It fires when the parent thread that
    forked the worker ends (see ``ordered_map``). Elsewhere, or if prctl fails, a thread watches the
    parent once a second.
    """
    on_linux = sys.platform.startswith("linux")
    if not on_linux or ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    if os.getppid() != parent_pid:  # the parent ended before the line above took effect
        os._exit(1)


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(1)
