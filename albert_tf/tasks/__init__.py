"""One folder per task family, each holding everything that family needs and nothing another needs:

- ``pretraining``: MLM + SOP (the pretraining model, its losses and metrics, the TFRecord schema and
  the hub-style export of a pretrained encoder);
- ``classification``: GLUE-style sentence (pair) classification and regression;
- ``multiple_choice``: RACE, one score per option;
- ``question_answering``: SQuAD v1.1 / v2.0 (span heads, post-processing, official scoring);
- ``token_classification``: NER, a tag per word.

A task is: a model (an ``AlbertTaskModel``: the encoder in ``albert`` plus a head with the
reference's TF1 names), a ``Task`` for the shared Trainer (losses, per-batch outputs, ``reduce`` to
metrics and prediction files), its metrics, its record schema and parser (``records.py``,
Keras-free: data_prep writes the records with its names), and a serving module (SavedModel
signatures, TFLite where it has one). Its data preparation lives in the folder of the same name in
``data_prep``; its command line is a ``run_<task>.py`` script at the repository root. A task
imports only the core folders of ``albert_tf``, never another task; the core never imports a task.
"""
