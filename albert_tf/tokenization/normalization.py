"""The caller-side text normalization of SentencePiece mode (reference ``preprocess_text``).

In the reference, callers normalize before tokenizing: ``preprocess_text`` collapses whitespace,
applies NFKD, removes combining characters (accents) and optionally lowercases;
``convert_to_unicode`` decodes bytes as UTF-8, dropping invalid bytes. ``FullTokenizer.tokenize_text``
(albert_tf/tokenization/full_tokenizer.py) applies it; ``InGraphTokenizer``
(albert_tf/tokenization/in_graph.py) reproduces it as TensorFlow ops.
"""

from __future__ import annotations

import unicodedata

# ---------------------------------------------------------------------------------------------------
# Text normalization
# ---------------------------------------------------------------------------------------------------

def convert_to_unicode(text: str | bytes) -> str:
    """Returns ``text`` as str; bytes are decoded as UTF-8 with undecodable bytes dropped (reference)."""
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    if isinstance(text, str):
        return text
    raise TypeError(f"expected str or bytes, got {type(text).__name__}")


def preprocess_text(inputs: str, remove_space: bool = True, lower: bool = False) -> str:
    """The caller-side normalization of SP mode (reference ``preprocess_text``).

    remove_space: strip and collapse every whitespace run to one space.
    Then NFKD normalization, removal of combining characters (accents: "café" -> "cafe"), and
    lowercasing when ``lower``. No quote normalization (the reference has none).
    """
    text = convert_to_unicode(inputs)
    if remove_space:
        text = " ".join(text.strip().split())
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    if lower:
        text = text.lower()
    return text
