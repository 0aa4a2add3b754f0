"""Trains a SentencePiece unigram model with the reference ALBERT recipe (the library of
``python -m data_prep.train_sentencepiece``).

The recipe of the released 30k-clean model: pad 0 ``<pad>``, unk 1 ``<unk>``, no BOS/EOS, control
symbols [CLS] [SEP] [MASK] (ids 2-4), user-defined symbols ( ) " - . – £ € (ids 5-12),
character_coverage 0.99995, model_type unigram.

``train_sentencepiece`` writes ``<model_prefix>.model`` and ``<model_prefix>.vocab`` (each through a
temporary file, then renamed). The training text is normalized with ``preprocess_text`` (lowercased
with ``do_lower_case``), the same normalization create_pretraining_data and the fine-tuning scripts
apply before tokenizing, so the model's pieces match the text it will see. Blank lines (document
separators) are skipped; a line that is not UTF-8 is an error naming the file and line.
"""

from __future__ import annotations

import io
import re
from typing import Iterator, Sequence

import sentencepiece as spm
import tensorflow as tf
from absl import logging

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_open, atomic_write_text
from albert_tf.files.paths import expand_input_patterns
from albert_tf.files.text_lines import TEXT_CHECK_BYTES, iter_file_lines, not_text_reason
from albert_tf.tokenization.normalization import preprocess_text
from data_prep.common.user_errors import SettingsError, opening_user_file
from data_prep.pretraining.corpus import CorpusError

PAD_ID = 0
UNK_ID = 1
CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")
DEFAULT_CHARACTER_COVERAGE = 0.99995
# SentencePiece's default max_sentence_length (bytes of a line as it receives it): longer lines are
# left out of training. Passed explicitly so that the count of such lines matches what it skips.
MAX_SENTENCE_BYTES = 4192
# The end of SentencePiece's error for a vocabulary size larger than the corpus allows.
_LARGEST_VOCAB_SIZE = re.compile(r"Please set it to a value <= (\d+)")


class TrainSentencePieceError(UserError, RuntimeError):
    """SentencePiece refused to train on the input and settings given (a vocabulary too large for
    the corpus, no text, ...); the message says why and what to change."""


class _NormalizedLines:
    """Iterates the non-blank lines of ``files`` after ``preprocess_text``; counts what it yielded
    (``count``) and how many of those SentencePiece will leave out as too long (``too_long``).

    ``error``: the user's mistake (a missing file, a line that is not UTF-8) that stopped the
    iteration, kept because SentencePiece, which iterates it, turns it into a RuntimeError of its
    own ("INTERNAL: ..." with a traceback)."""

    def __init__(self, files: Sequence[str], do_lower_case: bool):
        self.files = files
        self.do_lower_case = do_lower_case
        self.count = 0
        self.too_long = 0
        self.error: UserError | None = None

    def __iter__(self) -> Iterator[str]:
        try:
            yield from self._lines()
        except UserError as error:
            self.error = error
            raise

    def _lines(self) -> Iterator[str]:
        for path in self.files:
            with opening_user_file(path), tf.io.gfile.GFile(path, "rb") as handle:
                reason = not_text_reason(handle.read(TEXT_CHECK_BYTES))
                if reason:
                    raise CorpusError(f"{path} is {reason}; the input is UTF-8 text files, one "
                                      "sentence per line")
                handle.seek(0)
                for number, raw in enumerate(iter_file_lines(handle), start=1):
                    try:
                        line = raw.decode("utf-8")
                    except UnicodeDecodeError as err:
                        raise CorpusError(f"{path}:{number}: not valid UTF-8 ({err.reason} at byte "
                                          f"{err.start}); fix or remove the line") from None
                    text = preprocess_text(line, lower=self.do_lower_case)
                    if text:
                        self.count += 1
                        self.too_long += len(text.encode("utf-8")) > MAX_SENTENCE_BYTES
                        yield text


def _largest_vocab_size(message: str) -> str:
    """What SentencePiece's "Vocabulary size too high (N). Please set it to a value <= M." says,
    without its source location: the largest size it takes for this corpus, known only after
    training (the number of pieces that survive its pruning)."""
    largest = _LARGEST_VOCAB_SIZE.search(message)
    if largest is None:
        return f"SentencePiece says: {message.strip()}"
    return f"SentencePiece takes at most --vocab_size={largest[1]} for it"


