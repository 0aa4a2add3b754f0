"""token_classification (data_prep): NER files (CoNLL or JSON Lines) -> checked sentences ->
windowed features -> a feature file (TFRecord + JSON sidecar), read by run_ner.py.

What belongs here: reading and checking the files, the windows and records, and writing predictions
back in the input's format. What does not: the tag schemes and entity metrics, the model, task and
export (albert_tf/tasks/token_classification/), the feature cache and windows (data_prep/common/).
"""
