"""data_prep: raw data -> examples -> features -> TFRecords, in plain Python and ``tf.train.Example``
(optionally on Apache Beam for the pretraining data), written in the formats albert_tf reads.

The folders are the architecture:

- common/: what every data command shares: the feature cache, the Beam runner, ``tf.train.Example``
  helpers, text fields, pair truncation, the worker pool.
- pretraining/: SentencePiece vocabulary, corpus reading, MLM + SOP instances, their records,
  statistics, the local and Beam pipelines.
- classification/: GLUE: the task table, the processors (raw files -> examples), the features.
- question_answering/: SQuAD: examples, answer alignment, windowed features, the feature file.
- multiple_choice/: RACE: the reader, the features, the feature file.
- token_classification/: NER: the reader (CoNLL, JSON Lines), the windows and their feature file.

Commands at the top (``python data_prep/<command>.py`` or ``python -m data_prep.<command>``), flags
and wiring only:

- train_sentencepiece.py: a SentencePiece model with ALBERT's special pieces.
- create_pretraining_data.py: MLM + SOP pretraining TFRecords (locally or on Beam).
- glue.py: the GLUE feature caches that run_classifier reads.
- squad.py, race.py: one SQuAD / RACE feature file at a given path (run_squad and run_race build
  the same files in their own feature caches).

Layering (tests/test_import_graph.py checks it): no import cycle, between modules or between
folders; common/ never imports a task folder (here or albert_tf/tasks/); a task folder never imports
another task folder; a task folder may use the Keras-free modules of the albert_tf task of its own
name (albert_tf/tasks/<task>/: its record schema records.py, e.g. the GLUE metric keys) and
albert_tf's Keras-free core folders (errors, files, tokenization), never models, training or Keras;
albert_tf never imports data_prep; nothing imports a command; only the commands (and
albert_tf/cli/flag_definitions.py, albert_tf/cli/run_flags.py) import ``absl.flags`` or read
``FLAGS``. Package ``__init__`` files hold no code. Every error a user's data, files or settings
cause derives from albert_tf's ``UserError`` (albert_tf/errors/user_error.py): each reader's error
class (``GlueDataError``, ...), ``SettingsError`` and ``UserFileError``
(data_prep/common/user_errors.py).
"""
