"""Tests of data_prep/train_sentencepiece.py: the reference recipe, atomic output, errors, the CLI."""

import gzip
import os
import re

import pytest
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from albert_tf.files.paths import expand_input_patterns
from data_prep.pretraining.vocabulary import (TrainSentencePieceError, _vocab_text,
                                              train_sentencepiece)
from data_prep.pretraining.corpus import CorpusError
from tests import spm_fixtures
from tests.command_runner import run_command

ModelPiece = sentencepiece_model_pb2.ModelProto.SentencePiece

RECIPE_PIECES = [("<pad>", ModelPiece.CONTROL), ("<unk>", ModelPiece.UNKNOWN),
                 ("[CLS]", ModelPiece.CONTROL), ("[SEP]", ModelPiece.CONTROL),
                 ("[MASK]", ModelPiece.CONTROL)] + \
                [(s, ModelPiece.USER_DEFINED) for s in ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")]


def _proto(path: str) -> sentencepiece_model_pb2.ModelProto:
    proto = sentencepiece_model_pb2.ModelProto()
    with open(path, "rb") as handle:
        proto.ParseFromString(handle.read())
    return proto


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    directory = tmp_path_factory.mktemp("spm")
    corpus = spm_fixtures.write_fixture_corpus(str(directory / "corpus.txt"))
    model = train_sentencepiece(corpus, str(directory / "recipe"), vocab_size=400, num_threads=1,
                                quiet=True)
    return directory, model


def test_recipe_ids_and_types(trained):
    _, model = trained
    proto = _proto(model)
    assert [(p.piece, p.type) for p in proto.pieces[:13]] == RECIPE_PIECES
    assert len(proto.pieces) == 400
    assert all(p.type == ModelPiece.NORMAL for p in proto.pieces[13:])
    processor = spm.SentencePieceProcessor(model_file=model)
    assert (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id()) == (0, 1, -1, -1)


def test_recipe_trainer_spec(trained):
    spec = _proto(trained[1]).trainer_spec
    assert spec.model_type == sentencepiece_model_pb2.TrainerSpec.UNIGRAM
    assert spec.character_coverage == pytest.approx(0.99995)
    assert spec.input_sentence_size == 10_000_000 and spec.shuffle_input_sentence
    assert list(spec.control_symbols) == ["[CLS]", "[SEP]", "[MASK]"]
    assert spec.vocab_size == 400


def test_outputs_written_atomically(trained):
    directory, model = trained
    assert sorted(os.listdir(directory)) == ["corpus.txt", "recipe.model", "recipe.vocab"]
    processor = spm.SentencePieceProcessor(model_file=model)
    with open(str(directory / "recipe.vocab"), encoding="utf-8") as handle:
        rows = [line.rstrip("\n").split("\t") for line in handle]
    assert [row[0] for row in rows] == [processor.IdToPiece(i) for i in range(processor.GetPieceSize())]
    assert all(float(row[1]) == pytest.approx(processor.GetScore(i), rel=1e-5) for i, row in enumerate(rows))


def test_vocab_text_matches_spm_train_output(tmp_path):
    # SentencePiece's own trainer writes <prefix>.vocab beside the model (control and user-defined
    # symbols included); our writer must produce the same bytes from the model alone.
    corpus = spm_fixtures.write_fixture_corpus(str(tmp_path / "corpus.txt"))
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=str(tmp_path / "spm"), vocab_size=300,
                                   control_symbols=["[CLS]", "[SEP]", "[MASK]"],
                                   user_defined_symbols=["(", ")", "\u20ac"], num_threads=1,
                                   minloglevel=1)
    with open(tmp_path / "spm.model", "rb") as handle:
        text = _vocab_text(handle.read())
    with open(tmp_path / "spm.vocab", encoding="utf-8") as handle:
        assert text == handle.read()


def test_lowercasing_and_accent_removal_follow_the_flag(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(spm_fixtures.fixture_corpus_lines() + ["Café Über Ärger"] * 20) + "\n",
                      encoding="utf-8")
    lower = spm.SentencePieceProcessor(model_file=train_sentencepiece(
        str(corpus), str(tmp_path / "lower"), vocab_size=300, num_threads=1, quiet=True))
    cased = spm.SentencePieceProcessor(model_file=train_sentencepiece(
        str(corpus), str(tmp_path / "cased"), vocab_size=300, do_lower_case=False, num_threads=1,
        quiet=True))
    lower_pieces = [lower.IdToPiece(i) for i in range(13, lower.GetPieceSize())]
    cased_pieces = [cased.IdToPiece(i) for i in range(13, cased.GetPieceSize())]
    assert all(p == p.lower() for p in lower_pieces)
    assert any(p != p.lower() for p in cased_pieces)
    # Accents are removed in both (preprocess_text always applies NFKD + combining-mark removal).
    for pieces in (lower_pieces, cased_pieces):
        assert not any(ch in "éÜÄüä" for p in pieces for ch in p)


