"""serving: what every export of a fine-tuned or pretrained model shares: the SavedModel layout and
writer, raw text -> model inputs inside the graph, the preprocessing SavedModel, TFLite conversion.

What belongs here: export machinery that knows no task (a task is reached through a
``ServingModule`` subclass or an outputs function). What does not: a task's serving module, its
signatures, outputs and text packer (albert_tf/tasks/<task>/serving.py), the hub-style encoder
export (albert_tf/tasks/pretraining/hub_export.py), tokenization itself (albert_tf/tokenization/).
"""
