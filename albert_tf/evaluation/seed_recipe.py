"""The recipe a run_seeds output directory holds the seeds of: the record ``RECIPE`` of its run
manifest (albert_tf/files/run_manifest.py), the script and its flags as given after --.

run_seeds skips a seed whose ``best_results.json`` exists (its sweep finished), so that a rerun
resumes. Without a record of the recipe, a rerun with another recipe in the same directory (another
task, learning rate or checkpoint) would take the earlier recipe's finished seeds as its own and
report a median mixing the two. The first run records its recipe; a later run with another one
stops before any seed runs, naming both. A directory that records none (an earlier version's
without seed_recipe.json) is recorded by its next run.
"""

from __future__ import annotations

from albert_tf.files.run_manifest import Fact, add_facts, read_manifest, require_fact


RECIPE = Fact("seed_recipe", "the seeds of the recipe", describe=" ".join)
_SOURCE = "the arguments after --"


def check_recipe(output_dir: str, recipe: list[str]) -> None:
    """RunManifestError when ``output_dir`` records another recipe than ``recipe``."""
    require_fact(read_manifest(output_dir), RECIPE, recipe, _SOURCE)


def record_recipe(output_dir: str, recipe: list[str]) -> None:
    """Records ``recipe`` in ``output_dir``'s manifest unless it records one (checked first)."""
    add_facts(output_dir, {RECIPE: (recipe, _SOURCE)})
