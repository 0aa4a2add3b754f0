"""Every command's command line: --help lists every flag and exits 0, flag mistakes (unknown flag,
value out of range, stray argument) are one line and exit 1 before TensorFlow is imported, and
TensorFlow's C++ start-up lines are held back. Whether TensorFlow was imported is a question to a
fresh process: these commands run in processes of their own (marked ``subprocess``; each answers
in a fraction of a second, before TensorFlow loads, but the last)."""

from __future__ import annotations

import glob
import math
import os

import pytest
from absl import flags

from albert_tf.cli import command_line, flag_definitions
from tests import command_runner
from tests.command_runner import command_flags, run_subprocess
from tests.shared_setup import REPO_ROOT

# Every command, as its user starts it (the script or -m module), one of its own flags and one
# shared flag; the key is the name it prints in its messages.
COMMANDS = {
    "run_pretraining": ("run_pretraining.py", "eval_input_file", "num_train_steps"),
    "run_classifier": ("run_classifier.py", "threshold_to_export", "task_name"),
    "run_squad": ("run_squad.py", "n_best_size", "doc_stride"),
    "run_race": ("run_race.py", "num_keep_checkpoint", "max_qa_length"),
    "run_ner": ("run_ner.py", "tag_scheme", "doc_stride"),
    "export_hub": ("-m albert_tf.export_hub", "export_path", "spm_model_file"),
    "model_report": ("-m albert_tf.model_report", "batch_size", "dtype"),
    "run_seeds": ("-m albert_tf.run_seeds", "seeds", "output_dir"),
    "paper_tables": ("-m albert_tf.paper_tables", "pretraining_runs", "init_checkpoint"),
    "convert_checkpoint": ("-m albert_tf.convert_checkpoint", "tf1_checkpoint",
                           "init_from_group0"),
    "create_pretraining_data": ("-m data_prep.create_pretraining_data", "dupe_factor",
                                "max_predictions_per_seq"),
    "train_sentencepiece": ("-m data_prep.train_sentencepiece", "model_prefix",
                            "do_lower_case"),
    "glue": ("-m data_prep.glue", "splits", "cached_dir"),
    "squad": ("-m data_prep.squad", "is_training", "max_query_length"),
    "race": ("-m data_prep.race", "split", "middle_only"),
}

def run_command(name: str, *arguments: str, tensorflow_report: bool = False):
    """The command ``name`` in a process of its own, in the user's environment
    (TF_CPP_MIN_LOG_LEVEL unset); ``tensorflow_report``: stderr ends with whether TensorFlow was
    imported."""
    command, _, _ = COMMANDS[name]
    return run_subprocess(command, *arguments, timeout=300, TF_CPP_MIN_LOG_LEVEL=None,
                          report_tensorflow=tensorflow_report)


@pytest.mark.subprocess
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_lists_own_shared_and_logging_flags_and_exits_0(name):
    _, own_flag, shared_flag = COMMANDS[name]
    result = run_command(name, "--help", tensorflow_report=True)
    assert result.returncode == 0, result.stderr
    assert f"{name} flags:" in result.stdout
    for flag in (own_flag, shared_flag, "verbosity"):
        assert f"--{flag}:" in result.stdout or f"--[no]{flag}:" in result.stdout, flag
    assert "tensorflow imported: False" in result.stderr


@pytest.mark.subprocess
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_misspelt_flag_is_one_line_with_a_suggestion_before_tensorflow_loads(name):
    _, own_flag, _ = COMMANDS[name]
    misspelt = own_flag[:-1] + own_flag[-1].upper() + "x"
    result = run_command(name, f"--{misspelt}=1", tensorflow_report=True)
    assert result.returncode == 1
    message, report = result.stderr.strip().splitlines()
    assert message.startswith(f"{name}: error: Unknown command line flag '{misspelt}'")
    assert f"Did you mean: {own_flag}" in message
    assert report == "tensorflow imported: False"


