"""Tests of albert_tf/tokenization/ against the reference behaviour: text normalization, piece
encoding with the digit-comma rule, the SentencePiece and WordPiece tokenizers, the start-piece rule
of whole-word masking, and the in-graph tokenizer.

Expectations are derived independently: by hand, or from SentencePiece's own EncodeAsPieces on the
sub-parts the reference re-encodes.

Behaviour that holds for any SentencePiece model is tested on a tiny ALBERT-recipe model trained from
the bundled corpus (tests/spm_fixtures.py); the digit-comma pieces real models learn ("▁30,",
"/12,"), the en8k model's own ids and real Wikipedia text use the shared test data.
"""

import os
import pickle
import re

import pytest
import sentencepiece as spm
import tensorflow as tf
from sentencepiece import sentencepiece_model_pb2

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.in_graph import InGraphTokenizer
from albert_tf.tokenization.model_files import TokenizerError
from albert_tf.tokenization.normalization import preprocess_text
from albert_tf.tokenization.sentencepiece import encode_ids, encode_pieces, is_start_piece_sp
from albert_tf.tokenization.wordpiece import (BasicTokenizer, WordpieceTokenizer, is_control,
                                              is_punctuation, is_whitespace, parse_vocab)
from tests import spm_fixtures
from tests.shared_setup import EN8K_MODEL, GERMAN_30K_MODEL, SHARED_DATA_DIR, require_shared_data


def _wiki_paragraphs() -> list[str]:
    """The non-blank, non-markup lines of the shared Wikipedia sample."""
    with open(os.path.join(SHARED_DATA_DIR, "corpus", "wiki_00.txt"), encoding="utf-8") as handle:
        return [line.strip() for line in handle
                if line.strip() and not line.startswith(("<doc", "</doc"))]


@pytest.fixture(scope="module")
def german() -> FullTokenizer:
    require_shared_data()
    return FullTokenizer(spm_model_file=GERMAN_30K_MODEL, do_lower_case=False)


@pytest.fixture(scope="module")
def tiny() -> FullTokenizer:
    """A 500-piece ALBERT-recipe model of the bundled corpus, lowercasing (no shared data needed)."""
    return FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(), do_lower_case=True)


def _sp_with_extra_pieces(base_model: str, pieces: list[str]) -> spm.SentencePieceProcessor:
    """``base_model`` plus NORMAL pieces of score 0 (so Viterbi prefers them): a toy model holding
    digit-comma pieces such as "$45," without a leading "▁"."""
    proto = sentencepiece_model_pb2.ModelProto()
    with open(base_model, "rb") as handle:
        proto.ParseFromString(handle.read())
    for piece in pieces:
        proto.pieces.add(piece=piece, score=0.0, type=sentencepiece_model_pb2.ModelProto.SentencePiece.NORMAL)
    processor = spm.SentencePieceProcessor()
    processor.LoadFromSerializedProto(proto.SerializeToString())
    return processor


# --- preprocess_text -----------------------------------------------------------------------------

def test_preprocess_collapses_whitespace():
    assert preprocess_text("  a \t b\n\n c\u00a0 d  ") == "a b c d"
    assert preprocess_text(" a  b ", remove_space=False) == " a  b "


def test_preprocess_removes_accents_by_nfkd():
    assert preprocess_text("café") == "cafe"
    assert preprocess_text("Ångström naïve") == "Angstrom naive"
    # NFKD compatibility mappings: ligature, full-width letter, superscript.
    assert preprocess_text("ﬁne Ａ x²") == "fine A x2"


def test_preprocess_lowercases_only_when_asked():
    assert preprocess_text("Hello WORLD") == "Hello WORLD"
    assert preprocess_text("Hello WORLD", lower=True) == "hello world"
    # No quote normalization (the XLNet-style ``'' -> "`` replacement is absent in ALBERT).
    assert preprocess_text("``a''") == "``a''"


def test_preprocess_accepts_utf8_bytes():
    assert preprocess_text("Café".encode("utf-8"), lower=True) == "cafe"


# --- encode_pieces: digit-comma rule -------------------------------------------------------------

def test_pieces_without_digit_comma_equal_sentencepiece(tiny):
    for line in spm_fixtures.fixture_corpus_lines()[:50]:
        text = preprocess_text(line, lower=True)
        assert encode_pieces(tiny.sp_model, text) == tiny.sp_model.EncodeAsPieces(text)


