"""Checks of the flags alone run before TensorFlow loads and before any work, in every command:
run_seeds' recipe (its script's sweep on), paper_tables --plan_tasks, run_classifier's GLUE task and
own-file label flags, the window's room for the special tokens, the sweep's single process, whole
micro-batches; and --help / --print_recipe / a command's output survive a reader that stops
reading (| head).

A few cases run as their user runs them, in a new process that reports whether TensorFlow was
imported; the rest in-process (tests/command_runner.py)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from albert_tf.tasks.classification.recipes import GLUE_TASK_NAMES, REGRESSION_TASKS
from tests.command_runner import command_flags, run_command, run_subprocess
from tests.shared_setup import REPO_ROOT, subprocess_env

MODEL = ("--albert_config_file=albert_base/albert_config.json",
         "--spm_model_file=albert_base/30k-clean.model")


def run_reporting_tensorflow(command, *arguments):
    return run_subprocess(command, *arguments, timeout=120, report_tensorflow=True)


@pytest.mark.subprocess  # whether TensorFlow was imported: a fresh process
@pytest.mark.parametrize("command, arguments, message", [
    ("-m albert_tf.run_seeds", ["--output_dir={tmp}/runs/rte", "--", "run_classifier.py",
                                "--task_name=rte", "--data_dir=glue", "--do_train", *MODEL],
     "run_seeds: error: the recipe runs run_classifier without --do_eval, so no seed would write "
     "best_results.json (its sweep's best dev scores, which run_seeds takes the median of): add "
     "--do_eval"),
    ("-m albert_tf.paper_tables", ["--plan", "--model=v2_base", "--plan_tasks=mnli,squad3"],
     "paper_tables: error: --plan_tasks: unknown task(s) squad3; expected some of mnli, qnli, "
     "qqp, rte, sst-2, mrpc, cola, sts-b, squad1.1, squad2.0, race"),
    ("run_classifier.py", ["--train_file={tmp}/train.csv", "--do_train", "--output_dir={tmp}/out",
                           "--task_type=regression", "--labels=low,high", *MODEL],
     "run_classifier: error: --labels names the classes of a classification; a regression "
     "(--task_type=regression) has none"),
    ("run_classifier.py", ["--task_name=rtee", "--data_dir=glue", "--do_train",
                           "--output_dir={tmp}/out", *MODEL],
     "run_classifier: error: unknown GLUE task_name 'rtee'; expected one of ['ax', 'cola', "
     "'mismnli', 'mnli', 'mrpc', 'qnli', 'qqp', 'rte', 'sst-2', 'sts-b', 'wnli']"),
])
def test_flag_mistakes_found_late_before_are_one_line_before_tensorflow_loads(
        tmp_path, command, arguments, message):
    result = run_reporting_tensorflow(command, *[argument.format(tmp=tmp_path)
                                                 for argument in arguments])
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [message, "tensorflow imported: False"]
    assert os.listdir(tmp_path) == []  # nothing created


# ------------------------------------------------------------------------------------------------
# run_seeds: the recipe, before any seed runs.

def run_seeds(tmp_path, *recipe):
    return run_command("-m albert_tf.run_seeds", "--seeds=1,2", f"--output_dir={tmp_path / 'out'}",
                       "--", *recipe)


NO_SWEEP = ("the recipe runs {script} without --{flag}, so no seed would write best_results.json "
            "(its sweep's best dev scores, which run_seeds takes the median of): add --{flag}")


@pytest.mark.parametrize("recipe, script, flag, hint", [
    (["run_classifier.py", "--task_name=rte", "--do_train"], "run_classifier", "do_eval", ""),
    (["run_classifier.py", "--do_eval", "--do_train", "--nodo_eval"], "run_classifier", "do_eval",
     ""),
    (["run_ner.py", "--do_train", "--do_eval=false"], "run_ner", "do_eval", ""),
    (["run_race.py", "--do_train"], "run_race", "do_eval", ""),
    (["run_race.py", "--do_eval", "-do_eval=0"], "run_race", "do_eval", ""),
    (["run_squad.py", "--do_train", "--do_eval"], "run_squad", "do_predict",
     " (run_squad has no --do_eval: its sweep is --do_predict)"),
    (["-m", "run_squad", "--do_train"], "run_squad", "do_predict", ""),
    (["/somewhere/run_classifier.py", "--do_train"], "run_classifier", "do_eval", ""),
])
def test_a_recipe_without_its_scripts_sweep_is_refused_before_any_seed(tmp_path, recipe, script,
                                                                       flag, hint):
    result = run_seeds(tmp_path, *recipe)
    message = NO_SWEEP.format(script=script, flag=flag) + hint
    assert result.error_line() == f"run_seeds: error: {message}"
    assert result.stdout == "" and not (tmp_path / "out").exists()


def test_a_recipe_flagfile_is_read_for_the_checks(tmp_path):
    flagfile = tmp_path / "rte.flags"
    flagfile.write_text("# the paper's RTE recipe\n--task_name=rte\n--do_train\n\n--seed=3\n")
    result = run_seeds(tmp_path, "run_classifier.py", f"--flagfile={flagfile}", "--do_eval")
    assert result.error_line() == ("run_seeds: error: the recipe sets --seed, which run_seeds sets "
                                   "for each seed: leave it out")
    flagfile.write_text("--task_name=rte\n--do_train\n--do_eval\n")
    nested = tmp_path / "nested.flags"
    nested.write_text(f"--flagfile={flagfile}\n--nodo_eval\n")
    assert run_seeds(tmp_path, "run_classifier.py", f"--flagfile={nested}").error_line() == (
        "run_seeds: error: " + NO_SWEEP.format(script="run_classifier", flag="do_eval"))
    missing = tmp_path / "missing.flags"
    assert run_seeds(tmp_path, "run_classifier.py", f"--flagfile={missing}").error_line() == (
        f"run_seeds: error: the recipe's --flagfile={missing} cannot be read: No such file or "
        "directory")


@pytest.mark.parametrize("recipe, message", [
    (["python", "run_classifier.py", "--do_eval"], "the recipe runs 'python': run_seeds runs "
     "run_classifier.py, run_race.py, run_squad.py, run_ner.py (or -m <script>), whose sweep "
     "writes the best_results.json it summarises; give the script first, without python"),
    (["-m", "my.trainer", "--do_eval"], "the recipe runs '-m my.trainer': run_seeds runs"),
    (["run_classifier.py", "--do_eval=yes"],
     "the recipe sets --do_eval=yes: expected --do_eval, --nodo_eval or --do_eval=true/false"),
    (["run_ner.py", "--do_eval", "-input_seed=4"],
     "the recipe sets --input_seed, which run_seeds sets for each seed: leave it out"),
    ([], "give the recipe after --, e.g. -- run_classifier.py --task_name=rte ... (without "
         "--output_dir)"),
])
def test_other_recipe_mistakes_are_one_line_before_any_seed(tmp_path, recipe, message):
    result = run_seeds(tmp_path, *recipe)
    assert result.error_line().startswith(f"run_seeds: error: {message}")
    assert not (tmp_path / "out").exists()


def test_each_scripts_sweep_flag_is_the_scripts_own_and_every_action_is_off_by_default():
    """run_seeds takes a sweep flag left out as off: every fine-tuning script's actions are off
    by default (run_race's too, unlike the reference's, whose --do_predict alone trained first)."""
    # Read from the source: importing the command would define its flags in absl's registry.
    source = open(os.path.join(REPO_ROOT, "albert_tf", "run_seeds.py"), encoding="utf-8").read()
    assignment = next(node for node in ast.parse(source).body if isinstance(node, ast.Assign)
                      and getattr(node.targets[0], "id", "") == "SWEEP_FLAGS")
    sweep_flags = ast.literal_eval(assignment.value)
    assert sorted(sweep_flags) == ["run_classifier", "run_ner", "run_race", "run_squad"]
    for script, flag in sweep_flags.items():
        defined = command_flags(f"{script}.py")
        assert flag in defined, script
        actions = [name for name in ("do_train", "do_eval", "do_predict") if name in defined]
        assert [defined[name].default for name in actions] == [False] * len(actions), script
    assert "do_eval" not in command_flags("run_squad.py")


# ------------------------------------------------------------------------------------------------
# The scripts' and data_prep commands' own flags.

RUN_FILES = ("--output_dir={tmp}/out", *MODEL)


@pytest.mark.parametrize("command, arguments, message", [
    ("run_classifier.py", ["--train_file={tmp}/t.csv", "--do_train", "--task_type=regression",
                           "--selection_metric=macro_f1"],
     "--selection_metric=macro_f1: a regression's best checkpoint is chosen by Pearson's r"),
    ("run_classifier.py", ["--train_file={tmp}/t.csv", "--do_train", "--labels=neg,,pos"],
     "--labels=neg,,pos: expected distinct non-empty class names"),
    ("run_classifier.py", ["--train_file={tmp}/t.csv", "--do_train", "--labels=neg,pos,neg"],
     "--labels=neg,pos,neg: expected distinct non-empty class names"),
    ("run_classifier.py", ["--task_name=RTE", "--data_dir=glue", "--do_train",
                           "--max_seq_length=2"],
     "--max_seq_length=2 is too short: the 3 special tokens of [CLS] a [SEP] b [SEP] need at "
     "least 3."),
    ("run_classifier.py", ["--task_name=rte", "--data_dir=glue", "--do_train", "--do_eval",
                           "--strategy=multi_worker_mirrored"],
     "--do_eval with --strategy=multi_worker_mirrored: the checkpoint sweep runs in one process; "
     "start it as a separate job with --nodo_train and --strategy=one_device or mirrored."),
    ("run_squad.py", ["--predict_file=dev.json", "--do_predict",
                      "--strategy=multi_worker_mirrored"],
     "--do_predict with --strategy=multi_worker_mirrored: the checkpoint sweep runs in one"),
    ("run_race.py", ["--data_dir=race", "--do_train", "--max_seq_length=64", "--max_qa_length=62"],
     "--max_seq_length=64 is too short: [CLS], two [SEP] and --max_qa_length=62 question+option "
     "pieces need at least 65."),
    ("run_ner.py", ["--train_file=train.conll", "--do_train", "--max_seq_length=2"],
     "--max_seq_length=2 is too short: [CLS], a piece and [SEP] need at least 3."),
    ("run_pretraining.py", ["--input_file=x", "--do_eval", "--strategy=multi_worker_mirrored"],
     "--do_eval with --strategy=multi_worker_mirrored: the checkpoint sweep runs in one process"),
    ("run_pretraining.py", ["--input_file=x", "--train_batch_size=10",
                            "--gradient_accumulation_steps=4"],
     "flags gradient_accumulation_steps=4, train_batch_size=10: --train_batch_size must be "
     "divisible by --gradient_accumulation_steps: each batch is split into that many "
     "micro-batches of equal size"),
])
def test_a_scripts_flag_mistake_is_refused_before_any_work(tmp_path, command, arguments, message):
    (tmp_path / "t.csv").write_text("text,label\ngood,pos\nbad,neg\n")
    files = RUN_FILES[:2] if command == "run_pretraining.py" else RUN_FILES  # no tokenizer
    result = run_command(command, *[argument.format(tmp=tmp_path)
                                    for argument in (*arguments, *files)])
    assert result.error_line().startswith(f"{command[:-3]}: error: {message}")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("module, arguments, message", [
    ("data_prep.glue", ["--task_name=rtee", "--data_dir=glue", "--cached_dir={tmp}/cache"],
     "unknown GLUE task_name 'rtee'; expected one of"),
    ("data_prep.glue", ["--data_dir=glue", "--cached_dir={tmp}/cache"], "--task_name is required."),
    ("data_prep.glue", ["--task_name=rte", "--data_dir=glue", "--spm_model_file=s.model"],
     "--cached_dir is required."),
    ("data_prep.glue", ["--task_name=rte", "--data_dir=glue", "--cached_dir={tmp}/cache"],
     "--spm_model_file is required (or --vocab_file for a WordPiece model)."),
    ("data_prep.race", ["--data_dir=race", "--split=dev", "--output_file={tmp}/cache/dev.tfrecord",
                        "--spm_model_file=s.model", "--max_seq_length=10", "--max_qa_length=8"],
     "--max_seq_length=10 is too short: [CLS], two [SEP] and --max_qa_length=8 question+option "
     "pieces need at least 11."),
    ("data_prep.race", ["--data_dir=race", "--split=dev", "--output_file={tmp}/cache/dev.tfrecord",
                        "--spm_model_file=s.model", "--middle_only", "--high_only"],
     "--middle_only and --high_only exclude each other; give at most one."),
    ("data_prep.squad", ["--input_file=dev.json", "--output_file={tmp}/cache/dev.tfrecord",
                         "--spm_model_file=s.model", "--max_seq_length=60"],
     "--max_seq_length=60 must exceed --max_query_length + 3 = 67."),
    ("albert_tf.export_hub", ["--spm_model_file=s.model"],
     "Give --export_path, --preprocessing_export_path or both."),
    ("albert_tf.export_hub", ["--spm_model_file=s.model", "--export_path={tmp}/cache/hub"],
     "--export_path needs --albert_config_file and --checkpoint."),
])
def test_a_commands_flag_mistake_is_refused_before_any_work(tmp_path, module, arguments, message):
    result = run_command(f"-m {module}", *[argument.format(tmp=tmp_path) for argument in arguments])
    assert result.error_line().startswith(f"{module.split('.')[-1]}: error: {message}")
    assert not (tmp_path / "cache").exists()


def test_the_glue_task_names_known_before_tensorflow_are_data_preps_tasks():
    from data_prep.classification.glue_tasks import GLUE_TASKS
    assert sorted(GLUE_TASK_NAMES) == sorted(GLUE_TASKS)
    assert sorted(REGRESSION_TASKS) == sorted(
        name for name, task in GLUE_TASKS.items() if task.is_regression)


# ------------------------------------------------------------------------------------------------
# A reader that stops reading: --help | head.

@pytest.mark.subprocess  # a pipe whose reader stops
@pytest.mark.parametrize("command", ["run_classifier.py", "-m albert_tf.paper_tables",
                                     "-m data_prep.glue"])
def test_help_piped_into_head_ends_quietly(command):
    shell = (f"{sys.executable} {command} --help | head -1; "
             "echo \"status ${PIPESTATUS[0]}\"")
    result = subprocess.run(["bash", "-c", shell], cwd=REPO_ROOT, env=subprocess_env(),
                            capture_output=True, text=True, timeout=120)
    first, status = result.stdout.splitlines()
    assert first and status == "status 0"
    assert result.stderr == ""  # no BrokenPipeError traceback


def closed_pipe_run(*command):
    """Runs the command with stdout a pipe whose reader has already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, *command], stdout=write_end, stderr=subprocess.PIPE,
                              cwd=REPO_ROOT, env=subprocess_env(), text=True, timeout=300)
    finally:
        os.close(write_end)


@pytest.mark.subprocess  # a pipe whose reader has gone
def test_print_recipe_and_a_commands_output_into_a_closed_pipe_end_quietly():
    recipe = closed_pipe_run("run_squad.py", "--print_recipe")
    assert (recipe.returncode, recipe.stderr) == (0, "")
    # A command's own output: quiet too, with the status of a process SIGPIPE ends (the work
    # after the print is not done).
    plan = closed_pipe_run("-m", "albert_tf.paper_tables", "--plan", "--model=v2_base")
    assert (plan.returncode, plan.stderr) == (141, "")
