"""python -m albert_tf.paper_tables: the published numbers it carries, the downstream table and the
pretraining ablation tables (Tables 3-5) checked cell by cell against the runs' own results files,
and the reproduction plan's commands accepted by the scripts they run."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import statistics

import pytest
import tensorflow as tf

from albert_tf.checkpoints.run_config import CONFIG, write_config_file
from albert_tf.evaluation.best_checkpoint import run_checkpoint_sweep
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy
from albert_tf.models.config import AlbertConfig
from albert_tf.models.parameters import encoder_parameter_count, paper_parameter_count
from albert_tf.reproduction.downstream import (DOWNSTREAM_TASKS, downstream_table,
                                               format_difference, paper_average, read_task_scores)
from albert_tf.reproduction.plan import AVERAGE_TASKS, PlanPaths, reproduction_plan
from albert_tf.reproduction.published import published_model, published_rows, released_models
from albert_tf.files.run_manifest import add_facts
from albert_tf.tasks.pretraining.objective import OBJECTIVE, evaluation_name
from albert_tf.tasks.pretraining.task import PretrainingTask, pretraining_dataset_fn
from albert_tf.training import optimization
from albert_tf.training.task import EvalSet
from albert_tf.training.trainer import RunConfig, Trainer
from tests.command_runner import run_command
from tests.shared_setup import REFERENCE_MAX_PREDICTIONS, REFERENCE_SEQ_LENGTH, tiny_config

BASE = dict(vocab_size=30000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2)


def paper_tables(*args):
    return run_command("-m albert_tf.paper_tables", *args)


# ------------------------------------------------------------------------------------------------
# The published numbers.

def test_every_published_average_follows_the_papers_formula():
    rows = [published_model(name) for name in released_models()]
    rows += [row for table in ("table2", "table5", "table6_8", "appendix_depth", "appendix_width")
             for row in published_rows(table)]
    assert len(rows) == 8 + 6 + 3 + 4 + 6 + 4
    for row in rows:  # cells and averages are rounded to 0.1 each
        assert paper_average(row) == pytest.approx(row["avg"], abs=0.1), row
    assert paper_average(published_model("v1_base")) == pytest.approx(80.05)


def test_published_parameter_counts_are_the_closed_form_within_1m():
    rows = published_rows("table3") + published_rows("table4")
    assert len(rows) == 16
    for row in rows:
        config = AlbertConfig.from_dict(dict(BASE, embedding_size=row["embedding_size"],
                                             cross_layer_sharing=row["cross_layer_sharing"]))
        assert abs(paper_parameter_count(config) / 1e6 - row["params_m"]) < 1.0, row


def test_the_papers_model_sizes_are_the_counts_docs_model_md_names():
    """Table 2's sizes: the shared ALBERTs round the encoder total (with the pooler), the not-shared
    BERTs embeddings + transformer; ALBERT-xlarge's 60M and -xxlarge's 235M match neither count
    (docs/model.md, "The paper's parameter counts")."""
    sizes = {"base": (768, 12, 12, 3072), "large": (1024, 24, 16, 4096),
             "xlarge": (2048, 24, 32, 8192), "xxlarge": (4096, 12, 64, 16384)}
    for row in published_rows("table2"):
        family, size = row["model"].split("-")
        hidden, layers, heads, intermediate = sizes[size]
        shared = family == "ALBERT"
        config = AlbertConfig.from_dict(dict(
            BASE, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=intermediate, embedding_size=128 if shared else hidden,
            cross_layer_sharing="all" if shared else "none"))
        with_pooler = round(encoder_parameter_count(config) / 1e6)
        without = round(paper_parameter_count(config) / 1e6)
        if not shared:
            assert without == row["params_m"], row
        elif size in ("base", "large"):
            assert with_pooler == row["params_m"] and without != row["params_m"], row
        else:
            assert row["params_m"] not in (with_pooler, without), row


def test_unknown_model_names_the_released_ones():
    with pytest.raises(ValueError, match="v3_base.*v2_base, v2_large"):
        published_model("v3_base")


# ------------------------------------------------------------------------------------------------
# The downstream table.

def write_results(directory, metrics, file="best_results.json", key="f1"):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, file), "w", encoding="utf-8") as handle:
        json.dump({"selection_metric": key, "best_step": 3, "metrics": metrics}, handle)


def write_seeds(directory, accuracies):
    os.makedirs(directory, exist_ok=True)
    seeds = {str(i): {"selection_metric": "eval_accuracy", "best_step": 2,
                      "metrics": {"eval_accuracy": value}} for i, value in enumerate(accuracies)}
    with open(os.path.join(directory, "seed_results.json"), "w", encoding="utf-8") as handle:
        json.dump({"selection_metric": "eval_accuracy", "seeds": seeds,
                   "median": {"eval_accuracy": statistics.median(accuracies)}}, handle)


def test_the_downstream_table_reads_medians_and_single_runs_and_averages_as_the_paper(tmp_path):
    runs = str(tmp_path)
    write_seeds(os.path.join(runs, "mnli"), [0.80, 0.84, 0.82, 0.70, 0.83])  # median 0.82
    write_seeds(os.path.join(runs, "sst-2"), [0.91, 0.93])  # median 0.92
    write_results(os.path.join(runs, "squad1.1"), {"f1": 88.0, "exact_match": 81.0})
    write_results(os.path.join(runs, "squad2.0"), {"reference_tuned_f1": 79.0,
                                                   "reference_tuned_exact": 76.0, "f1": 1.0,
                                                   "exact": 1.0})
    write_results(os.path.join(runs, "race"), {"eval_accuracy": 0.6})
    write_results(os.path.join(runs, "cola"), {"matthew_corr": 0.5})
    table = downstream_table(runs, "v2_base")
    ours = table["ours"]
    assert ours["mnli"] == pytest.approx(82.0) and ours["sst-2"] == pytest.approx(92.0)
    assert (ours["squad2.0_f1"], ours["squad2.0_em"]) == (79.0, 76.0)  # the reference's tuned
    assert ours["cola"] == pytest.approx(50.0) and "qnli" not in ours
    expected_average = ((88 + 81) / 2 + (79 + 76) / 2 + 82 + 92 + 60) / 5
    assert ours["avg"] == pytest.approx(expected_average)
    assert table["difference"]["avg"] == pytest.approx(expected_average - 82.3)
    assert table["difference"]["race"] == pytest.approx(60 - 66.8)
    assert "cola" not in table["difference"]  # not published for v2_base
    assert table["runs"] == {"mnli": 5, "sst-2": 2, "cola": 1, "squad1.1": 1, "squad2.0": 1,
                             "race": 1}

    result = paper_tables(f"--runs_dir={runs}", "--model=v2_base", f"--output={tmp_path}/table")
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "table.md").read_text().splitlines()
    assert lines[0] == ("| | MNLI | QNLI | QQP | RTE | SST-2 | MRPC | CoLA | STS-B | SQuAD1.1 | "
                        "SQuAD2.0 | RACE | Avg |")
    assert lines[2] == (f"| albert_tf ({runs}) | 82.0 | – | – | – | 92.0 | – | 50.0 | – | "
                        f"88.0/81.0 | 79.0/76.0 | 60.0 | {expected_average:.1f} |")
    assert lines[3] == ("| published (v2_base) | 84.6 | – | – | – | 92.9 | – | – | – | 90.2/83.2 "
                        "| 82.1/79.3 | 66.8 | 82.3 |")
    assert lines[4].startswith("| difference | -2.6 | – |")
    written = json.loads((tmp_path / "table.json").read_text())["downstream"]
    assert written["ours"] == pytest.approx(ours)


def test_a_run_of_another_size_than_the_model_is_refused_not_compared(tmp_path):
    """A large run among base runs (a seed's recorded config), or runs of one size compared with
    another size's published numbers, made a table of wrong differences without a word."""
    runs = tmp_path / "runs"
    write_seeds(str(runs / "mnli"), [0.80, 0.84])
    write_results(str(runs / "race"), {"eval_accuracy": 0.6})
    base = AlbertConfig.from_dict(dict(BASE, embedding_size=128))
    base.to_json_file(str(runs / "race" / "albert_config.json"))
    base.to_json_file(str(runs / "mnli" / "seed_1" / "albert_config.json"))
    large = AlbertConfig.from_dict(dict(BASE, embedding_size=128, hidden_size=1024,
                                        num_hidden_layers=24, num_attention_heads=16))
    large.to_json_file(str(runs / "mnli" / "seed_2" / "albert_config.json"))
    result = paper_tables(f"--runs_dir={runs}", "--model=v2_base", f"--output={tmp_path}/t")
    assert result.error_line() == (
        f"paper_tables: error: {runs / 'mnli' / 'seed_2' / 'albert_config.json'}: "
        "num_hidden_layers 24, hidden_size 1024, but --model=v2_base has num_hidden_layers 12, "
        "hidden_size 768: the run is of another model; give --model its size, or move the run "
        "out of --runs_dir")
    assert not (tmp_path / "t.md").exists()
    large.to_json_file(str(runs / "mnli" / "seed_1" / "albert_config.json"))
    large.to_json_file(str(runs / "race" / "albert_config.json"))
    result = paper_tables(f"--runs_dir={runs}", "--model=v2_large", f"--output={tmp_path}/t")
    assert result.returncode == 0, result.stderr[-2000:]
    assert downstream_table(str(runs), "v2_large")["ours"]["race"] == pytest.approx(60.0)


def test_a_difference_that_rounds_to_nothing_prints_plus_zero():
    """A run 0.04 below the paper printed "-0.0" in the difference column."""
    assert [format_difference(value) for value in (-0.04, 0.04, 0.0, -0.06, 1.26, -2.0)] == [
        "+0.0", "+0.0", "+0.0", "-0.1", "+1.3", "-2.0"]


def test_a_rerun_replaces_the_tables_own_output_in_the_runs_dir(tmp_path):
    # The plan's table command writes <runs_dir>/downstream_table.{md,json}; the table is rerun as
    # tasks finish, and its own earlier output is no results file of the runs.
    runs, output = tmp_path / "runs", tmp_path / "runs" / "downstream_table"
    write_results(runs / "race", {"eval_accuracy": 0.6})
    first = paper_tables(f"--runs_dir={runs}", "--model=v2_base", f"--output={output}")
    assert first.returncode == 0, first.stderr
    write_results(runs / "squad1.1", {"f1": 88.0, "exact_match": 81.0})
    again = paper_tables(f"--runs_dir={runs}", "--model=v2_base", f"--output={output}")
    assert again.returncode == 0, again.stderr
    ours = json.loads((runs / "downstream_table.json").read_text())["downstream"]["ours"]
    assert ours == {"race": pytest.approx(60.0), "squad1.1_f1": 88.0, "squad1.1_em": 81.0}
    assert "| 88.0/81.0 |" in (runs / "downstream_table.md").read_text()
    # A task's results file is still an input the output may not replace.
    over_input = paper_tables(f"--runs_dir={runs}", "--model=v2_base",
                              f"--output={runs}/race/best_results")
    assert over_input.returncode == 1
    assert "is also an input" in over_input.stderr and len(over_input.stderr.splitlines()) == 1


def test_results_the_table_does_not_read_are_named_not_left_out_silently(tmp_path):
    # GLUE's data directories are RTE, SST-2, ...; the table's are rte, sst-2: a run under the
    # other spelling was a silent dash.
    runs = tmp_path / "runs"
    write_seeds(runs / "RTE", [0.6, 0.7, 0.8])
    write_results(runs / "squad_v1", {"f1": 88.0, "exact_match": 81.0})
    write_results(runs / "race", {"eval_accuracy": 0.6})
    (runs / "notes").mkdir()  # no results: nothing to say about it
    result = paper_tables(f"--runs_dir={runs}", "--model=v2_base", f"--output={tmp_path}/table")
    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "table.json").read_text())["downstream"]
    assert written["unread"] == ["RTE", "squad_v1"] and set(written["ours"]) == {"race"}
    assert (f"Not read: RTE, squad_v1 in {runs} (results under a name that is no task of the "
            "table; the tasks' directories are mnli, qnli, qqp, rte, sst-2, mrpc, cola, sts-b, "
            "squad1.1, squad2.0, race).") in (tmp_path / "table.md").read_text().splitlines()
    # One task's directory given as --runs_dir: one line, not a table of dashes.
    tasks = ", ".join(task.name for task in DOWNSTREAM_TASKS)
    task_dir = paper_tables(f"--runs_dir={runs}/RTE", "--model=v2_base")
    assert (task_dir.returncode, task_dir.stdout) == (1, "")
    assert task_dir.stderr.strip() == (f"paper_tables: error: {runs}/RTE holds the results of one "
                                       f"task's runs ({runs}/RTE/seed_results.json): the runs "
                                       f"directory holds a subdirectory per task ({tasks}); give "
                                       "the directory above it")


