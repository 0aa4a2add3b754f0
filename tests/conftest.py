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
