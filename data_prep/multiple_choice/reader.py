"""RACE reading comprehension: JSON articles -> examples (one per question), as the reference's
``RaceProcessor`` reads them.

Input layout: ``<data_dir>/RACE/<split>/<level>/`` for split train/dev/test and level middle/high,
read in the order middle, high (``middle_only`` / ``high_only`` read one level; ``race_sources``).
Each level directory is read in one of two layouts, chosen per directory:

- ``all.txt`` (the reference's layout): one JSON article per line, in line order; blank lines are
  ignored. Lines end at "\\n" (or "\\r\\n") only (albert_tf/files/text_lines.py): an article's
  text may hold U+2028, U+0085, ...
- the official RACE release: every ``*.txt`` file holds one JSON article; files are read in sorted
  file-name order (plain string order: ``10.txt`` comes before ``2.txt``).

A directory holding both all.txt and other ``*.txt`` files is an error naming it and both kinds of
files (reading one layout would silently drop the other's articles, reading both would likely read
every article twice).

An article is ``{"id", "article", "questions", "options", "answers"}``, with one option list of 4 and
one answer letter "A"-"D" per question. Each question is one example (the reference's
``RaceProcessor``): label = answer letter - "A"; article, question and options normalized as the
tokenizer expects (SentencePiece mode: ``preprocess_text`` with ``lower=do_lower_case``); for each
option, the question with every "_" replaced by the option if it has one, else question + " " + option
(``fill_in_option``).

Where the reference would crash or read garbage, reading fails with ``RaceDataError`` naming the file
(and line, for all.txt) and the question: malformed JSON, missing keys, a question without exactly 4
options, an answer other than "A"-"D", a repeated article id. With ``skip_invalid=True`` the bad
question (or the whole article, when the article itself is unusable) is skipped, logged and counted.

``convert_examples`` turns the examples into features (layout and records:
data_prep/multiple_choice/features.py); the feature file of a split is
data_prep/multiple_choice/feature_file.py.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from typing import Callable, Iterable, Iterator, Sequence

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.text_lines import split_lines
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.common.text_fields import normalize_field
from data_prep.common.user_errors import opening_user_file
from data_prep.multiple_choice.features import (NUM_CHOICES, RaceFeatures, check_lengths,
                                                question_features)

SPLITS = ("train", "dev", "test")
LEVELS = ("middle", "high")
ALL_TXT = "all.txt"
ANSWER_LETTERS = "ABCD"
_ARTICLE_KEYS = ("id", "article", "questions", "options", "answers")


class RaceDataError(UserError, ValueError):
    """A RACE file is missing or malformed; the message names the file (line) and question."""


@dataclasses.dataclass(frozen=True)
class RaceSource:
    """One file read for a level: an all.txt (one JSON article per line) or one article's file."""

    level: str
    path: str
    one_article_per_line: bool


@dataclasses.dataclass(frozen=True)
class RaceExample:
    """One question.

    example_id: "<article id>-<question index>" (0-based index within the article), unique per split.
    article: the normalized article text (shared by the article's questions).
    qa_texts: NUM_CHOICES normalized question+option texts, option A first.
    label_id: 0-3 for the answer letters A-D.
    """

    example_id: str
    level: str
    article: str
    qa_texts: tuple[str, ...]
    label_id: int


@dataclasses.dataclass(frozen=True)
class RaceExamples:
    """What a read produced: the examples in reading order and what ``skip_invalid`` dropped."""

    examples: list[RaceExample]
    num_skipped_questions: int = 0
    num_skipped_articles: int = 0


# -- reading ---------------------------------------------------------------------------------------

