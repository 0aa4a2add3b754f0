"""The results files the tables and run_seeds read (best_results*.json, seed_results.json, a
pretraining run's albert_config.json and sentence_objective.json): every value is checked, and a
file of the wrong shape is one line naming the file and the key, never a traceback nor a cell that
shows "nan". paper_tables' own mistakes: a --runs_dir that does not exist, an --output that names
a directory. All in-process (tests/command_runner.py)."""

from __future__ import annotations

import json
import os

import pytest

from albert_tf.evaluation.seed_results import (RunResultsError, read_best_results_file,
                                               read_seed_results_file, seed_directory,
                                               summarize_seeds)
from tests.command_runner import run_command
from tests.test_run_files import earlier_runs_checkpoint

BEST = {"selection_metric": "eval_accuracy", "best_step": 300,
        "metrics": {"eval_accuracy": 0.75, "eval_loss": 0.5}}
SEEDS = {"selection_metric": "eval_accuracy", "seeds": {"1": BEST, "2": BEST},
         "median": {"eval_accuracy": 0.75, "eval_loss": 0.5}}


def paper_tables(*args):
    return run_command("-m albert_tf.paper_tables", *args)


def write(path, content):
    """Writes ``content`` (text as it is, anything else as JSON, NaN and Infinity spelt as Python's
    json module spells them) and returns the path as a string."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def changed(document, key_path, value):
    """A copy of ``document`` with the value at ``key_path`` ("a.b.c") replaced, or removed when
    ``value`` is ``REMOVE``."""
    document = json.loads(json.dumps(document))
    *parents, last = key_path.split(".")
    target = document
    for key in parents:
        target = target[key]
    if value is REMOVE:
        del target[last]
    else:
        target[last] = value
    return document


REMOVE = object()
NAN, INF = float("nan"), float("inf")

# (what is wrong, key path, value, the end of the one-line message)
BEST_RESULTS_CASES = [
    ("a score as a string", "metrics.eval_accuracy", "0.75",
     "'metrics.eval_accuracy' is \"0.75\": expected a finite number"),
    ("a score as a list", "metrics.eval_accuracy", [0.75],
     "'metrics.eval_accuracy' is [0.75]: expected a finite number"),
    ("a score as null", "metrics.eval_loss", None,
     "'metrics.eval_loss' is null: expected a finite number"),
    ("a score as a boolean", "metrics.eval_accuracy", True,
     "'metrics.eval_accuracy' is true: expected a finite number"),
    ("a NaN score", "metrics.eval_accuracy", NAN,
     "'metrics.eval_accuracy' is NaN: expected a finite number"),
    ("an infinite score", "metrics.eval_loss", -INF,
     "'metrics.eval_loss' is -Infinity: expected a finite number"),
    ("metrics a list", "metrics", [0.75], "'metrics' is [0.75]: expected an object of scores"),
    ("no metrics", "metrics", REMOVE,
     "is not a results file of albert_tf: no 'metrics' (an object of scores)"),
    ("no selection_metric", "selection_metric", REMOVE,
     "is not a results file of albert_tf: no 'selection_metric' (the name of a metric)"),
    ("selection_metric a number", "selection_metric", 3,
     "'selection_metric' is 3: expected the name of a metric"),
    ("no best_step", "best_step", REMOVE,
     "is not a results file of albert_tf: no 'best_step' (a step, an integer >= 0)"),
    ("best_step a string", "best_step", "300",
     "'best_step' is \"300\": expected a step, an integer >= 0"),
    ("best_step a float", "best_step", 300.0,
     "'best_step' is 300.0: expected a step, an integer >= 0"),
    ("best_step negative", "best_step", -1, "'best_step' is -1: expected a step, an integer >= 0"),
]


@pytest.mark.parametrize("what, key_path, value, message", BEST_RESULTS_CASES,
                         ids=[case[0] for case in BEST_RESULTS_CASES])
def test_a_best_results_file_of_the_wrong_shape_is_one_line_naming_file_and_key(
        tmp_path, what, key_path, value, message):
    path = write(tmp_path / "runs" / "rte" / "best_results.json", changed(BEST, key_path, value))
    with pytest.raises(RunResultsError) as raised:
        read_best_results_file(path)
    assert str(raised.value) in (f"{path}: {message}", f"{path} {message}")
    result = paper_tables(f"--runs_dir={tmp_path / 'runs'}", "--model=v2_base")
    assert result.error_line() == f"paper_tables: error: {raised.value}"
    assert result.stdout == ""


@pytest.mark.parametrize("text, message", [
    ("[0.75]", "must hold a JSON object."),
    ('"eval_accuracy"', "must hold a JSON object."),
    ("", "is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
    ('{"selection_metric": "eval_accuracy", "best_step": 3, "metrics": {"eval_accuracy": 1e999}}',
     ": 'metrics.eval_accuracy' is Infinity: expected a finite number"),
])
def test_a_best_results_file_that_is_no_object_or_spells_an_overflow_is_named(tmp_path, text,
                                                                              message):
    path = write(tmp_path / "runs" / "mnli" / "best_results.json", text)
    result = paper_tables(f"--runs_dir={tmp_path / 'runs'}", "--model=v2_base")
    assert result.error_line().startswith(f"paper_tables: error: {path}")
    assert result.error_line().endswith(message)


SEED_RESULTS_CASES = [
    ("a NaN median", "median.eval_accuracy", NAN,
     "'median.eval_accuracy' is NaN: expected a finite number"),
    ("a median as a string", "median.eval_accuracy", "0.75",
     "'median.eval_accuracy' is \"0.75\": expected a finite number"),
    ("no median", "median", REMOVE,
     "is not a results file of albert_tf: no 'median' (an object of scores)"),
    ("no seeds", "seeds", REMOVE,
     "is not a results file of albert_tf: no 'seeds' (an object of each seed's best results)"),
    ("seeds a list", "seeds", [BEST], "'seeds' is [{\"selection_metric\": \"eval_accuracy\"...: "
     "expected an object of each seed's best results"),
    ("no seed", "seeds", {}, "'seeds' is empty: expected each seed's best results"),
    ("a seed that is a number", "seeds.2", 0.75,
     "'seeds.2' is 0.75: expected the seed's best results, an object"),
    ("an infinite score of a seed", "seeds.2.metrics.eval_loss", INF,
     "'seeds.2.metrics.eval_loss' is Infinity: expected a finite number"),
    ("a seed without best_step", "seeds.1.best_step", REMOVE,
     "is not a results file of albert_tf: no 'seeds.1.best_step' (a step, an integer >= 0)"),
    ("no selection_metric", "selection_metric", REMOVE,
     "is not a results file of albert_tf: no 'selection_metric' (the name of a metric)"),
]


@pytest.mark.parametrize("what, key_path, value, message", SEED_RESULTS_CASES,
                         ids=[case[0] for case in SEED_RESULTS_CASES])
def test_a_seed_results_file_of_the_wrong_shape_is_one_line_naming_file_and_key(
        tmp_path, what, key_path, value, message):
    path = write(tmp_path / "runs" / "sst-2" / "seed_results.json",
                 changed(SEEDS, key_path, value))
    with pytest.raises(RunResultsError) as raised:
        read_seed_results_file(path)
    assert str(raised.value) in (f"{path}: {message}", f"{path} {message}")
    result = paper_tables(f"--runs_dir={tmp_path / 'runs'}", "--model=v2_base")
    assert result.error_line() == f"paper_tables: error: {raised.value}"


def test_good_files_still_make_the_table(tmp_path):
    write(tmp_path / "runs" / "sst-2" / "seed_results.json", SEEDS)
    write(tmp_path / "runs" / "rte" / "best_results.json", BEST)
    result = paper_tables(f"--runs_dir={tmp_path / 'runs'}", "--model=v2_base")
    assert result.returncode == 0, result.stderr
    assert "| – | – | – | 75.0 | 75.0 | – |" in result.stdout


# ------------------------------------------------------------------------------------------------
# run_seeds: the seeds' best_results.json.

def run_seeds_summary(output_dir):
    """run_seeds over seeds 1 and 2 whose sweeps finished (so nothing is trained)."""
    return run_command("-m albert_tf.run_seeds", "--seeds=1,2", f"--output_dir={output_dir}", "--",
                       "run_classifier.py", "--task_name=rte", "--do_train", "--do_eval")


def finished_seed(output_dir, seed: int, best) -> str:
    """A seed's run directory as a finished run leaves it: its best_results.json (``best``), and
    the checkpoint and 'checkpoint' state file of every training run (by which run_seeds knows the
    directory for its own without the output record of a run_seeds run); returns the results
    file."""
    directory = seed_directory(str(output_dir), seed)
    earlier_runs_checkpoint(directory)
    return write(os.path.join(directory, "best_results.json"), best)


@pytest.mark.parametrize("key_path, value, message", [
    ("metrics.eval_accuracy", NAN, "'metrics.eval_accuracy' is NaN: expected a finite number"),
    ("metrics.eval_loss", {"value": 1}, "'metrics.eval_loss' is {\"value\": 1}: expected a "
                                        "finite number"),
    ("best_step", "late", "'best_step' is \"late\": expected a step, an integer >= 0"),
])
def test_run_seeds_names_the_seed_file_and_key_of_a_bad_best_results(tmp_path, key_path, value,
                                                                      message):
    finished_seed(tmp_path, 1, BEST)
    bad = finished_seed(tmp_path, 2, changed(BEST, key_path, value))
    result = run_seeds_summary(tmp_path)
    assert result.error_line() == f"run_seeds: error: {bad}: {message}"
    assert not (tmp_path / "seed_results.json").exists()


def test_a_seed_whose_metrics_lack_its_selection_metric_is_named(tmp_path):
    write(os.path.join(seed_directory(str(tmp_path), 1), "best_results.json"), BEST)
    bad = write(os.path.join(seed_directory(str(tmp_path), 2), "best_results.json"),
                changed(BEST, "metrics.eval_accuracy", REMOVE))
    with pytest.raises(RunResultsError, match=f"^{bad}: 'metrics' has no score of its "
                                              "selection_metric 'eval_accuracy'$"):
        summarize_seeds(str(tmp_path), [1, 2])


def test_run_seeds_summarises_good_seed_files(tmp_path):
    finished_seed(tmp_path, 1, BEST)
    finished_seed(tmp_path, 2, changed(BEST, "metrics.eval_accuracy", 0.85))
    result = run_seeds_summary(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("done earlier") == 2
    summary = read_seed_results_file(str(tmp_path / "seed_results.json"))
    assert summary["median"] == {"eval_accuracy": pytest.approx(0.8), "eval_loss": 0.5}


# ------------------------------------------------------------------------------------------------
# The ablation tables: a pretraining run's results, config and objective files.

TINY_CONFIG = dict(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
PRETRAINING_BEST = {"selection_metric": "masked_lm_accuracy", "best_step": 2,
                    "metrics": {"masked_lm_accuracy": 0.5, "sentence_order_accuracy": 0.8}}


def pretraining_run(run_dir, config=None, objective='{"sentence_objective": "sop"}',
                    best=None, named=None):
    """A run directory of run_pretraining in an earlier version's layout (its records in files of
    their own; TF's checkpoint state file, which every earlier training run left)."""
    write(run_dir / "checkpoint", 'model_checkpoint_path: "model.ckpt-2"\n')
    write(run_dir / "albert_config.json", TINY_CONFIG if config is None else config)
    write(run_dir / "sentence_objective.json", objective)
    write(run_dir / "best_results.json", PRETRAINING_BEST if best is None else best)
    if named is not None:
        write(run_dir / "best_results_nsp.json", named)
    return str(run_dir)


