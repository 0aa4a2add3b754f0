"""Unit tests of the pretraining-instance algorithm (data_prep/pretraining/instances.py: segment
pairs, truncation, masking) on hand-made token sequences. Expected values are derived by hand or by straightforward
re-implementations of the reference's description in this file."""

from __future__ import annotations

import collections
import random

import pytest

from albert_tf.tokenization.sentencepiece import is_start_piece_sp
from albert_tf.tokenization.wordpiece import is_start_piece_wordpiece
from data_prep.common.pair_truncation import truncate_seq_pair
from data_prep.pretraining.instances import (CLS, IN_ORDER, MASK, RANDOM_DOCUMENT, SEP, SWAPPED,
                                             InstanceConfig, MaskingConfig,
                                             create_instances_from_document,
                                             create_masked_lm_predictions, group_candidate_words,
                                             iter_chunk_instances, ngram_cumulative_probabilities,
                                             num_to_predict)


class ScriptedRandom:
    """Stands in for random.Random: returns scripted values, checks the ranges asked for, and fails
    when a draw was not expected (so the tests also pin the order and number of draws)."""

    def __init__(self, values):
        self.values = list(values)

    def _next(self, kind):
        assert self.values, f"unexpected draw: {kind}"
        value = self.values.pop(0)
        return value

    def random(self):
        value = self._next("random()")
        assert 0.0 <= value < 1.0
        return value

    def randint(self, low, high):
        value = self._next(f"randint({low}, {high})")
        assert low <= value <= high, (low, value, high)
        return value

    def randrange(self, low, stop):
        value = self._next(f"randrange({low}, {stop})")
        assert low <= value < stop, (low, value, stop)
        return value


NO_MASKING = MaskingConfig(masked_lm_prob=0.0)


def words_of(candidates):
    return [list(range(start, stop)) for start, stop in zip(candidates.starts, candidates.stops)]


# --- start pieces and candidate words ---------------------------------------------------------------

def test_candidate_words_sentencepiece_whole_word():
    tokens = [CLS, "▁un", "believ", "able", "▁1", "9", "'s", ",", "x", SEP, "ing", "▁go", "es", SEP]
    words = group_candidate_words(tokens, is_start_piece_sp, do_whole_word_mask=True)
    # "believ"/"able"/"x": a-z continuations; "9" (digit), "'s" (apostrophe), "," (punctuation) start
    # words; "ing" right after [SEP] starts its own word instead of joining "x".
    assert words_of(words) == [[1, 2, 3], [4], [5], [6], [7, 8], [10], [11, 12]]
    assert words.token_boundary == [1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 0, 1, 0, 1]
    # Words 0-4 are in segment A (ending before word 5), words 5-6 in segment B.
    assert words.segment_ends == [5, 5, 5, 5, 5, 7, 7]


def test_candidate_words_without_whole_word_mask_keeps_boundaries():
    tokens = [CLS, "▁un", "able", SEP, "▁go", SEP]
    words = group_candidate_words(tokens, is_start_piece_sp, do_whole_word_mask=False)
    assert words_of(words) == [[1], [2], [4]]
    assert words.token_boundary == [1, 1, 0, 1, 1, 1]


def test_candidate_words_wordpiece_rule():
    tokens = [CLS, "un", "##want", "##ed", "runn", "##ing", SEP, "##s", SEP]
    words = group_candidate_words(tokens, is_start_piece_wordpiece, do_whole_word_mask=True)
    assert words_of(words) == [[1, 2, 3], [4, 5], [7]]
    assert words.token_boundary == [1, 1, 0, 0, 1, 0, 1, 0, 1]


# --- budget and n-gram lengths ----------------------------------------------------------------------

@pytest.mark.parametrize("num_tokens, prob, cap, expected", [
    (128, 0.15, 20, 19),   # round(19.2)
    (512, 0.15, 20, 20),   # round(76.8) capped at M
    (10, 0.15, 20, 2),     # round(1.5) = 2 (halves to even)
    (30, 0.15, 20, 4),     # round(4.5) = 4 (halves to even)
    (3, 0.15, 20, 1),      # round(0.45) = 0 -> at least 1
])
def test_num_to_predict(num_tokens, prob, cap, expected):
    masking = MaskingConfig(masked_lm_prob=prob, max_predictions_per_seq=cap)
    assert num_to_predict(num_tokens, masking) == expected


