"""NER files -> sentences of words and tags, checked.

Two formats (``file_format``: by extension unless declared, ``.jsonl`` / ``.json`` = JSON Lines):

- CoNLL: one word per line, columns separated by spaces or tabs, the word first and the tag last
  (CoNLL-2003's ``EU NNP B-NP B-ORG`` or just ``EU B-ORG``); a blank line ends a sentence;
  ``-DOCSTART-`` lines are ignored (they end a sentence too);
- JSON Lines: one sentence per line, ``{"tokens": [...], "tags": [...]}`` (other keys are kept
  and ignored); blank lines are skipped.

A labelled file (training, evaluation) needs a tag per word; each sentence's tags must keep the
declared scheme (albert_tf/tasks/token_classification/schemes.py: e.g. no ``I-PER`` after ``O`` in
IOB2; such a file is refused, never repaired, so that scores count the tags the file holds) and,
for an evaluation file, come from the training file's tag set; no tag holds a tab or a line
break. Lines end at "\\n" (or "\\r\\n") only (albert_tf/files/text_lines.py). A prediction
file's tags are optional and ignored (CoNLL: a line may hold the word alone). Every mistake is a
``NerDataError`` ``<file>:<line>: <what is wrong and what was expected>``, raised while reading,
before any training.

The formats' names and lines (``resolve_format``, ``NerDataError``) are the task's
(albert_tf/tasks/token_classification/file_formats.py), shared with the prediction writer
(albert_tf/tasks/token_classification/predictions.py), which writes a file back in its format.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterator, Sequence

from albert_tf.files.json_objects import json_error_reason
from albert_tf.files.text_lines import tab_or_line_break
from albert_tf.tasks.token_classification.file_formats import (JSON_LINES, NerDataError,
                                                               conll_columns, is_conll_word,
                                                               read_lines, resolve_format)
from albert_tf.tasks.token_classification.schemes import OUTSIDE, scheme_violation


@dataclasses.dataclass(frozen=True)
class Sentence:
    """One sentence: its words, their tags (None in an unlabelled file) and, per word, the line of
    the file it comes from (JSON Lines: the sentence's line for every word)."""

    words: tuple[str, ...]
    tags: tuple[str, ...] | None
    lines: tuple[int, ...]


def _conll_sentences(path: str, labelled: bool) -> Iterator[Sentence]:
    words, tags, lines = [], [], []
    for number, line in list(read_lines(path)) + [(0, "")]:
        columns = conll_columns(line)
        if is_conll_word(columns):
            if labelled and len(columns) < 2:
                raise NerDataError(f"{path}:{number}: {line.strip()!r} has no tag; expected "
                                   "'<word> ... <tag>' (whitespace-separated, the tag last)")
            words.append(columns[0])
            tags.append(columns[-1] if len(columns) > 1 else OUTSIDE)
            lines.append(number)
        elif words:
            yield Sentence(tuple(words), tuple(tags) if labelled else None, tuple(lines))
            words, tags, lines = [], [], []


def _string_list(record: dict, key: str, where: str) -> list[str]:
    values = record.get(key)
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise NerDataError(f"{where}: {key!r} must be a list of strings, got "
                           f"{json.dumps(values)[:80]}")
    return values


def _json_sentences(path: str, labelled: bool) -> Iterator[Sentence]:
    for number, line in read_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise NerDataError(f"{where}: not valid JSON ({json_error_reason(error)}); expected "
                               'one object {"tokens": [...], "tags": [...]} per line') from None
        if not isinstance(record, dict):
            raise NerDataError(f'{where}: expected an object {{"tokens": [...], "tags": [...]}}')
        words = _string_list(record, "tokens", where)
        tags = None
        if labelled or "tags" in record:
            tags = _string_list(record, "tags", where)
            if len(tags) != len(words):
                raise NerDataError(f"{where}: {len(words)} tokens but {len(tags)} tags; expected "
                                   "one tag per token")
        if not words:
            raise NerDataError(f"{where}: empty sentence (no tokens)")
        yield Sentence(tuple(words), tuple(tags) if labelled else None, (number,) * len(words))


def read_sentences(path: str, file_format: str = "auto", labelled: bool = True,
                   scheme: str | None = None,
                   known_tags: Sequence[str] | None = None) -> list[Sentence]:
    """The sentences of an NER file, checked (see the module doc).

    labelled: every word needs a tag (else tags are ignored: ``Sentence.tags`` None).
    scheme: the declared tag scheme every labelled sentence must keep. known_tags: the tag set
    (the training file's) every tag must belong to. NerDataError naming file and line otherwise.
    """
    file_format = resolve_format(path, file_format)
    reader = _json_sentences if file_format == JSON_LINES else _conll_sentences
    sentences = []
    known = None if known_tags is None else set(known_tags)
    for sentence in reader(path, labelled):
        for word, line in zip(sentence.words, sentence.lines):
            if not word.strip():
                raise NerDataError(f"{path}:{line}: empty token; every token needs a character "
                                   "other than whitespace")
        if sentence.tags is not None:
            _check_tags(path, sentence, scheme, known)
        sentences.append(sentence)
    if not sentences:
        raise NerDataError(f"{path}: no sentence found (expected {file_format} data)")
    return sentences


def _check_tags(path: str, sentence: Sentence, scheme: str | None, known: set | None) -> None:
    if scheme is not None:
        violation = scheme_violation(sentence.tags, scheme)
        if violation is not None:
            index, reason = violation
            raise NerDataError(f"{path}:{sentence.lines[index]}: {reason}")
    for tag, line in zip(sentence.tags, sentence.lines):
        breaking = tab_or_line_break(tag)
        if breaking:
            raise NerDataError(f"{path}:{line}: tag {tag!r} holds {breaking}; a tag is a line of "
                               "the export's tags.txt")
    if known is not None:
        for tag, line in zip(sentence.tags, sentence.lines):
            if tag not in known:
                raise NerDataError(f"{path}:{line}: tag {tag!r} is not in the training file's "
                                   f"tag set {sorted(known)}")


def tag_set(sentences: Sequence[Sentence]) -> list[str]:
    """The tags of labelled sentences: ``O`` first, then the others sorted (tag id = index)."""
    tags = {tag for sentence in sentences for tag in sentence.tags}
    return [OUTSIDE] + sorted(tags - {OUTSIDE})
