"""models: the ALBERT encoder, its layers and the heads every task shares, with their configuration.

What belongs here: the model code no single task owns (numerically the reference's forward pass,
under the reference's variable names). What does not: a task's own model and head (the pretraining,
classifier, SQuAD, RACE and NER models live in albert_tf/tasks/<task>/model.py, the SQuAD heads in
albert_tf/tasks/question_answering/heads.py), checkpoint loading (albert_tf/checkpoints/), training
(albert_tf/training/).
"""
