"""Token classification (NER): a tag per word, as run_ner.py trains, evaluates and exports it (the
reference has no such task).

- ``schemes.py``: IOB1 / IOB2 / BIOES tags, scheme checks, entities under conlleval's rules;
- ``metrics.py``: entity precision / recall / F1 (micro and per type) and word accuracy;
- ``model.py``: ``AlbertTokenClassifierModel``, the encoder with a per-position classifier;
- ``task.py``: ``TokenClassifierTask`` (loss on each word's first piece, ``reduce`` = one prediction
  per word from its max-context window, then the metrics);
- ``serving.py``: the SavedModel signatures (ids, and text returning a tag name per word);
- ``records.py``: the record schema (names, dtypes, shapes) and ``parse_ner_record``;
- ``file_formats.py``: CoNLL and JSON Lines files (names, format resolution, lines, NerDataError);
- ``predictions.py``: ``write_predictions``, a file's predicted tags in its own format.
"""
