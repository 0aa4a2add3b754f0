"""NER sentences -> windows of pieces -> fixed-length records, cached as feature files.

Each word is tokenized on its own (``FullTokenizer.encode_text``; a word that yields no piece, e.g.
one made of characters normalisation removes, gets the unknown piece), so a word's pieces never
straddle another word. A sentence's pieces are cut into windows of up to ``max_seq_length - 2``
pieces, the next starting ``doc_stride`` pieces later (SQuAD's windows,
data_prep/common/windows.py); every piece lies in a window, so every word is read. One record per
window, of max_seq_length S::

    input_ids      [CLS] p_1 .. p_l [SEP] 0 .. 0
    label_ids        0   t_1 .. t_l   0   0 .. 0     tag id at a word's first piece, else 0
    label_weights    0   1 0 .. 1 0   0   0 .. 0     1 at the first piece of every word
    word_index      -1   w   .. -1   -1  -1 .. -1    the word's index where this window is the
                                                    one where its first piece has the most context

``label_weights`` are the training loss's positions (a word's other pieces are ignored, as is a
word whose first piece falls in an earlier window). ``word_index`` picks, for evaluation and
prediction, each word's prediction from the one window where it has the most context (SQuAD's
max-context rule): exactly one position per word over a sentence's windows. ``sentence_index``
(scalar) says which sentence a window belongs to. ``input_mask`` 1 over the real positions,
``segment_ids`` 0. All int64 in the file, int32 once parsed: the schema and its parser
(``parse_ner_record``) are the task's, albert_tf/tasks/token_classification/records.py.

``ner_feature_file`` caches a file's records (data_prep/common/feature_cache.py), keyed by the
input file, the tokenizer and its ``NerFeatureSettings`` (S, the stride, the tag list, whether the
file was read labelled, FEATURES_VERSION); its metadata holds ``num_sentences``, ``num_words`` and
``words_per_sentence``.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from albert_tf.tasks.token_classification import records
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.common.feature_cache import FeatureFile, RecordSink, cached_feature_file
from data_prep.common.tf_example import int64_feature, serialize_example
from data_prep.common.user_errors import SettingsError
from data_prep.common.windows import doc_spans, max_context_spans
from data_prep.token_classification.reader import Sentence

# The records version: bump when the records written for the same inputs and settings change
# (every cached NER feature file is then rebuilt).
FEATURES_VERSION = 1
# [CLS] and [SEP] around each window.
SPECIAL_TOKENS = 2


@dataclasses.dataclass(frozen=True)
class Window:
    """One record's lists, each of length max_seq_length, and its sentence."""

    input_ids: list[int]
    input_mask: list[int]
    label_ids: list[int]
    label_weights: list[int]
    word_index: list[int]
    sentence_index: int


def check_geometry(max_seq_length: int, doc_stride: int) -> None:
    """SettingsError (a ValueError) unless a window holds a piece and the stride moves."""
    if max_seq_length < SPECIAL_TOKENS + 1:
        raise SettingsError(f"max_seq_length must be >= 3 ([CLS], a piece, [SEP]), got "
                            f"{max_seq_length}")
    if doc_stride < 1:
        raise SettingsError(f"doc_stride must be >= 1, got {doc_stride}")


@dataclasses.dataclass(frozen=True)
class NerFeatureSettings:
    """What determines an NER feature file's records besides its file and the tokenizer: what
    ``write_windows`` converts with and, as ``dataclasses.asdict``, the feature cache's key
    settings.

    max_seq_length: S. doc_stride: the pieces between two windows' starts. tags: the tag list (tag
    id = index). labelled: the sentences carry tags (label ids from them; else 0).
    features_version: ``FEATURES_VERSION``.
    """

    max_seq_length: int
    doc_stride: int
    tags: tuple[str, ...]
    labelled: bool
    features_version: int = dataclasses.field(default=FEATURES_VERSION, init=False)

    def __post_init__(self):
        check_geometry(self.max_seq_length, self.doc_stride)

    @classmethod
    def for_sentences(cls, sentences: Sequence[Sentence], tags: Sequence[str],
                      max_seq_length: int, doc_stride: int) -> "NerFeatureSettings":
        """The settings of ``sentences`` (labelled when every one carries tags)."""
        return cls(max_seq_length, doc_stride, tuple(tags),
                   all(sentence.tags is not None for sentence in sentences))


