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

import tensorflow as tf


class TokenizerError(ValueError):
    """A vocabulary or SentencePiece model is unusable; the message names the file and the problem."""


def read_model_file(path: str, what: str) -> bytes:
    """Reads a local or remote (gs://...) file; a missing file is an error naming ``what`` and the path."""
    if not path:
        raise TokenizerError(f"no {what} given (empty path)")
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    with tf.io.gfile.GFile(path, "rb") as handle:
        return handle.read()
