"""TODO(split) Text -> pieces -> ids, exactly as the reference's tokenization.py does it.

Two modes, as in the reference:
- SentencePiece (SP) mode, used by every released ALBERT model: callers first normalize the text with
  ``preprocess_text`` (whitespace collapse, NFKD, accent removal, optional lowercasing), then
  ``encode_pieces`` applies the model plus the reference's digit-comma rule.
- WordPiece mode (only a vocab file): BERT's BasicTokenizer + greedy longest-match WordpieceTokenizer.

``FullTokenizer.tokenize`` does NOT normalize (reference semantics: callers preprocess);
``FullTokenizer.encode_text`` / ``tokenize_text`` do the whole caller-side chain and are what new code
should call. ``InGraphTokenizer`` is the same contract as TensorFlow ops, for serving: identical ids.

Differences from the reference, on purpose: ``SPIECE_UNDERLINE`` is a str (the reference's is bytes);
pieces are always str; a model or vocab lacking [CLS]/[SEP]/[MASK], a missing or corrupt file, and an
unknown WordPiece token are errors naming the file; no TF-Hub v1 ``from_hub_module``.
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
