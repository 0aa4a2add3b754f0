"""classification: sentence and sentence-pair classification and regression, as the reference's
run_classifier: the GLUE tasks and the user's own CSV / TSV / JSON Lines files (run_classifier.py).

The model, the ``Task`` and its prediction files, the GLUE metrics and the per-class report, the
label set of a run on own files, the SavedModel and TFLite exports, and the paper's per-task
recipes. The data: data_prep/classification/.
"""
