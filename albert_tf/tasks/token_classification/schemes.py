"""Tag schemes of token classification (IOB1, IOB2, BIOES): what a tag is, which sequences a
scheme allows, and the entities (typed spans) a sequence of tags holds.

A tag is ``O`` or ``<prefix>-<type>``: prefixes B, I (IOB1, IOB2) and also E, S (BIOES); the type
is any non-empty text (``B-PER``, ``I-MISC``).

``entities`` reads spans with conlleval's chunk rules, whatever the scheme, so that it gives a
score to any predicted sequence, broken ones included (the model's outputs are not constrained):

- a chunk ends before a tag when the previous tag is E or S, or when the previous tag is B or I and
  this one is B, S or O, or when the type changes;
- a chunk starts at a tag that is B or S, at an I or E after O, E or S, or at any tag whose type
  differs from the previous tag's.

So an ``I-PER`` after ``O`` starts an entity (IOB1's reading), ``B-PER I-LOC`` is two entities, and
IOB1's ``I-PER B-PER`` is two.

``scheme_violation`` says where a sequence breaks its declared scheme; the data readers refuse such
files (data_prep/token_classification/reader.py).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

SCHEMES = ("IOB1", "IOB2", "BIOES")
OUTSIDE = "O"
_PREFIXES = {"IOB1": "BI", "IOB2": "BI", "BIOES": "BIES"}


class Entity(NamedTuple):
    """A typed span of words: [start, end) word indices and its type."""

    type: str
    start: int
    end: int


def split_tag(tag: str) -> tuple[str, str]:
    """``"B-PER"`` -> ("B", "PER"); ``"O"`` -> ("O", ""). ValueError for anything else."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, dash, kind = tag.partition("-")
    if not dash or len(prefix) != 1 or prefix not in "BIES" or not kind:
        raise ValueError(f"tag {tag!r} is neither O nor <B|I|E|S>-<type>")
    return prefix, kind


def check_tag(tag: str, scheme: str) -> None:
    """ValueError unless ``tag`` is a tag of ``scheme`` (E- and S- only in BIOES)."""
    prefix, _ = split_tag(tag)
    if prefix != OUTSIDE and prefix not in _PREFIXES[check_scheme(scheme)]:
        raise ValueError(f"tag {tag!r} has prefix {prefix}-, which {scheme} does not use "
                         f"(its prefixes: {', '.join(_PREFIXES[scheme])} and O)")


def check_scheme(scheme: str) -> str:
    if scheme not in SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")
    return scheme


def _continues(prefix: str, kind: str, previous: str) -> bool:
    """Whether a tag of (prefix, kind) after ``previous`` continues an entity of its type."""
    previous_prefix, previous_kind = split_tag(previous)
    return previous_kind == kind and previous_prefix in ("B", "I")


def scheme_violation(tags: Sequence[str], scheme: str) -> tuple[int, str] | None:
    """(index of the first offending tag, why) where ``tags`` (one sentence) break ``scheme``, or
    None. Every tag must be one of the scheme (``check_tag``), and:

    - IOB2: an I-X continues an entity of type X (B-X or I-X before it);
    - IOB1: a B-X only separates two entities of type X (I-X or B-X before it);
    - BIOES: I-X and E-X continue an entity of type X (B-X or I-X before), and B-X and I-X are
      followed by I-X or E-X (an entity is closed by E-, a single word is S-).
    """
    check_scheme(scheme)
    for index, tag in enumerate(tags):
        try:
            check_tag(tag, scheme)
        except ValueError as error:
            return index, str(error)
    previous = OUTSIDE
    for index, tag in enumerate(list(tags) + [OUTSIDE]):
        prefix, kind = split_tag(tag)
        at_end = index == len(tags)
        if scheme == "BIOES":
            open_before = split_tag(previous)[0] in ("B", "I")
            continued = prefix in ("I", "E") and _continues(prefix, kind, previous)
            if open_before and not continued:
                where = "the sentence's end" if at_end else f"{tag!r}"
                return (index - 1, f"{previous!r} is followed by {where}; in BIOES an entity "
                        "goes on with I- or E- of its type")
            if prefix in ("I", "E") and not continued:
                return index, (f"{tag!r} after {previous!r}: in BIOES an {prefix}- tag continues "
                               f"an entity of its type (B-{kind} or I-{kind} before it)")
        elif scheme == "IOB2" and prefix == "I" and not _continues(prefix, kind, previous):
            return index, (f"{tag!r} after {previous!r}: in IOB2 an I- tag continues an entity "
                           f"of its type (B-{kind} or I-{kind} before it)")
        elif scheme == "IOB1" and prefix == "B" and not _continues(prefix, kind, previous):
            return index, (f"{tag!r} after {previous!r}: in IOB1 a B- tag only separates two "
                           f"adjacent entities of type {kind} (I-{kind} or B-{kind} before it)")
        previous = tag
    return None


def _chunk_ends(previous: tuple[str, str], current: tuple[str, str]) -> bool:
    (previous_prefix, previous_kind), (prefix, kind) = previous, current
    if previous_prefix == OUTSIDE:
        return False
    return (previous_prefix in ("E", "S") or prefix in ("B", "S", OUTSIDE)
            or previous_kind != kind)


def _chunk_starts(previous: tuple[str, str], current: tuple[str, str]) -> bool:
    (previous_prefix, previous_kind), (prefix, kind) = previous, current
    if prefix == OUTSIDE:
        return False
    return (prefix in ("B", "S") or previous_prefix in (OUTSIDE, "E", "S")
            or previous_kind != kind)


def entities(tags: Sequence[str]) -> list[Entity]:
    """The entities of one sentence's tags under conlleval's chunk rules (see the module doc), in
    order. Tags must pass ``split_tag``."""
    found = []
    previous = (OUTSIDE, "")
    start = None
    for index, tag in enumerate(list(tags) + [OUTSIDE]):
        current = split_tag(tag)
        if start is not None and _chunk_ends(previous, current):
            found.append(Entity(previous[1], start, index))
            start = None
        if _chunk_starts(previous, current):
            start = index
        previous = current
    return found
