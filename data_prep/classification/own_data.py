"""The user's own classification or regression files: CSV, TSV or JSON Lines -> ``InputExample``.

Formats (``FILE_FORMATS``, chosen by the file's extension or given): ``.csv`` (comma-separated,
double quotes as in RFC 4180: a quoted cell may hold commas, quotes and newlines), ``.tsv``
(tab-separated, quotes kept literally as GLUE's TSV files are read), ``.jsonl`` / ``.ndjson``
(one JSON object per line). CSV and TSV files start with a header naming the columns; blank lines
are skipped. Files are UTF-8 (a byte-order mark is ignored), read through ``tf.io.gfile``. Lines
end at "\\n" (or "\\r\\n") only, as every reader of the project splits them
(albert_tf/files/text_lines.py): U+2028, U+0085, "\\v", ... are characters of a cell or string; a
CSV cell may be as long as the file.

Columns (``Columns``): one text (default ``text``) or a pair (default ``text_a`` and ``text_b``
when the file has no ``text`` column), the label (default ``label``) and optionally an id column
whose values name the predictions (default: the example's line number). The texts are normalized
as GLUE's (SentencePiece mode: whitespace collapsed, accents stripped, lower-cased with
do_lower_case), so the same sentences give the same features as through the GLUE path.

Labels. Classification: a label is a class name, a string or (JSON) an integer, kept as written
(surrounding spaces stripped). The label set is given, or is every label of the training file,
sorted (numerically when every label is an integer, else as strings): stable for the same file.
A number with a fraction (``0.5``) is refused unless the given label set names it: it is most
likely a regression score. One integer written two ways (``01`` and ``1``, ``+1`` and ``1``) is
refused: it would be two classes. A label holding a tab or a line break is refused (it is a cell
of ``submit_results.tsv``). Regression: a finite number (JSON number or numeric string).

Ids (the id column of the test file, which name the predictions): non-empty strings or integers
without a tab or line break, each once in the file.

Every mistake is an ``OwnDataError`` naming the file and line (lines are counted as an editor
shows them; a quoted CSV cell spanning lines counts from the line it starts on): a missing file,
an unknown format, a missing column, a row with more or fewer cells than the header, an empty text,
a missing or empty label in a labelled file, a label outside the label set, a fractional label in
a classification, a non-numeric score in a regression, invalid UTF-8 or JSON, a file without
examples. A test file may lack the label column (its examples get ``label=None``).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import os
import re
from typing import Any, Iterator, Sequence

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.json_objects import json_error_reason
from albert_tf.files.text_lines import line_number_at, split_lines, tab_or_line_break
from data_prep.classification.processors import InputExample
from data_prep.common.text_fields import normalize_field
from data_prep.common.user_errors import opening_user_file

FILE_FORMATS = ("csv", "tsv", "jsonl")
_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
TASK_TYPES = ("classification", "regression")
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


class OwnDataError(UserError, ValueError):
    """A data file is missing or malformed; the message names the file (and line) and what was
    expected."""


@dataclasses.dataclass(frozen=True)
class Columns:
    """The columns read: ``text_a`` (None: ``text``, else ``text_a``), ``text_b`` (None: a single
    text, or ``text_b`` when text_a defaulted to ``text_a`` and the file has it), ``label``, ``id``
    (None: the line number names each example)."""

    text_a: str | None = None
    text_b: str | None = None
    label: str = "label"
    id: str | None = None

    def resolve(self, header: Sequence[str], path: str) -> "Columns":
        """The columns with their defaults filled in from the first file's ``header``."""
        if self.text_a is not None:
            return self
        if "text" in header:
            return dataclasses.replace(self, text_a="text")
        if "text_a" in header:
            text_b = self.text_b or ("text_b" if "text_b" in header else None)
            return dataclasses.replace(self, text_a="text_a", text_b=text_b)
        raise OwnDataError(f"{path}:1: no text column: expected 'text' (one text) or 'text_a' and "
                           f"'text_b' (a pair), found {list(header)}; name yours with "
                           "--text_column (and --text_b_column)")

    def texts(self) -> list[str]:
        return [self.text_a] + ([self.text_b] if self.text_b else [])


