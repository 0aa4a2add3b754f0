"""run_ner.py's starting recipe. The paper has no NER experiment, so this is albert_tf's documented
starting point (the worked example of docs/ner.md), not a reproduction: tune it on your dev set.
``run_ner.py --print_recipe`` prints it.
"""

from __future__ import annotations

from albert_tf.training.recipe import Recipe

NER_RECIPE = Recipe.of("albert_tf's starting point, docs/ner.md (the paper has no NER recipe)",
                       train_step=3000, warmup_step=300, learning_rate=3e-5, train_batch_size=32,
                       save_checkpoints_steps=500)
