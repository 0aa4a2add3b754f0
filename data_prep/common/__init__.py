"""common (data_prep): what every data command and task folder of data_prep shares; it knows no task.

What belongs here: the feature-file format and its cache, ``tf.train.Example`` helpers, field
normalization and pair truncation as the reference does them, the worker pool, running a Beam
pipeline. What does not: anything one task alone needs (data_prep/<task>/), file handling that
albert_tf uses as well (albert_tf/files/), tokenization (albert_tf/tokenization/). This folder never
imports a task folder of data_prep or albert_tf/tasks/.

- feature_cache.py: feature files (TFRecord + JSON sidecar) and their cache, keyed by all inputs.
- tf_example.py: ``tf.train.Example`` features, serialized deterministically.
- text_fields.py: the reference's normalization of every text field a task processor reads.
- pair_truncation.py: the reference's ``truncate_seq_pair`` (pretraining and fine-tuning).
- worker_pool.py: ``ordered_map``: the one process pool, results in task order.
- beam_runner.py: Beam options and runners from a command line, worker errors as one message
  (needs requirements-beam.txt; imported only by Beam runs).
- user_errors.py: ``SettingsError`` (a setting the user gave cannot work) and
  ``opening_user_file`` (an OS or TensorFlow file-system error on a user's path is a
  ``UserFileError``).
"""
