"""pretraining (data_prep): raw text -> masked-LM + sentence-order (SOP) pretraining TFRecords, as
the reference's create_pretraining_data, locally or on Apache Beam; and the SentencePiece
vocabulary.

What belongs here: the generator, layer by layer. What does not: the record parser and the checks
of records before training (albert_tf/tasks/pretraining/records.py), the worker pool and the Beam
runner set-up (data_prep/common/), the command lines (data_prep/create_pretraining_data.py,
data_prep/train_sentencepiece.py).
"""
