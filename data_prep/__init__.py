"""data_prep: raw data -> examples -> features -> TFRecords, in plain Python and
``tf.train.Example`` (optionally on Apache Beam for the pretraining data), written in the formats
albert_tf reads.

The folders are the architecture (docs/layout.md maps every module):

- common/: what every data command shares: the feature cache, the Beam runner, ``tf.train.Example``
  helpers, text fields, pair truncation, windows over long inputs, the worker pool.
- pretraining/: SentencePiece vocabulary, corpus reading, MLM + SOP instances, their records,
  statistics, the local and Beam pipelines.
- classification/: GLUE (the task table, the processors, the features) and the user's own CSV /
  TSV / JSON Lines files.
- question_answering/: SQuAD: examples, answer alignment, windowed features, the feature file.
- multiple_choice/: RACE: the reader, the features, the feature file.
- token_classification/: NER: CoNLL / JSON Lines files -> checked sentences -> windowed features.

Commands at the top (``python data_prep/<command>.py`` or ``python -m data_prep.<command>``), flags
and wiring only: train_sentencepiece, create_pretraining_data (locally or on Beam), glue (the GLUE
feature caches run_classifier reads; ``--print_recipe``), squad and race (one feature file at a
given path; run_squad and run_race build the same files in their own feature caches). run_ner.py
builds its feature files itself (data_prep/token_classification/ has no command).

Layering (tests/test_import_graph.py checks it): no import cycle, between modules or between
folders; common/ never imports a task folder (here or albert_tf/tasks/); a task folder never imports
another task folder; a task folder may use the albert_tf task of its own name
(albert_tf/tasks/<task>/, e.g. the GLUE metric keys) and albert_tf's core folders; albert_tf never
imports data_prep; nothing imports a command; only the commands (and the flag modules of
albert_tf/cli/) import ``absl.flags`` or read ``FLAGS``. Package ``__init__`` files hold no code.
"""