def ablation_error(run_dir):
    return paper_tables(f"--pretraining_runs={run_dir}").error_line()


def test_a_pretraining_runs_results_files_are_checked(tmp_path):
    run = tmp_path / "e16"
    pretraining_run(run, best=changed(PRETRAINING_BEST, "metrics.masked_lm_accuracy", NAN))
    assert ablation_error(run) == (f"paper_tables: error: {run}/best_results.json: "
                                   "'metrics.masked_lm_accuracy' is NaN: expected a finite number")
    pretraining_run(run, named=changed(PRETRAINING_BEST, "metrics", "0.5"))
    assert ablation_error(run) == (f"paper_tables: error: {run}/best_results_nsp.json: expected "
                                   '{"selection_metric", "best_step", "metrics"}; albert_tf wrote '
                                   "it")
    downstream = write(run / "downstream" / "race" / "best_results.json",
                       changed(BEST, "metrics.eval_accuracy", INF))
    pretraining_run(run, named=PRETRAINING_BEST)
    assert ablation_error(run) == (f"paper_tables: error: {downstream}: 'metrics.eval_accuracy' "
                                   "is Infinity: expected a finite number")
    os.remove(downstream)
    result = paper_tables(f"--pretraining_runs={run}")
    assert result.returncode == 0, result.stderr
    assert "| e16 | 16 | all | sop |" in result.stdout


