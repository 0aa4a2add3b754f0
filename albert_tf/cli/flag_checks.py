"""Checks of the flags alone, shared by the scripts and run before TensorFlow loads (they are the
``checks`` of ``command_line.parse_before_imports``): a mistake is one line ``<command>: error:
...`` in a fraction of a second. Each raises ``app.UsageError``.

``print_recipe`` is the one that answers --print_recipe: first in a script's list, it prints the
recipe and exits 0 before the others ask for data or outputs.
"""

from __future__ import annotations

import sys
from typing import Callable

from absl import app, flags

from albert_tf.errors.user_error import UserError
from albert_tf.training.recipe import Recipe


def print_recipe(recipe: Callable[[], Recipe]) -> Callable[[], None]:
    """The check answering --print_recipe, for a script whose recipe is ``recipe()`` (a function
    of the flags; its UserError, e.g. a task without a recipe, is the one-line usage error): with
    --print_recipe it prints the recipe's flags on one line and exits 0; without, it does nothing.
    Put it first in the checks, so that nothing else is asked for::

        command_line.parse_before_imports(__name__, checks=[
            flag_checks.print_recipe(lambda: glue_recipe(FLAGS.task_name)), check_flags])
    """
    def check() -> None:
        if not flags.FLAGS["print_recipe"].value:
            return
        try:
            chosen = recipe()
        except UserError as error:
            raise app.UsageError(str(error)) from None
        print(" ".join(chosen.flags()), flush=True)
        sys.exit(0)
    return check


def require_flags(*names: str) -> None:
    """UsageError naming the first of ``names`` that has no value."""
    for name in names:
        if flags.FLAGS[name].value in (None, ""):
            raise app.UsageError(f"--{name} is required.")


def require_action(*names: str) -> None:
    """UsageError "Nothing to do: set --a, --b or --c." unless one of the flags ``names`` is set."""
    if not any(flags.FLAGS[name].value for name in names):
        options = [f"--{name}" for name in names]
        raise app.UsageError(f"Nothing to do: set {', '.join(options[:-1])} or {options[-1]}.")


def require_tokenizer() -> None:
    """A tokenizer is given: --spm_model_file (or --vocab_file for a WordPiece model)."""
    if not (flags.FLAGS.spm_model_file or flags.FLAGS.vocab_file):
        raise app.UsageError("--spm_model_file is required (or --vocab_file for a WordPiece "
                             "model).")


def reject_hub_module_handle() -> None:
    """The reference's --albert_hub_module_handle (TF1 hub format) is not supported: say what to do."""
    if flags.FLAGS.albert_hub_module_handle:
        raise app.UsageError(
            "--albert_hub_module_handle: TF-Hub modules (the TF1 hub format) are not supported. "
            "Use the released checkpoint tarball instead (model.ckpt-best, albert_config.json, "
            "30k-clean.model): --init_checkpoint=<dir>/model.ckpt-best "
            "--albert_config_file=<dir>/albert_config.json --spm_model_file=<dir>/30k-clean.model. "
            "Reference checkpoints are read directly.")


def fine_tuning_checks(*actions: str, required: tuple[str, ...] = ()) -> None:
    """The checks every fine-tuning script runs: no TF1 hub module, one of ``actions`` set,
    --output_dir, --albert_config_file and ``required`` given, a tokenizer."""
    reject_hub_module_handle()
    require_action(*actions)
    require_flags("output_dir", "albert_config_file", *required)
    require_tokenizer()
