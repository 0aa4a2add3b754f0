"""Command line: runs one fine-tuning recipe with several seeds and writes each seed's best dev
scores and their median (the paper reports the median of 5 runs on dev for GLUE).

    python -m albert_tf.run_seeds --seeds=1,2,3,4,5 --output_dir=runs/rte -- \\
        run_classifier.py --task_name=rte --data_dir=glue --do_train --do_eval ... (no --output_dir)

Everything after ``--`` is the script and its flags (``run_classifier.py``, ``run_squad.py``,
``run_race.py``, ``run_ner.py``, or ``-m <script>``), without ``--output_dir``, ``--seed`` or
``--input_seed``, and with the script's sweep on (``--do_eval``; run_squad's is ``--do_predict``),
which writes the ``best_results.json`` summarised here; the recipe is checked for these before
TensorFlow loads and any seed runs (its --flagfile files read too). The seed ``S`` runs it with
``--seed=S --input_seed=S`` (the model initialisation, dropout and the training data order) and
``--output_dir=<output_dir>/seed_S``, one seed after the other, with the same Python. A seed whose
directory already holds ``best_results.json`` (its sweep finished) is not run again; a seed run
that fails stops the driver, naming the seed, and a rerun resumes it. At the end
``<output_dir>/seed_results.json`` holds every seed's best results and the median of each metric
(albert_tf/evaluation/seed_results.py), and the table is printed. The run manifest of
``--output_dir`` records the recipe: a rerun with another one stops before any seed runs
(albert_tf/evaluation/seed_recipe.py), since it would take the other recipe's seeds as its own.
"""

from __future__ import annotations

import os
import subprocess
import sys

from absl import app, flags

from albert_tf.cli import command_line, flag_definitions

flags.DEFINE_list("seeds", ["1", "2", "3", "4", "5"], "The seeds, one run each.")
flags.DEFINE_string("output_dir", None, "Parent of the seeds' output directories (seed_<S>) and "
                    "where seed_results.json is written.")
flags.mark_flag_as_required("output_dir")
flag_definitions.check_seed_list()

# The flags the driver sets for each seed; the recipe given after -- must leave them out.
DRIVER_FLAGS = ("output_dir", "seed", "input_seed")
# Each script run_seeds runs: the flag of its checkpoint sweep, which writes the best_results.json
# that run_seeds summarises (off by default in every script).
SWEEP_FLAGS = {"run_classifier": "do_eval", "run_race": "do_eval", "run_squad": "do_predict",
               "run_ner": "do_eval"}
_TRUE, _FALSE = ("true", "t", "1"), ("false", "f", "0")


def _recipe_flags(arguments: list[str], seen: tuple[str, ...] = ()) -> list[str]:
    """The flag arguments of the recipe, those of its --flagfile files read in their place (as
    absl reads them); app.UsageError for a flagfile that cannot be read."""
    expanded = []
    for argument in arguments:
        name, _, value = argument.lstrip("-").partition("=")
        if not argument.startswith("-") or argument == "--":
            continue
        if name != "flagfile":
            expanded.append(argument)
            continue
        if value in seen:
            continue
        try:
            with open(value, encoding="utf-8") as handle:
                lines = [line.strip() for line in handle]
        except (OSError, UnicodeDecodeError) as error:
            raise app.UsageError(f"the recipe's --flagfile={value} cannot be read: "
                                 f"{getattr(error, 'strerror', None) or error}") from None
        expanded += _recipe_flags([line for line in lines
                                   if line and not line.startswith(("#", "//"))],
                                  (*seen, value))
    return expanded


def _script_name(recipe: list[str]) -> str:
    """The name of the recipe's script: ``run_classifier`` of ``path/run_classifier.py`` or of
    ``-m run_classifier``."""
    if recipe[0] == "-m" and len(recipe) > 1:
        return recipe[1].rsplit(".", 1)[-1]
    return os.path.splitext(os.path.basename(recipe[0]))[0]


def _flag_value(flag_arguments: list[str], name: str) -> bool:
    """The value of the boolean flag ``name`` the recipe sets (the last setting counts, as in
    absl); False (its default) when it sets none."""
    value = False
    for argument in flag_arguments:
        given, has_value, text = argument.lstrip("-").partition("=")
        if given == f"no{name}" and not has_value:
            value = False
        elif given == name:
            if not has_value or text.lower() in _TRUE:
                value = True
            elif text.lower() in _FALSE:
                value = False
            else:
                raise app.UsageError(f"the recipe sets {argument}: expected --{name}, "
                                     f"--no{name} or --{name}=true/false")
    return value


