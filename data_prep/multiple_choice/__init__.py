"""multiple_choice (data_prep): RACE: JSON articles -> examples -> multiple-choice features -> feature
files, read by run_race.py.

What belongs here: everything RACE's data needs before training: reading the articles, the
features and their records, the feature file. What does not: the feature cache itself and text
normalization of fields (data_prep/common/), the record schema and its parser, the multiple-choice
model, task and serving (albert_tf/tasks/multiple_choice/), the command line (data_prep/race.py).

- reader.py: RACE's two directory layouts and JSON articles -> ``RaceExample`` (one per question).
- features.py: a question -> 4 fixed-length rows and their record (the task's schema).
- feature_file.py: the records and sidecar of a split, cached (run_race) or at a given path.
"""
