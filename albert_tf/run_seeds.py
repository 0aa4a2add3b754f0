"""Command line: runs one fine-tuning recipe with several seeds and writes each seed's best dev
scores and their median (the paper reports the median of 5 runs on dev for GLUE).

    python -m albert_tf.run_seeds --seeds=1,2,3,4,5 --output_dir=runs/rte -- \\
        run_classifier.py --task_name=rte --data_dir=glue --do_train --do_eval ... (no --output_dir)

Everything after ``--`` is the script and its flags (``run_classifier.py``, ``run_squad.py``,
``run_race.py``, or ``-m <module>``), without ``--output_dir``, ``--seed`` or ``--input_seed``:
the seed ``S`` runs it with ``--seed=S --input_seed=S`` (the model initialisation, dropout and the
training data order) and ``--output_dir=<output_dir>/seed_S``, one seed after the other, with the
same Python. A seed whose directory already holds ``best_results.json`` (its sweep finished) is not
run again; a seed run that fails stops the driver, naming the seed, and a rerun resumes it. At the
end ``<output_dir>/seed_results.json`` holds every seed's best results and the median of each
metric (albert_tf/evaluation/seed_results.py), and the table is printed.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

from absl import app, flags

from albert_tf.cli import command_line

flags.DEFINE_list("seeds", ["1", "2", "3", "4", "5"], "The seeds, one run each.")
flags.DEFINE_string("output_dir", None, "Parent of the seeds' output directories (seed_<S>) and "
                    "where seed_results.json is written.")
flags.mark_flag_as_required("output_dir")
flags.register_validator("seeds", lambda seeds: bool(seeds) and all(
    seed.lstrip("-").isdigit() for seed in seeds), "expected a comma-separated list of integers")

# The flags the driver sets for each seed; the recipe given after -- must leave them out.
DRIVER_FLAGS = ("output_dir", "seed", "input_seed")
_PARSE = functools.partial(command_line.parse_flags, positional_arguments=True)

# --help and flag mistakes are answered here, before TensorFlow loads.
command_line.parse_before_imports(__name__, _PARSE)

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.errors.user_error import UserError  # noqa: E402
from albert_tf.evaluation.best_checkpoint import BEST_RESULTS_FILE  # noqa: E402
from albert_tf.evaluation.seed_results import (  # noqa: E402
    SEED_DIRECTORY_PREFIX, SEED_RESULTS_FILE, format_seed_results, seed_directory, summarize_seeds, write_seed_results)
from albert_tf.files.run_files import (  # noqa: E402
    RunFiles, WorkDirectory, check_run_files, fixed_outputs)


class SeedRunFailed(UserError, ChildProcessError):
    """The run of one seed failed; its own output (above) says why."""


def recipe_command(recipe: list[str]) -> list[str]:
    """The command of the recipe after ``--``, checked: a script or ``-m module``, without the
    flags the driver sets."""
    if not recipe:
        raise app.UsageError("give the recipe after --, e.g. -- run_classifier.py --task_name=rte "
                             "... (without --output_dir)")
    for argument in recipe:
        name = argument.lstrip("-").split("=", 1)[0]
        if argument.startswith("--") and name in DRIVER_FLAGS:
            raise app.UsageError(f"the recipe sets {argument.split('=', 1)[0]}, which run_seeds "
                                 "sets for each seed: leave it out")
    return [sys.executable, *recipe]


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
    for index, seed in enumerate(seeds, start=1):
        run_seed(command, values.output_dir, seed, f"{index}/{len(seeds)}")
    summary = summarize_seeds(values.output_dir, seeds)
    path = write_seed_results(values.output_dir, summary)
    print(format_seed_results(summary) + f"\n-> {path}")


def run_files() -> RunFiles:
    """What the driver writes in --output_dir: the seeds' directories and seed_results.json (each
    seed's run checks its own files)."""
    output_dir = WorkDirectory("--output_dir", flags.FLAGS.output_dir)
    return RunFiles(outputs=fixed_outputs(output_dir, [SEED_RESULTS_FILE,
                                                       SEED_DIRECTORY_PREFIX + "[-0-9]*"]),
                    work_directories=(output_dir,))


if __name__ == "__main__":
    error_boundary.run(main, checks=[lambda: check_run_files(run_files())], flags_parser=_PARSE)