def test_a_results_file_of_another_task_is_named(tmp_path):
    write_results(tmp_path / "race", {"f1": 50.0})
    race = next(task for task in DOWNSTREAM_TASKS if task.name == "race")
    with pytest.raises(ValueError, match=r"race/best_results.json has no 'eval_accuracy' .*RACE"):
        read_task_scores(str(tmp_path / "race"), race)
    assert read_task_scores(str(tmp_path / "mnli"), race) is None  # not run: no cell
    (tmp_path / "race" / "best_results.json").write_text("{oops")
    with pytest.raises(ValueError, match=r"race/best_results.json is not valid JSON"):
        read_task_scores(str(tmp_path / "race"), race)
    (tmp_path / "race" / "best_results.json").write_text('{"eval_accuracy": 0.5}')
    with pytest.raises(ValueError, match=r"best_results.json is not a results file .*'metrics'"):
        read_task_scores(str(tmp_path / "race"), race)


def test_table_command_mistakes_are_one_line(tmp_path):
    nothing = paper_tables()
    assert nothing.returncode == 1
    assert nothing.stderr.strip() == ("paper_tables: error: give --runs_dir (the downstream "
                                      "table), --pretraining_runs (Tables 3-5) or --plan")
    no_model = paper_tables(f"--runs_dir={tmp_path}")
    assert no_model.returncode == 1 and "need --model" in no_model.stderr
    missing = paper_tables(f"--pretraining_runs={tmp_path}/nothing*")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (f"paper_tables: error: --pretraining_runs: "
                                      f"'{tmp_path}/nothing*' matches no directory.")


