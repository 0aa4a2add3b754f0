"""token_classification (data_prep): NER files (CoNLL or JSON Lines) -> checked sentences ->
windowed features -> a feature file (TFRecord + JSON sidecar), read by run_ner.py.

What belongs here: reading and checking the files, the windows and records. What does not: the tag
schemes, the file formats, the record schema and its parser, writing predictions back in the
input's format, entity metrics, the model, task and export (albert_tf/tasks/token_classification/),
the feature cache and windows (data_prep/common/).

- reader.py: CoNLL / JSON Lines -> ``Sentence`` (words, tags, lines), every mistake named by file
  and line.
- features.py: sentences -> windows -> records, cached.
"""