def test_digit_comma_piece_with_underline_is_split(en8k):
    sp = en8k.sp_model
    raw = sp.EncodeAsPieces("in 30, days")
    assert "▁30," in raw
    at = raw.index("▁30,")
    expected = raw[:at] + sp.EncodeAsPieces("30") + [","] + raw[at + 1:]
    assert encode_pieces(sp, "in 30, days") == expected
    assert encode_ids(sp, "in 30, days") == [sp.PieceToId(p) for p in expected]


def test_digit_comma_piece_keeps_the_extra_underline_as_py3_reference(german):
    # "/12," has no leading "▁"; the reference intended to drop the "▁" its re-encoding adds,
    # but on Python 3 that never happens.
    sp = german.sp_model
    text = "Saison 1997/12, und"
    raw = sp.EncodeAsPieces(text)
    assert "/12," in raw
    reencoded = sp.EncodeAsPieces("/12")
    assert reencoded[0].startswith("▁")
    at = raw.index("/12,")
    assert german.tokenize(text) == raw[:at] + reencoded + [","] + raw[at + 1:]


def test_dollar_digits_comma_keeps_the_extra_underline_on_toy_model():
    sp = _sp_with_extra_pieces(spm_fixtures.cached_tiny_spm(), ["$45,", "▁1990,"])
    raw = sp.EncodeAsPieces("x$45, 1990,")
    assert "$45," in raw and "▁1990," in raw
    expected = []
    for piece in raw:
        if piece == "$45,":
            expected += sp.EncodeAsPieces("$45") + [","]
        elif piece == "▁1990,":
            expected += sp.EncodeAsPieces("1990") + [","]
        else:
            expected.append(piece)
    assert sp.EncodeAsPieces("$45")[0][0] == "▁"
    assert encode_pieces(sp, "x$45, 1990,") == expected


def test_comma_after_non_digit_is_left_alone():
    sp = _sp_with_extra_pieces(spm_fixtures.cached_tiny_spm(), ["ab,", "▁,"])
    raw = sp.EncodeAsPieces("xab, ,")
    assert "ab," in raw
    assert encode_pieces(sp, "xab, ,") == raw


def test_sampling_varies_and_keeps_the_text(tiny):
    text = "the anarchists opposed hierarchical organisation"
    samples = {tuple(encode_pieces(tiny.sp_model, text, sample=True)) for _ in range(30)}
    assert len(samples) > 1
    for pieces in samples:
        assert "".join(pieces).replace("▁", " ").strip() == text


# --- FullTokenizer, SentencePiece mode -----------------------------------------------------------

def test_en8k_special_ids(en8k):
    assert (en8k.unk_id, en8k.cls_id, en8k.sep_id, en8k.mask_id) == (1, 2, 3, 4)
    assert en8k.vocab_size == 8000
    assert en8k.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert list(en8k.vocab)[:3] == ["<pad>", "<unk>", "[CLS]"]
    assert en8k.inv_vocab[4] == "[MASK]"


def test_unknown_piece_maps_to_unk(tiny):
    assert tiny.convert_tokens_to_ids(["no-such-piece-xyz", "▁the"]) == [1, tiny.vocab["▁the"]]
    assert tiny.vocab["▁the"] > 12


def test_tokenize_does_not_preprocess_but_tokenize_text_does(tiny):
    raw = "Café   Society"
    assert tiny.tokenize_text(raw) == tiny.tokenize("cafe society")
    assert tiny.tokenize(raw) != tiny.tokenize_text(raw)
    assert tiny.encode_text(raw) == tiny.convert_tokens_to_ids(tiny.tokenize("cafe society"))


def test_real_corpus_ids_are_stable_and_round_trip(en8k):
    other = FullTokenizer(spm_model_file=EN8K_MODEL, do_lower_case=True)
    checked = 0
    for line in _wiki_paragraphs():
        text = preprocess_text(line, lower=True)
        ids = en8k.encode_text(line)
        assert ids == other.encode_text(line)
        raw = en8k.sp_model.EncodeAsPieces(text)
        if not any(p.endswith(",") and len(p) > 1 and p[-2].isdigit() for p in raw):
            assert ids == en8k.sp_model.EncodeAsIds(text)
        if en8k.unk_id not in ids:
            # en8k's digit-comma pieces all start with "▁", so decoding restores the text exactly.
            assert en8k.sp_model.DecodeIds(ids) == text
            assert en8k.convert_tokens_to_ids(en8k.convert_ids_to_tokens(ids)) == ids
            checked += 1
    assert checked >= 100