def test_ngram_probabilities():
    assert ngram_cumulative_probabilities(3, True) == pytest.approx([6 / 11, 9 / 11, 1.0])
    assert ngram_cumulative_probabilities(3, False) == pytest.approx([2 / 11, 5 / 11, 1.0])
    assert ngram_cumulative_probabilities(1, True) == (1.0,)


# Tokens: word0 = [1], word1 = [2, 3, 4], word2 = [5] in segment A; word3 = [7, 8] in segment B.
BACKOFF_TOKENS = [CLS, "▁a", "▁b", "c", "d", "▁e", SEP, "▁f", "g", SEP]


def test_ngram_backs_off_to_fit_the_budget():
    # 10 tokens, prob 0.3 -> budget 3. Visit word0 (randrange 0), draw n=3 (0.95): words 0-2 are 5
    # positions > 3, words 0-1 are 4 > 3, so it backs off to word0 alone. Then visit word3
    # (randrange -> 3) with n=1 (0.1): 2 positions fit the remaining 2. Each chosen position draws 0.5
    # (< 0.8 -> [MASK]).
    rng = ScriptedRandom([0, 0.95, 0.5, 3, 0.1, 0.5, 0.5])
    masking = MaskingConfig(masked_lm_prob=0.3, max_predictions_per_seq=20, ngram=3)
    result = create_masked_lm_predictions(BACKOFF_TOKENS, masking, ["v"], is_start_piece_sp, rng)
    assert result.positions == [1, 7, 8]
    assert result.labels == ["▁a", "▁f", "g"]
    assert result.ngram_lengths == [1, 1]
    assert result.tokens == [CLS, MASK, "▁b", "c", "d", "▁e", SEP, MASK, MASK, SEP]
    assert rng.values == []


def test_word_longer_than_the_remaining_budget_is_skipped():
    # Budget 3. Visit word0 (n=1, [MASK]): room 2. Word1 (randrange keeps index 1) has 3 positions:
    # skipped without replacement draws. Word2 (1 position) fits: room 1. Word3 (2 positions) does
    # not fit any more: skipped. All words visited, budget not reached.
    rng = ScriptedRandom([0, 0.1, 0.5, 1, 0.1, 2, 0.1, 0.5, 3, 0.1])
    masking = MaskingConfig(masked_lm_prob=0.3, max_predictions_per_seq=20, ngram=3)
    result = create_masked_lm_predictions(BACKOFF_TOKENS, masking, ["v"], is_start_piece_sp, rng)
    assert result.positions == [1, 5]
    assert result.ngram_lengths == [1, 1]
    assert rng.values == []


def test_ngram_stops_at_sep_and_overlaps_are_skipped():
    # Budget 6 (prob 0.6). Visit word2 ("▁e", last word of segment A) with n=3 (0.95): no word after
    # it in its segment -> 1 word. Then word1 with n=2 (0.7): words 1-2 overlap position 5 -> skipped.
    # Then word3 (randrange -> 3) with n=2: only 1 word in segment B -> positions 7, 8. Last, word0
    # with n=2: words 0-1 are 4 positions > room 3 -> backs off to word0 alone.
    masking = MaskingConfig(masked_lm_prob=0.6, max_predictions_per_seq=20, ngram=3)
    rng = ScriptedRandom([2, 0.95, 0.5, 1, 0.7, 3, 0.7, 0.5, 0.5, 3, 0.7, 0.5])
    result = create_masked_lm_predictions(BACKOFF_TOKENS, masking, ["v"], is_start_piece_sp, rng)
    assert result.ngram_lengths == [1, 1, 1]
    assert result.positions == [1, 5, 7, 8]
    assert rng.values == []


def test_replacement_decisions_per_token():
    # Three single-piece words, each masked alone (n=1): draws 0.79 -> [MASK]; 0.85 then 0.49 -> kept;
    # 0.85 then 0.5 -> random vocabulary entry randint(0, 3) = 2.
    tokens = [CLS, "▁a", "▁b", SEP, "▁c", SEP]
    masking = MaskingConfig(masked_lm_prob=0.5, max_predictions_per_seq=20, ngram=1)
    vocab = ["<pad>", "<unk>", "▁zz", "▁yy"]
    rng = ScriptedRandom([0, 0.0, 0.79, 1, 0.0, 0.85, 0.49, 2, 0.0, 0.85, 0.5, 2])
    result = create_masked_lm_predictions(tokens, masking, vocab, is_start_piece_sp, rng)
    assert result.tokens == [CLS, MASK, "▁b", SEP, "▁zz", SEP]
    assert result.positions == [1, 2, 4]
    assert result.labels == ["▁a", "▁b", "▁c"]


