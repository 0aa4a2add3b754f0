"""Every command of a full reproduction of the paper's downstream table for one pretrained
checkpoint: the paper's recipe per task, five seeds for each GLUE task (the paper reports their
median), one run each for SQuAD v1.1, v2.0 and RACE (the paper's are single runs), then the table.

The runs go where the downstream table reads them (``<runs_dir>/<task>``, reproduction/downstream.py),
so the last command assembles the table once they finish. Paths not given are left as shell
variables (``${GLUE_DIR}``), so the plan can be pasted into a cluster job that sets them.

    print("\n".join(reproduction_plan(PlanPaths(init_checkpoint="base/model.ckpt-best"), "v2_base")))
"""

from __future__ import annotations

import dataclasses
import shlex

from albert_tf.tasks.classification.recipes import GLUE_RECIPES
from albert_tf.tasks.multiple_choice.recipes import race_recipe
from albert_tf.tasks.question_answering.recipes import SQUAD_RECIPES

# The GLUE tasks of the paper's table, in its order.
GLUE_TABLE_TASKS = ("mnli", "qnli", "qqp", "rte", "sst-2", "mrpc", "cola", "sts-b")
# SQuAD files under --squad_dir, per version (the official names).
SQUAD_FILES = {"squad1.1": ("train-v1.1.json", "dev-v1.1.json"),
               "squad2.0": ("train-v2.0.json", "dev-v2.0.json")}


@dataclasses.dataclass(frozen=True)
class PlanPaths:
    """The inputs and the output root of a reproduction; None leaves a shell variable."""

    init_checkpoint: str | None = None
    albert_config_file: str | None = None
    spm_model_file: str | None = None
    glue_dir: str | None = None
    squad_dir: str | None = None
    race_dir: str | None = None
    runs_dir: str | None = None

    def value(self, name: str) -> str:
        """The path, shell-quoted, or ``${NAME}`` when not given."""
        path = getattr(self, name)
        return "${" + name.upper() + "}" if path is None else shlex.quote(path)


def _model_flags(paths: PlanPaths) -> list[str]:
    return [f"--init_checkpoint={paths.value('init_checkpoint')}",
            f"--albert_config_file={paths.value('albert_config_file')}",
            f"--spm_model_file={paths.value('spm_model_file')}"]


def _line(words: list[str]) -> str:
    """One command, continued over lines of at most ~100 characters."""
    lines, current = [], ""
    for word in words:
        if current and len(current) + len(word) + 1 > 96:
            lines.append(current + " \\")
            current = "    " + word
        else:
            current = f"{current} {word}" if current else word
    return "\n".join(lines + [current])


# Every task of the table, and those of the paper's average (what an ablation's Avg needs).
PLAN_TASKS = (*GLUE_TABLE_TASKS, "squad1.1", "squad2.0", "race")
AVERAGE_TASKS = ("mnli", "sst-2", "squad1.1", "squad2.0", "race")


def reproduction_plan(paths: PlanPaths, model: str, seeds: tuple[int, ...] = (1, 2, 3, 4, 5),
                      tasks: tuple[str, ...] = PLAN_TASKS, python: str = "python") -> list[str]:
    """The commands (with comment lines) of a full reproduction, or of ``tasks`` only (some of
    ``PLAN_TASKS``; ValueError naming an unknown one); ``model`` names the released model the
    table compares with (``v2_base``, ...) and chooses the RACE recipe (v1 or v2)."""
    unknown = [task for task in tasks if task not in PLAN_TASKS]
    if unknown:
        raise ValueError(f"Unknown task(s) {', '.join(unknown)} for the plan; expected some of "
                         f"{', '.join(PLAN_TASKS)}.")
    runs = paths.value("runs_dir")
    seed_list = ",".join(str(seed) for seed in seeds)
    plan = [f"# Reproduction of the paper's downstream table for {paths.value('init_checkpoint')}"
            f" (compared with {model}); runs in {runs}/<task>.",
            f"# GLUE: {len(seeds)} seeds per task, the median of each task's best dev scores."]
    for task in (task for task in GLUE_TABLE_TASKS if task in tasks):
        recipe = GLUE_RECIPES[task]
        if recipe.encoder_dropout:
            plan.append(f"# {task}: the paper fine-tunes with encoder dropout "
                        f"{recipe.encoder_dropout:g}: give a config with hidden_dropout_prob "
                        f"{recipe.encoder_dropout:g}.")
        plan.append(_line([python, "-m", "albert_tf.run_seeds", f"--seeds={seed_list}",
                           f"--output_dir={runs}/{task}", "--", "run_classifier.py",
                           f"--task_name={task}", *recipe.flags(),
                           f"--data_dir={paths.value('glue_dir')}", *_model_flags(paths),
                           "--do_train", "--do_eval"]))
    plan.append("# SQuAD v1.1 and v2.0: one run each (the paper's numbers are single runs).")
    for version, recipe in SQUAD_RECIPES.items():
        if version not in tasks:
            continue
        train_file, dev_file = SQUAD_FILES[version]
        squad_dir = paths.value("squad_dir")
        plan.append(_line([python, "run_squad.py", *recipe.flags(),
                           f"--train_file={squad_dir}/{train_file}",
                           f"--predict_file={squad_dir}/{dev_file}", *_model_flags(paths),
                           f"--output_dir={runs}/{version}", "--do_train", "--do_predict"]))
    if "race" in tasks:
        plan.append("# RACE: one run, the dev set selects the checkpoint, the test set is "
                    "predicted.")
        plan.append(_line([python, "run_race.py", *race_recipe(model.split("_")[0]).flags(),
                           f"--data_dir={paths.value('race_dir')}", *_model_flags(paths),
                           f"--output_dir={runs}/race", "--do_predict"]))
    plan.append("# The table (Markdown and JSON), beside the published numbers:")
    plan.append(_line([python, "-m", "albert_tf.paper_tables", f"--runs_dir={runs}",
                       f"--model={model}", f"--output={runs}/downstream_table"]))
    return plan
