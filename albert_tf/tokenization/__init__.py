"""tokenization: text -> pieces -> ids, exactly as the reference's tokenization.py does it, in
Python and inside the TensorFlow graph.

What belongs here: normalization, the SentencePiece and WordPiece tokenizers, the tokenizer every
script builds (``FullTokenizer``) and its in-graph twins for serving. What does not: packing tokens
into model inputs ([CLS]/[SEP], truncation, padding: albert_tf/serving/text_packing.py in the graph,
the feature builders of data_prep/ in Python), training a SentencePiece model
(data_prep/pretraining/vocabulary.py).
"""
