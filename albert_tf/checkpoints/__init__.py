"""checkpoints: reading and writing model weights in the reference's TF1 format, in albert_tf's own
and in the Hugging Face format.

Three formats: the reference's name-based TF1 checkpoints (``bert/...``, ``cls/...`` names; what
released models ship), albert_tf's object-based ones (``tf.train.Checkpoint(model=<task
model>)``, also a SavedModel's variables) and Hugging Face directories (``config.json`` +
``model.safetensors``, what transformers and keras-hub load). Each warm-starts any task model; a
shape mismatch is an error naming the variable, both shapes and the checkpoint, raised before any
variable changes.

What belongs here: checkpoint names, files, loading, checks and conversion for any model. What does
not: when checkpoints are saved and resumed (albert_tf/training/trainer.py), the sweep that keeps the
best one (albert_tf/evaluation/), SavedModel exports (albert_tf/serving/), a head's reference names
(each task model's ``tf1_head_variables``).

- files.py: checkpoint files on disk: prefixes, the ``checkpoint`` state file, list/copy/rename/remove.
- tf1_names.py: reference TF1 names <-> the variables of an encoder or a task model.
- tf1_format.py: loading and writing reference TF1 checkpoints.
- object_format.py: loading and checking albert_tf's own (object-based) checkpoints.
- report.py: ``LoadReport`` (what a load took, missed, left unused) and ``CheckpointMismatchError``.
- warm_start.py: ``load_checkpoint``, the warm start from any format.
- hf_names.py: the Hugging Face format's key names and layouts, its config.json, what it cannot
  represent.
- hf_format.py: loading and writing Hugging Face directories.
- run_config.py: the config a run directory was trained with (``albert_config.json`` beside its
  checkpoints).
- conversion.py: reference TF1 <-> albert_tf <-> Hugging Face conversion (the library of
  ``python -m albert_tf.convert_checkpoint``).
"""
