"""NER entity metrics and tag schemes: albert_tf's own conlleval-style metric equals seqeval's
(test-only) on every scheme, with nested-looking and broken spans; the scheme checks the readers
apply."""

import random

import pytest
from seqeval import metrics as seqeval_metrics
from seqeval.scheme import IOBES

from albert_tf.tasks.token_classification.metrics import entity_metrics
from albert_tf.tasks.token_classification.schemes import Entity, entities, scheme_violation
from data_prep.token_classification.reader import NerDataError, read_sentences

# Hand-made cases: (gold, predicted) sentences, each with its scheme's oddities.
CASES = {
    "IOB2": ([["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "I-ORG", "O", "B-PER"]],
             [["B-PER", "I-PER", "O", "I-LOC"], ["B-ORG", "I-LOC", "I-ORG", "O", "B-PER"]]),
    # IOB1: I- opens, B- separates adjacent same-type entities; a "nested-looking" I-ORG B-ORG.
    "IOB1": ([["I-PER", "I-PER", "B-PER", "O", "I-LOC"], ["I-ORG", "B-ORG", "I-ORG"]],
             [["I-PER", "I-PER", "I-PER", "O", "I-LOC"], ["B-ORG", "B-ORG", "I-ORG"]]),
    # BIOES with broken predictions: an unclosed B-, an E- without B-, S- inside an entity.
    "BIOES": ([["B-PER", "E-PER", "O", "S-LOC"], ["B-ORG", "I-ORG", "E-ORG", "S-PER"]],
              [["B-PER", "O", "E-PER", "S-LOC"], ["B-ORG", "S-ORG", "E-ORG", "B-PER"]]),
}
TYPES = ("PER", "LOC", "ORG")
ALPHABETS = {"IOB1": "BI", "IOB2": "BI", "BIOES": "BIES"}
# seqeval's report averages over empty slices for some random cases (its numpy warnings).
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def seqeval_scores(gold, predicted, **mode) -> dict[str, float]:
    report = seqeval_metrics.classification_report(gold, predicted, output_dict=True,
                                                   zero_division=0, **mode)
    scores = {"precision": seqeval_metrics.precision_score(gold, predicted, zero_division=0,
                                                           **mode),
              "recall": seqeval_metrics.recall_score(gold, predicted, zero_division=0, **mode),
              "f1": seqeval_metrics.f1_score(gold, predicted, zero_division=0, **mode),
              "accuracy": seqeval_metrics.accuracy_score(gold, predicted)}
    for kind, row in report.items():
        if kind in TYPES:
            scores.update({f"{kind}_{name}": row[name] for name in ("precision", "recall")})
            scores[f"{kind}_f1"] = row["f1-score"]
            scores[f"{kind}_support"] = row["support"]
    return scores




def assert_same(gold, predicted, **mode):
    expected = seqeval_scores(gold, predicted, **mode)
    actual = entity_metrics(gold, predicted)
    for key, value in expected.items():
        assert actual[key] == pytest.approx(value), (key, gold, predicted)
    # Per-type rows seqeval leaves out are types neither side has.
    assert {key for key in actual if key.split("_")[0] in TYPES} <= set(expected)


@pytest.mark.parametrize("scheme", sorted(CASES))
def test_hand_cases_equal_seqeval_default_mode(scheme):
    gold, predicted = CASES[scheme]
    assert_same(gold, predicted)


def random_tags(rng: random.Random, alphabet: str, length: int) -> list[str]:
    return [rng.choice(["O", "O"] + [f"{prefix}-{kind}" for prefix in alphabet
                                     for kind in TYPES[:2]]) for _ in range(length)]


@pytest.mark.parametrize("scheme", sorted(ALPHABETS))
def test_random_sequences_broken_ones_included_equal_seqeval_default_mode(scheme):
    """seqeval's default mode is conlleval's chunking for every prefix, B/I/E/S alike."""
    rng = random.Random(sum(map(ord, scheme)))
    for _ in range(200):
        sentences = rng.randint(1, 4)
        lengths = [rng.randint(1, 7) for _ in range(sentences)]
        gold = [random_tags(rng, ALPHABETS[scheme], n) for n in lengths]
        predicted = [random_tags(rng, ALPHABETS[scheme], n) for n in lengths]
        assert_same(gold, predicted)


def valid_bioes(rng: random.Random, length: int) -> list[str]:
    tags = []
    while len(tags) < length:
        size, kind = rng.randint(0, 3), rng.choice(TYPES)
        if size == 0 or len(tags) + size > length:
            tags.append("O")
        elif size == 1:
            tags.append(f"S-{kind}")
        else:
            tags += [f"B-{kind}"] + [f"I-{kind}"] * (size - 2) + [f"E-{kind}"]
    return tags


def test_valid_bioes_sequences_equal_seqeval_strict_iobes_mode():
    """On sequences that keep BIOES, seqeval's strict IOBES mode agrees with our reading."""
    rng = random.Random(7)
    for _ in range(200):
        lengths = [rng.randint(1, 8) for _ in range(rng.randint(1, 3))]
        gold = [valid_bioes(rng, n) for n in lengths]
        predicted = [valid_bioes(rng, n) for n in lengths]
        assert all(scheme_violation(tags, "BIOES") is None for tags in gold + predicted)
        assert_same(gold, predicted, mode="strict", scheme=IOBES)


def test_entities_spans_and_perfect_scores():
    assert entities(["B-PER", "I-PER", "O", "I-LOC", "B-LOC"]) == [
        Entity("PER", 0, 2), Entity("LOC", 3, 4), Entity("LOC", 4, 5)]
    assert entities(["B-PER", "I-LOC"]) == [Entity("PER", 0, 1), Entity("LOC", 1, 2)]
    gold = CASES["IOB2"][0]
    results = entity_metrics(gold, gold)
    assert results["f1"] == results["accuracy"] == results["PER_f1"] == 1.0
    assert results["PER_support"] == 2.0


@pytest.mark.parametrize("scheme, tags, index, words", [
    ("IOB2", ["O", "I-PER"], 1, "I-PER' after 'O'"),
    ("IOB2", ["B-LOC", "I-PER"], 1, "in IOB2"),
    ("IOB1", ["O", "B-PER"], 1, "in IOB1 a B- tag"),
    ("IOB1", ["I-PER", "E-PER"], 1, "does not use"),
    ("BIOES", ["B-PER", "O"], 0, "followed by 'O'"),
    ("BIOES", ["B-PER"], 0, "the sentence's end"),
    ("BIOES", ["O", "E-PER"], 1, "continues"),
    ("IOB2", ["PER"], 0, "neither O nor"),
])
def test_scheme_violations_name_the_tag(scheme, tags, index, words):
    found = scheme_violation(tags, scheme)
    assert found is not None and found[0] == index and words in found[1]


@pytest.mark.parametrize("scheme, tags", [
    ("IOB2", ["B-PER", "I-PER", "O", "B-PER", "B-PER"]),
    ("IOB1", ["I-PER", "B-PER", "O", "I-LOC"]),
    ("BIOES", ["B-PER", "I-PER", "E-PER", "S-LOC", "O"]),
])
def test_valid_sequences_pass(scheme, tags):
    assert scheme_violation(tags, scheme) is None


def test_files_in_iob1_and_bioes_read_under_their_scheme_and_not_under_iob2(tmp_path):
    iob1 = tmp_path / "iob1.txt"
    iob1.write_text("Mary I-PER\nJohn B-PER\nsaw O\nRome I-LOC\n")
    assert read_sentences(str(iob1), scheme="IOB1")[0].tags == ("I-PER", "B-PER", "O", "I-LOC")
    with pytest.raises(NerDataError, match=r"iob1.txt:1: 'I-PER' after 'O': in IOB2"):
        read_sentences(str(iob1), scheme="IOB2")
    bioes = tmp_path / "bioes.jsonl"
    bioes.write_text('{"tokens": ["New", "York", "is"], "tags": ["B-LOC", "E-LOC", "O"]}\n'
                     '{"tokens": ["New", "York"], "tags": ["B-LOC", "I-LOC"]}\n')
    with pytest.raises(NerDataError, match=r"bioes.jsonl:2: 'I-LOC' is followed by the "
                                           r"sentence's end"):
        read_sentences(str(bioes), scheme="BIOES")
    with pytest.raises(NerDataError, match=r"bioes.jsonl:1: tag 'E-LOC' has prefix E-, which "
                                           r"IOB2 does not use"):
        read_sentences(str(bioes), scheme="IOB2")
