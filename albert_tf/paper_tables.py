"""Command line: the paper's tables from this project's runs, beside the published numbers, and the
plan of a full reproduction.

    # the downstream table (MNLI ... RACE, Avg) of one checkpoint's fine-tuning runs
    python -m albert_tf.paper_tables --runs_dir=runs/base --model=v2_base --output=runs/base/table
    # Tables 3, 4 and 5 from pretraining runs (run_pretraining --output_dir each)
    python -m albert_tf.paper_tables --pretraining_runs='ablation/*' --output=ablation/tables
    # every command of a full reproduction for a checkpoint (paths left out stay ${VARIABLES})
    python -m albert_tf.paper_tables --plan --model=v2_base --init_checkpoint=base/model.ckpt-best \\
        --runs_dir=runs/base

--runs_dir holds one subdirectory per task (mnli, qnli, qqp, rte, sst-2, mrpc, cola, sts-b,
squad1.1, squad2.0, race); a task's score is its seeds' median (seed_results.json of
albert_tf.run_seeds) or its run's best dev score (best_results.json). The paper's Avg is
((SQuAD1.1 F1 + EM)/2 + (SQuAD2.0 F1 + EM)/2 + MNLI + SST-2 + RACE) / 5. The tables print as
Markdown; --output=<prefix> also writes <prefix>.md and <prefix>.json. The library is
albert_tf/reproduction/.
"""

from __future__ import annotations

import os

from absl import app, flags

from albert_tf.cli import command_line, flag_definitions
from albert_tf.reproduction.plan import PLAN_TASKS

# The released models, whose published numbers the downstream table compares with.
RELEASED_MODELS = [f"{version}_{size}" for version in ("v2", "v1")
                   for size in ("base", "large", "xlarge", "xxlarge")]

flags.DEFINE_string("runs_dir", None, "Fine-tuning runs of one checkpoint, a subdirectory per "
                    "task (the downstream table); with --plan, where the plan puts them.")
flags.DEFINE_enum("model", None, RELEASED_MODELS, "The released model whose published numbers "
                  "go beside the downstream table (with --plan it also picks the RACE recipe).")
flags.DEFINE_list("pretraining_runs", [], "Comma-separated run_pretraining output directories "
                  "(globs allowed) for Tables 3, 4 and 5.")
flags.DEFINE_string("output", None, "Also write the tables to <output>.md and <output>.json.")
flags.DEFINE_bool("plan", False, "Print every command of a full reproduction for "
                  "--init_checkpoint instead of reading results.")
flags.DEFINE_list("seeds", ["1", "2", "3", "4", "5"], "--plan: the seeds of each GLUE task.")
flags.DEFINE_list("plan_tasks", [], "--plan: only these tasks (default: all of the table; "
                  "mnli,sst-2,squad1.1,squad2.0,race are those of the paper's Avg).")
flags.DEFINE_string("glue_dir", None, "--plan: GLUE data (a folder per task).")
flags.DEFINE_string("squad_dir", None, "--plan: SQuAD files (train-v1.1.json, dev-v1.1.json, "
                    "train-v2.0.json, dev-v2.0.json).")
flags.DEFINE_string("race_dir", None, "--plan: RACE data (RACE/{train,dev,test}/...).")
flag_definitions.define("init_checkpoint", "albert_config_file", "spm_model_file")
flag_definitions.check_seed_list()


def check_what_to_do() -> None:
    """One of the three jobs is asked for, and --model where it is needed (app.UsageError)."""
    values = flags.FLAGS
    if not (values.plan or values.runs_dir or values.pretraining_runs):
        raise app.UsageError("give --runs_dir (the downstream table), --pretraining_runs "
                             "(Tables 3-5) or --plan")
    if (values.plan or values.runs_dir) and not values.model:
        raise app.UsageError("--runs_dir and --plan need --model, the released model to compare "
                             "with (e.g. --model=v2_base)")


def check_output() -> None:
    """--output is a path prefix (the tables go to <output>.md and <output>.json), not a directory:
    a value ending in / or naming an existing directory is refused (app.UsageError)."""
    output = flags.FLAGS.output
    if output and (output.endswith(("/", os.sep)) or ("://" not in output
                                                      and os.path.isdir(output))):
        example = os.path.join(output.rstrip("/" + os.sep) or ".", "table")
        raise app.UsageError(f"--output={output} names a directory: the tables go to <output>.md "
                             f"and <output>.json, so give a path prefix, e.g. --output={example}")


def check_plan_tasks() -> None:
    """--plan_tasks names tasks of the plan (app.UsageError listing them otherwise)."""
    unknown = [task for task in flags.FLAGS.plan_tasks if task.lower() not in PLAN_TASKS]
    if unknown:
        raise app.UsageError(f"--plan_tasks: unknown task(s) {', '.join(unknown)}; expected some "
                             f"of {', '.join(PLAN_TASKS)}")


