"""Pytest fixtures shared by the test files (their constants and helpers: tests/shared_setup.py)."""

from __future__ import annotations

import pytest

from albert_tf.tokenization import FullTokenizer
from tests.shared_setup import EN8K_MODEL


@pytest.fixture(scope="session")
def en8k() -> FullTokenizer:
    """The en8k SentencePiece tokenizer with lowercasing, as the reference's scripts run it."""
    return FullTokenizer(spm_model_file=EN8K_MODEL, do_lower_case=True)
