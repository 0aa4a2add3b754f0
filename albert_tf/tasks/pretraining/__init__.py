"""pretraining: masked LM + sentence-order prediction, as the reference's run_pretraining (or
next-sentence prediction, or the masked LM alone) (run_pretraining.py).

The model with its MLM and sentence heads, the ``Task`` (input pipeline, losses, metrics), the
sentence objective, the record schema and its checks, the memory estimate of model_report, and the
hub-style export of a pretrained encoder (``python -m albert_tf.export_hub``). The data:
data_prep/pretraining/.
"""