# --help, flag mistakes: before TensorFlow loads.
command_line.parse_before_imports(__name__, checks=[check_what_to_do, check_output,
                                                    check_plan_tasks])

import json  # noqa: E402

import tensorflow as tf  # noqa: E402

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.errors.user_error import MissingFileError, UserFileError  # noqa: E402
from albert_tf.files.atomic import atomic_write_text  # noqa: E402
from albert_tf.files.run_files import Output, RunFiles, check_run_files, inputs  # noqa: E402
from albert_tf.reproduction.ablation import (  # noqa: E402
    ablation_tables, expand_run_dirs, format_ablation_markdown)
from albert_tf.reproduction.downstream import (  # noqa: E402
    downstream_table, format_downstream_markdown)
from albert_tf.reproduction.plan import PlanPaths, reproduction_plan  # noqa: E402

FLAGS = flags.FLAGS


def print_plan() -> None:
    paths = PlanPaths(FLAGS.init_checkpoint, FLAGS.albert_config_file, FLAGS.spm_model_file,
                      FLAGS.glue_dir, FLAGS.squad_dir, FLAGS.race_dir, FLAGS.runs_dir)
    seeds = tuple(int(seed) for seed in FLAGS.seeds)
    tasks = tuple(task.lower() for task in FLAGS.plan_tasks) or PLAN_TASKS
    print("\n".join(reproduction_plan(paths, FLAGS.model, seeds, tasks)))


def main(argv: list[str]) -> None:
    del argv
    if FLAGS.plan:
        print_plan()
        return
    results, sections = {}, []
    if FLAGS.runs_dir:
        results["downstream"] = downstream_table(FLAGS.runs_dir, FLAGS.model)
        sections.append(format_downstream_markdown(results["downstream"]))
    if FLAGS.pretraining_runs:
        results["ablation"] = ablation_tables(expand_run_dirs(FLAGS.pretraining_runs))
        sections.append(format_ablation_markdown(results["ablation"]))
    markdown = "\n\n".join(sections) + "\n"
    print(markdown, end="")
    if FLAGS.output:
        atomic_write_text(FLAGS.output + ".md", markdown)
        atomic_write_text(FLAGS.output + ".json", json.dumps(results, indent=1, sort_keys=True)
                          + "\n")
        print(f"-> {FLAGS.output}.md, {FLAGS.output}.json")


def check_runs_dir() -> None:
    """The downstream table's --runs_dir exists and is a directory (MissingFileError,
    UserFileError): a mistyped path is an error, not a table of dashes."""
    runs_dir = FLAGS.runs_dir
    if not runs_dir or FLAGS.plan:
        return
    if not tf.io.gfile.exists(runs_dir):
        raise MissingFileError(f"--runs_dir {runs_dir} does not exist (the fine-tuning runs, a "
                               f"subdirectory per task: {', '.join(PLAN_TASKS)})")
    if not tf.io.gfile.isdir(runs_dir):
        raise UserFileError(f"--runs_dir {runs_dir} is a file, not a directory of runs")


def _json_files(directory: str, depths: range) -> list[str]:
    """The JSON files ``depth`` levels below ``directory``, for each depth of ``depths``."""
    return [path for depth in depths
            for path in tf.io.gfile.glob(os.path.join(directory, *["*"] * depth) + ".json")]


def run_files() -> RunFiles:
    """What the command reads (the JSON files of the runs: their results, configs and seeds'
    summaries) and writes (<output>.md and <output>.json).

    The downstream table reads nothing directly in --runs_dir, only its task directories (and
    their seeds' directories below them): the files of --runs_dir itself are no input, so that the
    table's own output there (the plan's <runs_dir>/downstream_table) is replaced by a rerun
    instead of refused as an input. A pretraining run's own files (its config, objective and
    results) are inputs, and so are those of its downstream/ runs."""
    read_paths = []
    if FLAGS.runs_dir and not FLAGS.plan:
        read_paths += _json_files(FLAGS.runs_dir, range(2, 4))
    if FLAGS.pretraining_runs and not FLAGS.plan:
        read_paths += [path for directory in expand_run_dirs(FLAGS.pretraining_runs)
                       for path in _json_files(directory, range(1, 5))]
    read = inputs(*(("a results file of the runs", path) for path in read_paths))
    written = (tuple(Output("--output", FLAGS.output + suffix) for suffix in (".md", ".json"))
               if FLAGS.output and not FLAGS.plan else ())
    return RunFiles(read, written)


if __name__ == "__main__":
    error_boundary.run(main, checks=[check_runs_dir, lambda: check_run_files(run_files())])