@pytest.mark.subprocess
@pytest.mark.parametrize("name, argument, expected", [
    ("run_squad", "--n_best_size=0", "flag --n_best_size=0: expected a finite value >= 1"),
    ("run_squad", "--max_answer_length=-3", "flag --max_answer_length=-3: expected"),
    ("run_squad", "--num_train_epochs=inf", "flag --num_train_epochs=inf: expected a finite value > 0"),
    ("run_squad", "--train_batch_size=0", "flag --train_batch_size=0: expected a finite value >= 1"),
    ("run_classifier", "--learning_rate=nan", "flag --learning_rate=nan: expected a finite value > 0"),
    ("run_classifier", "--patience_tolerance=nan", "flag --patience_tolerance=nan: expected a finite value"),
    ("run_race", "--dropout_prob=1", "flag --dropout_prob=1.0: expected a finite value in [0, 1)"),
    ("run_pretraining", "--save_checkpoints_steps=0", "expected a finite value >= 1"),
    ("create_pretraining_data", "--masked_lm_prob=1.5", "expected a finite value in [0, 1]"),
    ("glue", "--splits=train,validation", "expected some of ['train', 'dev', 'test']"),
    ("squad", "--doc_stride=0", "flag --doc_stride=0: expected a finite value >= 1"),
])
def test_a_value_out_of_range_is_a_flag_error_before_tensorflow_loads(name, argument, expected):
    result = run_command(name, argument, tensorflow_report=True)
    assert result.returncode == 1
    message, report = result.stderr.strip().splitlines()
    assert message.startswith(f"{name}: error: ") and expected in message
    assert report == "tensorflow imported: False"


@pytest.mark.subprocess
def test_only_check_args_checks_the_flags_and_stops_before_tensorflow_loads():
    """A cluster job's flags can be checked in a fraction of a second (absl's --only_check_args)."""
    job = ("--task_name=rte", "--data_dir=glue", "--do_train", "--output_dir=out",
           "--albert_config_file=config.json", "--spm_model_file=30k-clean.model")
    checked = run_command("run_classifier", *job, "--learning_rate=2e-5", "--only_check_args",
                          tensorflow_report=True)
    assert (checked.returncode, checked.stderr.strip()) == (0, "tensorflow imported: False")
    incomplete = run_command("run_classifier", *job[:-1], "--only_check_args")
    assert incomplete.returncode == 1 and "--spm_model_file is required" in incomplete.stderr
    wrong = run_command("run_classifier", "--learning_rate=-1", "--only_check_args")
    assert wrong.returncode == 1 and "flag --learning_rate=-1.0: expected" in wrong.stderr


_GLUE_RTE = ("--task_name=rte --warmup_step=200 --learning_rate=3e-05 --train_step=800 "
             "--save_checkpoints_steps=100 --train_batch_size=32 --max_seq_length=512 "
             "--optimizer=adamw --do_lower_case")
_SQUAD_COMMON = ("--doc_stride=128 --max_query_length=64 --warmup_proportion=0.1 "
                 "--save_checkpoints_steps=1000 --do_lower_case")
_RACE = ("--train_batch_size=32 --train_step=12000 --warmup_step=1000 --max_seq_length=512 "
         "--max_qa_length=128 --save_checkpoints_steps=100 --dropout_prob=0.1 --optimizer=adamw "
         "--do_lower_case --do_train --do_eval")


