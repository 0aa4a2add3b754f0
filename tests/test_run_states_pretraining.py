"""Rerunning a command never undoes its work: run_pretraining's commands (with export_hub's and
convert_checkpoint's) on its run directory in each state (tests/run_states.py: the states, the
commands, the contract)."""

import pytest

from tests import run_states


@pytest.fixture(scope="module")
def states(tmp_path_factory):
    return run_states.RunStates(tmp_path_factory)


@pytest.mark.parametrize("cell",
                         run_states.cells(lambda case: case.script == "run_pretraining.py"))
def test_a_command_on_a_run_directory_keeps_its_work(cell, states):
    states.check(cell)


def test_a_sweep_on_other_evaluation_records_evaluates_every_checkpoint_afresh(states, tmp_path):
    """The run manifest records the evaluation records of a pretraining sweep: a rerun of
    --do_eval on the same records evaluates nothing new, on other records (a copy under another
    name) every checkpoint again, and the manifest then names the new records."""
    import json
    import shutil

    from tests.task_cases import TASKS_BY_NAME
    from tests.task_harness import only_actions

    case = TASKS_BY_NAME["pretraining"]
    output_dir = tmp_path / "out"
    shutil.copytree(states.state(case, "newest").output_dir, output_dir, symlinks=True)
    flags = {**only_actions(case, states.full_flags(case), "do_eval"),
             "output_dir": str(output_dir), "max_eval_wait_secs": "5"}
    blocks = lambda: (output_dir / "eval_results.txt").read_text().count("global_step = ")  # noqa: E731
    evaluated = blocks()
    same = run_states.run(case.script, flags)
    assert same.returncode == 0, run_states.shown(same)
    assert blocks() == evaluated
    other = tmp_path / "held_out.tfrecord"
    shutil.copy(flags["eval_input_file"], other)
    again = run_states.run(case.script, {**flags, "eval_input_file": str(other)})
    assert again.returncode == 0, run_states.shown(again)
    assert blocks() == 2 and "Evaluated" in again.stdout
    sweep = json.loads((output_dir / "run_manifest.json").read_text())["sweeps"][""]
    assert str(other) in sweep["eval_data"][""]