def _vocab_text(model_bytes: bytes) -> str:
    """The ``.vocab`` file spm_train writes: ``piece<TAB>score`` per id, score printed as C++ does (%g)."""
    processor = spm.SentencePieceProcessor()
    processor.LoadFromSerializedProto(model_bytes)
    return "".join(f"{processor.IdToPiece(i)}\t{processor.GetScore(i):g}\n"
                   for i in range(processor.GetPieceSize()))


def train_sentencepiece(input_files: str | Sequence[str],
                        model_prefix: str,
                        vocab_size: int = 30000,
                        input_sentence_size: int = 10_000_000,
                        shuffle_input_sentence: bool = True,
                        character_coverage: float = DEFAULT_CHARACTER_COVERAGE,
                        do_lower_case: bool = True,
                        num_threads: int = 1,
                        hard_vocab_limit: bool = True,
                        quiet: bool = False) -> str:
    """Trains a unigram model with the ALBERT recipe; returns the path of ``<model_prefix>.model``.

    input_files: comma-separated glob patterns, or a list of patterns; one sentence per line.
    input_sentence_size: at most this many sentences are used (sampled when shuffle_input_sentence);
      0 = all; SentencePiece rejects 1-100.
    hard_vocab_limit: when False, vocab_size is a soft limit (SentencePiece may make fewer pieces).
    quiet: only SentencePiece warnings on stderr (its INFO log is the progress display otherwise).
    """
    if vocab_size <= len(CONTROL_SYMBOLS) + len(USER_DEFINED_SYMBOLS) + 2:
        raise SettingsError(f"vocab_size={vocab_size} leaves no room for learned pieces after the "
                            "13 special and user-defined pieces")
    if 0 < input_sentence_size <= 100:
        raise SettingsError(f"input_sentence_size={input_sentence_size}: SentencePiece needs 0 "
                            "(use every sentence) or more than 100")
    files = expand_input_patterns(input_files)
    lines = _NormalizedLines(files, do_lower_case)
    model_writer = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=model_writer,
            model_type="unigram",
            vocab_size=vocab_size,
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=-1, eos_id=-1,
            # Lists, not comma-joined strings: SentencePiece parses strings as CSV, where a lone '"'
            # starts a quoted field and swallows the rest of the symbols.
            control_symbols=list(CONTROL_SYMBOLS),
            user_defined_symbols=list(USER_DEFINED_SYMBOLS),
            character_coverage=character_coverage,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=shuffle_input_sentence,
            hard_vocab_limit=hard_vocab_limit,
            num_threads=num_threads,
            max_sentence_length=MAX_SENTENCE_BYTES,
            minloglevel=1 if quiet else 0)
    except RuntimeError as err:
        if lines.error is not None:
            raise lines.error from None
        message = str(err)
        if "Vocabulary size" in message and "too high" in message:
            raise TrainSentencePieceError(
                f"--vocab_size={vocab_size} is too large for this corpus ({lines.count} non-blank "
                f"lines from {len(files)} file(s)): {_largest_vocab_size(message)}; use a smaller "
                "--vocab_size, more text, or --nohard_vocab_limit (vocab_size becomes an upper "
                "bound)") from err
        if lines.count == 0:
            raise TrainSentencePieceError(f"no non-blank lines in the input files {files}") from err
        if lines.too_long == lines.count:
            raise TrainSentencePieceError(
                f"every one of the {lines.count} non-blank lines of {files} is longer than "
                f"{MAX_SENTENCE_BYTES} bytes, which SentencePiece leaves out of training: give one "
                "sentence per line (split paragraphs into sentences)") from err
        raise TrainSentencePieceError(f"SentencePiece training failed: {message.strip()}") from err
    if lines.too_long:
        logging.warning(
            "%d of %d lines (%.1f%%) are longer than %d bytes and were left out of training by "
            "SentencePiece (its max_sentence_length): the model did not learn from their text; "
            "give one sentence per line (split paragraphs into sentences) to use it",
            lines.too_long, lines.count, 100 * lines.too_long / lines.count, MAX_SENTENCE_BYTES)
    model_bytes = model_writer.getvalue()
    atomic_write_text(model_prefix + ".vocab", _vocab_text(model_bytes))
    with atomic_open(model_prefix + ".model", "wb") as handle:
        handle.write(model_bytes)
    return model_prefix + ".model"
