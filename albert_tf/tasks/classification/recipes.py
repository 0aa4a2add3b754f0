"""The paper's GLUE fine-tuning recipes (the reference's run_glue.sh), as run_classifier flags.

``GLUE_RECIPES`` is keyed by --task_name; ``run_classifier.py --task_name=X --print_recipe`` (and
``python -m data_prep.glue --task_name=X --print_recipe``) prints one, preceded by its --task_name
(``glue_recipe``); scripts/run_glue.sh and the reproduction plan (python -m albert_tf.paper_tables
--plan) run them. Encoder dropout is a config key (``hidden_dropout_prob``), not a flag: a recipe
names it in ``encoder_dropout`` (the released v2 configs use 0).

    GLUE_RECIPES["rte"].flags()[:2]   # ['--warmup_step=200', '--learning_rate=3e-05']
"""

from __future__ import annotations

from albert_tf.training.recipe import NoRecipeError, Recipe

_SOURCE = "reference run_glue.sh"


def _recipe(warmup_step: int, learning_rate: float, train_step: int, save_checkpoints_steps: int,
            train_batch_size: int, max_seq_length: int = 512, encoder_dropout: float = 0.0,
            source: str = _SOURCE) -> Recipe:
    """One task's run_classifier flags, in run_glue.sh's order; every task also uses
    --optimizer=adamw and --do_lower_case."""
    return Recipe.of(source, encoder_dropout=encoder_dropout, warmup_step=warmup_step,
                     learning_rate=learning_rate, train_step=train_step,
                     save_checkpoints_steps=save_checkpoints_steps,
                     train_batch_size=train_batch_size, max_seq_length=max_seq_length,
                     optimizer="adamw", do_lower_case=True)


_MNLI = _recipe(1000, 3e-5, 10000, 100, 128)

# Keyed by run_classifier's --task_name; mismnli is MNLI's recipe, ax (predicted with an MNLI model)
# has none.
GLUE_RECIPES: dict[str, Recipe] = {
    "cola": _recipe(320, 1e-5, 5336, 100, 16),
    "sst-2": _recipe(1256, 1e-5, 20935, 100, 32),
    "mrpc": _recipe(200, 2e-5, 800, 100, 32),
    "sts-b": _recipe(214, 2e-5, 3598, 100, 16),
    "qqp": _recipe(1000, 5e-5, 14000, 100, 128, encoder_dropout=0.1),
    "mnli": _MNLI,
    "mismnli": _MNLI,
    "qnli": _recipe(1986, 1e-5, 33112, 200, 32),
    "rte": _recipe(200, 3e-5, 800, 100, 32, encoder_dropout=0.1),
    # Not in run_glue.sh: the paper's table (S=128); the checkpoint cadence is our choice.
    "wnli": _recipe(250, 2e-5, 2000, 100, 16, max_seq_length=128, encoder_dropout=0.1,
                    source="ALBERT paper (not in run_glue.sh)"),
}
# GLUE's diagnostic set: predicted with an MNLI model, never trained.
PREDICT_ONLY_TASKS = ("ax",)
# Every GLUE --task_name (data_prep/classification/glue_tasks.py's GLUE_TASKS, tested equal), known
# here without TensorFlow so that the commands refuse an unknown one before it loads.
GLUE_TASK_NAMES = (*GLUE_RECIPES, *PREDICT_ONLY_TASKS)
# The GLUE tasks that are a regression (glue_tasks' is_regression, tested equal), known here without
# TensorFlow so that run_classifier refuses its regression-only flags on the others before it loads.
REGRESSION_TASKS = ("sts-b",)


def unknown_task_message(task_name: str) -> str:
    """What is said of a --task_name that is not a GLUE task (glue_tasks.glue_task says the
    same)."""
    return f"unknown GLUE task_name {task_name!r}; expected one of {sorted(GLUE_TASK_NAMES)}"


def glue_recipe(task_name: str | None) -> Recipe:
    """The recipe of ``task_name`` (any case) preceded by ``--task_name=<task>``: what
    ``--print_recipe`` prints. NoRecipeError for no task, an unknown one or ax (predict-only)."""
    if not task_name:
        raise NoRecipeError("--print_recipe prints the recipe of a GLUE task: give --task_name.")
    name = task_name.lower()
    if name in PREDICT_ONLY_TASKS:
        raise NoRecipeError(f"task {name!r} is predict-only and has no recipe")
    if name not in GLUE_RECIPES:
        raise NoRecipeError(f"no recipe for task_name {task_name!r}; the GLUE tasks: "
                            f"{', '.join(GLUE_RECIPES)}")
    return GLUE_RECIPES[name].preceded_by(task_name=name)
