"""Tiny SentencePiece models, WordPiece vocabularies and pretraining records for tests (each made in
about a second).

Shared by every test file that needs a tokenizer:

    from tests import spm_fixtures
    model_path = spm_fixtures.train_tiny_spm(tmp_path)          # ALBERT recipe, 500 pieces
    model_path = spm_fixtures.cached_tiny_spm()                  # same, trained once per process
    vocab_path = spm_fixtures.write_wordpiece_vocab(tmp_path, ["un", "##want"])
    records = spm_fixtures.write_pretraining_records(tmp_path / "train.tfrecord")  # S 128, M 20

The training text is the corpus bundled with the repository, scripts/quickstart_corpus.txt (425
sentences, 39 KB of English prose), so these need no shared test data. Tiny unigram models do not learn
digit-comma pieces such as "▁1990,"; tests of that rule use the shared real models
(``tests.shared_setup.EN8K_MODEL`` and ``GERMAN_30K_MODEL``).
"""

from __future__ import annotations

import atexit
import io
import os
import shutil
import tempfile

import sentencepiece as spm

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.pretraining.chunks import ChunkProcessor, GenerationConfig
from data_prep.pretraining.instances import InstanceConfig, MaskingConfig
from data_prep.pretraining.pipeline import generate_pretraining_data
from data_prep.pretraining.vocabulary import train_sentencepiece
from tests.shared_setup import REPO_ROOT

FIXTURE_CORPUS = os.path.join(REPO_ROOT, "scripts", "quickstart_corpus.txt")

WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def fixture_corpus_lines() -> list[str]:
    """The training sentences: the non-blank lines of the bundled corpus."""
    with open(FIXTURE_CORPUS, encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def write_fixture_corpus(path: str) -> str:
    """Writes ``fixture_corpus_lines()`` one per line to ``path``; returns ``path``."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(fixture_corpus_lines()) + "\n")
    return path


def train_tiny_spm(directory: str | os.PathLike, vocab_size: int = 500, do_lower_case: bool = True,
                   name: str = "tiny") -> str:
    """Trains an ALBERT-recipe model (data_prep.train_sentencepiece) in ``directory``; returns its path."""
    directory = os.fspath(directory)
    corpus = write_fixture_corpus(os.path.join(directory, f"{name}_corpus.txt"))
    return train_sentencepiece(corpus, os.path.join(directory, name), vocab_size=vocab_size,
                               do_lower_case=do_lower_case, num_threads=1, quiet=True)


def train_spm_without_specials(directory: str | os.PathLike, vocab_size: int = 300) -> str:
    """A model trained with SentencePiece defaults: no [CLS]/[SEP]/[MASK] (for error tests)."""
    path = os.path.join(os.fspath(directory), "no_specials.model")
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(fixture_corpus_lines()), model_writer=writer,
                                   vocab_size=vocab_size, model_type="unigram", num_threads=1,
                                   minloglevel=1)
    with open(path, "wb") as handle:
        handle.write(writer.getvalue())
    return path


_cache_dir: str | None = None


def cached_tiny_spm(vocab_size: int = 500, do_lower_case: bool = True) -> str:
    """Like ``train_tiny_spm`` but trained once per test process (in a temp dir removed at exit)."""
    global _cache_dir
    if _cache_dir is None:
        _cache_dir = tempfile.mkdtemp(prefix="albert_tf_spm_fixtures_")
        atexit.register(shutil.rmtree, _cache_dir, True)
    name = f"tiny_v{vocab_size}_{'lower' if do_lower_case else 'cased'}"
    path = os.path.join(_cache_dir, name + ".model")
    if not os.path.exists(path):
        train_tiny_spm(_cache_dir, vocab_size=vocab_size, do_lower_case=do_lower_case, name=name)
    return path


def write_wordpiece_vocab(directory: str | os.PathLike, tokens: list[str],
                          name: str = "vocab.txt") -> str:
    """Writes [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4) then ``tokens``, one per line; returns the path."""
    path = os.path.join(os.fspath(directory), name)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("".join(token + "\n" for token in WORDPIECE_SPECIALS + tuple(tokens)))
    return path


def write_pretraining_records(path: str | os.PathLike, max_seq_length: int = 128,
                              max_predictions_per_seq: int = 20, dupe_factor: int = 2,
                              random_next_sentence: bool = False) -> str:
    """Pretraining records (MLM + SOP, the reference's schema) of the bundled corpus, tokenized with
    ``cached_tiny_spm()`` (ids below 500); returns the path. The defaults are the settings of the
    reference's records in the shared data; dupe_factor 2 gives about 300 records.
    ``random_next_sentence``: NSP records (create_pretraining_data --random_next_sentence)."""
    path = os.fspath(path)
    config = GenerationConfig(InstanceConfig(
        max_seq_length=max_seq_length, random_next_sentence=random_next_sentence,
        masking=MaskingConfig(max_predictions_per_seq=max_predictions_per_seq)), dupe_factor=dupe_factor)
    processor = ChunkProcessor(FullTokenizer(spm_model_file=cached_tiny_spm()), config)
    generate_pretraining_data([FIXTURE_CORPUS], [path], processor, chunk_documents=100)
    return path