def word_pieces(words: Sequence[str], tokenizer: FullTokenizer) -> list[list[int]]:
    """The piece ids of every word, tokenized alone (the unknown piece for a word without any)."""
    return [tokenizer.encode_text(word) or [tokenizer.unk_id] for word in words]


def sentence_windows(pieces: Sequence[Sequence[int]], tag_ids: Sequence[int] | None,
                     sentence_index: int, max_seq_length: int, doc_stride: int,
                     cls_id: int, sep_id: int) -> list[Window]:
    """The windows of one sentence (see the module doc). pieces: per word; tag_ids: per word (None:
    unlabelled, label ids 0)."""
    check_geometry(max_seq_length, doc_stride)
    flat = [piece for word in pieces for piece in word]
    first_piece, position = [], 0
    for word in pieces:
        first_piece.append(position)
        position += len(word)
    spans = doc_spans(len(flat), max_seq_length - SPECIAL_TOKENS, doc_stride)
    best = max_context_spans(spans, len(flat))
    windows = []
    for span_index, (start, length) in enumerate(spans):
        padding = max_seq_length - length - SPECIAL_TOKENS
        labels, weights = [0] * max_seq_length, [0] * max_seq_length
        word_index = [-1] * max_seq_length
        for word, piece in enumerate(first_piece):
            if start <= piece < start + length:
                slot = piece - start + 1
                labels[slot] = 0 if tag_ids is None else tag_ids[word]
                weights[slot] = 1
                if best[piece] == span_index:
                    word_index[slot] = word
        windows.append(Window(
            input_ids=[cls_id] + flat[start:start + length] + [sep_id] + [0] * padding,
            input_mask=[1] * (length + SPECIAL_TOKENS) + [0] * padding,
            label_ids=labels, label_weights=weights, word_index=word_index,
            sentence_index=sentence_index))
    return windows


def serialize_window(window: Window) -> bytes:
    """The record of a window (the schema of albert_tf/tasks/token_classification/records.py)."""
    return serialize_example({
        records.INPUT_IDS: int64_feature(window.input_ids),
        records.INPUT_MASK: int64_feature(window.input_mask),
        records.SEGMENT_IDS: int64_feature([0] * len(window.input_ids)),
        records.LABEL_IDS: int64_feature(window.label_ids),
        records.LABEL_WEIGHTS: int64_feature(window.label_weights),
        records.WORD_INDEX: int64_feature(window.word_index),
        records.SENTENCE_INDEX: int64_feature([window.sentence_index]),
    })


def write_windows(sink: RecordSink, sentences: Sequence[Sentence], tokenizer: FullTokenizer,
                  settings: NerFeatureSettings) -> int:
    """Writes every sentence's windows to ``sink``; returns the number of records. Labelled
    settings take each word's tag id from ``settings.tags``."""
    tag_id = {tag: index for index, tag in enumerate(settings.tags)}
    count = 0
    for index, sentence in enumerate(sentences):
        tag_ids = [tag_id[tag] for tag in sentence.tags] if settings.labelled else None
        for window in sentence_windows(word_pieces(sentence.words, tokenizer), tag_ids, index,
                                       settings.max_seq_length, settings.doc_stride,
                                       tokenizer.cls_id, tokenizer.sep_id):
            sink.write(serialize_window(window))
            count += 1
    return count


def ner_feature_file(input_path: str, split: str, sentences: Sequence[Sentence],
                     settings: NerFeatureSettings, tokenizer: FullTokenizer,
                     cache_dir: str) -> FeatureFile:
    """The cached feature file of ``sentences`` (read from ``input_path``; see the module doc)."""
    if settings.labelled != all(sentence.tags is not None for sentence in sentences):
        raise ValueError(f"settings.labelled={settings.labelled} but the sentences of "
                         f"{input_path} are {'not ' if settings.labelled else ''}all labelled")

    def build(sink: RecordSink) -> dict:
        write_windows(sink, sentences, tokenizer, settings)
        return {"num_sentences": len(sentences),
                "num_words": sum(len(sentence.words) for sentence in sentences),
                "words_per_sentence": [len(sentence.words) for sentence in sentences]}

    return cached_feature_file(cache_dir, "ner", split, settings, tokenizer.fingerprint,
                               [input_path], build)
