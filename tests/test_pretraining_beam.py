"""create_pretraining_data --runner=DirectRunner (data_prep/pretraining/beam.py and
data_prep/common/beam_runner.py) against the single-machine command: the same bytes in every output
file and the same statistics file, whatever the runner's parallelism; bad input and bad options as
clear errors; Beam imported only when asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from absl import app

import data_prep.common
from data_prep.common import beam_runner
from tests import spm_fixtures
from tests.command_runner import run_command, run_subprocess
from tests.shared_setup import REPO_ROOT, subprocess_env
from tests.test_create_pretraining_data import (bundled_documents, parsed_flags,  # noqa: F401
                                                read_records, run_cli, write_corpus)

# A tiny SentencePiece model and the bundled corpus (bundled_documents): no shared test data needed.
SPM_MODEL = spm_fixtures.cached_tiny_spm()
SETTINGS = dict(spm_model_file=SPM_MODEL, max_seq_length=64, max_predictions_per_seq=10,
                dupe_factor=2, random_seed=3)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    """Three files of 110, 75 and 1 documents (chunks of 40 cross the file ends); the last line of
    the second file is not UTF-8."""
    directory = tmp_path_factory.mktemp("corpus")
    documents = bundled_documents(186)
    write_corpus(directory / "part-0.txt", documents[:110])
    second = write_corpus(directory / "part-1.txt", documents[110:185])
    with open(second, "ab") as handle:
        handle.write(b"\nbroken \xff\xfe line\n")
    write_corpus(directory / "part-2.txt", documents[185:])
    return str(directory / "part-*.txt")


def last_line_number(path: str) -> int:
    with open(path, "rb") as handle:
        return len(handle.read().splitlines())


def run_and_read(output_files: list[str], beam_args: tuple[str, ...] = (),
                 **flag_values) -> tuple[list[bytes], str]:
    """Runs the command; returns every output file's bytes and the statistics file's text, then
    removes them so that the next run writes the same paths."""
    run_cli(beam_args, output_file=",".join(output_files), **flag_values)
    contents = []
    for path in output_files:
        with open(path, "rb") as handle:
            contents.append(handle.read())
        os.remove(path)
    stats_file = output_files[0] + ".stats.json"
    with open(stats_file, encoding="utf-8") as handle:
        stats = handle.read()
    os.remove(stats_file)
    return contents, stats


@pytest.mark.parametrize("runner, beam_workers, beam_args", [
    ("DirectRunner", 1, ()),  # in this process
    ("DirectRunner", 2, ()),  # two worker processes
    # Through a job service and the portable worker harness, as Flink and Spark run it.
    ("PortableRunner", 1, ("--job_endpoint=embed", "--environment_type=LOOPBACK")),
])
def test_beam_writes_the_bytes_of_the_single_machine_command(corpus, tmp_path, runner, beam_workers,
                                                              beam_args):
    outputs = [str(tmp_path / f"train-{index}.tfrecord") for index in range(3)]
    flag_values = dict(SETTINGS, input_file=corpus, chunk_documents=40, skip_invalid_lines=True)
    expected, expected_stats = run_and_read(outputs, num_workers=2, **flag_values)
    written, stats = run_and_read(outputs, beam_args, runner=runner, num_workers=beam_workers,
                                  **flag_values)

    assert [len(content) for content in written] == [len(content) for content in expected]
    assert written == expected
    assert stats == expected_stats
    summary = json.loads(stats)
    assert summary["invalid_lines_skipped"] == 1 and summary["documents"] == 186
    assert summary["settings"]["chunk_documents"] == 40
    assert summary["instances"] > 500
    assert os.listdir(tmp_path) == []  # no temporary file left


def test_output_files_without_records_are_written_empty_as_on_one_machine(tmp_path):
    corpus = write_corpus(tmp_path / "one.txt", [["A first sentence here.", "And a second one."]])
    outputs = [str(tmp_path / "out" / f"o-{index}.tfrecord") for index in range(6)]
    flag_values = dict(SETTINGS, input_file=corpus, dupe_factor=1)
    expected, expected_stats = run_and_read(outputs, **flag_values)
    written, stats = run_and_read(outputs, runner="DirectRunner", **flag_values)
    assert written == expected and stats == expected_stats
    assert b"" in written and any(written)


def test_the_statistics_are_the_sum_over_chunks(corpus, tmp_path):
    """The combiner's statistics describe the records written (not only equal the other path's)."""
    outputs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    run_cli(output_file=",".join(outputs), input_file=corpus, chunk_documents=40,
            skip_invalid_lines=True, runner="DirectRunner", **SETTINGS)
    with open(outputs[0] + ".stats.json", encoding="utf-8") as handle:
        summary = json.load(handle)
    counts = [len(read_records(path)) for path in outputs]
    assert sum(counts) == summary["instances"] and abs(counts[0] - counts[1]) <= 1
    assert sum(summary["sentence_pairs"].values()) == summary["instances"]


@pytest.mark.slow  # Beam's worker processes, about 15 s
@pytest.mark.subprocess  # Beam's workers report the error to the command's process
def test_invalid_utf8_is_an_error_naming_file_and_line_and_nothing_is_written(corpus, tmp_path):
    out_dir = tmp_path / "out"
    completed = run_subprocess(
        "-m data_prep.create_pretraining_data", f"--input_file={corpus}",
        f"--output_file={out_dir / 'a.tfrecord'},{out_dir / 'b.tfrecord'}",
        f"--spm_model_file={SPM_MODEL}", "--max_seq_length=64", "--dupe_factor=1",
        "--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing",
        timeout=300)
    assert completed.returncode == 1, completed.stderr
    bad_file = corpus.replace("*", "1")
    error_lines = [line for line in completed.stderr.splitlines()
                   if line.startswith("create_pretraining_data")]
    assert error_lines == [
        f"create_pretraining_data: error: {bad_file}, line {last_line_number(bad_file)}: not valid "
        "UTF-8 (invalid start byte at byte 7 of the line); fix the file or pass --skip_invalid_lines"]
    assert "Traceback" not in completed.stderr
    assert os.listdir(out_dir) == []


def test_empty_corpus_is_an_error_and_writes_nothing(tmp_path):
    corpus = tmp_path / "empty.txt"
    corpus.write_text("\n \n\n", encoding="utf-8")
    out_dir = tmp_path / "out"
    with pytest.raises(SystemExit, match="no documents"):
        run_cli(input_file=str(corpus), output_file=str(out_dir / "o.tfrecord"), runner="DirectRunner",
                **SETTINGS)
    assert os.listdir(out_dir) == []


@pytest.mark.parametrize("runner, beam_args, message", [
    ("NoSuchRunner", [], "Unexpected pipeline runner: NoSuchRunner"),
    ("DirectRunner", ["--no_such_option=1"], "unknown option(s) --no_such_option"),
])
def test_bad_runner_or_option_is_a_usage_error(tmp_path, runner, beam_args, message):
    with pytest.raises(app.UsageError, match=f"--runner={runner}: .*{message}".replace("(", r"\(")
                       .replace(")", r"\)")):
        run_cli(beam_args, runner=runner, input_file=str(tmp_path / "none.txt"),
                               output_file=str(tmp_path / "o.tfrecord"), **SETTINGS)


def test_dataflow_refuses_local_paths_before_any_work(tmp_path):
    corpus = write_corpus(tmp_path / "c.txt", bundled_documents(5))
    with pytest.raises(ValueError, match=r"--input_file '.*c\.txt' is a local path, which "
                                         r"Dataflow's workers cannot read or write: use gs://"):
        run_cli(["--project=p", "--region=r", "--temp_location=gs://b/tmp"],
                               runner="DataflowRunner", input_file=corpus,
                               output_file=str(tmp_path / "o.tfrecord"), **SETTINGS)
    assert os.listdir(tmp_path) == ["c.txt"]


def test_pipeline_options_for_each_runner():
    direct = beam_runner.pipeline_options("DirectRunner", [], 3, False).get_all_options()
    assert direct["runner"] == beam_runner.LOCAL_RUNNER
    assert (direct["direct_num_workers"], direct["direct_running_mode"]) == (3, "multi_processing")
    explicit = beam_runner.pipeline_options(
        "DirectRunner", ["--direct_running_mode=multi_threading"], 1, False).get_all_options()
    assert explicit["direct_running_mode"] == "multi_threading"  # the user's option wins
    flink = beam_runner.pipeline_options("FlinkRunner", ["--parallelism=8"], 4, True)
    assert flink.get_all_options()["num_workers"] == 4 and flink.get_all_options()["parallelism"] == 8
    assert beam_runner.pipeline_options("FlinkRunner", [], 4, False).get_all_options()[
        "num_workers"] is None


@pytest.mark.subprocess  # whether Beam was imported: a fresh process
def test_without_runner_beam_is_not_imported(tmp_path):
    corpus = write_corpus(tmp_path / "c.txt", bundled_documents(20))
    script = (
        "import sys\n"
        "from absl import flags\n"
        "from data_prep import create_pretraining_data\n"
        f"flags.FLAGS(['x', '--input_file={corpus}', '--output_file={tmp_path / 'o.tfrecord'}', "
        f"'--spm_model_file={SPM_MODEL}', '--max_seq_length=64', '--dupe_factor=1'])\n"
        "create_pretraining_data.main(['x'])\n"
        "print('beam imported:', 'apache_beam' in sys.modules)\n")
    completed = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=subprocess_env(),
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert "beam imported: False" in completed.stdout
    assert len(read_records(str(tmp_path / "o.tfrecord"))) > 0


def test_unknown_flag_without_runner_is_absl_error(tmp_path):
    completed = run_command("-m data_prep.create_pretraining_data", "--input_file=x.txt",
                            f"--output_file={tmp_path / 'o.tfrecord'}",
                            f"--spm_model_file={SPM_MODEL}", "--dupe_factr=3")
    assert completed.returncode == 1
    assert "Unknown command line flag 'dupe_factr'" in completed.stderr
    assert "dupe_factor" in completed.stderr  # absl's suggestion


def test_runner_without_beam_installed_names_the_requirements_file(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "apache_beam", None)  # "import apache_beam" fails
    monkeypatch.delitem(sys.modules, "data_prep.common.beam_runner")
    monkeypatch.delattr(data_prep.common, "beam_runner")
    with pytest.raises(app.UsageError, match="--runner needs Apache Beam, which is not installed .*"
                                             "pip install -r requirements-beam.txt"):
        run_cli(runner="DirectRunner", input_file=str(tmp_path / "none.txt"),
                output_file=str(tmp_path / "o.tfrecord"), **SETTINGS)
