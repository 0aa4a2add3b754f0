"""classification (data_prep): GLUE's TSV files, or the user's own CSV / TSV / JSON Lines files ->
examples -> fixed-length features -> cached feature files, read by run_classifier.py.

What belongs here: everything that data needs before training: the GLUE task table, the file
readers and their checks, the feature builder and its record schema. What does not: the feature
cache itself (data_prep/common/feature_cache.py), pair truncation
(data_prep/common/pair_truncation.py), the classifier model, task, metrics and label file
(albert_tf/tasks/classification/), the paper's recipes
(albert_tf/tasks/classification/recipes.py), the command line (data_prep/glue.py).
"""