def test_german_model_user_defined_symbols(german):
    symbols = ["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"]
    assert [german.vocab[s] for s in symbols] == list(range(5, 13))
    assert (german.cls_id, german.sep_id, german.mask_id) == (2, 3, 4)
    assert german.vocab_size == 30000
    # User-defined symbols are always whole pieces in text; control symbols never are.
    pieces = german.tokenize("Haus(Bau) [MASK]")
    assert "(" in pieces and ")" in pieces
    assert "[MASK]" not in pieces


def test_tiny_recipe_model_special_ids(tmp_path):
    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.train_tiny_spm(tmp_path, vocab_size=300))
    assert tokenizer.convert_ids_to_tokens(range(5)) == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert (tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (1, 2, 3, 4)


def test_fingerprint_depends_on_file_bytes_and_casing(tiny, tmp_path):
    copied = tmp_path / "copied.model"
    copied.write_bytes(open(spm_fixtures.cached_tiny_spm(), "rb").read())
    again = FullTokenizer(spm_model_file=str(copied), do_lower_case=True)
    cased = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(), do_lower_case=False)
    other = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(vocab_size=300), do_lower_case=True)
    assert tiny.fingerprint == again.fingerprint   # the bytes count, not the path
    assert len({tiny.fingerprint, cased.fingerprint, other.fingerprint}) == 3
    assert re.fullmatch("[0-9a-f]{16}", tiny.fingerprint)


def test_model_without_control_symbols_is_rejected(tmp_path):
    path = spm_fixtures.train_spm_without_specials(tmp_path)
    with pytest.raises(TokenizerError) as info:
        FullTokenizer(spm_model_file=path)
    assert path in str(info.value)
    assert "[CLS]" in str(info.value) and "[MASK]" in str(info.value)


def test_missing_files_name_the_path(tmp_path):
    missing = str(tmp_path / "nowhere.model")
    with pytest.raises(FileNotFoundError, match="nowhere.model"):
        FullTokenizer(spm_model_file=missing)
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        FullTokenizer(vocab_file=str(tmp_path / "vocab.txt"))
    with pytest.raises(TokenizerError, match="spm_model_file"):
        FullTokenizer()


def test_corrupt_model_is_rejected(tmp_path):
    path = tmp_path / "broken.model"
    path.write_bytes(b"this is not a protobuf")
    with pytest.raises(TokenizerError, match="broken.model"):
        FullTokenizer(spm_model_file=str(path))


# --- start-piece rule of whole-word masking ------------------------------------------------------

@pytest.mark.parametrize("piece, expected", [
    ("▁the", True), ("▁", True), ("<unk>", True), (",", True), ("-", True), ("$", True),
    ("ing", False), ("ab,", False), ("a-b", False), ("ING", False),
    ("'s", True),   # apostrophe is not in the punctuation set
    ("=", True),    # "=" neither a-z nor in the set -> any-char rule
    ("9", True), ("é", True), ("€", True), ("£", True),
    ("x€", True),   # py3: "€" is not treated as punctuation (the reference added it as bytes)
    ("", False),
])
def test_is_start_piece_sp(piece, expected):
    assert is_start_piece_sp(piece) is expected


def test_full_tokenizer_start_piece_dispatch(tiny, tmp_path):
    assert tiny.is_start_piece("ing") is False and tiny.is_start_piece("▁ing") is True
    wordpiece = FullTokenizer(vocab_file=spm_fixtures.write_wordpiece_vocab(tmp_path, ["ing"]))
    assert wordpiece.is_start_piece("##ing") is False and wordpiece.is_start_piece("ing") is True


# --- WordPiece mode (as the reference's tokenization_test) ---------------------------------------

REFERENCE_TEST_VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn",
                        "##ing", ",", "[MASK]"]


@pytest.fixture
def reference_vocab_file(tmp_path) -> str:
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in REFERENCE_TEST_VOCAB), encoding="utf-8")
    return str(path)


