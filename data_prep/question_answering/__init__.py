"""question_answering (data_prep): SQuAD v1.1 / v2.0: a JSON file -> questions -> windowed features
-> a feature file (TFRecord + JSON sidecar), read by run_squad.py.

What belongs here: everything SQuAD's data needs before training and what post-processing needs
from it (the sidecar metadata). What does not: the feature cache and the worker pool
(data_prep/common/), the record schema and its parser, the SQuAD model, heads, post-processing
and official scoring (albert_tf/tasks/question_answering/), the command line (data_prep/squad.py).

- examples.py: SQuAD JSON -> ``SquadExample`` (one per question), as the reference reads it.
- alignment.py: character alignment of a raw paragraph with its pieces (the reference's banded LCS).
- features.py: questions -> windows -> fixed-length features and records, in worker processes.
- feature_file.py: the feature file of a SQuAD file, cached (run_squad) or at a given path.
"""
