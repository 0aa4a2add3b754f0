"""SQuAD questions -> fixed-length features and TFRecords, as the reference's
``convert_examples_to_features`` builds them (SentencePiece models only).

Per question:
1. The question's ids (``preprocess_text`` then ``encode_ids``), keeping the first max_query_length.
2. The paragraph's pieces (``preprocess_text`` then ``encode_pieces``) and, through the character
   alignment of ``squad_alignment``, each piece's first and last character in the raw paragraph
   (``tok_start_to_orig_index`` / ``tok_end_to_orig_index``). A paragraph that does not align drops
   its questions (no features).
3. Windows over the pieces: up to ``S - len(query) - 3`` pieces each, the next starting
   ``min(window length, doc_stride)`` pieces later, the last one reaching the paragraph's end.
4. One feature per window, of max_seq_length S::

       input_ids    [CLS] q_1 .. q_k [SEP] d_1 .. d_l [SEP] 0 .. 0
       segment_ids    0    0  ..  0    0     1  ..  1    1  0 .. 0
       input_mask     1    1  ..  1    1     1  ..  1    1  0 .. 0
       p_mask         0    1  ..  1    1     0  ..  0    1  1 .. 1

   ``paragraph_len`` is the number of real tokens (k + l + 3, not l: the reference's name);
   ``doc_offset`` = k + 2 is the input position of d_1. ``token_is_max_context`` says, per piece,
   whether this window is the one where the piece has the most context: the largest
   ``min(left, right) + 0.01 * window length``, the first window on ties. Features hold it as a
   list over the window's pieces; their metadata as the reference does, keyed by input position.
5. Training labels: the answer's pieces as input positions when it lies wholly inside the window;
   otherwise, and for unanswerable questions, position 0 ([CLS]) and ``is_impossible``.

Records: the task's schema (albert_tf/tasks/question_answering/records.py, the reference's
``FeatureWriter`` schema, all int64): ``unique_ids`` [1]; ``input_ids``, ``input_mask``,
``segment_ids``, ``p_mask`` [S]; training adds ``start_positions``, ``end_positions``,
``is_impossible`` [1]. Unique ids count features from 1000000000 in question order; a dropped
question takes none.

Conversion runs in worker processes (``data_prep.common.worker_pool``) on chunks of whole
paragraphs, each paragraph tokenized and aligned once for all its questions; results come back in
question order, so the output does not depend on the number of workers. The unique id is added to
each record in that order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Callable, Iterable, Iterator, Sequence

import sentencepiece as spm
import tensorflow as tf

from albert_tf.tasks.question_answering import records
from albert_tf.tokenization.normalization import preprocess_text
from albert_tf.tokenization.sentencepiece import SPIECE_UNDERLINE, encode_ids, encode_pieces
from data_prep.common.tf_example import int64_feature, serialize_example
from data_prep.common.windows import doc_spans, max_context_spans
from data_prep.common.worker_pool import ordered_map
from data_prep.question_answering.alignment import IndexFiller, align_characters
from data_prep.question_answering.examples import SquadDataError, SquadExample

FIRST_UNIQUE_ID = 1000000000

# The records version: bump when the records or the metadata change for the same inputs and
# settings (every cached SQuAD feature file is then rebuilt).
FEATURES_VERSION = 2


@dataclasses.dataclass(frozen=True)
class SquadFeatureSettings:
    """What determines a SQuAD feature file's records besides its JSON file and the tokenizer: what
    the converters convert with and, as ``dataclasses.asdict``, the feature cache's key settings.

    max_seq_length, doc_stride, max_query_length: the window geometry (the reference's flags of
    the same names). is_training: training records (labels; questions read as training ones).
    version_2_with_negative: False refuses SQuAD 2.0 questions, None accepts either version
    (``read_squad_questions``). shuffle_seed: the questions shuffled with
    ``random.Random(shuffle_seed)`` before conversion (None: file order). features_version:
    ``FEATURES_VERSION``.
    """

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    is_training: bool = False
    version_2_with_negative: bool | None = None
    shuffle_seed: int | None = None
    features_version: int = dataclasses.field(default=FEATURES_VERSION, init=False)

    def __post_init__(self):
        if self.max_query_length < 0:
            raise SquadDataError(f"max_query_length must be >= 0, got {self.max_query_length}")
        if self.max_seq_length <= self.max_query_length + 3:
            raise SquadDataError(
                f"max_seq_length ({self.max_seq_length}) must be greater than max_query_length + 3 "
                f"({self.max_query_length + 3}): [CLS], two [SEP] and at least one paragraph piece")
        if self.doc_stride < 1:
            raise SquadDataError(f"doc_stride must be >= 1, got {self.doc_stride}")


@dataclasses.dataclass(frozen=True)
class SquadFeature:
    """One window of one question (lists of length S unless said otherwise).

    example_index: the question's position in the file. doc_span_index: the window's position
    among the question's windows. doc_offset: input position of the window's first piece.
    tok_start/end_to_orig_index, token_is_max_context: [window pieces] character offsets in the raw
    paragraph, and whether this is the piece's max-context window (see the module doc).
    start_position / end_position / is_impossible: training labels, None in eval.
    """

    example_index: int
    doc_span_index: int
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]
    p_mask: list[int]
    paragraph_len: int
    doc_offset: int
    tok_start_to_orig_index: list[int]
    tok_end_to_orig_index: list[int]
    token_is_max_context: list[bool]
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool | None = None


@dataclasses.dataclass(frozen=True)
class ParagraphTokens:
    """A paragraph's pieces, tied to its raw characters.

    piece_ids: [P]. tok_start/end_to_orig_index: [P] first / last raw character of each piece.
    chartok_to_tok_index: [m] piece of each character of the pieces' text.
    orig_to_chartok: raw character -> character of the pieces' text (gaps filled as the reference).
    """

    piece_ids: list[int]
    tok_start_to_orig_index: list[int]
    tok_end_to_orig_index: list[int]
    chartok_to_tok_index: list[int]
    orig_to_chartok: IndexFiller

    def answer_pieces(self, start_char: int, answer_text: str) -> tuple[int, int]:
        """(first, last) piece of the answer starting at raw character ``start_char``."""
        end_char = start_char + len(answer_text) - 1
        first = self.chartok_to_tok_index[self.orig_to_chartok.fill(start_char, is_start=True)]
        last = self.chartok_to_tok_index[self.orig_to_chartok.fill(end_char, is_start=False)]
        return first, last


def tokenize_paragraph(paragraph_text: str, sp_model: spm.SentencePieceProcessor,
                       do_lower_case: bool, char_keys: dict[str, str] | None = None
                       ) -> ParagraphTokens | None:
    """Pieces of the paragraph and their raw offsets; None when the alignment fails (a mismatch).

    char_keys: a cache of per-character normalizations (for this do_lower_case), shared across
      paragraphs.
    """
    char_keys = {} if char_keys is None else char_keys
    pieces = encode_pieces(sp_model, preprocess_text(paragraph_text, lower=do_lower_case))
    chartok_to_tok_index: list[int] = []
    tok_start_to_chartok: list[int] = []
    tok_end_to_chartok: list[int] = []
    for index, piece in enumerate(pieces):
        tok_start_to_chartok.append(len(chartok_to_tok_index))
        chartok_to_tok_index.extend([index] * len(piece))
        tok_end_to_chartok.append(len(chartok_to_tok_index) - 1)
    piece_text = "".join(pieces).replace(SPIECE_UNDERLINE, " ")
    for char in set(paragraph_text).difference(char_keys):
        char_keys[char] = preprocess_text(char, remove_space=False, lower=do_lower_case)
    raw_keys = list(map(char_keys.__getitem__, paragraph_text))
    alignment = align_characters(raw_keys, piece_text)
    if alignment is None:
        return None
    chartok_to_orig = IndexFiller(alignment.chartok_to_orig, limit=len(paragraph_text))
    return ParagraphTokens(
        piece_ids=[sp_model.PieceToId(piece) for piece in pieces],
        tok_start_to_orig_index=[chartok_to_orig.fill(p, is_start=True) for p in tok_start_to_chartok],
        tok_end_to_orig_index=[chartok_to_orig.fill(p, is_start=False) for p in tok_end_to_chartok],
        chartok_to_tok_index=chartok_to_tok_index,
        orig_to_chartok=IndexFiller(alignment.orig_to_chartok))


class FeatureConverter:
    """Questions -> features for one SentencePiece model, lowercasing choice and settings
    (geometry; training features or not).

    Consecutive questions on the same paragraph reuse its pieces and alignment.
    """

    def __init__(self, sp_model: spm.SentencePieceProcessor, do_lower_case: bool,
                 settings: SquadFeatureSettings):
        self.sp_model = sp_model
        self.do_lower_case = do_lower_case
        self.settings = settings
        self.is_training = settings.is_training
        self._cls_id = sp_model.PieceToId("[CLS]")
        self._sep_id = sp_model.PieceToId("[SEP]")
        self._char_keys: dict[str, str] = {}
        self._last_paragraph: tuple[str, ParagraphTokens | None] | None = None

    def paragraph(self, paragraph_text: str) -> ParagraphTokens | None:
        """``tokenize_paragraph`` of the text, computed once for consecutive equal texts."""
        if self._last_paragraph is None or self._last_paragraph[0] != paragraph_text:
            tokens = tokenize_paragraph(paragraph_text, self.sp_model, self.do_lower_case,
                                        self._char_keys)
            self._last_paragraph = (paragraph_text, tokens)
        return self._last_paragraph[1]

    def convert(self, example: SquadExample, example_index: int) -> list[SquadFeature] | None:
        """The features of one question, or None when its paragraph does not align (dropped)."""
        paragraph = self.paragraph(example.paragraph_text)
        if paragraph is None:
            return None
        query_ids = encode_ids(self.sp_model, preprocess_text(example.question_text,
                                                              lower=self.do_lower_case))
        query_ids = query_ids[:self.settings.max_query_length]
        answer = None
        if self.is_training and not example.is_impossible:
            answer = paragraph.answer_pieces(example.start_position, example.orig_answer_text)
            if answer[0] > answer[1]:
                raise SquadDataError(f"question {example.qas_id}: answer {example.orig_answer_text!r} "
                                     "covers no piece of its paragraph")
        num_pieces = len(paragraph.piece_ids)
        spans = doc_spans(num_pieces, self.settings.max_seq_length - len(query_ids) - 3,
                          self.settings.doc_stride)
        best_span = max_context_spans(spans, num_pieces)
        return [self._window(example_index, paragraph, query_ids, span_index, span, best_span,
                             answer)
                for span_index, span in enumerate(spans)]

    def _window(self, example_index: int, paragraph: ParagraphTokens, query_ids: list[int],
                span_index: int, span: tuple[int, int], best_span: list[int],
                answer: tuple[int, int] | None) -> SquadFeature:
        """The feature of window ``span`` (start, length); ``answer``: the answer's (first, last)
        piece for an answerable training question, else None."""
        start, length = span
        end = start + length
        doc_offset = len(query_ids) + 2
        input_ids = [self._cls_id] + query_ids + [self._sep_id] + paragraph.piece_ids[start:end] + [
            self._sep_id]
        segment_ids = [0] * doc_offset + [1] * (length + 1)
        p_mask = [0] + [1] * (doc_offset - 1) + [0] * length + [1]
        paragraph_len = len(input_ids)
        padding = self.settings.max_seq_length - paragraph_len
        labels = {}
        if self.is_training:
            labels = {"start_position": 0, "end_position": 0, "is_impossible": True}
            if answer is not None and start <= answer[0] and answer[1] < end:
                labels = {"start_position": answer[0] - start + doc_offset,
                          "end_position": answer[1] - start + doc_offset, "is_impossible": False}
        return SquadFeature(
            example_index=example_index, doc_span_index=span_index,
            input_ids=input_ids + [0] * padding,
            input_mask=[1] * paragraph_len + [0] * padding,
            segment_ids=segment_ids + [0] * padding,
            p_mask=p_mask + [1] * padding,
            paragraph_len=paragraph_len,
            doc_offset=doc_offset,
            tok_start_to_orig_index=paragraph.tok_start_to_orig_index[start:end],
            tok_end_to_orig_index=paragraph.tok_end_to_orig_index[start:end],
            token_is_max_context=[best == span_index for best in best_span[start:end]],
            **labels)


# -- records -----------------------------------------------------------------------------------------

def feature_record(feature: SquadFeature) -> bytes:
    """The serialized tf.train.Example of a feature, without its unique id (see with_unique_id);
    the same bytes in every process (``serialize_example``)."""
    columns = {records.INPUT_IDS: int64_feature(feature.input_ids),
               records.INPUT_MASK: int64_feature(feature.input_mask),
               records.SEGMENT_IDS: int64_feature(feature.segment_ids),
               records.P_MASK: int64_feature(feature.p_mask)}
    if feature.is_impossible is not None:
        columns[records.START_POSITIONS] = int64_feature([feature.start_position])
        columns[records.END_POSITIONS] = int64_feature([feature.end_position])
        columns[records.IS_IMPOSSIBLE] = int64_feature([int(feature.is_impossible)])
    return serialize_example(columns)


def with_unique_id(record: bytes, unique_id: int) -> bytes:
    """``record`` (from feature_record) with its ``unique_ids`` column added."""
    example = tf.train.Example.FromString(record)
    example.features.feature[records.UNIQUE_IDS].int64_list.value.append(unique_id)
    return example.SerializeToString(deterministic=True)


_position_names: list[str] = []


def _position_keys(start: int, stop: int) -> list[str]:
    """str(position) for positions start..stop-1, the same str objects on every call (so pickle
    and JSON handle many features' keys cheaply)."""
    while len(_position_names) < stop:
        _position_names.append(str(len(_position_names)))
    return _position_names[start:stop]


def feature_metadata(feature: SquadFeature, is_training: bool) -> dict:
    """What post-processing needs of a feature besides its record and unique id, JSON-ready: the
    reference's ``InputFeatures`` fields but tokens and the arrays of the record (example_index
    None for training features as there; token_is_max_context keyed by input position as a
    string), plus doc_offset (its post-processing finds it from the tokens)."""
    max_context_keys = _position_keys(feature.doc_offset,
                                      feature.doc_offset + len(feature.token_is_max_context))
    return {
        "example_index": None if is_training else feature.example_index,
        "doc_span_index": feature.doc_span_index,
        "doc_offset": feature.doc_offset,
        "paragraph_len": feature.paragraph_len,
        "tok_start_to_orig_index": feature.tok_start_to_orig_index,
        "tok_end_to_orig_index": feature.tok_end_to_orig_index,
        "token_is_max_context": dict(zip(max_context_keys, feature.token_is_max_context)),
    }


def convert_examples(examples: Iterable[SquadExample], sp_model: spm.SentencePieceProcessor,
                     do_lower_case: bool,
                     settings: SquadFeatureSettings) -> Iterator[tuple[int, SquadFeature]]:
    """(unique id, feature) of every window of every question, in order, in this process (the
    reference's ``convert_examples_to_features``; dropped questions yield nothing)."""
    converter = FeatureConverter(sp_model, do_lower_case, settings)
    unique_id = FIRST_UNIQUE_ID
    for example_index, example in enumerate(examples):
        for feature in converter.convert(example, example_index) or ():
            yield unique_id, feature
            unique_id += 1


# -- conversion in worker processes ------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ConvertedQuestion:
    """One question's output: None when dropped (its paragraph does not align), else per window
    its record without unique id and, if asked for, its ``feature_metadata``."""

    example_index: int
    windows: list[tuple[bytes, dict | None]] | None


def _convert_chunk(converter: FeatureConverter, chunk: Sequence[tuple[int, SquadExample]],
                   with_metadata: bool) -> list[ConvertedQuestion]:
    results = []
    for example_index, example in chunk:
        features = converter.convert(example, example_index)
        windows = None if features is None else [
            (feature_record(feature),
             feature_metadata(feature, converter.is_training) if with_metadata else None)
            for feature in features]
        results.append(ConvertedQuestion(example_index, windows))
    return results


def paragraph_chunks(examples: Iterable[SquadExample],
                     chunk_questions: int) -> Iterator[list[tuple[int, SquadExample]]]:
    """(example_index, example) lists of whole paragraphs, each closed once it holds
    ``chunk_questions`` questions."""
    chunk: list[tuple[int, SquadExample]] = []
    for example_index, example in enumerate(examples):
        if len(chunk) >= chunk_questions and chunk[-1][1].paragraph_index != example.paragraph_index:
            yield chunk
            chunk = []
        chunk.append((example_index, example))
    if chunk:
        yield chunk


def convert_questions(examples: Iterable[SquadExample], sp_model: spm.SentencePieceProcessor,
                      do_lower_case: bool, settings: SquadFeatureSettings,
                      num_workers: int = 1, with_metadata: bool = False,
                      chunk_questions: int = 64) -> Iterator[ConvertedQuestion]:
    """Every question's records (and feature metadata if ``with_metadata``), in question order.

    num_workers > 1 converts chunks of paragraphs in that many forked processes
    (``worker_pool.ordered_map``: at most ``num_workers + 2`` chunks in flight, so memory is bounded
    by chunks, not by the file); each process builds its own converter.
    """

    def make_worker() -> Callable[[Sequence[tuple[int, SquadExample]]], list[ConvertedQuestion]]:
        converter = FeatureConverter(sp_model, do_lower_case, settings)
        return functools.partial(_convert_chunk, converter, with_metadata=with_metadata)

    chunks = paragraph_chunks(examples, chunk_questions)
    with contextlib.closing(ordered_map(make_worker, chunks, num_workers)) as results:
        for questions in results:
            yield from questions