# ------------------------------------------------------------------------------------------------
# The pretraining ablation tables, from tiny runs made here.

def record_run(run_dir, config, objective):
    """What run_pretraining records before training: the objective and the config in the run
    manifest, the config also as albert_config.json beside the checkpoints."""
    add_facts(run_dir, {OBJECTIVE: (objective, "--sentence_objective"),
                          CONFIG: (config.to_dict(), "config.json")})
    write_config_file(run_dir, config)


def pretrain(run_dir, config, objective, records):
    """A 2-step run with run_pretraining's records (config, objective) and evaluations on SOP and
    NSP records, the own one unnamed."""
    os.makedirs(run_dir, exist_ok=True)
    record_run(run_dir, config, objective)
    run_config = RunConfig(output_dir=run_dir, train_batch_size=8, num_train_steps=2,
                           save_checkpoints_steps=2, iterations_per_loop=2, seed=1)
    trainer = Trainer(tf.distribute.get_strategy(), PretrainingTask(config, objective),
                      lambda: optimization.create_optimizer("lamb", 5e-3, 2, 0), run_config,
                      log=lambda message: None)
    train_records = records["nsp" if objective == "nsp" else "sop"]
    trainer.train(pretraining_dataset_fn([train_records], REFERENCE_SEQ_LENGTH,
                                         REFERENCE_MAX_PREDICTIONS, is_training=True))
    for task in ("sop", "nsp"):
        data = pretraining_dataset_fn([records[task]], REFERENCE_SEQ_LENGTH,
                                      REFERENCE_MAX_PREDICTIONS, is_training=False)
        eval_set = EvalSet("", lambda data=data: data(8, 0), context=task, max_steps=2)
        run_checkpoint_sweep(trainer, [eval_set], "masked_lm_accuracy", SweepPolicy(),
                             evaluation_name(objective, task))


