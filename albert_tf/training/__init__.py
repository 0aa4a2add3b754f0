"""training: the loop every task shares (train / predict / evaluate a checkpoint), its optimizers,
its input pipelines and its ``tf.distribute`` strategy.

What belongs here: what runs any task's model, knowing a task only through the ``Task`` protocol;
the ``Recipe`` type of the tasks' fine-tuning recipes (recipe.py, TensorFlow-free).
What does not: a task's losses, outputs and metrics (albert_tf/tasks/<task>/task.py), the sweep over
checkpoints and the best-checkpoint choice (albert_tf/evaluation/), checkpoint formats
(albert_tf/checkpoints/), the settings that configure all this (albert_tf/cli/settings.py, read from the flags).
"""