@pytest.mark.subprocess
@pytest.mark.parametrize("name, arguments, printed", [
    ("run_classifier", ["--task_name=RTE"], _GLUE_RTE),
    # Before any other check: the own-file flags would be refused beside --task_name.
    ("run_classifier", ["--task_name=rte", "--train_file=x.csv", "--do_train"], _GLUE_RTE),
    ("glue", ["--task_name=rte"], _GLUE_RTE),
    ("run_squad", [], "--learning_rate=5e-05 --train_batch_size=48 --num_train_epochs=2 "
                      "--max_seq_length=384 " + _SQUAD_COMMON),
    ("run_squad", ["--version_2_with_negative", "--do_train"],
     "--learning_rate=3e-05 --train_batch_size=48 --num_train_epochs=3 --max_seq_length=512 "
     "--version_2_with_negative " + _SQUAD_COMMON),
    ("run_race", [], "--learning_rate=1e-05 " + _RACE),
    ("run_race", ["--recipe_model_version=v1", "--task_name=other"],
     "--learning_rate=2e-05 " + _RACE),
    ("run_ner", ["--do_eval"], "--train_step=3000 --warmup_step=300 --learning_rate=3e-05 "
                               "--train_batch_size=32 --save_checkpoints_steps=500"),
])
def test_print_recipe_prints_one_line_and_exits_0_before_tensorflow_and_other_checks(
        name, arguments, printed):
    """--print_recipe needs no data, model or output: it answers before every other check."""
    result = run_command(name, *arguments, "--print_recipe", tensorflow_report=True)
    assert (result.returncode, result.stdout) == (0, printed + "\n"), result.stderr
    assert result.stderr.strip() == "tensorflow imported: False"


@pytest.mark.subprocess
@pytest.mark.parametrize("name, arguments, message", [
    ("run_classifier", ["--task_name=ax"], "task 'ax' is predict-only and has no recipe"),
    ("run_classifier", [], "give --task_name"),
    ("glue", ["--task_name=stsb"], "no recipe for task_name 'stsb'; the GLUE tasks: cola,"),
    ("run_race", ["--recipe_model_version=v3"], "flag --recipe_model_version=v3: value should"),
])
def test_print_recipe_without_a_recipe_is_one_line_and_exit_1(name, arguments, message):
    result = run_command(name, *arguments, "--print_recipe", tensorflow_report=True)
    assert result.returncode == 1 and result.stdout == ""
    error, report = result.stderr.strip().splitlines()
    assert error.startswith(f"{name}: error: ") and message in error, error
    assert report == "tensorflow imported: False"


@pytest.mark.subprocess
def test_a_stray_argument_is_refused():
    result = run_command("run_squad", "--do_train", "true")
    assert result.returncode == 1
    assert result.stderr.strip() == ("run_squad: error: unexpected argument(s) 'true': every "
                                     "setting is a --flag=value")


@pytest.mark.subprocess
def test_tensorflow_start_up_lines_are_held_back_unless_verbosity_asks(tmp_path):
    """A mistake found after TensorFlow loaded is still the only line on stderr."""
    arguments = ("--do_train", f"--output_dir={tmp_path / 'out'}", "--albert_config_file=/no/such/config.json",
                 "--train_file=x.json", "--spm_model_file=x.model")
    quiet = run_command("run_squad", *arguments, tensorflow_report=True)
    assert quiet.returncode == 1
    assert quiet.stderr.strip().splitlines() == [
        "run_squad: error: ALBERT config file not found: /no/such/config.json",
        "tensorflow imported: True"]


def test_help_text_puts_every_flag_in_exactly_one_group():
    values = flags.FlagValues()
    shared = ("output_dir", "max_seq_length", "do_train", "learning_rate", "seed", "use_tpu")
    flag_definitions.define(*shared, flag_values=values)
    flags.DEFINE_string("own_flag", None, "The command's own flag.", flag_values=values)
    original = flags.FLAGS
    try:
        flags.FLAGS = values
        text = command_line.help_text("Does things.")
    finally:
        flags.FLAGS = original
    listed = [line.split(":")[0].strip() for line in text.splitlines() if line.startswith("  --")]
    names = [name.replace("--[no]", "").replace("--", "") for name in listed]
    assert sorted(names) == sorted((*shared, "own_flag"))
    assert text.index("own_flag") < text.index("Model, tokenizer and files:")


def test_every_shared_flag_is_in_one_help_group_and_numeric_ones_have_a_range():
    grouped = [name for section in flag_definitions.SECTIONS.values() for name in section]
    assert sorted(grouped) == sorted(flag_definitions.SPECS)
    numeric = {name for name, spec in flag_definitions.SPECS.items()
               if spec.define in (flags.DEFINE_integer, flags.DEFINE_float)}
    assert numeric - set(flag_definitions.RANGES) == {"seed", "input_seed"}


