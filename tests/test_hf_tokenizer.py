"""The tokenizer of a Hugging Face directory albert_tf wrote, against ``FullTokenizer``, on real
text.

SentencePiece models trained here with the ALBERT recipe (its user-defined symbols ``( ) " - . – £
€``; lower-cased and cased) on the shared Wikipedia sample, then the directory's tokenizer through
transformers' ``AutoTokenizer`` (``use_fast`` True and False) and keras-hub's ``AlbertTokenizer``
on the sample's sentences and the GLUE dev sentences (969 texts), and the [CLS]/[SEP] pair
encoding of the fine-tuning scripts on the GLUE dev pairs. What cannot match is in
docs/checkpoints.md ("What encodes how").
"""

import csv
import os
import re

import pytest
import transformers

from albert_tf.checkpoints.conversion import to_huggingface
from albert_tf.checkpoints.hf_format import WRITTEN_FILES, write_hf_directory
from albert_tf.checkpoints.hf_names import HuggingFaceFormatError
from albert_tf.checkpoints.hf_tokenizer import build_tokenizer
from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import AlbertModel
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.normalization import preprocess_text
from data_prep.classification.features import build_features
from data_prep.pretraining.vocabulary import train_sentencepiece
from tests import spm_fixtures
from tests.shared_setup import EN8K_MODEL, GLUE_DIR, SHARED_DATA_DIR

pytestmark = pytest.mark.requires_shared_data

WIKI = os.path.join(SHARED_DATA_DIR, "corpus", "wiki_00.txt")
# GLUE dev files and their sentence columns.
GLUE_PAIRS = (("RTE", "sentence1", "sentence2"), ("WNLI", "sentence1", "sentence2"),
              ("MRPC", "#1 String", "#2 String"), ("STS-B", "sentence1", "sentence2"))
MAX_SEQ_LENGTH = 512  # no GLUE dev pair needs truncating (checked below)

# Where transformers' own conversion of spiece.model went wrong (user-defined symbols), and where
# normalization is subtle: whitespace kinds, accents, compatibility characters, the final sigma,
# scripts whose composition tokenizers' character map misses, characters newer than tokenizers'
# Unicode tables (MODIFIER LETTER CAPITAL C, SEGMENTED DIGIT ZERO), a literal "▁", special tokens
# written in lower case.
EDGE_TEXTS = (
    "x-rays, self-supervised e-mail: 3.5 of U.S.A. (1990) \"quoted\" – £5 or €3.",
    "", "   ", " \t\n", "a\u00a0\u2028b\u3000\u205fc  ", "Café déjà vu, ÅNGSTRÖM naïve Øre",
    "ﬁne ½ Ⅻ ① ㈱ （ｆｕｌｌ） ``tex'' quotes", "ΟΔΟΣ ΣΑΣ Σ. ὈΔΥΣΣΕΎΣ'", "한국어 텍스트",
    "কোন ଓଡ଼ିଆ हिन्दी ไทย العربية 中文", "\ua7f2\U0001fbf0 modifier", "a\u200db\u200c\x00c\u00adend",
    "\u00a8x \u00a8", "▁a a▁ b▁", "emoji 😀👍🏽 ok", "[mask] and [cls]",
)


def _wiki_sentences() -> list[str]:
    sentences = []
    with open(WIKI, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line and not line.startswith(("<doc", "</doc")):
                sentences += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"(])", line) if s.strip()]
    return sentences


