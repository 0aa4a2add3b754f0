"""Pytest fixtures shared by the test files (their constants and helpers: tests/shared_setup.py)."""

from __future__ import annotations

import os

import pytest

# The tests read and edit SentencePiece models with sentencepiece's generated protobuf module, built
# for protobuf 7; apache-beam (requirements-beam.txt, installed for the tests) needs protobuf < 7.
# Protobuf's switch for this lets the generated module load on protobuf 6 (the product never
# imports it).
os.environ.setdefault("TEMPORARILY_DISABLE_PROTOBUF_VERSION_CHECK", "true")

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from tests.shared_setup import EN8K_MODEL


@pytest.fixture(scope="session")
def en8k() -> FullTokenizer:
    """The en8k SentencePiece tokenizer with lowercasing, as the reference's scripts run it."""
    return FullTokenizer(spm_model_file=EN8K_MODEL, do_lower_case=True)