@pytest.mark.parametrize("valid, accepted, refused", [
    (flag_definitions.AT_LEAST_ONE, [1, 7, None], [0, -1, math.inf, math.nan]),
    (flag_definitions.POSITIVE, [1e-9, 3.0], [0.0, -1.0, math.inf, math.nan]),
    (flag_definitions.PROBABILITY, [0.0, 0.5], [1.0, -0.1, math.nan]),
    (flag_definitions.FRACTION, [0.0, 1.0], [1.01, -0.01]),
])
def test_ranges_accept_and_refuse(valid, accepted, refused):
    assert all(valid.accepts(value) for value in accepted)
    assert not any(valid.accepts(value) for value in refused)


def commands_in_the_repository() -> set[str]:
    """Every command as its user starts it (the scripts at the root, ``-m <module>`` of albert_tf
    and data_prep): the modules that parse their command line with parse_before_imports."""
    commands = {os.path.basename(path) for path in glob.glob(os.path.join(REPO_ROOT, "run_*.py"))}
    for package in ("albert_tf", "data_prep"):
        for path in glob.glob(os.path.join(REPO_ROOT, package, "*.py")):
            with open(path, encoding="utf-8") as source:
                if "command_line.parse_before_imports(__name__" in source.read():
                    module = os.path.splitext(os.path.basename(path))[0]
                    commands.add(f"-m {package}.{module}")
    return commands


def test_commands_lists_every_command():
    assert {command for command, _, _ in COMMANDS.values()} == commands_in_the_repository()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_float_flag_refuses_nan_and_infinities(name):
    """No float flag of any command gives NaN or an infinity a meaning: each is refused when the
    command line is parsed, naming the flag (run_classifier --patience_tolerance=nan used to
    choose an arbitrary patience, --regression_threshold=inf was taken)."""
    command = COMMANDS[name][0]
    defined = command_flags(command)
    float_flags = [flag for flag, value in defined.items()
                   if isinstance(value.parser, flags.FloatParser)]
    # Every string flag without a default gets one, so that absl's required flags are given and
    # the float's refusal is the message.
    strings = [f"--{flag}=x" for flag, value in defined.items()
               if type(value.parser) is flags.ArgumentParser and value.default is None]
    for flag in float_flags:
        for given, value in (("nan", "nan"), ("inf", "inf"), ("-Infinity", "-inf")):
            result = command_runner.run_command(command, *strings, f"--{flag}={given}")
            message = result.error_line()
            assert result.stderr.strip() == message, (flag, given)
            # (-inf below absl's lower_bound is refused by absl: "-inf is not a non-negative
            # number".)
            assert message.startswith(f"{name}: error: flag --{flag}="), (flag, given)
            assert (f"--{flag}={value}: expected a finite value" in message
                    or value == "-inf" and "not a non-negative number" in message), message


def test_a_nan_default_is_not_a_value_given():
    """run_classifier's --threshold_to_export is NaN by default (no threshold): a run without
    it passes the checks, one giving nan is refused."""
    job = ("--task_name=rte", "--data_dir=glue", "--do_train", "--output_dir=out",
           "--albert_config_file=config.json", "--spm_model_file=30k-clean.model")
    accepted = command_runner.run_command("run_classifier.py", *job, "--only_check_args")
    assert accepted.returncode == 0, accepted.stderr
    refused = command_runner.run_command("run_classifier.py", *job, "--threshold_to_export=NaN",
                                         "--only_check_args")
    assert refused.error_line() == ("run_classifier: error: flag --threshold_to_export=nan: "
                                    "expected a finite value")


def test_the_splits_flag_values_match_the_readers():
    from data_prep.classification.processors import SPLITS as GLUE_SPLITS
    from data_prep.multiple_choice.reader import SPLITS as RACE_SPLITS
    assert flag_definitions.DATA_SPLITS == GLUE_SPLITS == RACE_SPLITS
