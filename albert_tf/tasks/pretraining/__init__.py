"""Pretraining: masked LM + sentence-order prediction, as the reference's run_pretraining (or
next-sentence prediction, or the masked LM alone).

- ``model.py``: ``AlbertPretrainingModel``, the encoder with the MLM and SOP heads;
- ``task.py``: the pretraining input pipeline, losses and metrics (``PretrainingTask``);
- ``objective.py``: the sentence objective (sop, nsp, none), its metric names and its record in
  the output directory;
- ``memory.py``: the closed-form parameter count of the heads and the memory estimate of a step;
- ``records.py``: the pretraining TFRecord schema, its parser and the checks of a file's first records;
- ``hub_export.py``: the hub-style SavedModel of a pretrained encoder (``python -m albert_tf.export_hub``).
"""
