"""The recipe a run_seeds output directory holds the seeds of, kept beside them as
``<output_dir>/seed_recipe.json`` = {"recipe": [the script and its flags, as given after --]}.

run_seeds skips a seed whose ``best_results.json`` exists (its sweep finished), so that a rerun
resumes. Without a record of the recipe, a rerun with another recipe in the same directory (another
task, learning rate or checkpoint) would take the earlier recipe's finished seeds as its own and
report a median mixing the two. The first run records its recipe; a later run with another one
stops before any seed runs (``RecipeMismatch``), naming both. A directory written before this
record existed is recorded by its next run.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_write_text
from albert_tf.files.json_objects import read_json_object

RECIPE_FILE = "seed_recipe.json"
_KEY = "recipe"


class RecipeMismatch(UserError, ValueError):
    """The output directory holds the seeds of another recipe, or its record is unreadable."""


def recipe_path(output_dir: str) -> str:
    return os.path.join(output_dir, RECIPE_FILE)


def recorded_recipe(output_dir: str) -> list[str] | None:
    """The recipe recorded in ``output_dir``, or None when there is no record. RecipeMismatch for
    a record that is not run_seeds'."""
    path = recipe_path(output_dir)
    if not tf.io.gfile.exists(path):
        return None
    recipe = read_json_object(path, RecipeMismatch, path).get(_KEY)
    if not isinstance(recipe, list) or not all(isinstance(item, str) for item in recipe):
        raise RecipeMismatch(f"{path}: expected {{\"{_KEY}\": [the recipe's arguments]}}; it is "
                             "written by run_seeds in its --output_dir.")
    return recipe


def check_recipe(output_dir: str, recipe: list[str]) -> None:
    """RecipeMismatch when ``output_dir`` records another recipe than ``recipe`` (the arguments
    after --)."""
    stored = recorded_recipe(output_dir)
    if stored is not None and stored != recipe:
        raise RecipeMismatch(
            f"--output_dir={output_dir} holds the seeds of another recipe ({RECIPE_FILE}: "
            f"{' '.join(stored)}); this run's is {' '.join(recipe)}. Its finished seeds would be "
            "taken as this recipe's: rerun that recipe to resume it, or use another --output_dir.")


def record_recipe(output_dir: str, recipe: list[str]) -> None:
    """Writes ``RECIPE_FILE`` in ``output_dir`` (atomically) unless there is one."""
    if recorded_recipe(output_dir) is None:
        atomic_write_text(recipe_path(output_dir), json.dumps({_KEY: recipe}, indent=1) + "\n")