def test_replacement_frequencies_are_80_10_10():
    rng = random.Random(7)
    tokens = [CLS] + [f"▁w{i}" for i in range(60)] + [SEP] + [f"▁v{i}" for i in range(60)] + [SEP]
    vocab = [f"▁r{i}" for i in range(1000)]
    masking = MaskingConfig(masked_lm_prob=0.15, max_predictions_per_seq=20)
    counts = collections.Counter()
    for _ in range(400):
        result = create_masked_lm_predictions(tokens, masking, vocab, is_start_piece_sp, rng)
        assert len(result.positions) == 18  # round(123 * 0.15); every word is one piece
        for position, label in zip(result.positions, result.labels):
            written = result.tokens[position]
            counts["mask" if written == MASK else "kept" if written == label else "random"] += 1
    total = sum(counts.values())
    assert counts["mask"] / total == pytest.approx(0.8, abs=0.015)
    assert counts["kept"] / total == pytest.approx(0.1, abs=0.012)
    assert counts["random"] / total == pytest.approx(0.1, abs=0.012)


def test_zero_masked_lm_prob_predicts_nothing():
    tokens = [CLS, "▁a", SEP, "▁b", SEP]
    result = create_masked_lm_predictions(tokens, NO_MASKING, ["v"], is_start_piece_sp,
                                          ScriptedRandom([]))
    assert result.positions == [] and result.tokens == tokens


# --- truncation ------------------------------------------------------------------------------------

def reference_truncate(tokens_a, tokens_b, max_num_tokens, rng):
    """The reference's truncate_seq_pair, one deletion at a time.

    While too long, the longer segment (B on a tie) loses its first token if rng.random() < 0.5,
    else its last.
    """
    tokens_a, tokens_b = list(tokens_a), list(tokens_b)
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()
    return tokens_a, tokens_b


def test_truncate_by_hand():
    a, b = list("abcde"), list("xyz")
    # A (5) > B (3): 0.3 -> drop A's front; A (4) > B (3): 0.7 -> drop A's back; 3 + 3 = 6 fits.
    assert truncate_seq_pair(a, b, 6, ScriptedRandom([0.3, 0.7])) == (list("bcd"), list("xyz"))
    # Equal lengths: B is shortened.
    assert truncate_seq_pair(list("ab"), list("xy"), 3, ScriptedRandom([0.9])) == (list("ab"), list("x"))


@pytest.mark.parametrize("len_a, len_b, limit", [(1000, 2, 125), (40, 70, 61), (5, 5, 2), (3, 4, 10)])
def test_truncate_matches_one_at_a_time_deletion(len_a, len_b, limit):
    a = [f"a{i}" for i in range(len_a)]
    b = [f"b{i}" for i in range(len_b)]
    ours = truncate_seq_pair(a, b, limit, random.Random(len_a))
    assert ours == reference_truncate(a, b, limit, random.Random(len_a))
    assert len(ours[0]) + len(ours[1]) <= limit and ours[0] and ours[1]


# --- segment pairs and sentence-order labels -------------------------------------------------------

def sentence(name, length):
    return [f"▁{name}{i}" for i in range(length)]


S0, S1, S2, S3 = sentence("p", 2), sentence("q", 2), sentence("r", 2), sentence("s", 2)
OTHER = [sentence("o", 3), sentence("t", 3)]


@pytest.mark.parametrize("coin, kind, a, b", [(0.3, SWAPPED, S1, S0), (0.7, IN_ORDER, S0, S1)])
def test_sentence_order_swap_and_in_order(coin, kind, a, b):
    # short_seq draw 0.5 (no short target); chunk [S0, S1] closes at the last sentence; a_end = 1;
    # SOP coin decides the swap. No masking draws (masked_lm_prob 0), no truncation draws.
    config = InstanceConfig(max_seq_length=64, masking=NO_MASKING)
    rng = ScriptedRandom([0.5, 1, coin])
    (instance,) = create_instances_from_document([[S0, S1], OTHER], 0, config, ["v"], is_start_piece_sp, rng)
    assert instance.pair_kind == kind
    assert instance.is_random_next == (kind == SWAPPED)
    assert instance.tokens == [CLS, *a, SEP, *b, SEP]
    assert instance.segment_ids == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert rng.values == []