def test_full_tokenizer_wordpiece(reference_vocab_file):
    tokenizer = FullTokenizer(vocab_file=reference_vocab_file)
    tokens = tokenizer.tokenize("UNwant\u00E9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
    assert tokenizer.encode_text("UNwant\u00E9d,running") == [7, 4, 5, 10, 8, 9]
    assert (tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (0, 1, 2, 11)
    with pytest.raises(KeyError, match="xyz"):
        tokenizer.convert_tokens_to_ids(["xyz"])


def test_wordpiece_vocab_without_mask_is_rejected(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[UNK]\n[CLS]\n[SEP]\nwant\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"vocab.txt.*\[MASK\]"):
        FullTokenizer(vocab_file=str(path))


def test_a_sentencepiece_vocab_listing_as_vocab_file_points_to_the_model():
    # A user giving the .vocab beside a SentencePiece model as --vocab_file (WordPiece mode) got
    # "lacks the special pieces ['[UNK]']; ... train SentencePiece with control_symbols", which
    # sends them to retrain a model they already have.
    vocab_file = spm_fixtures.cached_tiny_spm().replace(".model", ".vocab")
    with pytest.raises(TokenizerError) as info:
        FullTokenizer(vocab_file=vocab_file)
    assert str(info.value) == (
        f"vocab file {vocab_file} is the .vocab listing of a SentencePiece model (<unk> and pieces "
        "starting with \u2581), not a WordPiece vocab.txt: give the model itself (the .model file "
        "beside it) as --spm_model_file")


def test_chinese_characters_are_split():
    assert BasicTokenizer().tokenize("ah\u535A\u63A8zz") == ["ah", "\u535A", "\u63A8", "zz"]


def test_basic_tokenizer_lower():
    tokenizer = BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert tokenizer.tokenize("H\u00E9llo") == ["hello"]


def test_basic_tokenizer_no_lower():
    tokenizer = BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["HeLLo", "!", "how", "Are", "yoU", "?"]
    assert tokenizer.tokenize("H\u00E9llo") == ["H\u00E9llo"]


def test_basic_tokenizer_drops_control_and_invalid_chars():
    assert BasicTokenizer().tokenize("a\u0005b\u0000c\ufffdd\u200be") == ["abcde"]


def test_wordpiece_tokenizer():
    vocab = {token: i for i, token in enumerate(REFERENCE_TEST_VOCAB)}
    tokenizer = WordpieceTokenizer(vocab=vocab)
    assert tokenizer.tokenize("") == []
    assert tokenizer.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenizer.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
    assert tokenizer.tokenize("want" * 51) == ["[UNK]"]   # 204 chars > 200


def test_character_classes():
    for char in (" ", "\t", "\r", "\n", "\u00A0"):
        assert is_whitespace(char)
    for char in ("A", "-"):
        assert not is_whitespace(char)
    assert is_control("\u0005")
    for char in ("A", " ", "\t", "\r", "\U0001F4A9"):
        assert not is_control(char)
    for char in ("-", "$", "`", ".", "\u00bf"):
        assert is_punctuation(char)
    for char in ("A", " ", "7"):
        assert not is_punctuation(char)


def test_parse_vocab_formats(tmp_path):
    path = tmp_path / "mixed.vocab"
    path.write_text("a\t-1.5\n\nb 2\na\nc\n", encoding="utf-8")
    assert parse_vocab(path.read_bytes(), str(path)) == {"a": 0, " ": 1, "b": 2, "c": 3}
    model = spm_fixtures.cached_tiny_spm()
    vocab_file = model.replace(".model", ".vocab")   # SentencePiece's .vocab format (piece, tab, score)
    with open(vocab_file, "rb") as handle:
        vocab = parse_vocab(handle.read(), vocab_file)
    processor = spm.SentencePieceProcessor(model_file=model)
    assert len(vocab) == processor.GetPieceSize()
    assert all(vocab[processor.IdToPiece(i)] == i for i in range(processor.GetPieceSize()))


# --- InGraphTokenizer: identical ids to FullTokenizer.encode_text (serving = training) -----------

@pytest.fixture(scope="module")
def tiny_graph(tiny) -> InGraphTokenizer:
    return InGraphTokenizer.from_full_tokenizer(tiny)


def _all_code_point_texts(chunk: int = 64) -> list[str]:
    """Every Unicode scalar value, in strings of ``chunk`` consecutive code points."""
    code_points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    return ["".join(map(chr, code_points[i:i + chunk])) for i in range(0, len(code_points), chunk)]


def test_in_graph_ids_equal_python_on_real_text(en8k):
    texts = []
    for name in ("wiki_00.txt", "sample_text.txt"):
        with open(os.path.join(SHARED_DATA_DIR, "corpus", name), encoding="utf-8") as handle:
            texts += handle.read().split("\n")
    ids = InGraphTokenizer.from_full_tokenizer(en8k)(texts).to_list()
    assert len(ids) == len(texts) > 280
    for text, graph_ids in zip(texts, ids):
        assert graph_ids == en8k.encode_text(text), text


def test_in_graph_digit_comma_rule(german):
    graph = InGraphTokenizer.from_full_tokenizer(german)
    texts = ["Saison 1997/12, und", "Im Jahr 2014, kam er.", "am 03/12, und 5/07, 6/09,", "x$45, 1,2,"]
    fired = [any(p.endswith(",") and len(p) > 1 and p[-2].isdigit()
                 for p in german.sp_model.EncodeAsPieces(t)) for t in texts]
    assert all(fired[:3])
    assert graph(texts).to_list() == [german.encode_text(t) for t in texts]


def test_in_graph_digit_comma_rule_on_toy_model():
    sp = _sp_with_extra_pieces(spm_fixtures.cached_tiny_spm(), ["$45,", "▁1990,"])
    graph = InGraphTokenizer(sp.serialized_model_proto(), do_lower_case=True)
    texts = ["x$45, 1990,", "In 1990, it cost US$45, yes"]
    expected = [encode_ids(sp, preprocess_text(t, lower=True)) for t in texts]
    assert any(sp.PieceToId("$45,") == i for t in texts for i in sp.EncodeAsIds(preprocess_text(t, True)))
    assert graph(texts).to_list() == expected


@pytest.mark.parametrize("lower", [True, False])
def test_in_graph_normalization_equals_preprocess_text_on_every_code_point(lower):
    with open(spm_fixtures.cached_tiny_spm(), "rb") as handle:
        graph = InGraphTokenizer(handle.read(), do_lower_case=lower)
    texts = _all_code_point_texts()
    normalized = graph.normalize(texts).numpy()
    mismatches = [i for i, (text, out) in enumerate(zip(texts, normalized))
                  if preprocess_text(text, lower=lower).encode("utf-8") != out]
    assert mismatches == []


def test_in_graph_whitespace_sigma_and_invalid_utf8(tiny_graph):
    cases = {
        "a\x1cb\x85c\u3000d \u2029": "a b c d",     # every char str.split() splits on
        "ΟΔΟΣ ΣΟΦΙΑ": "οδος σοφια",                 # final sigma, as str.lower
        "ΑΣ' Β Σ ΑΣΑ ΑΣ'Β": "ας' β σ ασα ασ'β",      # "'" is case-ignorable (skipped)
        "  Café\tNAÏVE ﬁ  ": "cafe naive fi",
    }
    out = tiny_graph.normalize(list(cases)).numpy()
    assert [o.decode("utf-8") for o in out] == list(cases.values())
    broken = [b"caf\xc3 x", b"\xff\xfeab c", b"a \xe2\x82 b", b"\xed\xa0\x80x", b"\xc0\xafz"]
    assert list(tiny_graph.normalize(broken).numpy()) == \
        [preprocess_text(b, lower=True).encode("utf-8") for b in broken]


def test_in_graph_tokenizer_survives_saved_model(tiny, tiny_graph, tmp_path):
    tf.saved_model.save(tiny_graph, str(tmp_path / "tokenizer"))
    restored = tf.saved_model.load(str(tmp_path / "tokenizer"))
    texts = ["ΟΔΟΣ in 30, days", "Anarchism is a political philosophy."]
    assert restored(texts).to_list() == [tiny.encode_text(t) for t in texts]


def test_in_graph_needs_sentencepiece(reference_vocab_file):
    with pytest.raises(TokenizerError, match="WordPiece"):
        InGraphTokenizer.from_full_tokenizer(FullTokenizer(vocab_file=reference_vocab_file))


def test_full_tokenizer_pickles_as_its_model_bytes(tiny, reference_vocab_file, tmp_path):
    """A pickled tokenizer (as a Beam worker on another machine gets it) needs no file and tokenizes
    exactly as the original."""
    text = "Unbelievable, the 1,000 runners finished; naïve Zürich résumé!"
    wordpiece = FullTokenizer(vocab_file=reference_vocab_file, do_lower_case=False)
    for original in (tiny, wordpiece):
        copy = pickle.loads(pickle.dumps(original))
        assert copy.tokenize_text(text) == original.tokenize_text(text)
        assert copy.vocab == original.vocab
        assert copy.fingerprint == original.fingerprint
        assert copy.do_lower_case == original.do_lower_case
    moved = tmp_path / "moved.model"
    moved.write_bytes(open(spm_fixtures.cached_tiny_spm(), "rb").read())
    pickled = pickle.dumps(FullTokenizer(spm_model_file=str(moved)))
    moved.unlink()
    assert pickle.loads(pickled).tokenize_text(text) == tiny.tokenize_text(text)