def best_metrics(run_dir, name=""):
    suffix = f"_{name}" if name else ""
    with open(os.path.join(run_dir, f"best_results{suffix}.json"), encoding="utf-8") as handle:
        return json.load(handle)["metrics"]


def test_ablation_tables_from_pretraining_runs(tmp_path, pretraining_records,
                                               nsp_pretraining_records):
    records = {"sop": pretraining_records, "nsp": nsp_pretraining_records}
    configs = {"all": tiny_config(), "none": tiny_config(cross_layer_sharing="none")}
    runs = {"all": str(tmp_path / "all"), "none": str(tmp_path / "none"),
            "mlm_only": str(tmp_path / "mlm_only")}
    pretrain(runs["all"], configs["all"], "sop", records)
    pretrain(runs["none"], configs["none"], "sop", records)
    pretrain(runs["mlm_only"], configs["all"], "none", records)
    assert not os.path.exists(os.path.join(runs["mlm_only"], "best_results.json"))  # all named
    # One run's downstream results: its Avg goes into every table it is in.
    downstream = os.path.join(runs["all"], "downstream")
    for task, metrics in (("mnli", {"eval_accuracy": 0.5}), ("sst-2", {"eval_accuracy": 0.7}),
                          ("race", {"eval_accuracy": 0.3}),
                          ("squad1.1", {"f1": 40.0, "exact_match": 30.0}),
                          ("squad2.0", {"reference_tuned_f1": 50.0,
                                        "reference_tuned_exact": 45.0})):
        write_results(os.path.join(downstream, task), metrics)
    average = (35 + 47.5 + 50 + 70 + 30) / 5

    result = paper_tables(f"--pretraining_runs={tmp_path}/*", f"--output={tmp_path}/ablation")
    assert result.returncode == 0, result.stderr
    tables = json.loads((tmp_path / "ablation.json").read_text())["ablation"]
    size = tiny_config().embedding_size

    [row3] = tables["table3"]
    assert row3["embedding_size"] == size
    for column, sharing in (("all_shared", "all"), ("not_shared", "none")):
        cell = row3[column]
        assert cell["run_dir"] == runs[sharing]
        assert cell["params_m"]["ours"] == paper_parameter_count(configs[sharing]) / 1e6
        assert cell["params_m"]["published"] is None  # the paper has no E=16 row
    assert row3["all_shared"]["avg"]["ours"] == pytest.approx(average)
    assert row3["not_shared"]["avg"]["ours"] is None

    assert [row["cross_layer_sharing"] for row in tables["table4"]] == ["all", "none"]
    assert tables["table4"][0][f"E={size}"]["avg"]["ours"] == pytest.approx(average)

    rows5 = {row["sentence_objective"]: row for row in tables["table5"]}
    assert list(rows5) == ["none", "sop"]  # the paper's order; no NSP run here
    sop_own, sop_other = best_metrics(runs["all"]), best_metrics(runs["all"], "nsp")
    assert rows5["sop"]["masked_lm_accuracy"]["ours"] == pytest.approx(
        100 * sop_own["masked_lm_accuracy"])
    assert rows5["sop"]["sentence_order_accuracy"]["ours"] == pytest.approx(
        100 * sop_own["sentence_order_accuracy"])
    assert rows5["sop"]["next_sentence_accuracy"]["ours"] == pytest.approx(
        100 * sop_other["next_sentence_accuracy"])
    assert rows5["sop"]["sentence_order_accuracy"]["published"] is None  # not ALBERT-base
    assert rows5["sop"]["avg"]["ours"] == pytest.approx(average)
    mlm_sop, mlm_nsp = best_metrics(runs["mlm_only"], "sop"), best_metrics(runs["mlm_only"], "nsp")
    assert rows5["none"]["masked_lm_accuracy"]["ours"] == pytest.approx(
        100 * mlm_sop["masked_lm_accuracy"])
    assert rows5["none"]["next_sentence_accuracy"]["ours"] == pytest.approx(
        100 * mlm_nsp["next_sentence_accuracy"])
    markdown = (tmp_path / "ablation.md").read_text()
    assert "Table 3" in markdown and "Table 4" in markdown and "Table 5" in markdown
    assert (f"| all | {size} | all | sop | {paper_parameter_count(configs['all']) / 1e6:.2f}M | "
            f"{100 * sop_own['masked_lm_accuracy']:.1f} | "
            f"{100 * sop_own['sentence_order_accuracy']:.1f} | "
            f"{100 * sop_other['next_sentence_accuracy']:.1f} | {average:.1f} |") in markdown

    # Two runs in one cell are refused, naming both.
    shutil.copytree(runs["none"], tmp_path / "again")
    repeated = paper_tables(f"--pretraining_runs={tmp_path}/*")
    assert repeated.returncode == 1
    assert re.search(r"Table 3: .*/again and .*/none are both runs of embedding_size 16, "
                     "cross_layer_sharing none", repeated.stderr)


