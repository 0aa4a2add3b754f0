"""serving: what every export of a fine-tuned or pretrained model shares: the SavedModel layout and
writer, raw text -> model inputs inside the graph, the preprocessing SavedModel, TFLite conversion.

What belongs here: export machinery that knows no task (a task is reached through a
``ServingModule`` subclass or an outputs function). What does not: a task's serving module, its
signatures, outputs and text packer (albert_tf/tasks/<task>/serving.py), the hub-style encoder
export (albert_tf/tasks/pretraining/hub_export.py), tokenization itself (albert_tf/tokenization/).

- saved_model.py: the ``ids_only`` / ``with_text`` export layout, ``ServingModule``, ``write_export``,
  and the new-directory rule every export follows.
- input_checks.py: the in-graph checks of a signature's inputs (shapes, batch sizes, lengths, id
  ranges), failing with a message naming the input; every export runs them.
- text_packing.py: truncation and ``[CLS] a [SEP] b [SEP]`` packing of ragged ids, in the graph.
- preprocessing.py: the preprocessing SavedModel (text -> encoder inputs), saved apart from the encoder.
- tflite.py: the TFLite flatbuffer (float32, int8 or float16 weights) of a model and the outputs a
  task gives.
"""
