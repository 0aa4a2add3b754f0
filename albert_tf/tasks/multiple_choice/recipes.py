"""The paper's RACE fine-tuning recipes (the reference's run_race.py defaults and README), as
run_race.py flags, per model version: learning rate 2e-5 for the v1 models, 1e-5 for v2 (the v1
recipe diverges on v2, which the released v2 configs also run with encoder dropout 0); both 12000
steps, 1000 warmup, batch 32, S=512, 0.1 dropout before the choice scorer; each trains and
evaluates every checkpoint on dev (--do_train --do_eval, which run_race.py leaves off by default,
unlike the reference's script, whose defaults turn them on), so that the printed recipe is a
complete run.

``run_race.py --print_recipe`` prints v2's, with --recipe_model_version=v1 v1's (``race_recipe``);
run_race.py's defaults are the v2 recipe's values; scripts/run_race.sh and the reproduction plan
run them (adding --do_predict).
"""

from __future__ import annotations

from albert_tf.training.recipe import NoRecipeError, Recipe

MODEL_VERSIONS = ("v1", "v2")
_SOURCE = "reference run_race.py defaults and README"


def _recipe(learning_rate: float) -> Recipe:
    return Recipe.of(_SOURCE, learning_rate=learning_rate, train_batch_size=32, train_step=12000,
                     warmup_step=1000, max_seq_length=512, max_qa_length=128,
                     save_checkpoints_steps=100, dropout_prob=0.1, optimizer="adamw",
                     do_lower_case=True, do_train=True, do_eval=True)


RACE_RECIPES: dict[str, Recipe] = {"v1": _recipe(2e-5), "v2": _recipe(1e-5)}


def race_recipe(model_version: str) -> Recipe:
    """The recipe for a ``v1`` or ``v2`` model (NoRecipeError for another version)."""
    if model_version not in RACE_RECIPES:
        raise NoRecipeError(f"Unknown model version {model_version!r}; expected one of "
                            f"{', '.join(MODEL_VERSIONS)}.")
    return RACE_RECIPES[model_version]
