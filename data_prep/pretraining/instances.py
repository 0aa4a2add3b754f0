"""Pretraining instances from tokenized documents: segment pairs, sentence-order labels, n-gram masking.

The pure algorithm of the reference's create_pretraining_data (document shuffling and passes,
segment pairs, masking), working on token strings (pieces) and a ``random.Random``; no tokenizer, no
files, no TensorFlow. Every random decision comes from the ``rng`` argument, so a seeded rng gives
reproducible instances.

Deliberate differences from the reference (fixes of its quirks), none of which changes the format:
- The n-gram length is drawn from ``rng`` (the reference uses numpy's unseeded global generator,
  which makes its output irreproducible).
- Whole-word grouping and n-grams stop at ``[SEP]``: a continuation piece at the start of segment B
  (which appears when truncation cut a word's front) starts its own candidate instead of joining the
  last word of segment A, and an n-gram never spans the two segments. This only touches pieces next
  to the middle [SEP]; the output's statistics stay within sampling noise of the reference's
  (tests/test_create_pretraining_data.py compares them on the shared RTE corpus).
- The reference's no-op "skip covered words" loop and its second, unused shuffle of the n-gram list
  are not reproduced; the shuffle of candidate words is drawn lazily (only as far as needed), which
  gives the same distribution as shuffling the whole list first.

Kept as in the reference because trained models depend on it: sentence-order (SOP) data contains
random-document negatives for single-sentence chunks; ``num_to_predict`` counts the special tokens;
the random replacement token is uniform over the whole vocabulary (special pieces included).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import random
from typing import Callable, Iterator, Sequence

from data_prep.common.pair_truncation import truncate_seq_pair

CLS = "[CLS]"
SEP = "[SEP]"
MASK = "[MASK]"

# How segment B relates to segment A; the sentence-order label is 1 unless IN_ORDER.
IN_ORDER = "in_order"
SWAPPED = "swapped"
RANDOM_DOCUMENT = "random_document"
PAIR_KINDS = (IN_ORDER, SWAPPED, RANDOM_DOCUMENT)

# Tries to draw a random document other than the current one before accepting it anyway (reference).
_RANDOM_DOCUMENT_TRIES = 10

Document = Sequence[Sequence[str]]  # sentences, each a non-empty list of pieces
StartPieceRule = Callable[[str], bool]


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """Parameters of the masked-LM target selection; names follow the reference's flags."""

    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
    """Parameters of segment-pair building plus the masking parameters."""

    max_seq_length: int = 512
    short_seq_prob: float = 0.1
    random_next_sentence: bool = False
    masking: MaskingConfig = MaskingConfig()


@dataclasses.dataclass
class MaskedTokens:
    """Result of masking one token sequence of length T.

    tokens: [T] pieces after replacement ([MASK], kept or random); token_boundary: [T] 1 for specials
    and word starts; positions: sorted predicted positions; labels: original pieces at ``positions``;
    ngram_lengths: number of words of every selected n-gram (for statistics).
    """

    tokens: list[str]
    token_boundary: list[int]
    positions: list[int]
    labels: list[str]
    ngram_lengths: list[int]


@dataclasses.dataclass
class TrainingInstance:
    """One pretraining example before id conversion: ``[CLS] A [SEP] B [SEP]`` (T <= max_seq_length).

    tokens, segment_ids (0 up to and including the first [SEP], then 1), token_boundary: [T];
    masked_lm_positions, masked_lm_labels: [P] with P <= max_predictions_per_seq; pair_kind: one of
    PAIR_KINDS; ngram_lengths: words per selected n-gram.
    """

    tokens: list[str]
    segment_ids: list[int]
    token_boundary: list[int]
    masked_lm_positions: list[int]
    masked_lm_labels: list[str]
    pair_kind: str
    ngram_lengths: list[int]

    @property
    def is_random_next(self) -> bool:
        """The reference's name for the sentence-order label (1 = swapped or random-document B)."""
        return self.pair_kind != IN_ORDER


@functools.lru_cache(maxsize=None)
def ngram_cumulative_probabilities(max_ngram: int, favor_shorter_ngram: bool) -> tuple[float, ...]:
    """Cumulative probabilities of n-gram lengths 1..max_ngram: p(n) ∝ 1/n, reversed if not favoring
    shorter n-grams. For max_ngram=3: p = [6/11, 3/11, 2/11] -> (6/11, 9/11, 1.0)."""
    weights = [1.0 / n for n in range(1, max_ngram + 1)]
    if not favor_shorter_ngram:
        weights.reverse()
    total = sum(weights)
    cumulative, running = [], 0.0
    for weight in weights:
        running += weight / total
        cumulative.append(running)
    cumulative[-1] = 1.0  # guard against rounding: a draw in [0, 1) always finds a length
    return tuple(cumulative)


