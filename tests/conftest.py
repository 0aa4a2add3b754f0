"""Pytest fixtures shared by the test files (their constants and helpers: tests/shared_setup.py).

Tests that read the real test data (tests.shared_setup.SHARED_DATA_DIR) carry the marker
``requires_shared_data`` or use a fixture that calls ``require_shared_data()`` (``en8k``). Without the
data they are skipped, all with one message naming the directory and ALBERT_TF_SHARED_DATA; with the
environment variable CI set they fail instead, so CI always runs every test.
"""

from __future__ import annotations

import os

import pytest

# The tests read and edit SentencePiece models with sentencepiece's generated protobuf module, built
# for protobuf 7; apache-beam (requirements-beam.txt, installed for the tests) needs protobuf < 7.
# Protobuf's switch for this lets the generated module load on protobuf 6 (the product never
# imports it).
os.environ.setdefault("TEMPORARILY_DISABLE_PROTOBUF_VERSION_CHECK", "true")

# A pytest-xdist worker among as many as the machine has cores (scripts/test.sh: 2 on 2) gets one
# TensorFlow thread per pool, and so do the processes its tests start (they inherit the
# environment): with TensorFlow's default of a thread per core in each worker, the workers' threads
# outnumber the cores and spend CPU time waiting on each other (a 78-test sample took 8% less CPU).
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")) >= (os.cpu_count() or 1):
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from tests import command_runner, spm_fixtures
from tests.shared_setup import EN8K_MODEL, require_shared_data, shared_data_missing


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``requires_shared_data``: skipped (or failed in CI) before their fixtures run.
    tests/command_runner.py learns whether the test is marked ``subprocess`` (only those may start
    a command in a process of its own)."""
    command_runner.current_test_marked = item.get_closest_marker("subprocess") is not None
    if item.get_closest_marker("requires_shared_data") is not None:
        require_shared_data()


def pytest_terminal_summary(terminalreporter) -> None:
    """One line saying how many tests were skipped for want of the shared data, and what to do."""
    reason = shared_data_missing()
    if reason is None:
        return
    skipped = sum(1 for report in terminalreporter.stats.get("skipped", [])
                  if isinstance(report.longrepr, tuple) and reason in report.longrepr[2])
    if skipped:
        terminalreporter.write_line(f"{skipped} skipped: {reason}", yellow=True)


def harness_run_users(tests_dir: str) -> set[str]:
    """The test files (names in ``tests_dir``) that ask for the ``task_runs`` fixture."""
    return {name for name in os.listdir(tests_dir)
            if name.startswith("test_") and name.endswith(".py")
            and "task_runs" in open(os.path.join(tests_dir, name), encoding="utf-8").read()}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``--dist loadfile`` (scripts/test.sh), the files that read the harness's task runs
    go to one worker as one unit: each run (15-60 s of training, predicting and exporting) is then
    made once per suite, not once in each worker that has a file asking for it. Every other file
    is its own unit, as loadfile makes it."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    users = harness_run_users(os.path.dirname(__file__))

    class HarnessRunsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "the harness's task runs" if os.path.basename(path) in users else path

    return HarnessRunsTogether(config, log)


@pytest.fixture(scope="session")
def pretraining_records(tmp_path_factory) -> str:
    """Pretraining records made from the bundled corpus (spm_fixtures.write_pretraining_records):
    the shared reference records' settings (S 128, M 20) without the shared data."""
    return spm_fixtures.write_pretraining_records(tmp_path_factory.mktemp("records") / "train.tfrecord")


@pytest.fixture(scope="session")
def nsp_pretraining_records(tmp_path_factory) -> str:
    """NSP records of the same corpus and settings (create_pretraining_data
    --random_next_sentence): negatives take segment B from a random document."""
    return spm_fixtures.write_pretraining_records(
        tmp_path_factory.mktemp("nsp_records") / "train.tfrecord", random_next_sentence=True)


@pytest.fixture(scope="session")
def en8k() -> FullTokenizer:
    """The en8k SentencePiece tokenizer with lowercasing, as the reference's scripts run it."""
    require_shared_data()
    return FullTokenizer(spm_model_file=EN8K_MODEL, do_lower_case=True)


@pytest.fixture(scope="session")
def task_runs(tmp_path_factory):
    """The per-task harness's runs (tests/task_harness.py), each made once per session when a test
    first asks for it: ``task_runs.get("race")``."""
    from tests.task_harness import TaskRuns

    return TaskRuns(tmp_path_factory.mktemp)