def recipe_command(recipe: list[str]) -> list[str]:
    """The command of the recipe after ``--``, checked before any seed runs (app.UsageError): one
    of the fine-tuning scripts (``SWEEP_FLAGS``; a path, or ``-m <module>``), without the flags
    the driver sets, with its sweep on (without it no seed writes best_results.json, and every
    seed would train to its end for nothing)."""
    if not recipe:
        raise app.UsageError("give the recipe after --, e.g. -- run_classifier.py --task_name=rte "
                             "... (without --output_dir)")
    script = _script_name(recipe)
    if script not in SWEEP_FLAGS:
        raise app.UsageError(
            f"the recipe runs {recipe[0] if recipe[0] != '-m' else ' '.join(recipe[:2])!r}: "
            f"run_seeds runs {', '.join(f'{name}.py' for name in SWEEP_FLAGS)} (or -m "
            "<script>), whose sweep writes the best_results.json it summarises; give the script "
            "first, without python")
    flag_arguments = _recipe_flags(recipe)
    for argument in flag_arguments:
        name = argument.lstrip("-").split("=", 1)[0]
        if name in DRIVER_FLAGS:
            raise app.UsageError(f"the recipe sets --{name}, which run_seeds sets for each seed: "
                                 "leave it out")
    sweep_flag = SWEEP_FLAGS[script]
    if not _flag_value(flag_arguments, sweep_flag):
        other = "do_eval" if sweep_flag == "do_predict" else None
        hint = (f" ({script} has no --{other}: its sweep is --{sweep_flag})"
                if other and any(argument.lstrip("-").split("=", 1)[0] == other
                                 for argument in flag_arguments) else "")
        raise app.UsageError(f"the recipe runs {script} without --{sweep_flag}, so no seed would "
                             "write best_results.json (its sweep's best dev scores, which "
                             f"run_seeds takes the median of): add --{sweep_flag}{hint}")
    return [sys.executable, *recipe]


_RECIPE: list[str] = []


def _parse(argv: list[str]) -> list[str]:
    """absl's parsing, the recipe after ``--`` kept for the checks before TensorFlow loads."""
    remaining = command_line.parse_flags(argv, positional_arguments=True)
    _RECIPE[:] = remaining[1:]
    return remaining


# --help, flag mistakes and the recipe's mistakes are answered here, before TensorFlow loads.
command_line.parse_before_imports(__name__, _parse, checks=[lambda: recipe_command(_RECIPE)])

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.errors.user_error import UserError  # noqa: E402
from albert_tf.evaluation.best_checkpoint import BEST_RESULTS_FILE  # noqa: E402
from albert_tf.evaluation.seed_results import (  # noqa: E402
    SEED_DIRECTORY_PREFIX, SEED_RESULTS_FILE, format_seed_results, seed_directory, summarize_seeds,
    write_seed_results)
from albert_tf.evaluation.seed_recipe import check_recipe, record_recipe  # noqa: E402
from albert_tf.files.run_files import (  # noqa: E402
    RunFiles, WorkDirectory, check_run_files, fixed_outputs)


# What a stop leaves (the running seed's process is killed with the driver: subprocess.run ends
# its child when interrupted).
SEEDS_STOPPED = ("the finished seeds and the checkpoints of the stopped one are kept; rerun the "
                 "same command to resume")


class SeedRunFailed(UserError, ChildProcessError):
    """The run of one seed failed; its own output (above) says why."""


def run_seed(command: list[str], output_dir: str, seed: int, position: str) -> None:
    """Runs the recipe for ``seed`` unless its sweep already finished; a failed run is an error
    naming the seed."""
    directory = seed_directory(output_dir, seed)
    if os.path.exists(os.path.join(directory, BEST_RESULTS_FILE)):
        print(f"=== seed {seed} ({position}): done earlier, {directory}", flush=True)
        return
    seeded = [*command, f"--seed={seed}", f"--input_seed={seed}", f"--output_dir={directory}"]
    print(f"=== seed {seed} ({position}): {' '.join(seeded)}", flush=True)
    status = subprocess.run(seeded, check=False).returncode
    if status != 0:
        raise SeedRunFailed(f"the run of seed {seed} failed (exit status {status}); its output "
                            f"is in {directory}: fix the cause and rerun to resume")


def main(argv: list[str]) -> None:
    command = recipe_command(argv[1:])
    values = flags.FLAGS
    seeds = [int(seed) for seed in values.seeds]
    record_recipe(values.output_dir, argv[1:])  # checked against the record before main
    for index, seed in enumerate(seeds, start=1):
        run_seed(command, values.output_dir, seed, f"{index}/{len(seeds)}")
    summary = summarize_seeds(values.output_dir, seeds)
    path = write_seed_results(values.output_dir, summary)
    print(format_seed_results(summary) + f"\n-> {path}")


def run_files() -> RunFiles:
    """What the driver writes in --output_dir: the seeds' directories and seed_results.json (and
    its run manifest, which records its recipe; each seed's run checks its own files)."""
    output_dir = WorkDirectory("--output_dir", flags.FLAGS.output_dir)
    return RunFiles(outputs=fixed_outputs(output_dir, [SEED_RESULTS_FILE,
                                                       SEED_DIRECTORY_PREFIX + "[-0-9]*"]),
                    work_directories=(output_dir,))


if __name__ == "__main__":
    error_boundary.run(main, checks=[lambda: check_recipe(flags.FLAGS.output_dir, _RECIPE),
                                     lambda: check_run_files(run_files())],
                       flags_parser=_parse, when_stopped=SEEDS_STOPPED)
