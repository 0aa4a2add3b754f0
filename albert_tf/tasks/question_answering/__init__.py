"""Extractive question answering (SQuAD v1.1 and v2.0), as the reference's run_squad_v1 / v2.

- ``heads.py``: the v1 span head and the v2 answer verifier, with the reference's TF1 names;
- ``model.py``: ``AlbertSquadModel``, the encoder with either head;
- ``task.py``: ``SquadTask`` (losses, raw outputs, ``reduce`` = post-processing + scores);
- ``records.py``: the record schema (names, dtypes, shapes) and ``parse_squad_record``;
- ``postprocessing.py``: raw outputs per window -> answers, n-best lists, null odds, prediction files;
- ``metrics.py``: the official SQuAD v1.1 / v2.0 scoring;
- ``serving.py``: the SavedModel signatures (ids, and raw question and context with character
  spans), the post-processing of their outputs, and the v1.1 TFLite model.
"""
