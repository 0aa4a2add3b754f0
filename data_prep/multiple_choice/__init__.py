"""multiple_choice (data_prep): RACE: JSON articles -> examples -> multiple-choice features ->
feature files, read by run_race.py.

What belongs here: everything RACE's data needs before training: reading the articles, the
features and their record schema, the feature file. What does not: the feature cache itself and text
normalization of fields (data_prep/common/), the multiple-choice model, task and serving
(albert_tf/tasks/multiple_choice/), the command line (data_prep/race.py).
"""
