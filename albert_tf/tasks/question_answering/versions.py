"""What separates SQuAD v1.1 from v2.0 for a command before TensorFlow loads (no TensorFlow here):
the version's name and why v1.1's batches keep length S."""

from __future__ import annotations


def version_name(version_2: bool) -> str:
    return "v2.0" if version_2 else "v1.1"


def full_length_reason(version_2: bool) -> str | None:
    """Why the version's batches keep --max_seq_length (None: v2.0 masks the padding out of its
    softmax, so its batches may be cut to their longest window): v1.1's loss and n-best lists rank
    every position, padding included, as the reference's."""
    if version_2:
        return None
    return ("SQuAD v1.1's loss and n-best lists rank the padding positions too, as the "
            "reference's; v2.0's (--version_2_with_negative) do not")
