"""run_seeds: one recipe with several seeds, each seed's best dev results and their median, checked
against the runs' own eval_results.txt; the library's summary on hand-written results."""

from __future__ import annotations

import json
import os
import statistics

import pytest

from albert_tf.evaluation.seed_results import seed_directory, summarize_seeds
from albert_tf.files.run_manifest import read_manifest, update_manifest
from tests.command_runner import run_command
from tests.shared_setup import EN8K_MODEL
from tests.task_cases import glue_sample
from tests.test_run_classifier import blocks_of, write_config
from tests.test_run_files import earlier_runs_checkpoint


def write_best_results(directory, key, metrics, step=4):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "best_results.json"), "w", encoding="utf-8") as handle:
        json.dump({"selection_metric": key, "best_step": step, "metrics": metrics}, handle)


def test_the_median_is_taken_per_metric_over_the_seeds(tmp_path):
    for seed, accuracy, loss in ((1, 0.5, 0.9), (2, 0.7, 0.8), (3, 0.6, 0.7)):
        write_best_results(seed_directory(str(tmp_path), seed), "eval_accuracy",
                           {"eval_accuracy": accuracy, "eval_loss": loss})
    write_best_results(seed_directory(str(tmp_path), 4), "eval_accuracy", {"eval_accuracy": 0.9})
    summary = summarize_seeds(str(tmp_path), [1, 2, 3])
    assert summary["selection_metric"] == "eval_accuracy"
    assert summary["median"] == {"eval_accuracy": 0.6, "eval_loss": 0.8}
    assert sorted(summary["seeds"]) == ["1", "2", "3"]
    # A metric that one seed lacks (a resumed sweep whose eval_results.txt lost the best keeps
    # only the key) has no median.
    assert summarize_seeds(str(tmp_path), [1, 4])["median"] == {"eval_accuracy": 0.7}


def test_missing_or_mixed_runs_are_errors(tmp_path):
    write_best_results(seed_directory(str(tmp_path), 1), "eval_accuracy", {"eval_accuracy": 0.5})
    with pytest.raises(FileNotFoundError, match="seed_2/best_results.json does not exist"):
        summarize_seeds(str(tmp_path), [1, 2])
    write_best_results(seed_directory(str(tmp_path), 2), "f1", {"f1": 50.0})
    with pytest.raises(ValueError, match=r"different metrics \(\['eval_accuracy', 'f1'\]\)"):
        summarize_seeds(str(tmp_path), [1, 2])


def run_seeds(*args):
    """run_seeds in this process (each seed's run is a process it starts)."""
    return run_command("-m albert_tf.run_seeds", *args)


def rte_recipe(tmp_path):
    data_dir = glue_sample(tmp_path / "glue", "RTE", rows=24)
    return ["run_classifier.py", "--task_name=RTE", f"--data_dir={data_dir}",
            f"--albert_config_file={write_config(tmp_path / 'config.json', hidden_dropout_prob=0.1)}",
            f"--spm_model_file={EN8K_MODEL}", "--max_seq_length=64", "--learning_rate=1e-3",
            "--do_train", "--do_eval", "--train_step=4", "--save_checkpoints_steps=2",
            "--train_batch_size=8", "--eval_batch_size=8"]


@pytest.mark.slow  # a process per seed, about 25 s
@pytest.mark.subprocess  # run_seeds starts each seed's run as a process
@pytest.mark.requires_shared_data
def test_two_seeds_of_a_glue_recipe_give_their_best_median_and_table_cell(tmp_path):
    output_dir, recipe = tmp_path / "runs" / "rte", rte_recipe(tmp_path)
    result = run_seeds("--seeds=1,2", f"--output_dir={output_dir}", "--", *recipe)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((output_dir / "seed_results.json").read_text())
    assert summary["selection_metric"] == "eval_accuracy"
    best_accuracies = []
    for seed in ("1", "2"):
        blocks = [dict(line.split(" = ") for line in block[:-1])
                  for block in blocks_of(output_dir / f"seed_{seed}" / "eval_results.txt")]
        best = max(blocks, key=lambda block: float(block["eval_accuracy"]))  # first maximum
        best_accuracies.append(float(best["eval_accuracy"]))
        recorded = summary["seeds"][seed]
        assert recorded["best_step"] == int(best["global_step"])
        for name, value in recorded["metrics"].items():
            assert value == pytest.approx(float(best[name]), rel=1e-6), (seed, name)
    losses = [summary["seeds"][seed]["metrics"]["eval_loss"] for seed in ("1", "2")]
    assert losses[0] != losses[1]  # the seeds differ
    for name, median in summary["median"].items():
        assert median == pytest.approx(statistics.median(
            summary["seeds"][seed]["metrics"][name] for seed in ("1", "2")))
    assert "median" in result.stdout

    again = run_seeds("--seeds=1,2", f"--output_dir={output_dir}", "--", *recipe)
    assert again.returncode == 0 and again.stdout.count("done earlier") == 2
    assert json.loads((output_dir / "seed_results.json").read_text()) == summary

    # The table command's RTE cell is that median, beside the paper's (xxlarge, 1.5M steps) 89.2.
    # The seeds recorded their tiny config (in each seed's run manifest, and as albert_config.json
    # beside the checkpoints), which the table refuses to compare with xxlarge's numbers; without
    # the records (runs of earlier versions) it reads the cells.
    table = run_command("-m albert_tf.paper_tables", f"--runs_dir={tmp_path / 'runs'}",
                        "--model=v1_xxlarge", f"--output={tmp_path / 'table'}")
    assert "seed_1/albert_config.json: num_hidden_layers 2" in table.error_line()
    for seed in (1, 2):
        directory = seed_directory(str(output_dir), seed)
        assert read_manifest(directory).fact("config")["num_hidden_layers"] == 2
        os.remove(os.path.join(directory, "albert_config.json"))
        update_manifest(directory, lambda content: content["facts"].pop("config"))
    table = run_command("-m albert_tf.paper_tables", f"--runs_dir={tmp_path / 'runs'}",
                        "--model=v1_xxlarge", f"--output={tmp_path / 'table'}")
    assert table.returncode == 0, table.stderr
    downstream = json.loads((tmp_path / "table.json").read_text())["downstream"]
    rte = 100 * statistics.median(best_accuracies)
    assert downstream["ours"] == {"rte": pytest.approx(rte)}
    assert downstream["published"]["rte"] == 89.2
    assert downstream["difference"] == {"rte": pytest.approx(rte - 89.2)}
    assert downstream["runs"] == {"rte": 2}
    assert f"| – | – | – | {rte:.1f} | – |" in (tmp_path / "table.md").read_text()


