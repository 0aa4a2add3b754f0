"""The TFRecord feature names that every task's record schema shares (the reference's names).

Each task's ``records.py`` (albert_tf/tasks/<task>/records.py) adds its own features and its
parser; these are the ones all of them, or all the one-label ones, spell the same way, so that the
encoder's inputs are named once.
"""

INPUT_IDS = "input_ids"
INPUT_MASK = "input_mask"
SEGMENT_IDS = "segment_ids"
# The encoder's inputs, in the reference's order: each task's records hold them of length S.
ENCODER_INPUTS = (INPUT_IDS, INPUT_MASK, SEGMENT_IDS)
# A one-label task's label (an index, or a score for a regression) and its is-real-example flag.
LABEL_IDS = "label_ids"
IS_REAL_EXAMPLE = "is_real_example"