def file_format(path: str, given: str | None = None) -> str:
    """``given`` if set, else the format of the path's extension; OwnDataError otherwise."""
    if given:
        if given not in FILE_FORMATS:
            raise OwnDataError(f"unknown file format {given!r}; expected one of {FILE_FORMATS}")
        return given
    extension = os.path.splitext(path)[1].lower()
    if extension not in _EXTENSIONS:
        raise OwnDataError(f"{path}: cannot tell the format from the extension {extension!r}; "
                           f"expected one of {sorted(_EXTENSIONS)} or --file_format=csv|tsv|jsonl")
    return _EXTENSIONS[extension]


def _read_text(path: str) -> str:
    if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
        raise OwnDataError(f"{path}: file not found")
    with opening_user_file(path), tf.io.gfile.GFile(path, "rb") as handle:
        data = handle.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = line_number_at(data, error.start)
        raise OwnDataError(f"{path}:{line}: not valid UTF-8 (byte {data[error.start]:#04x}); "
                           "expected UTF-8 text") from None


def read_rows(path: str, fmt: str) -> tuple[list[str], Iterator[tuple[int, dict[str, Any]]]]:
    """(header, rows) of a file: rows are (line number, {column: value}); JSON Lines: the header is
    the first object's keys and values keep their JSON types."""
    text = _read_text(path)
    if fmt == "jsonl":
        rows = list(_json_rows(path, text))
        return (list(rows[0][1]) if rows else []), iter(rows)
    return _delimited_rows(path, text, "," if fmt == "csv" else "\t")


