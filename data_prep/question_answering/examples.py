"""SQuAD v1.1 / v2.0 JSON -> questions (examples), as the reference's ``read_squad_examples``.

The file is ``{"data": [{"paragraphs": [{"context": str, "qas": [{"id", "question", "answers":
[{"text", "answer_start"}], "is_impossible" (v2.0)}]}]}]}``. Examples come in file order; each keeps
the raw paragraph text (answers are character offsets into it).

Training (``is_training``): an answerable question must have exactly one answer, whose text and
start become the label; an unanswerable one (v2.0 ``is_impossible``) gets start -1 and text "".
Evaluation examples carry no label, but keep every gold answer text for scoring.

Where the reference would train on a wrong label, fail much later or lose a prediction, reading
checks first (the reference does none of this):

- Question ids must be unique in the file (predictions and scores are keyed by id): a repeated id
  is an error naming both places (``data[a].paragraphs[p].qas[q]``).
- SQuAD 2.0 data read as v1.1 (``version_2_with_negative=False``): a question with
  ``is_impossible`` true or without any answer is an error naming the file, the question and the
  flag --version_2_with_negative (v1.1 training would take it as answerable; v1.1 scoring has no
  answer to score against). ``version_2_with_negative=None`` accepts either version.
- Training: an answer whose text is not found at its ``answer_start`` (the paragraph's text there
  differs, white space runs aside, or lies past the paragraph's end) would label the wrong span:
  its question is skipped, logged and listed (``SquadQuestions.skipped_qas_ids``), as the BERT
  reference skipped an answer it could not find. An empty answer text or a negative start is an
  error naming the question.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import tensorflow as tf
from absl import logging

from albert_tf.errors.user_error import UserError
from data_prep.common.user_errors import opening_user_file


class SquadDataError(UserError, ValueError):
    """A SQuAD file is unusable; the message names the file and the question (or the part) at fault."""


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question on one paragraph.

    orig_answer_text / start_position: the training label (the answer's text and the character
      offset of its start in paragraph_text); "" / -1 for an unanswerable question; None in eval.
    answers: every gold answer text (scoring), in file order.
    paragraph_index: position of the paragraph in the file (questions of a paragraph share it).
    """

    qas_id: str
    question_text: str
    paragraph_text: str
    paragraph_index: int
    orig_answer_text: str | None = None
    start_position: int | None = None
    is_impossible: bool = False
    answers: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class SquadQuestions:
    """What reading a SQuAD file produced.

    examples: the questions kept, in file order.
    skipped_qas_ids: training questions left out, in file order, because their answer text is not
      found at its answer_start (see the module doc); always empty in eval.
    """

    examples: list[SquadExample]
    skipped_qas_ids: list[str] = dataclasses.field(default_factory=list)


