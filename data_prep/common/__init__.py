"""common (data_prep): what every data command and task folder of data_prep shares; it knows no
task.

What belongs here: the feature-file format and its cache, ``tf.train.Example`` helpers, field
normalization and pair truncation as the reference does them, the worker pool, running a Beam
pipeline. What does not: anything one task alone needs (data_prep/<task>/), file handling that
albert_tf uses as well (albert_tf/files/), tokenization (albert_tf/tokenization/). This folder never
imports a task folder of data_prep or albert_tf/tasks/.
"""
