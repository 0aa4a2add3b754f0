"""The Recipe type (albert_tf/training/recipe.py) and every task's recipes expressed with it."""

from __future__ import annotations

import dataclasses
import re

import pytest

from albert_tf.tasks.classification.recipes import GLUE_RECIPES, glue_recipe
from albert_tf.tasks.multiple_choice.recipes import MODEL_VERSIONS, RACE_RECIPES, race_recipe
from albert_tf.tasks.question_answering.recipes import SQUAD_RECIPES, squad_recipe
from albert_tf.tasks.token_classification.recipes import NER_RECIPE
from albert_tf.training.recipe import NoRecipeError, Recipe, format_flag
from tests.command_runner import run_command


def test_flags_keep_the_order_and_format_each_value():
    recipe = Recipe.of("a test", warmup_step=200, learning_rate=3e-5, num_train_epochs=2.0,
                       dropout_prob=0.1, optimizer="adamw", do_lower_case=True,
                       use_xla=False, poly_power=1.0000001)
    assert recipe.flags() == [
        "--warmup_step=200", "--learning_rate=3e-05", "--num_train_epochs=2",
        "--dropout_prob=0.1", "--optimizer=adamw", "--do_lower_case", "--nouse_xla",
        "--poly_power=1.0000001"]  # ":g" would lose digits: repr
    assert recipe.value("learning_rate") == 3e-5 and recipe.source == "a test"
    assert recipe.encoder_dropout is None
    with pytest.raises(KeyError):
        recipe.value("train_step")
    assert format_flag("learning_rate", 0.00176) == "--learning_rate=0.00176"


def test_a_recipe_is_frozen_and_checked():
    recipe = Recipe((("train_step", 10),), "a test", encoder_dropout=0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.source = "another"  # type: ignore[misc]
    assert recipe.preceded_by(task_name="rte").flags() == ["--task_name=rte", "--train_step=10"]
    assert recipe.flags() == ["--train_step=10"] and hash(recipe) == hash(recipe)
    with pytest.raises(ValueError, match="more than once: train_step"):
        recipe.preceded_by(train_step=5)
    with pytest.raises(ValueError, match="without '--'"):
        Recipe((("--train_step", 10),), "a test")
    with pytest.raises(ValueError, match="finite float"):
        Recipe.of("a test", learning_rate=float("nan"))
    with pytest.raises(ValueError, match="not a bool, int"):
        Recipe((("labels", ["a"]),), "a test")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="names its source"):
        Recipe.of("", train_step=1)


def test_glue_recipes_keep_the_reference_flags_and_order():
    assert GLUE_RECIPES["rte"].flags() == [
        "--warmup_step=200", "--learning_rate=3e-05", "--train_step=800",
        "--save_checkpoints_steps=100", "--train_batch_size=32", "--max_seq_length=512",
        "--optimizer=adamw", "--do_lower_case"]
    assert GLUE_RECIPES["wnli"].flags()[5] == "--max_seq_length=128"
    assert GLUE_RECIPES["mismnli"] is GLUE_RECIPES["mnli"]
    assert {name for name, recipe in GLUE_RECIPES.items() if recipe.encoder_dropout} == {
        "qqp", "rte", "wnli"}
    assert glue_recipe("RTE").flags() == ["--task_name=rte", *GLUE_RECIPES["rte"].flags()]
    for task_name, message in ((None, "give --task_name"), ("ax", "predict-only"),
                               ("stsb", "no recipe for task_name 'stsb'")):
        with pytest.raises(NoRecipeError, match=message):
            glue_recipe(task_name)


def test_squad_race_and_ner_recipes():
    assert squad_recipe(False) is SQUAD_RECIPES["squad1.1"]
    assert squad_recipe(True).flags() == [
        "--learning_rate=3e-05", "--train_batch_size=48", "--num_train_epochs=3",
        "--max_seq_length=512", "--version_2_with_negative", "--doc_stride=128",
        "--max_query_length=64", "--warmup_proportion=0.1", "--save_checkpoints_steps=1000",
        "--do_lower_case"]
    assert set(RACE_RECIPES) == set(MODEL_VERSIONS)
    assert race_recipe("v1").value("learning_rate") == 2e-5
    assert race_recipe("v2").value("learning_rate") == 1e-5
    assert race_recipe("v1").flags()[1:] == race_recipe("v2").flags()[1:]
    with pytest.raises(NoRecipeError, match="Unknown model version 'v3'"):
        race_recipe("v3")
    assert "paper has no NER recipe" in NER_RECIPE.source


def test_run_race_defaults_are_the_v2_recipe():
    """run_race.py's defaults are the reference's, which are the v2 recipe: every valued flag of
    the recipe is the default --help prints. Its actions are not (off, as in every script): the
    recipe gives them, so that it is a complete run."""
    result = run_command("run_race.py", "--help")
    help_text = " ".join(result.stdout.split())
    defaults = {name: re.search(rf"--{name}: .*?\(default: '([^']*)'\)", help_text).group(1)
                for name, value in RACE_RECIPES["v2"].flag_values if not isinstance(value, bool)}
    assert [f"--{name}={value}" for name, value in defaults.items()] == [
        flag for flag in RACE_RECIPES["v2"].flags() if "=" in flag]
    assert "--do_lower_case" in RACE_RECIPES["v2"].flags()  # a default too
    for version in MODEL_VERSIONS:
        assert RACE_RECIPES[version].flags()[-2:] == ["--do_train", "--do_eval"]
    for action in ("do_train", "do_eval"):
        assert re.search(rf"--\[no\]{action}: .*?\(default: '(\w+)'\)",
                         help_text).group(1) == "false", action