def num_to_predict(num_tokens: int, masking: MaskingConfig) -> int:
    """How many positions to predict: min(M, max(1, round(T * masked_lm_prob))), T incl. specials.

    ``round`` is Python's (halves to even), as in the reference.
    """
    return min(masking.max_predictions_per_seq, max(1, int(round(num_tokens * masking.masked_lm_prob))))


@dataclasses.dataclass
class CandidateWords:
    """Maskable words of a token sequence of length T (without the reference's join across [SEP]).

    Word w covers the contiguous positions ``range(starts[w], stops[w])``; words are in position
    order; [CLS]/[SEP] belong to no word. ``segment_ends[w]`` is the index of the first word after
    the segment of word w (n-grams stop there). ``token_boundary``: [T] 1 for [CLS], [SEP] and
    start pieces (whole-word masking or not), else 0.
    """

    starts: list[int]
    stops: list[int]
    segment_ends: list[int]
    token_boundary: list[int]


def group_candidate_words(tokens: Sequence[str], is_start_piece: StartPieceRule,
                          do_whole_word_mask: bool) -> CandidateWords:
    """Groups token positions into maskable words.

    With whole-word masking, a word is a start piece and the continuation pieces after it; a
    continuation piece right after [CLS]/[SEP] starts a word of its own (the reference would join it
    to the last word before the [SEP]). Without it, every non-special token is a word.
    """
    is_start = list(map(is_start_piece, tokens))
    token_boundary = list(map(int, is_start))
    specials = [position for position, token in enumerate(tokens) if token == CLS or token == SEP]
    words = CandidateWords([], [], [], token_boundary)
    segment_first = 0
    for segment_stop in [*specials, len(tokens)]:
        if segment_stop < len(tokens):
            token_boundary[segment_stop] = 1
        if segment_first < segment_stop:
            if do_whole_word_mask:
                starts = [segment_first] + [position for position in range(segment_first + 1, segment_stop)
                                            if is_start[position]]
            else:
                starts = list(range(segment_first, segment_stop))
            words.starts.extend(starts)
            words.stops.extend(starts[1:])
            words.stops.append(segment_stop)
            words.segment_ends.extend([len(words.starts)] * len(starts))
        segment_first = segment_stop + 1
    return words


def create_masked_lm_predictions(tokens: Sequence[str], masking: MaskingConfig,
                                 vocab_words: Sequence[str], is_start_piece: StartPieceRule,
                                 rng: random.Random) -> MaskedTokens:
    """Chooses and replaces the masked-LM targets of ``tokens`` as the reference does.

    Candidate words are visited in random order; for each, an n-gram length is drawn with
    p(n) ∝ 1/n (``ngram_cumulative_probabilities``), the n-gram is the word and the following words
    of its segment (fewer near the segment end), and it backs off to n-1, ..., 1 words while it would
    exceed ``num_to_predict``; an n-gram that still does not fit, or overlaps an earlier one, is skipped.
    Every chosen position independently becomes [MASK] (80%), stays (10%) or becomes a uniformly drawn
    entry of ``vocab_words`` (10%).
    """
    words = group_candidate_words(tokens, is_start_piece, masking.do_whole_word_mask)
    output = list(tokens)
    result = MaskedTokens(output, words.token_boundary, [], [], [])
    if masking.masked_lm_prob == 0:
        return result
    budget = num_to_predict(len(tokens), masking)
    cumulative = ngram_cumulative_probabilities(masking.ngram, masking.favor_shorter_ngram)
    covered: set[int] = set()
    order = list(range(len(words.starts)))
    for k in range(len(order)):
        if len(covered) >= budget:
            break
        # Lazy Fisher-Yates: order[k] is the k-th word of a uniformly shuffled order.
        j = rng.randrange(k, len(order))
        order[k], order[j] = order[j], order[k]
        first = order[k]
        n = bisect.bisect_right(cumulative, rng.random()) + 1
        last = min(first + n, words.segment_ends[first]) - 1
        # Back off to fewer words while the n-gram would exceed the budget.
        room = budget - len(covered)
        while last >= first and words.stops[last] - words.starts[first] > room:
            last -= 1
        if last < first:
            continue
        chosen = range(words.starts[first], words.stops[last])
        if not covered.isdisjoint(chosen):
            continue
        result.ngram_lengths.append(last - first + 1)
        for position in chosen:
            covered.add(position)
            output[position] = _replacement(tokens[position], vocab_words, rng)
    result.positions = sorted(covered)
    result.labels = [tokens[position] for position in result.positions]
    return result


def _replacement(token: str, vocab_words: Sequence[str], rng: random.Random) -> str:
    """80% [MASK], 10% the original token, 10% a uniformly random vocabulary entry (reference draws)."""
    if rng.random() < 0.8:
        return MASK
    if rng.random() < 0.5:
        return token
    return vocab_words[rng.randint(0, len(vocab_words) - 1)]