def _glue_pairs() -> list[tuple[str, str]]:
    pairs = []
    for task, first, second in GLUE_PAIRS:
        with open(os.path.join(GLUE_DIR, task, "dev.tsv"), encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
        columns = rows[0].index(first), rows[0].index(second)
        pairs += [(row[columns[0]], row[columns[1]]) for row in rows[1:]]
    return pairs


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """969 real sentences: the Wikipedia sample's and every GLUE dev sentence."""
    sentences = _wiki_sentences() + [text for pair in _glue_pairs() for text in pair]
    assert len(sentences) >= 600
    return sentences


@pytest.fixture(scope="module", params=[True, False], ids=["lower_cased", "cased"])
def exported(request, tmp_path_factory) -> tuple[FullTokenizer, str]:
    """(FullTokenizer, the Hugging Face directory written with it) for a model trained with the
    ALBERT recipe on the Wikipedia sample (2,000 pieces; about two seconds)."""
    lower = request.param
    directory = tmp_path_factory.mktemp("hf_tokenizer")
    model_file = train_sentencepiece(WIKI, str(directory / "wiki"), vocab_size=2000,
                                     do_lower_case=lower, quiet=True)
    tokenizer = FullTokenizer(spm_model_file=model_file, do_lower_case=lower)
    assert [tokenizer.inv_vocab[i] for i in range(5, 13)] == list('()"-.–£€')
    config = AlbertConfig.from_dict(dict(
        vocab_size=tokenizer.vocab_size, embedding_size=4, hidden_size=8, num_hidden_layers=1,
        num_attention_heads=1, intermediate_size=8, max_position_embeddings=MAX_SEQ_LENGTH))
    write_hf_directory(AlbertModel(config), str(directory / "hf"), spm_model_file=model_file,
                       do_lower_case=lower)
    return tokenizer, str(directory / "hf")


def _differences(tokenizer: FullTokenizer, texts, theirs) -> list[str]:
    """A line for each text whose ids differ from ``tokenizer.encode_text``'s (their pieces)."""
    return [f"{text!r}: {tokenizer.convert_ids_to_tokens(tokenizer.encode_text(text))} != "
            f"{tokenizer.convert_ids_to_tokens(ids)}"
            for text, ids in zip(texts, theirs) if list(ids) != tokenizer.encode_text(text)]


@pytest.mark.parametrize("use_fast", [True, False])
def test_autotokenizer_encodes_real_text_as_albert_tf(exported, texts, use_fast):
    tokenizer, directory = exported
    theirs = transformers.AutoTokenizer.from_pretrained(directory, use_fast=use_fast)
    assert isinstance(theirs, transformers.PreTrainedTokenizerFast)
    ids = theirs(texts, add_special_tokens=False)["input_ids"]
    differences = _differences(tokenizer, texts, ids)
    assert not differences, f"{len(differences)} of {len(texts)} differ: {differences[:3]}"
    ids = theirs(list(EDGE_TEXTS), add_special_tokens=False)["input_ids"]
    assert not _differences(tokenizer, EDGE_TEXTS, ids)
    # One sentence is [CLS] ids [SEP]. Special tokens written in the text are special tokens (the
    # transformers convention, e.g. for fill-mask); albert_tf encodes them as text.
    assert theirs(texts[0])["input_ids"] == ([tokenizer.cls_id] + tokenizer.encode_text(texts[0])
                                             + [tokenizer.sep_id])
    assert tokenizer.mask_id in theirs("the [MASK] sat")["input_ids"]


def test_autotokenizer_packs_a_pair_as_the_fine_tuning_scripts(exported):
    tokenizer, directory = exported
    theirs = transformers.AutoTokenizer.from_pretrained(directory)
    for first, second in _glue_pairs():
        ids_a, ids_b = tokenizer.encode_text(first), tokenizer.encode_text(second)
        assert len(ids_a) + len(ids_b) + 3 <= MAX_SEQ_LENGTH
        features = build_features(ids_a, ids_b, MAX_SEQ_LENGTH, tokenizer.cls_id,
                                  tokenizer.sep_id, label_id=0)
        encoded = theirs(first, second, padding="max_length", max_length=MAX_SEQ_LENGTH)
        assert encoded["input_ids"] == features.input_ids, (first, second)
        assert encoded["token_type_ids"] == features.segment_ids
        assert encoded["attention_mask"] == features.input_mask


def test_keras_hub_encodes_normalized_text_as_albert_tf(exported, texts):
    """keras-hub's AlbertTokenizer applies spiece.model alone (no lower-casing, accent removal or
    digit-comma rule): on text through ``preprocess_text`` it gives albert_tf's ids, and on raw text
    wherever ``preprocess_text`` leaves the text as it is; its pair packing is the scripts'."""
    import keras_hub

    tokenizer, directory = exported
    theirs = keras_hub.models.AlbertTokenizer.from_preset(directory)
    normalized = [preprocess_text(text, lower=tokenizer.do_lower_case) for text in texts]
    ids = [[int(i) for i in row] for row in theirs(normalized)]
    differences = _differences(tokenizer, texts, ids)
    assert not differences, f"{len(differences)} of {len(texts)} differ: {differences[:3]}"
    unchanged = [text for text, norm in zip(texts, normalized) if norm == text]
    assert unchanged  # sentences without capitals (lower-cased), accents or extra spaces
    assert not _differences(tokenizer, unchanged, [[int(i) for i in row]
                                                   for row in theirs(unchanged)])

    packer = keras_hub.models.AlbertTextClassifierPreprocessor(theirs,
                                                              sequence_length=MAX_SEQ_LENGTH)
    pairs = _glue_pairs()[:40]
    packed = packer(x=tuple([preprocess_text(pair[k], lower=tokenizer.do_lower_case)
                             for pair in pairs] for k in (0, 1)))
    for row, (first, second) in enumerate(pairs):
        features = build_features(tokenizer.encode_text(first), tokenizer.encode_text(second),
                                  MAX_SEQ_LENGTH, tokenizer.cls_id, tokenizer.sep_id, label_id=0)
        assert packed["token_ids"][row].numpy().tolist() == features.input_ids
        assert packed["segment_ids"][row].numpy().tolist() == features.segment_ids
        assert packed["padding_mask"][row].numpy().astype(int).tolist() == features.input_mask


def test_tokenizer_json_normalizes_as_preprocess_text_and_sentencepiece(exported):
    """The normalized text itself (every character, not only those the small model knows)."""
    tokenizer, directory = exported
    normalizer = transformers.AutoTokenizer.from_pretrained(
        directory).backend_tokenizer.normalizer
    for text in EDGE_TEXTS:
        expected = tokenizer.sp_model.Normalize(preprocess_text(text,
                                                                lower=tokenizer.do_lower_case))
        assert normalizer.normalize_str(text) == expected, text


def test_digit_comma_pieces_at_the_end_of_a_word_split_as_albert_tf(texts):
    """en8k holds pieces such as "▁30," that the reference's digit-comma rule splits."""
    tokenizer = FullTokenizer(spm_model_file=EN8K_MODEL, do_lower_case=True)
    with open(EN8K_MODEL, "rb") as handle:
        theirs = build_tokenizer(handle.read(), do_lower_case=True)
    assert "▁30," in tokenizer.sp_model.EncodeAsPieces("on june 30, 2001")
    assert tokenizer.tokenize_text("On June 30, 2001")[-3:-1] == ["▁30", ","]
    numbers = [text for text in texts if re.search(r"\d,", text)]
    numbers += ["On June 30, Google said 2, 3 and 14, and 47, or 1,000 and 60,000."]
    assert len(numbers) > 40
    ids = [encoding.ids for encoding in theirs.encode_batch(numbers, add_special_tokens=False)]
    assert not _differences(tokenizer, numbers, ids)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _with_trainer_field(model_bytes: bytes, field: int, value: int) -> bytes:
    """The model with its trainer_spec's varint ``field`` set (an appended occurrence merges)."""
    trainer_spec = _varint(field << 3) + _varint(value)
    return model_bytes + _varint(2 << 3 | 2) + _varint(len(trainer_spec)) + trainer_spec


def test_models_tokenizer_json_cannot_express_are_refused(tmp_path):
    with open(spm_fixtures.cached_tiny_spm(), "rb") as handle:
        model_bytes = handle.read()
    for field, value, reason in ((3, 2, "not unigram"), (35, 1, "byte fallback"),
                                 (24, 1, "whitespace as a suffix")):
        with pytest.raises(HuggingFaceFormatError, match=reason):
            build_tokenizer(_with_trainer_field(model_bytes, field, value), True, "m.model")
    with pytest.raises(HuggingFaceFormatError, match="not a SentencePiece model"):
        build_tokenizer(b"\x0a\x05ab", True)
    assert "tokenizer.json" in WRITTEN_FILES

    # The conversion refuses it before reading the checkpoint (which does not even exist here).
    bpe_model = tmp_path / "bpe.model"
    bpe_model.write_bytes(_with_trainer_field(model_bytes, 3, 2))
    config = AlbertConfig.from_dict(dict(vocab_size=500, embedding_size=4, hidden_size=8,
                                         num_hidden_layers=1, num_attention_heads=1,
                                         intermediate_size=8, max_position_embeddings=8))
    with pytest.raises(HuggingFaceFormatError, match=f"--spm_model_file={bpe_model}.*not unigram"):
        to_huggingface(AlbertPretrainingModel(config), str(tmp_path / "no_checkpoint"),
                       "checkpoint", str(tmp_path / "hf"), spm_model_file=str(bpe_model))
    assert not (tmp_path / "hf").exists()
