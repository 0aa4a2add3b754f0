"""evaluation: what every task's evaluation shares: the reference's sweep over saved checkpoints,
the best checkpoint that prediction and export start from, and the metrics on whole NumPy arrays.

What belongs here: task-independent evaluation (a task is reached only through
``Trainer.evaluate_checkpoint`` and a metric key). What does not: a task's own metrics and
prediction files (GLUE in albert_tf/tasks/classification/metrics.py, the official SQuAD scoring in
albert_tf/tasks/question_answering/metrics.py, each task's ``reduce``), the evaluation loop itself
(albert_tf/training/trainer.py), checkpoint file handling (albert_tf/checkpoints/files.py).
"""
