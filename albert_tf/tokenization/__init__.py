"""tokenization: text -> pieces -> ids, exactly as the reference's tokenization.py does it, in Python
and inside the TensorFlow graph.

What belongs here: normalization, the SentencePiece and WordPiece tokenizers, the tokenizer every
script builds (``FullTokenizer``) and its in-graph twins for serving. What does not: packing tokens
into model inputs ([CLS]/[SEP], truncation, padding: albert_tf/serving/text_packing.py in the graph,
the feature builders of data_prep/ in Python), training a SentencePiece model
(data_prep/pretraining/vocabulary.py).

- model_files.py: ``TokenizerError`` and reading a model or vocabulary file (local or ``gs://``).
- normalization.py: ``convert_to_unicode`` and ``preprocess_text``, the caller-side normalization.
- sentencepiece.py: SentencePiece encoding with the reference's digit-comma rule; its start-piece rule.
- wordpiece.py: BERT's BasicTokenizer and greedy longest-match WordpieceTokenizer.
- full_tokenizer.py: ``FullTokenizer``, the reference's tokenizer over either mode.
- in_graph.py: ``InGraphTokenizer``, the same ids as TensorFlow ops (SentencePiece mode).
- spans.py: ``SpanTokenizer``, those ids plus each token's character span in the raw text.
"""
