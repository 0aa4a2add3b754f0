"""The worker pool of data preparation (data_prep/common/worker_pool.py): results in task order, at
most num_workers + 2 tasks in flight, one make_worker() per process, worker errors raised here with
their message, workers stopped at once when the run stops early, in-process run for one worker;
and, for the SQuAD converter, that kill -9 of the parent leaves no worker behind. Real processes,
bounded waits."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool

import pytest

from albert_tf.cli import error_boundary
from data_prep.common import worker_pool
from data_prep.common.worker_pool import ordered_map
from data_prep.question_answering.examples import SquadDataError
from tests.shared_setup import (EN8K_MODEL, REPO_ROOT, SHARED_DATA_DIR, child_pids, is_alive,
                                subprocess_env, wait_for, write_repeated_squad)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks, reads /proc")

SQUAD_DIR = os.path.join(SHARED_DATA_DIR, "squad")
SQUAD_SAMPLES = [os.path.join(SQUAD_DIR, name)
                 for name in ("dev-v1.1-sample.json", "dev-v2.0-sample.json")]


def started_workers(children_before: set[int]) -> set[int]:
    """The child processes of this process that were not there before (the pool's workers)."""
    return set(child_pids(os.getpid())) - children_before


def make_square_worker():
    return lambda task: task * task


def make_slow_worker(seconds):
    """Workers that sleep ``seconds(task)`` then return (task, their pid)."""

    def make_worker():
        def work(task):
            time.sleep(seconds(task))
            return task, os.getpid()
        return work

    return make_worker


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_results_come_in_task_order(num_workers):
    # Tasks take different times: a pool that yielded results as they finish would reorder them.
    results = list(ordered_map(make_slow_worker(lambda task: 0.002 * (task % 5)), range(40),
                               num_workers))
    assert [task for task, _ in results] == list(range(40))


@pytest.mark.parametrize("num_workers", [1, 2])
def test_at_most_num_workers_plus_two_tasks_in_flight(num_workers):
    taken = []

    def tasks():
        for task in range(30):
            taken.append(task)
            yield task

    for received, (task, _) in enumerate(ordered_map(make_slow_worker(lambda task: 0.001), tasks(),
                                                     num_workers), start=1):
        assert task == received - 1
        assert len(taken) - received + 1 <= num_workers + 2  # the one received is in flight too
    assert len(taken) == 30


def test_make_worker_runs_once_per_worker_process():
    def make_worker():
        built_in = os.getpid()
        tasks_done = itertools.count()

        def work(task):
            time.sleep(0.01)
            return os.getpid(), built_in, next(tasks_done)
        return work

    results = list(ordered_map(make_worker, range(40), 2))
    pids = {pid for pid, _, _ in results}
    assert len(pids) == 2 and os.getpid() not in pids
    for pid in pids:
        built_in, counts = zip(*[(built, count) for p, built, count in results if p == pid])
        assert set(built_in) == {pid}  # built in the worker, not inherited from this process
        assert list(counts) == list(range(len(counts)))  # one function for all its tasks


def test_one_worker_runs_in_this_process():
    made = []

    def make_worker():
        made.append(os.getpid())
        return lambda task: (task, os.getpid())

    assert list(ordered_map(make_worker, range(5), 1)) == [(task, os.getpid()) for task in range(5)]
    assert made == [os.getpid()]


def test_fewer_than_one_worker_is_refused():
    with pytest.raises(ValueError, match="num_workers must be >= 1, got 0"):
        next(ordered_map(make_square_worker, range(3), 0))


def test_a_ctrl_c_landing_while_a_worker_starts_does_not_reach_it(monkeypatch):
    """A worker runs this process's signal handlers until its initializer replaces them: a Ctrl-C
    in that window (here sent by each worker to itself first thing) raised KeyboardInterrupt in the
    initializer, printed its traceback and broke the pool. Forked with the signal blocked, the
    worker discards it once it ignores SIGINT."""
    start_worker_process = worker_pool._die_with_parent

    def start_interrupted(parent_pid):
        os.kill(os.getpid(), signal.SIGINT)
        start_worker_process(parent_pid)

    monkeypatch.setattr(worker_pool, "_die_with_parent", start_interrupted)
    # Python's own Ctrl-C handler, as in a command (a pytest-xdist worker ignores SIGINT).
    previous_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        results = list(ordered_map(make_square_worker, range(8), 2))
    finally:
        signal.signal(signal.SIGINT, previous_handler)
    assert results == [task * task for task in range(8)]
    # This process blocks the signals again no longer than it takes to fork.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert signal.SIGINT not in blocked and signal.SIGTERM not in blocked


def failing_worker(fail_at: int, in_make_worker: bool = False):
    """Workers whose task ``fail_at`` raises a user error (or whose make_worker does); the tasks
    after it sleep a minute, so that only stopping the workers ends the run in time."""

    def make_worker():
        if in_make_worker:
            raise SquadDataError(f"cannot build a worker in process {os.getpid()}")

        def work(task):
            if task == fail_at:
                raise SquadDataError(f"question q-{task}: answer covers no piece")
            time.sleep(60 if task > fail_at else 0.01)
            return task
        return work

    return make_worker


def test_worker_error_is_raised_here_with_its_message_and_stops_the_others():
    start, children_before = time.monotonic(), set(child_pids(os.getpid()))
    results = ordered_map(failing_worker(fail_at=5), range(20), 2)
    assert next(results) == 0
    workers = started_workers(children_before)
    assert len(workers) == 2
    with pytest.raises(SquadDataError) as raised:
        list(results)
    assert str(raised.value) == "question q-5: answer covers no piece"
    # The command line shows the one line of a user error, not the remote traceback.
    assert error_boundary.user_error_message(raised.value) == "question q-5: answer covers no piece"
    assert "raise SquadDataError" in str(raised.value.__cause__)  # the worker's traceback
    assert not any(map(is_alive, workers))
    assert time.monotonic() - start < 30  # the sleeping tasks were not waited for


def test_make_worker_error_is_raised_here_with_its_message():
    with pytest.raises(SquadDataError, match=r"^cannot build a worker in process \d+$") as raised:
        list(ordered_map(failing_worker(fail_at=-1, in_make_worker=True), range(4), 2))
    assert int(str(raised.value).rsplit(" ", 1)[1]) != os.getpid()


def test_closing_the_results_early_stops_the_workers():
    start, children_before = time.monotonic(), set(child_pids(os.getpid()))
    results = ordered_map(make_slow_worker(lambda task: 60 if task > 0 else 0), range(10), 2)
    assert next(results)[0] == 0
    workers = started_workers(children_before)
    assert len(workers) == 2
    results.close()
    assert not any(map(is_alive, workers))
    assert time.monotonic() - start < 30


def test_a_worker_that_dies_raises_broken_process_pool():
    def make_worker():
        return lambda task: os._exit(3)

    with pytest.raises(BrokenProcessPool):
        list(ordered_map(make_worker, range(4), 2))


# --- SQuAD conversion: kill -9 of the parent ------------------------------------------------------

# Converts a SQuAD file (argv[1]) with en8k (argv[2]) in two workers, each given one chunk of half
# the questions: many seconds of work, so a worker that merely finished its task after its parent's
# death would outlive it for that long.
CONVERT_IN_TWO_CHUNKS = """
import sys
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.question_answering.examples import read_squad_examples
from data_prep.question_answering.features import SquadFeatureSettings, convert_questions
source, model = sys.argv[1:]
examples = read_squad_examples(source, is_training=False)
tokenizer = FullTokenizer(spm_model_file=model, do_lower_case=True)
for _ in convert_questions(examples, tokenizer.sp_model, True, SquadFeatureSettings(),
                           num_workers=2, chunk_questions=len(examples) // 2):
    pass
"""


@pytest.mark.subprocess  # kill -9
@pytest.mark.requires_shared_data
def test_kill_9_of_the_squad_converter_ends_its_workers_at_once(tmp_path):
    source = tmp_path / "squad.json"
    assert write_repeated_squad(SQUAD_SAMPLES, source, copies=1000) == 22000  # about 10 s per chunk, one core
    process = subprocess.Popen(
        [sys.executable, "-c", CONVERT_IN_TWO_CHUNKS, str(source), EN8K_MODEL], cwd=REPO_ROOT,
        env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    workers = []
    try:
        workers = wait_for(lambda: len(child_pids(process.pid)) == 2 and child_pids(process.pid),
                           120, "two worker processes")
        assert process.poll() is None  # still converting
        process.kill()
        assert process.wait(timeout=30) == -signal.SIGKILL
        wait_for(lambda: not any(map(is_alive, workers)), 5, "the workers to end with their parent")
    finally:
        for pid in (process.pid, *workers):  # only if the test failed: nothing may outlive it
            if is_alive(pid):
                os.kill(pid, signal.SIGKILL)
        process.wait(timeout=30)