def race_sources(data_dir: str, split: str, middle_only: bool = False,
                 high_only: bool = False) -> list[RaceSource]:
    """The files to read for ``split``, levels in the order middle, high.

    Raises RaceDataError for an unknown split, both level restrictions at once, a missing level
    directory, or one with neither all.txt nor *.txt files, or with both.
    """
    if split not in SPLITS:
        raise RaceDataError(f"unknown RACE split {split!r}; expected one of {list(SPLITS)}")
    if middle_only and high_only:
        raise RaceDataError("middle_only and high_only exclude each other; give at most one")
    levels = ["middle"] if middle_only else ["high"] if high_only else list(LEVELS)
    sources = []
    for level in levels:
        directory = os.path.join(data_dir, "RACE", split, level)
        if not tf.io.gfile.isdir(directory):
            raise RaceDataError(f"RACE directory not found: {directory} (expected "
                                f"<data_dir>/RACE/{split}/{level}/ holding all.txt or *.txt)")
        with opening_user_file(directory):
            names = sorted(tf.io.gfile.listdir(directory))
        articles = [name for name in names if name.endswith(".txt") and name != ALL_TXT
                    and not tf.io.gfile.isdir(os.path.join(directory, name))]
        if ALL_TXT in names and articles:
            shown = ", ".join(articles[:3]) + (", ..." if len(articles) > 3 else "")
            raise RaceDataError(
                f"{directory}: holds both {ALL_TXT} (one article per line) and {len(articles)} "
                f"per-article *.txt files ({shown}); keep one layout (reading one would drop the "
                "other's articles, reading both would likely read each article twice)")
        if ALL_TXT in names:
            sources.append(RaceSource(level, os.path.join(directory, ALL_TXT), True))
        elif articles:
            sources.extend(RaceSource(level, os.path.join(directory, name), False)
                           for name in articles)
        else:
            raise RaceDataError(f"{directory}: no all.txt and no *.txt article files")
    return sources


def read_race_examples(sources: Sequence[RaceSource], use_spm: bool = True, do_lower_case: bool = True,
                       skip_invalid: bool = False) -> RaceExamples:
    """The examples of ``sources`` in order (see the module docstring for the rules).

    use_spm / do_lower_case: normalize as a SentencePiece (or WordPiece) tokenizer with that casing
    expects. Raises RaceDataError on the first invalid article or question unless ``skip_invalid``.
    """
    reader = _Reader(functools.partial(normalize_field, use_spm=use_spm, do_lower_case=do_lower_case),
                     skip_invalid)
    examples = [example for source in sources for example in reader.read(source)]
    return RaceExamples(examples, reader.num_skipped_questions, reader.num_skipped_articles)


