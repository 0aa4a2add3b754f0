"""tasks: one folder per task family, each holding everything that family needs and nothing
another needs:

- pretraining/: MLM + SOP (or NSP, or the MLM alone): the pretraining model, losses and metrics,
  the TFRecord schema, the hub-style export of a pretrained encoder (run_pretraining.py,
  export_hub);
- classification/: GLUE-style sentence (pair) classification and regression, on GLUE or the
  user's own files (run_classifier.py);
- multiple_choice/: RACE, one score per option (run_race.py);
- question_answering/: SQuAD v1.1 / v2.0: span heads, post-processing, official scoring
  (run_squad.py);
- token_classification/: NER, a tag per word (run_ner.py).

A task is: a model (``model.py``, an ``AlbertTaskModel``: the encoder in ``albert`` plus a head
with the reference's TF1 names), a ``Task`` for the shared Trainer (``task.py``: losses, per-batch
outputs, ``reduce`` to metrics and prediction files), its metrics, and a serving module (SavedModel
signatures, TFLite where it has one). Its data preparation lives in the folder of the same name in
``data_prep``; its command line is a ``run_<task>.py`` script at the repository root. A task
imports only the core folders of ``albert_tf``, never another task; the core never imports a task.
"""
