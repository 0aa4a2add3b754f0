"""multiple_choice: RACE, as the reference's run_race: one score per option, a softmax over the
options (run_race.py).

The model, the ``Task`` (accuracy overall and per level) and its prediction file, the SavedModel
export, and the paper's recipe. The data: data_prep/multiple_choice/.
"""
