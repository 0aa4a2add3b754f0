"""Rerunning a command never undoes its work: the commands of every other task (run_ner,
run_squad, run_race, and any new entry of the task table) on its run directory in each state
(tests/run_states.py: the states, the commands, the contract)."""

import pytest

from tests import run_states

OWN_FILES = ("run_classifier.py", "run_pretraining.py")  # (test_run_states_<name>.py)


@pytest.fixture(scope="module")
def states(tmp_path_factory):
    return run_states.RunStates(tmp_path_factory)


@pytest.mark.parametrize("cell", run_states.cells(lambda case: case.script not in OWN_FILES))
def test_a_command_on_a_run_directory_keeps_its_work(cell, states):
    states.check(cell)


def test_every_script_has_its_states_tested():
    """Every training script has an entry in the task table whose run directory's states are
    tested (an entry is unless it sets ``states=False``)."""
    from tests.task_cases import TASKS
    from tests.test_task_contract import test_every_script_is_in_the_harness

    test_every_script_is_in_the_harness()
    assert {case.script for case in TASKS if case.states} == {case.script for case in TASKS}
