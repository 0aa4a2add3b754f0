"""classification (data_prep): GLUE: raw TSV files -> examples -> fixed-length features -> cached
feature files, read by run_classifier.py.

What belongs here: everything GLUE's data needs before training: the task table, the file readers,
the feature builder and its record writer. What does not: the feature cache itself
(data_prep/common/feature_cache.py), pair truncation (data_prep/common/pair_truncation.py), the
record schema and its parser, the classifier model, task and metrics
(albert_tf/tasks/classification/), the command line (data_prep/glue.py).

- glue_tasks.py: ``GLUE_TASKS``: per task its processor, metrics, selection metric, eval sets, recipe.
- processors.py: GLUE TSV files -> ``InputExample`` lists, one processor per task.
- features.py: examples -> features -> TFRecords (the task's schema); ``cached_glue_features``.
- own_data.py: the user's own CSV / TSV / JSON Lines files -> ``InputExample`` lists, every check.
- own_data_task.py: ``load_own_data``: those files as run_classifier's task (label set, metrics,
  feature files).
"""
