"""Pretraining: masked LM + sentence-order prediction, as the reference's run_pretraining.

- ``model.py``: ``AlbertPretrainingModel``, the encoder with the MLM and SOP heads;
- ``task.py``: the pretraining input pipeline, losses and metrics (``PretrainingTask``);
- ``memory.py``: the closed-form parameter count of the heads and the memory estimate of a step;
- ``records.py``: the pretraining TFRecord schema, its parser and the checks of a file's first records;
- ``hub_export.py``: the hub-style SavedModel of a pretrained encoder (``python -m albert_tf.export_hub``).
"""