def write_run(run_dir, config, objective, own, other):
    """A run directory as run_pretraining leaves it, with hand-written evaluation results."""
    os.makedirs(run_dir)
    record_run(str(run_dir), config, objective)
    own_task, other_task = ("nsp", "sop") if objective == "nsp" else ("sop", "nsp")
    write_results(run_dir, own, "best_results.json" if objective != "none"
                  else f"best_results_{own_task}.json", "masked_lm_accuracy")
    write_results(run_dir, other, f"best_results_{other_task}.json", "masked_lm_accuracy")


def test_albert_base_runs_get_the_papers_cells(tmp_path):
    base = {"all": AlbertConfig.from_dict(dict(BASE, embedding_size=128)),
            "none": AlbertConfig.from_dict(dict(BASE, embedding_size=128,
                                                cross_layer_sharing="none"))}
    write_run(tmp_path / "all", base["all"], "sop",
              {"masked_lm_accuracy": 0.53, "sentence_order_accuracy": 0.85},
              {"masked_lm_accuracy": 0.5, "next_sentence_accuracy": 0.8})
    write_run(tmp_path / "shared_none", base["none"], "sop", {"masked_lm_accuracy": 0.55}, {})
    write_run(tmp_path / "mlm", base["all"], "none",
              {"masked_lm_accuracy": 0.56, "sentence_order_accuracy": 0.52},
              {"masked_lm_accuracy": 0.54, "next_sentence_accuracy": 0.51})
    os.remove(tmp_path / "mlm" / "albert_config.json")  # the run manifest's record is the config
    result = paper_tables(f"--pretraining_runs={tmp_path}/*", f"--output={tmp_path}/tables")
    assert result.returncode == 0, result.stderr
    tables = json.loads((tmp_path / "tables.json").read_text())["ablation"]
    [row3] = tables["table3"]
    all_params = paper_parameter_count(base["all"]) / 1e6  # 11.09M, the paper's 12M
    assert row3["all_shared"]["params_m"] == {"ours": all_params, "published": 12,
                                              "difference": pytest.approx(all_params - 12)}
    assert row3["not_shared"]["params_m"]["published"] == 89
    assert row3["all_shared"]["avg"] == {"ours": None, "published": 80.1, "difference": None}
    table4 = {row["cross_layer_sharing"]: row["E=128"] for row in tables["table4"]}
    assert table4["none"]["avg"]["published"] == 81.6  # Table 4's, where Table 3 says 81.7
    rows5 = {row["sentence_objective"]: row for row in tables["table5"]}
    assert rows5["sop"]["sentence_order_accuracy"] == {
        "ours": pytest.approx(85.0), "published": 86.5, "difference": pytest.approx(-1.5)}
    assert rows5["sop"]["next_sentence_accuracy"]["ours"] == pytest.approx(80.0)
    assert rows5["sop"]["masked_lm_accuracy"]["ours"] == pytest.approx(53.0)  # its own records
    assert rows5["none"]["masked_lm_accuracy"]["ours"] == pytest.approx(56.0)  # the SOP records'
    assert rows5["none"]["next_sentence_accuracy"]["published"] == 52.4
    markdown = (tmp_path / "tables.md").read_text()
    assert f"| 128 | {paper_parameter_count(base['none']) / 1e6:.2f}M (89M, +0.1) | – (81.7) | 11.09M (12M, -0.9) |" in markdown
    assert "| SOP | 53.0 (54, -1.0) | 80.0 (78.9, +1.1) | 85.0 (86.5, -1.5) |" in markdown