def test_comma_separated_globs(tmp_path):
    for name in ("b1.txt", "a2.txt", "a1.txt"):
        (tmp_path / name).write_text("x\n", encoding="utf-8")
    files = expand_input_patterns(f"{tmp_path}/a*.txt, {tmp_path}/b1.txt")
    assert [os.path.basename(f) for f in files] == ["a1.txt", "a2.txt", "b1.txt"]
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        expand_input_patterns(f"{tmp_path}/a*.txt,{tmp_path}/nothing-here*.txt")


def test_vocab_size_too_large_names_the_largest_sentencepiece_takes_and_writes_nothing(tmp_path):
    corpus = tmp_path / "small.txt"
    corpus.write_text("hello world\n\nfoo bar baz\n", encoding="utf-8")
    result = run_command("-m data_prep.train_sentencepiece", f"--input_file={corpus}",
                         f"--model_prefix={tmp_path / 'm'}", "--vocab_size=300", "--num_threads=1")
    largest = re.fullmatch(
        r"train_sentencepiece: error: --vocab_size=300 is too large for this corpus \(2 non-blank "
        r"lines from 1 file\(s\)\): SentencePiece takes at most --vocab_size=(\d+) for it; use a "
        r"smaller --vocab_size, more text, or --nohard_vocab_limit \(vocab_size becomes an upper "
        r"bound\)", result.error_line())
    assert largest is not None, result.error_line()
    assert os.listdir(tmp_path) == ["small.txt"]
    # The size named is the largest SentencePiece takes: it trains, one more does not.
    model = train_sentencepiece(str(corpus), str(tmp_path / "m"), vocab_size=int(largest[1]),
                                quiet=True)
    assert spm.SentencePieceProcessor(model_file=model).GetPieceSize() == int(largest[1])
    with pytest.raises(TrainSentencePieceError, match=f"at most --vocab_size={largest[1]} "):
        train_sentencepiece(str(corpus), str(tmp_path / "m"), vocab_size=int(largest[1]) + 1,
                            quiet=True)


def test_soft_vocab_limit_trains_on_a_small_corpus(tmp_path):
    corpus = tmp_path / "small.txt"
    corpus.write_text("hello world\n\nfoo bar baz\n", encoding="utf-8")
    model = train_sentencepiece(str(corpus), str(tmp_path / "m"), vocab_size=300,
                                hard_vocab_limit=False, quiet=True)
    size = spm.SentencePieceProcessor(model_file=model).GetPieceSize()
    assert 13 < size < 300


def test_blank_only_input_is_an_error(tmp_path):
    corpus = tmp_path / "blank.txt"
    corpus.write_text("\n  \n\n", encoding="utf-8")
    with pytest.raises(TrainSentencePieceError, match="no non-blank lines"):
        train_sentencepiece(str(corpus), str(tmp_path / "m"), vocab_size=100, quiet=True)


def _long_line(seed: int) -> str:
    """One line of about 5,000 bytes after normalization: over SentencePiece's 4,192."""
    words = " ".join(spm_fixtures.fixture_corpus_lines()).split()
    line = " ".join(words[seed:seed + 1500])
    assert len(line.encode("utf-8")) > 5000
    return line[:5000].strip()


def test_lines_sentencepiece_leaves_out_as_too_long_are_counted_and_warned(tmp_path, caplog):
    # A paragraph-per-line corpus trained a model on its few short lines only; SentencePiece's
    # own "Skipped 300 too long sentences" was one INFO line among hundreds (none when quiet).
    short = spm_fixtures.fixture_corpus_lines()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join([_long_line(i) for i in range(7)] + short) + "\n",
                      encoding="utf-8")
    with caplog.at_level("WARNING"):
        train_sentencepiece(str(corpus), str(tmp_path / "m"), vocab_size=300, num_threads=1,
                            hard_vocab_limit=False, quiet=True)
    total = 7 + sum(1 for line in short if line.strip())
    assert (f"7 of {total} lines ({100 * 7 / total:.1f}%) are longer than 4192 bytes and were left "
            "out of training by SentencePiece") in caplog.text
    assert _proto(str(tmp_path / "m.model")).trainer_spec.max_sentence_length == 4192


