"""pretraining (data_prep): raw text -> masked-LM + sentence-order (SOP) pretraining TFRecords, as the
reference's create_pretraining_data, locally or on Apache Beam; and the SentencePiece vocabulary.

What belongs here: the generator, layer by layer. What does not: the record parser and the checks
of records before training (albert_tf/tasks/pretraining/records.py), the worker pool and the Beam
runner set-up (data_prep/common/), the command lines (data_prep/create_pretraining_data.py,
data_prep/train_sentencepiece.py).

- vocabulary.py: trains a SentencePiece model with the reference ALBERT recipe.
- corpus.py: streams the corpus (one sentence per line, blank line between documents) as chunks.
- instances.py: the pure algorithm: segment pairs, SOP labels, n-gram whole-word masking.
- records.py: the serialized ``tf.train.Example`` of an instance, written without TensorFlow.
- chunks.py: one chunk of documents -> shuffled records and statistics, seeded per chunk.
- stats.py: counts over the instances and the ``.stats.json`` summary.
- writer.py: round-robin TFRecord writing to outputs that appear only when complete.
- pipeline.py: the chunks processed in worker processes, written in chunk order.
- beam.py: the same output, byte for byte, as a Beam pipeline.
"""