@pytest.mark.subprocess  # run_seeds starts the seed's run as a process
def test_recipe_mistakes_and_a_failed_seed_are_one_line(tmp_path):
    result = run_seeds(f"--output_dir={tmp_path}", "--", "run_classifier.py", "--seed=3")
    assert result.returncode == 1
    assert result.stderr.strip() == ("run_seeds: error: the recipe sets --seed, which run_seeds "
                                     "sets for each seed: leave it out")
    failed = run_seeds("--seeds=7", f"--output_dir={tmp_path}", "--", "run_classifier.py",
                       "--task_name=no_such_task", "--do_eval")
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1].startswith(
        "run_seeds: error: the run of seed 7 failed (exit status 1)")


def recipe_mismatch(directory, recorded: list[str], given: list[str], where: str) -> str:
    """run_seeds' line refusing the recipe ``given`` in a directory that records ``recorded`` (in
    the file ``where``)."""
    return (f"run_seeds: error: --output_dir={directory} holds the seeds of the recipe "
            f"{' '.join(recorded)} ({where}); this run has {' '.join(given)} (the arguments "
            "after --). Give the run's own settings to continue it, or use another --output_dir")


def test_a_rerun_with_another_recipe_does_not_take_the_finished_seeds_as_its_own(tmp_path):
    """Finished seeds are skipped on a rerun, so the directory records its recipe: another
    recipe there stops before any seed runs, naming both, and the earlier results stay. The
    directory is one of an earlier version (no output record, no seed_recipe.json): its seed's
    run directory holds the checkpoint and `checkpoint` state file every training run leaves."""
    write_best_results(seed_directory(str(tmp_path), 1), "eval_accuracy", {"eval_accuracy": 0.5})
    earlier_runs_checkpoint(tmp_path / "seed_1", step=4)
    first = ["run_classifier.py", "--task_name=rte", "--data_dir=glue", "--do_train", "--do_eval"]
    result = run_seeds("--seeds=1", f"--output_dir={tmp_path}", "--", *first)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "done earlier" in result.stdout  # an old directory: recorded by this run
    assert read_manifest(str(tmp_path)).fact("seed_recipe") == first
    assert not (tmp_path / "seed_recipe.json").exists()
    results = (tmp_path / "seed_results.json").read_bytes()

    other = [*first[:1], "--task_name=mrpc", *first[2:]]
    result = run_seeds("--seeds=1", f"--output_dir={tmp_path}", "--", *other)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip() == recipe_mismatch(tmp_path, first, other, "run_manifest.json")
    assert (tmp_path / "seed_results.json").read_bytes() == results
    assert run_seeds("--seeds=1", f"--output_dir={tmp_path}", "--", *first).returncode == 0


def test_an_earlier_versions_recorded_recipe_is_checked(tmp_path):
    """seed_recipe.json of a directory an earlier version ran the seeds in is its recipe; the
    message names that file, where the directory records it (it has no run_manifest.json)."""
    first = ["run_classifier.py", "--task_name=rte", "--data_dir=glue", "--do_train", "--do_eval"]
    (tmp_path / "seed_recipe.json").write_text(json.dumps({"recipe": first}))
    other = [*first[:1], "--task_name=mrpc", *first[2:]]
    result = run_seeds("--seeds=1", f"--output_dir={tmp_path}", "--", *other)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip() == recipe_mismatch(tmp_path, first, other, "seed_recipe.json")
    assert sorted(os.listdir(tmp_path)) == ["seed_recipe.json"]


def test_a_seed_given_twice_is_refused_before_any_seed_runs(tmp_path):
    """``--seeds=1,01,2`` would run and count seed 1 once: a median of 2 seeds where the command
    line asks for 3. Refused in one line before any seed runs (as is the plan's --seeds of
    paper_tables)."""
    recipe = ["run_classifier.py", "--task_name=rte", "--data_dir=glue", "--do_train", "--do_eval"]
    for seeds in ("1,01,2", "1,2,1"):
        result = run_seeds(f"--seeds={seeds}", f"--output_dir={tmp_path}", "--", *recipe)
        assert result.returncode == 1 and result.stdout == ""
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("run_seeds: error: flag --seeds=")
        assert "expected a comma-separated list of distinct integers" in line
    assert os.listdir(tmp_path) == []
    plan = run_command("-m albert_tf.paper_tables", "--plan", "--model=v2_base", "--seeds=3,3")
    assert plan.returncode == 1
    assert "--seeds=['3', '3']: expected a comma-separated list of distinct" in plan.stderr