def test_a_corpus_of_only_too_long_lines_is_an_error(tmp_path):
    corpus = tmp_path / "paragraphs.txt"
    corpus.write_text("\n\n".join(_long_line(i) for i in range(5)) + "\n", encoding="utf-8")
    with pytest.raises(TrainSentencePieceError, match=(
            r"every one of the 5 non-blank lines of .*paragraphs.txt.* is longer than 4192 bytes, "
            r"which SentencePiece leaves out of training: give one sentence per line")):
        train_sentencepiece(str(corpus), str(tmp_path / "m"), vocab_size=100, quiet=True)
    assert sorted(os.listdir(tmp_path)) == ["paragraphs.txt"]


def test_a_compressed_input_is_refused_naming_it(tmp_path):
    corpus = spm_fixtures.write_fixture_corpus(str(tmp_path / "corpus.txt"))
    packed = tmp_path / "corpus.txt.gz"
    with open(corpus, "rb") as handle:
        packed.write_bytes(gzip.compress(handle.read()))
    with pytest.raises(CorpusError) as info:
        train_sentencepiece(str(packed), str(tmp_path / "m"), vocab_size=100, quiet=True)
    assert str(info.value) == (f"{packed} is gzip-compressed: decompress it first (gunzip); the "
                               "input is UTF-8 text files, one sentence per line")


def test_command_line(tmp_path):
    corpus = spm_fixtures.write_fixture_corpus(str(tmp_path / "corpus.txt"))
    result = run_command("-m data_prep.train_sentencepiece", f"--input_file={corpus}",
                         f"--model_prefix={tmp_path}/cli", "--vocab_size=300", "--num_threads=1")
    assert result.returncode == 0, result.stderr[-2000:]
    proto = _proto(str(tmp_path / "cli.model"))
    assert [(p.piece, p.type) for p in proto.pieces[:13]] == RECIPE_PIECES
    assert len(proto.pieces) == 300
    assert (tmp_path / "cli.vocab").exists()


def test_command_line_requires_flags():
    result = run_command("-m data_prep.train_sentencepiece")
    assert result.returncode != 0
    assert "input_file" in result.stderr and "model_prefix" in result.stderr


@pytest.mark.parametrize("prefix, message", [
    ("{dir}/", "--model_prefix={dir}/ names a directory, but it is the start of the file names "
               "(<prefix>.model and <prefix>.vocab are written): give e.g. "
               "--model_prefix={dir}/30k-clean"),
    ("{dir}/.", "--model_prefix={dir}/. names a directory"),
    ("{dir}/m.model", "--model_prefix={dir}/m.model ends with .model, but the command adds the "
                      "suffixes itself ({dir}/m.model.model and {dir}/m.model.vocab would be "
                      "written): give --model_prefix={dir}/m"),
    ("{dir}/m.vocab", "--model_prefix={dir}/m.vocab ends with .vocab"),
])
def test_command_line_refuses_a_prefix_that_is_a_directory_or_a_file_name(tmp_path, prefix,
                                                                         message):
    # Such a prefix used to write the hidden files dir/.model and dir/.vocab, or m.model.model.
    corpus = spm_fixtures.write_fixture_corpus(str(tmp_path / "corpus.txt"))
    directory = tmp_path / "out"
    directory.mkdir()
    result = run_command("-m data_prep.train_sentencepiece", f"--input_file={corpus}",
                         f"--model_prefix={prefix.format(dir=directory)}", "--vocab_size=300",
                         "--num_threads=1")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"train_sentencepiece: error: {message.format(dir=directory)}")
    assert "Traceback" not in result.stderr and os.listdir(directory) == []


def test_input_sentence_size_samples_and_rejects_tiny_values(tmp_path):
    corpus = spm_fixtures.write_fixture_corpus(str(tmp_path / "corpus.txt"))
    with pytest.raises(ValueError, match="input_sentence_size=50"):
        train_sentencepiece(corpus, str(tmp_path / "m"), vocab_size=200, input_sentence_size=50)
    model = train_sentencepiece(corpus, str(tmp_path / "m"), vocab_size=200, input_sentence_size=101,
                                quiet=True)
    assert _proto(model).trainer_spec.input_sentence_size == 101