def _field(record: Any, key: str, kind: type, where: str) -> Any:
    """record[key], checked to be a ``kind``; a SquadDataError naming ``where`` otherwise."""
    if not isinstance(record, dict) or key not in record:
        raise SquadDataError(f"{where}: missing {key!r}")
    value = record[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SquadDataError(f"{where}: {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def _answer_texts(qa: dict, where: str) -> tuple[str, ...]:
    answers = qa.get("answers", [])
    if not isinstance(answers, list):
        raise SquadDataError(f"{where}: 'answers' must be a list")
    return tuple(_field(answer, "text", str, where) for answer in answers)


def _is_impossible(qa: dict, where: str) -> bool:
    is_impossible = qa.get("is_impossible", False)
    if not isinstance(is_impossible, bool):
        raise SquadDataError(f"{where}: 'is_impossible' must be true or false, got {is_impossible!r}")
    return is_impossible


def _check_answerable(qa: dict, answers: tuple[str, ...], where: str) -> None:
    """A question of a file read as SQuAD v1.1 must be answerable (see the module doc)."""
    if _is_impossible(qa, where):
        state = "is_impossible is true"
    elif not answers:
        state = "it has no answer"
    else:
        return
    raise SquadDataError(
        f"{where}: an unanswerable question ({state}): SQuAD 2.0 data needs "
        "--version_2_with_negative (read as SQuAD v1.1, its training label and its score would "
        "be wrong)")


def _same_text(found: str, expected: str) -> bool:
    """Equal texts once every run of white space is one space (the BERT reference's leniency)."""
    return found == expected or found.split() == expected.split()


def _training_label(qa: dict, context: str, where: str) -> tuple[str, int, bool] | None:
    """(answer text, answer start, is_impossible) of a training question; None when its answer
    text is not found at its answer_start (the question is skipped)."""
    if _is_impossible(qa, where):
        return "", -1, True
    answers = qa.get("answers", [])
    if not isinstance(answers, list) or len(answers) != 1:
        count = len(answers) if isinstance(answers, list) else "no list of"
        raise SquadDataError(f"{where}: for training, each answerable question must have exactly "
                             f"1 answer, found {count} answers")
    text = _field(answers[0], "text", str, where)
    start = _field(answers[0], "answer_start", int, where)
    if not text or start < 0:
        raise SquadDataError(f"{where}: answer {text!r} at {start}: expected a non-empty text and "
                             "a character offset >= 0")
    if not _same_text(context[start:start + len(text)], text):
        return None
    return text, start, False


def _place(article: int, paragraph: int, question: int) -> str:
    return f"data[{article}].paragraphs[{paragraph}].qas[{question}]"


def _no_question_message(source: str, skipped: list[str], articles: int, paragraphs: int) -> str:
    """Why a SQuAD file gave no question: a feature file of 0 records (or a run on one) would
    finish without a word, as if it had worked."""
    if skipped:
        return (f"{source}: every one of its {len(skipped)} training questions is skipped: their "
                f"answer text is not found at answer_start ({', '.join(skipped[:5])}"
                f"{', ...' if len(skipped) > 5 else ''}); check the offsets")
    return (f"{source}: no question ({articles} articles, {paragraphs} paragraphs): expected "
            "questions in data[].paragraphs[].qas[]")


def parse_squad_questions(dataset: Any, is_training: bool, source: str = "<data>",
                          version_2_with_negative: bool | None = None) -> SquadQuestions:
    """The questions of a parsed SQuAD JSON object (see the module doc); ``source`` names it in
    errors. version_2_with_negative: False refuses SQuAD 2.0 questions, None accepts both."""
    articles = _field(dataset, "data", list, source)
    examples, skipped = [], []
    places: dict[str, str] = {}  # question id -> where it was first seen
    paragraph_index = 0
    for article_number, article in enumerate(articles):
        paragraphs = _field(article, "paragraphs", list, f"{source}: article {article_number}")
        for paragraph_number, paragraph in enumerate(paragraphs):
            where = f"{source}: paragraph {paragraph_index}"
            context = _field(paragraph, "context", str, where)
            for question_number, qa in enumerate(_field(paragraph, "qas", list, where)):
                qas_id = _field(qa, "id", str, where)
                place = _place(article_number, paragraph_number, question_number)
                first_place = places.setdefault(qas_id, place)
                if first_place != place:
                    raise SquadDataError(
                        f"{source}: question id {qas_id!r} appears twice, at {first_place} and at "
                        f"{place}; ids must be unique (predictions and scores are keyed by id)")
                question_where = f"{source}: question {qas_id}"
                question = _field(qa, "question", str, question_where)
                answers = _answer_texts(qa, question_where)
                if version_2_with_negative is False:
                    _check_answerable(qa, answers, question_where)
                label: dict[str, Any] = {}
                if is_training:
                    found = _training_label(qa, context, question_where)
                    if found is None:
                        skipped.append(qas_id)
                        continue
                    text, start, impossible = found
                    label = {"orig_answer_text": text, "start_position": start,
                             "is_impossible": impossible}
                examples.append(SquadExample(
                    qas_id=qas_id, question_text=question, paragraph_text=context,
                    paragraph_index=paragraph_index, answers=answers, **label))
            paragraph_index += 1
    if not examples:
        raise SquadDataError(_no_question_message(source, skipped, len(articles), paragraph_index))
    if skipped:
        logging.warning("%s: skipped %d training questions whose answer text is not found at "
                        "answer_start: %s", source, len(skipped), ", ".join(skipped[:20])
                        + (", ..." if len(skipped) > 20 else ""))
    return SquadQuestions(examples, skipped)


def read_squad_questions(input_file: str, is_training: bool,
                         version_2_with_negative: bool | None = None) -> SquadQuestions:
    """The questions of a SQuAD JSON file (local or gs://), in file order (``parse_squad_questions``)."""
    if not tf.io.gfile.exists(input_file):
        raise SquadDataError(f"SQuAD file not found: {input_file}")
    with opening_user_file(input_file), tf.io.gfile.GFile(input_file, "r") as handle:
        try:
            dataset = json.load(handle)
        except (ValueError, UnicodeDecodeError) as err:
            raise SquadDataError(f"{input_file}: not a SQuAD JSON file: {err}") from err
    return parse_squad_questions(dataset, is_training, input_file, version_2_with_negative)


def read_squad_examples(input_file: str, is_training: bool,
                        version_2_with_negative: bool | None = None) -> list[SquadExample]:
    """The examples of ``read_squad_questions``, for callers that need only them (skipped training
    questions are logged)."""
    return read_squad_questions(input_file, is_training, version_2_with_negative).examples