def test_single_sentence_chunk_takes_b_from_a_random_document():
    # One sentence: B from document 1 (randint -> 1), starting at its sentence 1, until B reaches the
    # target length 61 - 2 = 59 (so the rest of that document). Label 1 in SOP mode too.
    config = InstanceConfig(max_seq_length=64, masking=NO_MASKING)
    rng = ScriptedRandom([0.5, 1, 1])
    (instance,) = create_instances_from_document([[S0], OTHER], 0, config, ["v"], is_start_piece_sp, rng)
    assert instance.pair_kind == RANDOM_DOCUMENT and instance.is_random_next
    assert instance.tokens == [CLS, *S0, SEP, *OTHER[1], SEP]


def test_random_document_retries_avoid_the_current_document():
    config = InstanceConfig(max_seq_length=64, masking=NO_MASKING)
    # The first two document draws hit the current document 0, the third gives 1.
    rng = ScriptedRandom([0.5, 0, 0, 1, 0])
    (instance,) = create_instances_from_document([[S0], OTHER], 0, config, ["v"], is_start_piece_sp, rng)
    assert instance.tokens[len(S0) + 2:-1] == OTHER[0] + OTHER[1]


def test_nsp_mode_random_next_puts_unused_sentences_back():
    # Chunk [S0..S3] closes at the last sentence; a_end = 1; NSP coin 0.2 -> B from document 1
    # (start 0); S1..S3 are put back and form the next chunk: a_end = 2, coin 0.9 -> actual next.
    config = InstanceConfig(max_seq_length=64, random_next_sentence=True, masking=NO_MASKING)
    rng = ScriptedRandom([0.5, 1, 0.2, 1, 0, 2, 0.9])
    first, second = create_instances_from_document([[S0, S1, S2, S3], OTHER], 0, config, ["v"],
                                                   is_start_piece_sp, rng)
    assert first.pair_kind == RANDOM_DOCUMENT
    assert first.tokens == [CLS, *S0, SEP, *OTHER[0], *OTHER[1], SEP]
    assert second.pair_kind == IN_ORDER
    assert second.tokens == [CLS, *S1, *S2, SEP, *S3, SEP]
    assert rng.values == []


def test_short_target_length_splits_the_document():
    # short_seq draw 0.05 < 0.1 -> target randint(2, 61) = 3: chunks close as soon as they hold >= 3
    # tokens, i.e. after two 2-token sentences: [S0, S1] then [S2, S3].
    config = InstanceConfig(max_seq_length=64, masking=NO_MASKING)
    rng = ScriptedRandom([0.05, 3, 1, 0.9, 1, 0.9])
    instances = create_instances_from_document([[S0, S1, S2, S3], OTHER], 0, config, ["v"],
                                               is_start_piece_sp, rng)
    assert [inst.tokens for inst in instances] == [[CLS, *S0, SEP, *S1, SEP], [CLS, *S2, SEP, *S3, SEP]]


def test_long_sentence_is_truncated_to_max_seq_length():
    documents = [[sentence("long", 500)], [sentence("x", 5), sentence("y", 7)]]
    config = InstanceConfig(max_seq_length=32)
    instances = list(iter_chunk_instances(documents, config, 3, ["▁v"], is_start_piece_sp,
                                          random.Random(1)))
    assert max(len(instance.tokens) for instance in instances) == 32


def test_instances_are_well_formed():
    rng = random.Random(3)
    documents = [[sentence(f"d{d}s{s}", rng.randint(1, 30)) for s in range(rng.randint(1, 8))]
                 for d in range(30)]
    config = InstanceConfig(max_seq_length=48, masking=MaskingConfig(max_predictions_per_seq=7))
    instances = list(iter_chunk_instances(documents, config, 2, ["▁v"], is_start_piece_sp, rng))
    kinds = collections.Counter(instance.pair_kind for instance in instances)
    assert set(kinds) == {IN_ORDER, SWAPPED, RANDOM_DOCUMENT}
    for instance in instances:
        tokens = instance.tokens
        first_sep = tokens.index(SEP)
        assert tokens[0] == CLS and tokens[-1] == SEP and tokens.count(SEP) == 2
        assert len(tokens) <= 48 and 1 < first_sep < len(tokens) - 2
        assert instance.segment_ids == [0] * (first_sep + 1) + [1] * (len(tokens) - first_sep - 1)
        budget = num_to_predict(len(tokens), config.masking)
        assert 1 <= len(instance.masked_lm_positions) <= budget
        assert instance.masked_lm_positions == sorted(set(instance.masked_lm_positions))
        for position, label in zip(instance.masked_lm_positions, instance.masked_lm_labels):
            assert tokens[position] in (MASK, label, "▁v")
            assert label not in (CLS, SEP)
