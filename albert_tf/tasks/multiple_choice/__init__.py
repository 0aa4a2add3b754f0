"""Multiple choice (RACE), as the reference's run_race: one score per option, a softmax over the
options.

- ``model.py``: ``AlbertMultipleChoiceModel``, the encoder with the reference's choice scorer;
- ``task.py``: ``MultipleChoiceTask`` (losses, outputs, accuracy overall and per level) and the
  prediction file;
- ``serving.py``: the SavedModel signatures (ids, and raw article, question and options);
- ``records.py``: the record schema (names, dtypes, shapes) and ``parse_race_record``.
"""
