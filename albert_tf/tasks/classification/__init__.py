"""Sentence and sentence-pair classification and regression (GLUE), as the reference's
run_classifier.

- ``model.py``: ``AlbertClassifierModel``, the encoder with the reference's classifier head;
- ``task.py``: ``ClassifierTask`` (losses, outputs, metrics) and the prediction files;
- ``metrics.py``: ``glue_metrics``, the metric kinds a GLUE task reports; ``class_report``;
- ``label_file.py``: ``label_list.json``, the label set of a run on the user's own files;
- ``records.py``: the record schema (names, dtypes, shapes) and ``parse_glue_example``;
- ``serving.py``: the SavedModel signatures (ids and raw text), and the TFLite model.
"""