# ------------------------------------------------------------------------------------------------
# The plan.

def test_the_plan_covers_every_task_with_the_papers_recipes_and_its_commands_parse(tmp_path):
    paths = PlanPaths(init_checkpoint="base/model.ckpt-best", runs_dir=str(tmp_path / "runs"))
    plan = reproduction_plan(paths, "v2_base", seeds=(1, 2, 3))
    commands = [shlex.split(line.replace("\\\n", " ")) for line in plan
                if not line.startswith("#")]
    assert len(commands) == 8 + 2 + 1 + 1
    glue = commands[:8]
    assert [c[c.index("--") + 2] for c in glue] == [
        f"--task_name={task}" for task in ("mnli", "qnli", "qqp", "rte", "sst-2", "mrpc", "cola",
                                            "sts-b")]
    assert all("--seeds=1,2,3" in command for command in glue)
    assert "--learning_rate=3e-05" in glue[3] and "--train_step=800" in glue[3]  # RTE's recipe
    assert "--learning_rate=1e-05" in commands[10]  # RACE, v2 recipe
    # It trains, sweeps and predicts (run_race's actions are off by default), each said once.
    assert [flag for flag in commands[10] if flag.startswith("--do_")] == [
        "--do_lower_case", "--do_train", "--do_eval", "--do_predict"]
    assert "--learning_rate=2e-05" in shlex.split(reproduction_plan(paths, "v1_base")[-3])
    assert commands[-1][-3:] == [f"--runs_dir={tmp_path}/runs", "--model=v2_base",
                                 f"--output={tmp_path}/runs/downstream_table"]
    # Every command's flags are the script's (absl checks them without running anything).
    for command in commands:
        if command[1] == "-m" and command[2] == "albert_tf.run_seeds":
            # The recipe is a run_classifier command; run_seeds gives it --output_dir per seed.
            command = [*command[command.index("--") + 1:], f"--output_dir={tmp_path}/seed_1"]
        else:
            command = command[1:]
        if command[0] == "-m":
            command = [f"-m {command[1]}", *command[2:]]
        result = run_command(*command, "--only_check_args")
        assert result.returncode == 0, (command[:2], result.stderr)

    average_only = reproduction_plan(paths, "v2_base", tasks=AVERAGE_TASKS)
    assert [line.split("--output_dir=")[1].split()[0] for line in average_only
            if "--output_dir=" in line] == [f"{tmp_path}/runs/{task}" for task in (
                "mnli", "sst-2", "squad1.1", "squad2.0", "race")]
    with pytest.raises(ValueError, match="Unknown task.*squad3"):
        reproduction_plan(paths, "v2_base", tasks=("squad3",))

    printed = paper_tables("--plan", "--model=v2_base", "--seeds=1,2,3",
                           "--init_checkpoint=base/model.ckpt-best", f"--runs_dir={tmp_path}/runs")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.splitlines() == "\n".join(plan).splitlines()
