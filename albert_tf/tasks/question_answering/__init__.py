"""question_answering: extractive question answering, SQuAD v1.1 and v2.0, as the reference's
run_squad_v1 / v2 (run_squad.py).

The span heads (v1) and the answer verifier (v2) with the reference's TF1 names, the model, the
``Task``, the post-processing into answers and prediction files, the official scoring, the
SavedModel and TFLite (v1.1) exports, and the paper's recipes. The data:
data_prep/question_answering/.
"""
