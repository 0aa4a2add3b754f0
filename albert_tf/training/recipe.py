"""``Recipe``: the flags of one fine-tuning recipe of a script, where their numbers come from, and
the paper's settings that no flag sets.

Every task expresses its recipes with it (``albert_tf/tasks/<task>/recipes.py``); ``--print_recipe``
of each fine-tuning script prints one (``albert_tf/cli/flag_checks.print_recipe``), the shell
scripts and the reproduction plan run them. Neither TensorFlow nor Keras is imported, so a recipe
is printed before TensorFlow loads::

    recipe = Recipe.of("reference run_glue.sh", warmup_step=200, learning_rate=3e-5,
                       do_lower_case=True)
    recipe.flags()   # ['--warmup_step=200', '--learning_rate=3e-05', '--do_lower_case']
"""

from __future__ import annotations

import dataclasses
import math
import re

from albert_tf.errors.user_error import UserError

FlagValue = bool | int | float | str
_FLAG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class NoRecipeError(UserError, ValueError):
    """No recipe for what was asked (an unknown task or version, a task the paper never trains)."""


def format_flag(name: str, value: FlagValue) -> str:
    """``--name=value``; a boolean is ``--name`` or ``--noname`` (absl's spelling); a float is
    written with ``:g`` (``3e-05``, ``2``) unless that loses digits (then ``repr``)."""
    if isinstance(value, bool):
        return f"--{name}" if value else f"--no{name}"
    if isinstance(value, float):
        short = f"{value:g}"
        return f"--{name}={short if float(short) == value else repr(value)}"
    return f"--{name}={value}"


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One recipe of a script.

    flag_values: (flag name, value) pairs in the order ``flags()`` writes them; each name at most
      once, without the leading ``--``; a value is a bool, int, finite float or str.
    source: where the numbers come from (the reference's script, the paper, albert_tf's choice).
    encoder_dropout: the encoder's dropout the paper fine-tunes with, which no flag sets (only the
      config's ``hidden_dropout_prob``); None where the recipe keeps the config's.
    """

    flag_values: tuple[tuple[str, FlagValue], ...]
    source: str
    encoder_dropout: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "flag_values", tuple((name, value)
                                                      for name, value in self.flag_values))
        names = [name for name, _ in self.flag_values]
        for name, value in self.flag_values:
            if not isinstance(name, str) or not _FLAG_NAME.match(name):
                raise ValueError(f"recipe flag name {name!r}: expected a flag's name without "
                                 "'--'")
            if not isinstance(value, (bool, int, float, str)) or (
                    isinstance(value, float) and not math.isfinite(value)):
                raise ValueError(f"recipe flag --{name}: value {value!r} is not a bool, int, "
                                 "finite float or str")
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"recipe flags given more than once: {', '.join(repeated)}")
        if not self.source:
            raise ValueError("a recipe names its source")

    @classmethod
    def of(cls, source: str, /, *, encoder_dropout: float | None = None,
           **flag_values: FlagValue) -> "Recipe":
        """A recipe from keyword flags, in the order given."""
        return cls(tuple(flag_values.items()), source, encoder_dropout)

    def flags(self) -> list[str]:
        """The command-line flags, ``--name=value`` each (``--name`` for a true boolean)."""
        return [format_flag(name, value) for name, value in self.flag_values]

    def value(self, name: str) -> FlagValue:
        """The value of flag ``name`` (KeyError if the recipe does not set it)."""
        for flag_name, value in self.flag_values:
            if flag_name == name:
                return value
        raise KeyError(name)

    def preceded_by(self, **flag_values: FlagValue) -> "Recipe":
        """The same recipe with ``flag_values`` written first (e.g. the --task_name it is for)."""
        return dataclasses.replace(self, flag_values=(*flag_values.items(), *self.flag_values))