def _json_rows(path: str, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    # Lines end at "\n" only (split_lines): JSON strings may hold U+2028, U+0085, ...
    for line_number, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise OwnDataError(f"{path}:{line_number}: not valid JSON "
                               f"({json_error_reason(error)}); expected one JSON object per "
                               "line") from None
        if not isinstance(row, dict):
            raise OwnDataError(f"{path}:{line_number}: expected a JSON object, found "
                               f"{type(row).__name__}")
        yield line_number, row


def _delimited_rows(path: str, text: str, delimiter: str
                       ) -> tuple[list[str], Iterator[tuple[int, dict[str, Any]]]]:
    if delimiter == ",":
        rows = _csv_rows(path, text)
    else:  # TSV: split at tabs, quotes kept (as GLUE's files are read)
        rows = ((number, line.split("\t") if line else [])
                for number, line in enumerate(split_lines(text), start=1))
    rows = ((number, row) for number, row in rows
            if row and not (len(row) == 1 and not row[0].strip()))
    first = next(rows, None)
    if first is None:
        raise OwnDataError(f"{path}: empty file; expected a header line naming the columns")
    _, header = first
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise OwnDataError(f"{path}:1: the header names {duplicates} more than once")
    separator = "comma" if delimiter == "," else "tab"

    def records() -> Iterator[tuple[int, dict[str, Any]]]:
        for line_number, row in rows:
            if len(row) != len(header):
                raise OwnDataError(f"{path}:{line_number}: expected {len(header)} {separator}-"
                                   f"separated fields (as the header), found {len(row)}")
            yield line_number, dict(zip(header, row))

    return header, records()


def _csv_rows(path: str, text: str) -> Iterator[tuple[int, list[str]]]:
    """(line the row starts on, cells) of each CSV row (RFC 4180 quoting; a quoted cell may span
    lines). Blank lines are rows without cells, or with one blank cell: the caller skips them (a
    row of empty cells such as ",," is kept, and refused later for its empty text)."""
    # A cell may be as long as the file: csv's default limit (128 KiB) would refuse a valid file.
    limit = max(csv.field_size_limit(), len(text) + 1)
    reader = csv.reader(iter(split_lines(text, keepends=True)), delimiter=",", strict=True)
    next_line = 1
    while True:
        try:
            with _csv_field_size_limit(limit):
                row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            reason = str(error)
            if "new-line character seen in unquoted field" in reason:
                reason = ("a carriage return (\\r) not followed by a line feed in an unquoted "
                          "cell; quote the cell or remove the \\r")
            raise OwnDataError(f"{path}:{reader.line_num}: malformed CSV ({reason})") from None
        start, next_line = next_line, reader.line_num + 1
        yield start, row


@contextlib.contextmanager
def _csv_field_size_limit(limit: int) -> Iterator[None]:
    """Within the block the csv module accepts cells of up to ``limit`` characters (the limit is
    the process's: it is set back afterwards)."""
    previous = csv.field_size_limit(limit)
    try:
        yield
    finally:
        csv.field_size_limit(previous)


@dataclasses.dataclass(frozen=True)
class OwnDataReader:
    """Reads the user's files with one column choice and label rule.

    columns: resolved against the first file read (``resolve_columns``). task_type: one of
    TASK_TYPES. file_format: None = by extension. given_labels: the label set every label must
    belong to (None: any), named in messages by ``labels_source``. use_spm / do_lower_case: the
    tokenizer's normalization of the texts.
    """

    columns: Columns
    task_type: str = "classification"
    file_format: str | None = None
    given_labels: tuple[str, ...] | None = None
    labels_source: str = "--labels"
    use_spm: bool = True
    do_lower_case: bool = True

    @property
    def is_regression(self) -> bool:
        return self.task_type == "regression"

    def resolve_columns(self, path: str) -> "OwnDataReader":
        """This reader with the default columns filled in from ``path``'s header."""
        header, _ = read_rows(path, file_format(path, self.file_format))
        return dataclasses.replace(self, columns=self.columns.resolve(header, path))

    def with_labels(self, labels: Sequence[str], source: str) -> "OwnDataReader":
        """This reader, refusing every label outside ``labels`` (from ``source``)."""
        return dataclasses.replace(self, given_labels=tuple(labels), labels_source=source)

    def read(self, path: str, split: str) -> list[InputExample]:
        """The examples of one file; ``split`` "test" may lack the label column (label None).
        Default columns not yet resolved (``resolve_columns``) are resolved from this file.

        In the test file, whose ids name the predictions (``submit_results.tsv``), every id of the
        id column is a non-empty string or integer without a tab or line break, and no id
        appears twice. In a labelled file, an integer class is written one way only (``01`` and
        ``1`` would be two classes)."""
        fmt = file_format(path, self.file_format)
        header, rows = read_rows(path, fmt)
        reader = self if self.columns.text_a else dataclasses.replace(
            self, columns=self.columns.resolve(header, path))
        labelled = split != "test" or self.columns.label in header
        names_predictions = split == "test" and self.columns.id is not None
        if fmt != "jsonl":  # a header line names the columns of every row
            needed = [*reader.columns.texts(), *([self.columns.label] if labelled else []),
                      *([self.columns.id] if names_predictions else [])]
            absent = [column for column in needed if column not in header]
            if header and absent:
                raise OwnDataError(f"{path}:1: no column {absent[0]!r} in the header; found "
                                   f"{list(header)}")
        examples, id_lines, integer_labels = [], {}, {}
        for line_number, row in rows:
            example = reader._example(path, line_number, row, labelled, names_predictions)
            if names_predictions:
                first = id_lines.setdefault(example.guid, line_number)
                if first != line_number:
                    raise OwnDataError(
                        f"{path}:{line_number}: column {self.columns.id!r}: id {example.guid!r} "
                        f"appears twice, on lines {first} and {line_number}; ids must be unique: "
                        "they name the predictions in submit_results.tsv")
            integer = integer_class(example.label) if labelled and not self.is_regression else None
            if integer is not None:
                name, first = integer_labels.setdefault(integer, (example.label, line_number))
                if name != example.label:
                    raise OwnDataError(
                        f"{path}:{line_number}: column {self.columns.label!r}: label "
                        f"{example.label!r} is the integer of label {name!r} (line {first}) "
                        "written another way; they would be two classes: write each class one "
                        "way")
            examples.append(example)
        if not examples:
            raise OwnDataError(f"{path}: no examples; expected at least one row after the header"
                               if header else f"{path}: no examples; the file is empty")
        return examples

    def _example(self, path: str, line_number: int, row: dict[str, Any],
                 labelled: bool, names_predictions: bool = False) -> InputExample:
        def cell(column: str) -> Any:
            if column not in row:
                raise OwnDataError(f"{path}:{line_number}: no column {column!r}; found "
                                   f"{sorted(row)}")
            return row[column]

        texts = []
        for column in self.columns.texts():
            value = cell(column)
            if not isinstance(value, str) or not value.strip():
                found = "an empty text" if isinstance(value, str) else type(value).__name__
                raise OwnDataError(f"{path}:{line_number}: column {column!r}: expected a "
                                   f"non-empty text, found {found}")
            texts.append(normalize_field(value, self.use_spm, self.do_lower_case))
        label = self._label(path, line_number, cell(self.columns.label)) if labelled else None
        if self.columns.id is None:
            guid = str(line_number)
        elif names_predictions:
            guid = self._id(path, line_number, cell(self.columns.id))
        else:
            guid = str(cell(self.columns.id))
        return InputExample(guid=guid, text_a=texts[0], text_b=texts[1] if len(texts) > 1 else None,
                            label=label)

    def _id(self, path: str, line_number: int, value: Any) -> str:
        """The id of a test example: a non-empty string or integer, without a tab or line break
        (it is a cell of submit_results.tsv)."""
        where = f"{path}:{line_number}: column {self.columns.id!r}"
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise OwnDataError(f"{where}: expected an id (a string or an integer), found "
                               f"{json.dumps(value)}")
        name = str(value)
        if not name.strip():
            raise OwnDataError(f"{where}: empty id; every example needs one (it names its "
                               "prediction in submit_results.tsv)")
        breaking = tab_or_line_break(name)
        if breaking:
            raise OwnDataError(f"{where}: id {name!r} holds {breaking}; an id is a cell of "
                               "submit_results.tsv (tab-separated, one line per example)")
        return name

    def _label(self, path: str, line_number: int, value: Any) -> str | float:
        where = f"{path}:{line_number}: column {self.columns.label!r}"
        if isinstance(value, str):
            value = value.strip()
            if not value:
                raise OwnDataError(f"{where}: empty label")
        if self.is_regression:
            return _score(where, value)
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise OwnDataError(f"{where}: expected a class name (a string or an integer), found "
                               f"{json.dumps(value)}")
        name = str(value)
        given = self.given_labels
        if isinstance(value, float) or (_NUMBER.fullmatch(name) and not _INTEGER.fullmatch(name)):
            if given is None or name not in given:
                raise OwnDataError(f"{where}: label {name} is a float: a classification's "
                                   "labels are class names; for scores use "
                                   "--task_type=regression (to use it as a class name, list it "
                                   "in --labels)")
        breaking = tab_or_line_break(name)
        if breaking:
            raise OwnDataError(f"{where}: label {name!r} holds {breaking}; a label is a cell of "
                               "submit_results.tsv and a line of labels.txt")
        if given is not None and name not in given:
            integer = integer_class(name)
            same = [label for label in given
                    if integer is not None and integer_class(label) == integer]
            hint = (f"; the set has {same[0]!r}, the same integer written another way: write "
                    "each class one way") if same else ""
            raise OwnDataError(f"{where}: label {name!r} is not in the label set {list(given)} "
                               f"({self.labels_source}){hint}")
        return name


def _score(where: str, value: Any) -> float:
    """A regression label: a finite number."""
    try:
        score = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        score = math.nan
    if not math.isfinite(score):
        raise OwnDataError(f"{where}: expected a finite number (--task_type=regression), found "
                           f"{json.dumps(value)}")
    return score


def integer_class(name: str) -> int | None:
    """The integer a class name writes (``1``, ``01``, ``+1`` -> 1), or None for another name."""
    if not _INTEGER.fullmatch(name):
        return None
    try:
        return int(name)
    except ValueError:  # longer than Python converts (4300 digits)
        return None


def label_set(examples: Sequence[InputExample]) -> list[str]:
    """The sorted label names of ``examples``: numerically when all are integers, else as
    strings."""
    names = {example.label for example in examples if example.label is not None}
    if all(integer_class(name) is not None for name in names):
        return sorted(names, key=lambda name: (integer_class(name), name))
    return sorted(names)

