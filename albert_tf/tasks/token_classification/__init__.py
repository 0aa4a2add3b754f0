"""token_classification: NER, a tag per word, as run_ner.py trains, evaluates and exports it (the
reference has no such task).

The tag schemes (IOB1 / IOB2 / BIOES) and entity spans, entity-level metrics (conlleval's rules),
the model, the ``Task`` (one prediction per word from its max-context window), the SavedModel
export and albert_tf's starting recipe (the paper has none). The data:
data_prep/token_classification/.
"""
