"""files: reading and writing files safely, for every command and library module of both packages.

What belongs here: the file handling that knows nothing of models or tasks (works on local paths and
on anything ``tf.io.gfile`` handles, e.g. ``gs://``). It is the bottom layer: it imports no other
project folder but errors/. What does not: checkpoints (albert_tf/checkpoints/), SavedModel and TFLite exports
(albert_tf/serving/), the feature cache (data_prep/common/feature_cache.py), record schemas (each
task's own modules; the feature names they all share are in ``record_features``).
"""