@pytest.mark.parametrize("config, message", [
    (dict(TINY_CONFIG, embedding_size="16"),
     "AlbertConfig: 'embedding_size' must be a positive integer, got '16'."),
    (dict(TINY_CONFIG, hidden_size=NAN), "AlbertConfig: 'hidden_size' must be a positive integer, "
                                         "got nan."),
    (dict(TINY_CONFIG, cross_layer_sharing=["all"]), "'cross_layer_sharing' ['all'] is not one of"),
    ("[16]", "must hold a JSON object"),
])
def test_a_pretraining_runs_config_of_the_wrong_shape_is_one_line(tmp_path, config, message):
    run = tmp_path / "run"
    pretraining_run(run, config=config)
    line = ablation_error(run)
    assert line.startswith("paper_tables: error: ") and f"{run}/albert_config.json" in line
    assert message in line


@pytest.mark.parametrize("objective, message", [
    ('{"sentence_objective": ["sop"]}',
     "the recorded sentence objective ['sop'] is not one of sop, nsp, none"),
    ('{"objective": "sop"}', 'expected {"sentence_objective": ...}; albert_tf wrote it in this run '
                             'directory'),
    ('"sop"', 'expected {"sentence_objective": ...}; albert_tf wrote it in this run directory'),
    ('{"sentence_objective": NaN}', "the recorded sentence objective nan is not one of sop, nsp, "
                                    "none"),
])
def test_a_pretraining_runs_objective_file_of_the_wrong_shape_is_one_line(tmp_path, objective,
                                                                          message):
    run = tmp_path / "run"
    pretraining_run(run, objective=objective)
    assert ablation_error(run) == f"paper_tables: error: {run}/sentence_objective.json: {message}"


