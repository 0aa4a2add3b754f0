"""Rerunning a command never undoes its work: run_classifier's commands on its run directory in
each state (tests/run_states.py: the states, the commands, the contract)."""

import pytest

from tests import run_states


@pytest.fixture(scope="module")
def states(tmp_path_factory):
    return run_states.RunStates(tmp_path_factory)


@pytest.mark.parametrize("cell", run_states.cells(lambda case: case.script == "run_classifier.py"))
def test_a_command_on_a_run_directory_keeps_its_work(cell, states):
    states.check(cell)
