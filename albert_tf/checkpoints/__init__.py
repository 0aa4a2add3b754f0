"""checkpoints: reading and writing model weights in the reference's TF1 format, in albert_tf's own
and in the Hugging Face format.

Three formats: the reference's name-based TF1 checkpoints (``bert/...``, ``cls/...`` names; what
released models ship), albert_tf's object-based ones (``tf.train.Checkpoint(model=<task
model>)``, also a SavedModel's variables) and Hugging Face directories (``config.json`` +
``model.safetensors``, what transformers and keras-hub load). Each warm-starts any task model; a
shape mismatch is an error naming the variable, both shapes and the checkpoint, raised before any
variable changes.

What belongs here: checkpoint names, files, loading, checks and conversion for any model. What does
not: when checkpoints are saved and resumed (albert_tf/training/trainer.py), the sweep that keeps
the best one (albert_tf/evaluation/), SavedModel exports (albert_tf/serving/), a head's reference
names (each task model's ``tf1_head_variables``).
"""