# ------------------------------------------------------------------------------------------------
# paper_tables' paths.

def test_a_runs_dir_that_does_not_exist_or_is_a_file_is_an_error_not_a_table_of_dashes(tmp_path):
    missing = tmp_path / "runs" / "albert_bsae"
    result = paper_tables(f"--runs_dir={missing}", "--model=v2_base")
    assert result.error_line() == (
        f"paper_tables: error: --runs_dir {missing} does not exist (the fine-tuning runs, a "
        "subdirectory per task: mnli, qnli, qqp, rte, sst-2, mrpc, cola, sts-b, squad1.1, "
        "squad2.0, race)")
    assert result.stdout == ""
    afile = write(tmp_path / "runs.txt", "")
    assert paper_tables(f"--runs_dir={afile}", "--model=v2_base").error_line() == (
        f"paper_tables: error: --runs_dir {afile} is a file, not a directory of runs")
    # The plan only names --runs_dir: it need not exist yet.
    plan = paper_tables("--plan", "--model=v2_base", f"--runs_dir={missing}",
                        "--plan_tasks=rte")
    assert plan.returncode == 0, plan.stderr
    assert not missing.exists()


@pytest.mark.parametrize("output", ["{tmp}/tables/", "{tmp}/tables", "{tmp}/new/",
                                    "gs://bucket/t/"])
def test_an_output_that_names_a_directory_is_refused_before_any_work(tmp_path, output):
    (tmp_path / "tables").mkdir()
    write(tmp_path / "runs" / "rte" / "best_results.json", BEST)
    output = output.format(tmp=tmp_path)
    result = paper_tables(f"--runs_dir={tmp_path / 'runs'}", "--model=v2_base",
                          f"--output={output}")
    example = output.rstrip("/") + "/table"
    assert result.error_line() == (
        f"paper_tables: error: --output={output} names a directory: the tables go to <output>.md "
        f"and <output>.json, so give a path prefix, e.g. --output={example}")
    assert result.stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["runs", "tables"]
    assert not os.listdir(tmp_path / "tables")
    written = paper_tables(f"--runs_dir={tmp_path / 'runs'}", "--model=v2_base",
                           f"--output={tmp_path / 'tables' / 'base'}")
    assert written.returncode == 0, written.stderr
    assert sorted(os.listdir(tmp_path / "tables")) == ["base.json", "base.md"]


def test_an_unknown_plan_task_is_refused_with_the_known_ones(tmp_path):
    result = paper_tables("--plan", "--model=v2_base", "--plan_tasks=mnli,SQuAD3,race")
    assert result.error_line() == (
        "paper_tables: error: --plan_tasks: unknown task(s) SQuAD3; expected some of mnli, qnli, "
        "qqp, rte, sst-2, mrpc, cola, sts-b, squad1.1, squad2.0, race")
    assert result.stdout == ""
