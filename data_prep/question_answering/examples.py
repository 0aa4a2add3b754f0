"""SQuAD v1.1 / v2.0 JSON -> questions (examples), as the reference's ``read_squad_examples``.

The file is ``{"data": [{"paragraphs": [{"context": str, "qas": [{"id", "question", "answers":
[{"text", "answer_start"}], "is_impossible" (v2.0)}]}]}]}``. Examples come in file order; each keeps
the raw paragraph text (answers are character offsets into it).

Training (``is_training``): an answerable question must have exactly one answer, whose text and
start become the label; an unanswerable one (v2.0 ``is_impossible``) gets start -1 and text "".
Unlike the reference, which crashes later on such data, an answer that does not lie inside its
paragraph (or is empty) is an error naming the question. Evaluation examples carry no label, but
keep every gold answer text for scoring.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import tensorflow as tf


class SquadDataError(ValueError):
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


def _training_label(qa: dict, context: str, where: str) -> tuple[str, int, bool]:
    """(answer text, answer start, is_impossible) of a training question."""
    is_impossible = qa.get("is_impossible", False)
    if not isinstance(is_impossible, bool):
        raise SquadDataError(f"{where}: 'is_impossible' must be true or false, got {is_impossible!r}")
    if is_impossible:
        return "", -1, True
    answers = qa.get("answers", [])
    if not isinstance(answers, list) or len(answers) != 1:
        count = len(answers) if isinstance(answers, list) else "no list of"
        raise SquadDataError(f"{where}: for training, each answerable question must have exactly "
                             f"1 answer, found {count} answers")
    text = _field(answers[0], "text", str, where)
    start = _field(answers[0], "answer_start", int, where)
    if not text or start < 0 or start + len(text) > len(context):
        raise SquadDataError(f"{where}: answer {text!r} at {start} does not lie inside its paragraph "
                             f"({len(context)} characters)")
    return text, start, False


def parse_squad_examples(dataset: Any, is_training: bool, source: str = "<data>") -> list[SquadExample]:
    """Examples of a parsed SQuAD JSON object (see the module doc); ``source`` names it in errors."""
    articles = _field(dataset, "data", list, source)
    examples = []
    paragraph_index = 0
    for article_number, article in enumerate(articles):
        paragraphs = _field(article, "paragraphs", list, f"{source}: article {article_number}")
        for paragraph in paragraphs:
            where = f"{source}: paragraph {paragraph_index}"
            context = _field(paragraph, "context", str, where)
            for qa in _field(paragraph, "qas", list, where):
                qas_id = _field(qa, "id", str, where)
                question_where = f"{source}: question {qas_id}"
                question = _field(qa, "question", str, question_where)
                label: dict[str, Any] = {}
                if is_training:
                    text, start, impossible = _training_label(qa, context, question_where)
                    label = {"orig_answer_text": text, "start_position": start,
                             "is_impossible": impossible}
                examples.append(SquadExample(
                    qas_id=qas_id, question_text=question, paragraph_text=context,
                    paragraph_index=paragraph_index, answers=_answer_texts(qa, question_where),
                    **label))
            paragraph_index += 1
    return examples


def read_squad_examples(input_file: str, is_training: bool) -> list[SquadExample]:
    """Examples of a SQuAD JSON file (local or gs://), in file order."""
    if not tf.io.gfile.exists(input_file):
        raise SquadDataError(f"SQuAD file not found: {input_file}")
    with tf.io.gfile.GFile(input_file, "r") as handle:
        try:
            dataset = json.load(handle)
        except (ValueError, UnicodeDecodeError) as err:
            raise SquadDataError(f"{input_file}: not a SQuAD JSON file: {err}") from err
    return parse_squad_examples(dataset, is_training, source=input_file)
