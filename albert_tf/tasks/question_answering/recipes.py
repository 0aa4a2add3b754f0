"""The paper's SQuAD fine-tuning recipes (the reference README's), as run_squad.py flags: 2 epochs
at 5e-5 for v1.1, 3 epochs at 3e-5 for v2.0, batch 48, 10% warmup, windows of 384 / 512 tokens with
stride 128.

``SQUAD_RECIPES`` is keyed by the version's name, as the results tables name their columns;
``run_squad.py --print_recipe`` prints v1.1's, with --version_2_with_negative v2.0's
(``squad_recipe``); scripts/run_squad.sh and the reproduction plan run them.
"""

from __future__ import annotations

from albert_tf.training.recipe import Recipe

_SOURCE = "reference README (SQuAD)"
# What both versions use, after each version's own flags.
_COMMON = dict(doc_stride=128, max_query_length=64, warmup_proportion=0.1,
               save_checkpoints_steps=1000, do_lower_case=True)

SQUAD_RECIPES: dict[str, Recipe] = {
    "squad1.1": Recipe.of(_SOURCE, learning_rate=5e-5, train_batch_size=48, num_train_epochs=2.0,
                          max_seq_length=384, **_COMMON),
    "squad2.0": Recipe.of(_SOURCE, learning_rate=3e-5, train_batch_size=48, num_train_epochs=3.0,
                          max_seq_length=512, version_2_with_negative=True, **_COMMON),
}


def squad_recipe(version_2_with_negative: bool) -> Recipe:
    """The v2.0 recipe for a model with the answer verifier (--version_2_with_negative), else
    v1.1's."""
    return SQUAD_RECIPES["squad2.0" if version_2_with_negative else "squad1.1"]
