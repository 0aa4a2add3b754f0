"""The progress lines of the data commands (data_prep/common/progress.py): their cadence on a
controlled clock, and the counts that data_prep.glue, data_prep.race and data_prep.squad log on
stderr for the shared samples, against the records they write."""

from __future__ import annotations

import logging
import os
import re
import types

import pytest

from data_prep.common import progress
from tests.command_runner import SHOW_INFO, run_command
from tests.shared_setup import EN8K_MODEL, GLUE_DIR, SHARED_DATA_DIR

_LINE = re.compile(r"\] (done: )?(\d+)/(\d+) (\w+) converted(, [^\n]*)?, \d+ \4/s$", re.MULTILINE)


def test_a_line_every_interval_and_one_at_the_end(monkeypatch, caplog):
    ticks = iter(range(100))  # the clock advances one second at each reading
    monkeypatch.setattr(progress, "time", types.SimpleNamespace(monotonic=lambda: next(ticks)))
    details = []

    def detail() -> str:
        details.append(len(details))
        return "3 dropped"

    counter = progress.Progress("questions", "converted", total=12)  # started at second 0
    with caplog.at_level(logging.INFO):
        for done in range(1, 13):  # at seconds 1 .. 12
            counter.update(done, detail)
        counter.update(12, detail, final=True)  # at second 13
    assert [record.getMessage() for record in caplog.records] == [
        "5/12 questions converted, 3 dropped, 1 questions/s",
        "10/12 questions converted, 3 dropped, 1 questions/s",
        "done: 12/12 questions converted, 3 dropped, 1 questions/s"]
    assert len(details) == 3  # asked for the lines logged only


COMMANDS = {
    "glue": ("-m data_prep.glue", "--task_name=WNLI", f"--data_dir={GLUE_DIR}",
             f"--spm_model_file={EN8K_MODEL}", "--cached_dir={tmp}", "--max_seq_length=128",
             "--splits=dev"),
    "race": ("-m data_prep.race", f"--data_dir={os.path.join(SHARED_DATA_DIR, 'race')}",
             "--split=dev", f"--spm_model_file={EN8K_MODEL}", "--output_file={tmp}/race.tfrecord",
             "--max_seq_length=128", "--max_qa_length=32"),
    "squad": ("-m data_prep.squad",
              f"--input_file={os.path.join(SHARED_DATA_DIR, 'squad', 'dev-v2.0-sample.json')}",
              "--output_file={tmp}/squad.tfrecord", f"--spm_model_file={EN8K_MODEL}",
              "--version_2_with_negative", "--num_workers=1"),
}


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("command, noun, total", [
    ("glue", "examples", 70), ("race", "questions", 31), ("squad", "questions", 14)])
def test_a_conversion_logs_every_count_on_stderr(tmp_path, monkeypatch, command, noun, total):
    # No interval: every converted example or question logs its line, so each count shows.
    monkeypatch.setattr(progress, "PROGRESS_INTERVAL_S", 0.0)
    program, *arguments = COMMANDS[command]
    result = run_command(program, SHOW_INFO,
                         *(argument.format(tmp=tmp_path) for argument in arguments))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = _LINE.findall(result.stderr)
    assert {line[3] for line in lines} == {noun} and {line[2] for line in lines} == {str(total)}
    assert [(final, int(done)) for final, done, *_ in lines] == (
        [("", done) for done in range(1, total + 1)] + [("done: ", total)])
    assert str(total) in result.stdout  # as many records as the last line counted