class _Reader:
    """Reads sources one after another, remembering article ids (they must be unique) and skips."""

    def __init__(self, process_text: Callable[[str], str], skip_invalid: bool):
        self._process_text = process_text
        self._skip_invalid = skip_invalid
        self._article_places: dict[str, str] = {}
        self.num_skipped_questions = 0
        self.num_skipped_articles = 0

    def read(self, source: RaceSource) -> Iterator[RaceExample]:
        for place, raw in _raw_articles(source):
            try:
                article = self._parse_article(raw, place)
            except RaceDataError as error:
                self._skip(error, "article")
                continue
            text = self._process_text(article["article"])
            for index in range(len(article["questions"])):
                try:
                    yield self._example(article, index, text, source.level, place)
                except RaceDataError as error:
                    self._skip(error, "question")

    def _skip(self, error: RaceDataError, what: str) -> None:
        if not self._skip_invalid:
            raise error
        logging.warning("skipping invalid %s: %s", what, error)
        if what == "article":
            self.num_skipped_articles += 1
        else:
            self.num_skipped_questions += 1

    def _parse_article(self, raw: bytes, place: str) -> dict:
        try:
            article = json.loads(raw.decode("utf-8-sig"))
        except UnicodeDecodeError as error:
            raise RaceDataError(f"{place}: not UTF-8 text ({error.reason} at byte {error.start})") from None
        except json.JSONDecodeError as error:
            raise RaceDataError(f"{place}: malformed JSON: {error.msg} (line {error.lineno} "
                                f"column {error.colno} of the article)") from None
        if not isinstance(article, dict):
            raise RaceDataError(f"{place}: expected a JSON object with keys {list(_ARTICLE_KEYS)}, "
                                f"found {type(article).__name__}")
        missing = [key for key in _ARTICLE_KEYS if key not in article]
        if missing:
            raise RaceDataError(f"{place}: article lacks the keys {missing}")
        for key, kind in (("id", str), ("article", str), ("questions", list), ("options", list),
                          ("answers", list)):
            if not isinstance(article[key], kind):
                raise RaceDataError(f"{place}: {key!r} must be a {'string' if kind is str else 'list'}, "
                                    f"found {type(article[key]).__name__}")
        counts = [len(article[key]) for key in ("questions", "options", "answers")]
        if len(set(counts)) != 1:
            raise RaceDataError(f"{place}: article {article['id']!r} has {counts[0]} questions, "
                                f"{counts[1]} option lists and {counts[2]} answers; expected equal counts")
        first_place = self._article_places.setdefault(article["id"], place)
        if first_place != place:
            raise RaceDataError(f"{place}: article id {article['id']!r} was already read from "
                                f"{first_place}")
        return article

    def _example(self, article: dict, index: int, text: str, level: str, place: str) -> RaceExample:
        where = f"{place}: question {index} of article {article['id']!r}"
        question, options, answer = (article[key][index] for key in ("questions", "options", "answers"))
        if not isinstance(question, str):
            raise RaceDataError(f"{where}: the question must be a string, found {type(question).__name__}")
        if not isinstance(options, list) or len(options) != NUM_CHOICES:
            found = len(options) if isinstance(options, list) else type(options).__name__
            raise RaceDataError(f"{where}: expected {NUM_CHOICES} options, found {found}")
        if not all(isinstance(option, str) for option in options):
            raise RaceDataError(f"{where}: every option must be a string")
        if not isinstance(answer, str) or len(answer) != 1 or answer not in ANSWER_LETTERS:
            raise RaceDataError(f"{where}: expected an answer letter from {list(ANSWER_LETTERS)}, "
                                f"found {answer!r}")
        question = self._process_text(question)
        qa_texts = tuple(fill_in_option(question, self._process_text(option)) for option in options)
        return RaceExample(example_id=f"{article['id']}-{index}", level=level, article=text,
                           qa_texts=qa_texts, label_id=ANSWER_LETTERS.index(answer))


def fill_in_option(question: str, option: str) -> str:
    """The question with every "_" replaced by ``option``; without a "_", question + " " + option."""
    if "_" in question:
        return question.replace("_", option)
    return question + " " + option


def _raw_articles(source: RaceSource) -> Iterator[tuple[str, bytes]]:
    """(place, undecoded JSON text) per article; place is "path:line" for all.txt, else the path."""
    with opening_user_file(source.path), tf.io.gfile.GFile(source.path, "rb") as handle:
        content = handle.read()
    if not source.one_article_per_line:
        yield source.path, content
        return
    for line_number, line in enumerate(split_lines(content), start=1):
        if line.strip():
            yield f"{source.path}:{line_number}", line


# -- features and records --------------------------------------------------------------------------

def convert_examples(examples: Iterable[RaceExample], tokenizer: FullTokenizer, max_seq_length: int,
                     max_qa_length: int) -> Iterator[RaceFeatures]:
    """Features of each example (reference ``convert_single_example``), in order.

    The article is tokenized once for consecutive questions of the same article (same pieces).
    """
    check_lengths(max_seq_length, max_qa_length)
    article, article_ids = None, []
    for example in examples:
        if example.article != article:
            article = example.article
            article_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(article))
        yield question_features(article_ids, example.qa_texts, example.label_id, tokenizer,
                                max_seq_length, max_qa_length)
