"""The reference's normalization of every text field a task processor reads (GLUE, RACE).

SentencePiece mode: ``preprocess_text`` (whitespace collapse, NFKD without combining marks,
lowercasing when ``do_lower_case``); WordPiece mode: unchanged, the tokenizer normalizes itself.
"""

from __future__ import annotations

from albert_tf.tokenization.normalization import preprocess_text


def normalize_field(text: str, use_spm: bool, do_lower_case: bool) -> str:
    """``text`` as the task processors hand it to the tokenizer."""
    return preprocess_text(text, lower=do_lower_case) if use_spm else text