def longest_whole_sentence(max_seq_length: int) -> int:
    """The most pieces a sentence can have and still appear whole in an instance: ``[CLS] A [SEP]
    B [SEP]`` holds max_seq_length - 3 pieces of A and B, at least one of them in the other
    segment. ``truncate_seq_pair`` cuts a longer sentence in every instance that holds it."""
    return max_seq_length - 4


def create_instances_from_document(documents: Sequence[Document], document_index: int,
                                   config: InstanceConfig, vocab_words: Sequence[str],
                                   is_start_piece: StartPieceRule,
                                   rng: random.Random) -> list[TrainingInstance]:
    """All instances of one pass over ``documents[document_index]``, built as the reference does.

    Sentences are accumulated into a chunk until it reaches the target length (max_seq_length - 3,
    or with probability short_seq_prob a random length in [2, max_seq_length - 3], one draw per call)
    or the document ends. A random split point a_end divides the chunk into A and B. A single-sentence
    chunk (or, with random_next_sentence, a coin flip) takes B from a random other document instead and
    puts the unused sentences back; otherwise, in sentence-order mode, a coin flip swaps A and B.
    Pairs longer than max_seq_length - 3 are cut by ``truncate_seq_pair``.
    """
    document = documents[document_index]
    max_num_tokens = config.max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances: list[TrainingInstance] = []
    chunk: list[Sequence[str]] = []
    chunk_length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target_seq_length:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [token for sentence in chunk[:a_end] for token in sentence]
            if len(chunk) == 1 or (config.random_next_sentence and rng.random() < 0.5):
                pair_kind = RANDOM_DOCUMENT
                tokens_b = _random_document_tokens(documents, document_index,
                                                   target_seq_length - len(tokens_a), rng)
                i -= len(chunk) - a_end  # the sentences not used for A are put back
            else:
                tokens_b = [token for sentence in chunk[a_end:] for token in sentence]
                pair_kind = IN_ORDER
                if not config.random_next_sentence and rng.random() < 0.5:
                    pair_kind = SWAPPED
                    tokens_a, tokens_b = tokens_b, tokens_a
            tokens_a, tokens_b = truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            instances.append(_build_instance(tokens_a, tokens_b, pair_kind, config.masking,
                                             vocab_words, is_start_piece, rng))
            chunk = []
            chunk_length = 0
        i += 1
    return instances


def _random_document_tokens(documents: Sequence[Document], document_index: int, target_b_length: int,
                            rng: random.Random) -> list[str]:
    """Segment B from a random document: consecutive sentences from a random start until the length
    reaches ``target_b_length`` (at least one sentence). The document may, rarely, be the current one."""
    for _ in range(_RANDOM_DOCUMENT_TRIES):
        random_index = rng.randint(0, len(documents) - 1)
        if random_index != document_index:
            break
    random_document = documents[random_index]
    tokens_b: list[str] = []
    for sentence in random_document[rng.randint(0, len(random_document) - 1):]:
        tokens_b.extend(sentence)
        if len(tokens_b) >= target_b_length:
            break
    return tokens_b


def _build_instance(tokens_a: list[str], tokens_b: list[str], pair_kind: str, masking: MaskingConfig,
                    vocab_words: Sequence[str], is_start_piece: StartPieceRule,
                    rng: random.Random) -> TrainingInstance:
    """``[CLS] A [SEP] B [SEP]`` with segment ids, then masked."""
    if not tokens_a or not tokens_b:
        raise ValueError("internal error: empty segment after truncation "
                         f"(len A {len(tokens_a)}, len B {len(tokens_b)})")
    tokens = [CLS, *tokens_a, SEP, *tokens_b, SEP]
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    masked = create_masked_lm_predictions(tokens, masking, vocab_words, is_start_piece, rng)
    return TrainingInstance(tokens=masked.tokens, segment_ids=segment_ids,
                            token_boundary=masked.token_boundary,
                            masked_lm_positions=masked.positions, masked_lm_labels=masked.labels,
                            pair_kind=pair_kind, ngram_lengths=masked.ngram_lengths)


def iter_chunk_instances(documents: Sequence[Document], config: InstanceConfig, dupe_factor: int,
                         vocab_words: Sequence[str], is_start_piece: StartPieceRule,
                         rng: random.Random) -> Iterator[TrainingInstance]:
    """The reference's main loop over one set of documents, lazily.

    Empty documents are dropped and the rest shuffled once; ``dupe_factor`` passes each create the
    instances of every document in that order. Random-document segments B are drawn from
    ``documents`` only. The reference then shuffles all instances with the same rng: callers do that
    on whatever they keep (serialized records take far less memory than instances).
    """
    documents = [document for document in documents if document]
    rng.shuffle(documents)
    for _ in range(dupe_factor):
        for document_index in range(len(documents)):
            yield from create_instances_from_document(
                documents, document_index, config, vocab_words, is_start_piece, rng)
