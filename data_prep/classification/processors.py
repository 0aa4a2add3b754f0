"""GLUE TSV files -> ``InputExample`` lists, one processor per task.

Every processor reads ``<data_dir>/<task dir>/<split file>`` exactly as the reference's
classifier_utils does: tab-separated, **no quote handling** (a field that starts with ``"`` keeps it),
the reference's header rule, columns, label lists and guids, and every text field (plus guids and
label names) through ``process_text`` (SentencePiece mode: ``preprocess_text(lower=do_lower_case)``;
WordPiece mode: unchanged, the tokenizer normalizes).

Where the reference would crash later, train on garbage or silently read garbage, we fail at once
with the file and line: a line that is not UTF-8, a row whose column count differs from the file's
header (or from the fixed count of a headerless file), an unknown label name, an STS-B score that is
not a number from 0 to 5 (``nan``, negative or above 5: the reference trains on it), and a file
without a single example (a header-only train file would otherwise end the training loop with
"End of sequence"), and a test file whose guids (they key the predictions) repeat or hold a tab
or line break. Lines end at "\\n" only and are numbered so (see ``read_tsv``). The one exception
is QQP's labelled files, where the reference skips rows that have too few columns; we skip them too
and log how many.

Test files. GLUE's own test files carry no labels (and a different column layout for CoLA, SST-2, QQP,
QNLI); their examples get ``label=None``. A test file in the *labelled* layout (its header names the
label column, e.g. the re-split SST-2/RTE/WNLI files people evaluate on) is read like a dev file, labels
included. The choice is made per file from its header, and logged.

Processors know files, columns and labels only; which task name uses which processor, and each task's
metrics and recipe, are in data_prep/classification/glue_tasks.py. ``AxProcessor`` reads GLUE's
diagnostic set (``diagnostic/diagnostic.tsv``: ``index sentence1 sentence2``), predicted with an MNLI
model, so it has MNLI's labels and only a test split. Every file is read through ``tf.io.gfile`` (``gs://`` works).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from typing import Iterator

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.text_lines import split_lines, tab_or_line_break
from data_prep.common.text_fields import normalize_field
from data_prep.common.user_errors import opening_user_file

SPLITS = ("train", "dev", "test")


class GlueDataError(UserError, ValueError):
    """A GLUE file is missing or malformed; the message names the file (and line) and what was expected."""


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One GLUE example.

    guid: the GLUE index (column 0) where the file has one, else "<split>-<i>" with i the 0-based line
      index in the file (the reference's rule; GLUE submissions are keyed by the test guids).
    text_a / text_b: processed text; text_b is None for single-sentence tasks.
    label: a label name from ``get_labels()``, a float for STS-B, or None when the file has no labels
      (GLUE test files); features then use label id 0, the reference's placeholder.
    """

    guid: str
    text_a: str
    text_b: str | None
    label: str | float | None


@dataclasses.dataclass(frozen=True)
class RowLayout:
    """Where the fields of one file layout live (column indices; negative counts from the end).

    has_header: the first line is a header (skipped; it fixes the column count of every row).
    num_columns: the column count of a headerless file.
    guid: column of the guid, or None for "<split>-<line index>".
    label: column of the label, or None for an unlabelled layout.
    label_header: the header cell naming the label column (used to recognise labelled test files).
    """

    text_a: int
    text_b: int | None = None
    label: int | None = None
    guid: int | None = None
    has_header: bool = True
    num_columns: int | None = None
    label_header: str | None = None


class GlueProcessor:
    """Base class: reads one task's TSV files into ``InputExample`` lists.

    Subclasses set ``task_dir``, ``labels`` (None for regression), ``split_files``, ``labelled_layout``
    (train/dev) and ``test_layout`` (GLUE's unlabelled test file); regression tasks also set
    ``score_range``, the closed interval of valid scores.
    """

    task_dir: str = ""
    labels: tuple[str, ...] | None = ("0", "1")
    split_files: dict[str, str] = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
    labelled_layout: RowLayout
    test_layout: RowLayout
    score_range: tuple[float, float]
    skip_short_rows: bool = False

    def __init__(self, use_spm: bool = True, do_lower_case: bool = True):
        self.use_spm = use_spm
        self.do_lower_case = do_lower_case

    # -- public API --------------------------------------------------------------------------------

    @property
    def is_regression(self) -> bool:
        """True for STS-B: one real-valued output, float label ids."""
        return self.labels is None

    @classmethod
    def get_labels(cls) -> list[str] | None:
        """Label names in id order (label id = index), or None for regression."""
        return None if cls.labels is None else list(cls.labels)

    @classmethod
    def num_labels(cls) -> int:
        """Size of the classifier output: the number of labels, 1 for regression."""
        return 1 if cls.labels is None else len(cls.labels)

    def split_path(self, data_dir: str, split: str) -> str:
        """Path of the existing file read for ``split`` ("train", "dev" or "test").

        Raises GlueDataError if the task has no such split or the file does not exist.
        """
        if split not in self.split_files:
            raise GlueDataError(f"task directory {self.task_dir!r} has no {split!r} split; "
                                f"available: {sorted(self.split_files)}")
        path = os.path.join(data_dir, self.task_dir, self.split_files[split])
        if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
            raise GlueDataError(f"{split} file of task directory {self.task_dir!r} not found: {path} "
                                f"(expected <data_dir>/{self.task_dir}/{self.split_files[split]})")
        return path

    def get_examples(self, data_dir: str, split: str) -> list[InputExample]:
        """All examples of ``split`` read from ``split_path(data_dir, split)``."""
        path = self.split_path(data_dir, split)
        rows = list(read_tsv(path))
        layout = self.labelled_layout if split != "test" else self._test_file_layout(path, rows)
        return self._create_examples(path, rows, split, layout)

    def process_text(self, text: str) -> str:
        """The reference's normalization of every read field (SP mode: ``preprocess_text``)."""
        return normalize_field(text, self.use_spm, self.do_lower_case)

    # -- internals ---------------------------------------------------------------------------------

    def _test_file_layout(self, path: str, rows: list[tuple[int, list[str]]]) -> RowLayout:
        """The labelled layout if the test file's header names the label column, else GLUE's test layout."""
        labelled = self.labelled_layout
        if rows and labelled.has_header and labelled.label_header is not None:
            header = rows[0][1]
            in_range = -len(header) <= labelled.label < len(header)
            if in_range and header[labelled.label] == labelled.label_header:
                logging.info("%s: header names the label column %r; reading gold labels",
                             path, labelled.label_header)
                return labelled
        return self.test_layout

    def _create_examples(self, path: str, rows: list[tuple[int, list[str]]], split: str,
                         layout: RowLayout) -> list[InputExample]:
        if layout.has_header:
            if not rows:
                raise GlueDataError(f"{path}: empty file; expected a header line")
            expected_columns = len(rows[0][1])
            rows = rows[1:]
        else:
            expected_columns = layout.num_columns
        examples = []
        num_skipped = 0
        guid_lines: dict[str, int] = {}
        for line_number, row in rows:
            if len(row) != expected_columns:
                if self.skip_short_rows and layout.label is not None and len(row) < expected_columns:
                    num_skipped += 1
                    continue
                raise GlueDataError(f"{path}:{line_number}: expected {expected_columns} tab-separated "
                                    f"columns, found {len(row)}")
            example = self._example(path, line_number, row, split, layout)
            if split == "test" and layout.guid is not None:
                _check_test_guid(path, line_number, example.guid, guid_lines)
            examples.append(example)
        if num_skipped:
            logging.warning("%s: skipped %d rows with fewer than %d columns (as the reference does)",
                            path, num_skipped, expected_columns)
        if not examples:
            found = (f"all {num_skipped} rows have fewer than {expected_columns} columns" if num_skipped
                     else "the file has only its header line" if layout.has_header
                     else "the file is empty")
            raise GlueDataError(f"{path}: no examples ({found}); expected at least one row of "
                                f"{expected_columns} tab-separated columns")
        return examples

    def _example(self, path: str, line_number: int, row: list[str], split: str,
                 layout: RowLayout) -> InputExample:
        if layout.guid is None:
            guid = f"{split}-{line_number - 1}"
        else:
            guid = self.process_text(row[layout.guid])
        text_a = self.process_text(row[layout.text_a])
        text_b = None if layout.text_b is None else self.process_text(row[layout.text_b])
        label = None if layout.label is None else self._label(path, line_number, row[layout.label])
        return InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label)

    def _label(self, path: str, line_number: int, cell: str) -> str | float:
        if self.labels is None:
            return self._score(path, line_number, cell)
        label = self.process_text(cell)
        if label not in self.labels:
            raise GlueDataError(f"{path}:{line_number}: unknown label {cell!r}; expected one of "
                                f"{list(self.labels)}")
        return label

    def _score(self, path: str, line_number: int, cell: str) -> float:
        """The regression label of one row: a finite number within ``score_range``."""
        low, high = self.score_range
        try:
            score = float(cell)
        except ValueError:
            score = math.nan
        if not (math.isfinite(score) and low <= score <= high):
            raise GlueDataError(f"{path}:{line_number}: expected a score from {low:g} to {high:g}, "
                                f"found {cell!r}")
        return score


def _check_test_guid(path: str, line_number: int, guid: str, guid_lines: dict[str, int]) -> None:
    """A test guid keys its prediction (a cell of submit_results.tsv): no tab or line break in it,
    and no guid twice in the file (``guid_lines``: guid -> its line, so far)."""
    breaking = tab_or_line_break(guid)
    if breaking:
        raise GlueDataError(f"{path}:{line_number}: guid {guid!r} holds {breaking}; a guid is a "
                            "cell of submit_results.tsv")
    first = guid_lines.setdefault(guid, line_number)
    if first != line_number:
        raise GlueDataError(f"{path}:{line_number}: guid {guid!r} appears twice, on lines {first} "
                            f"and {line_number}; guids must be unique: they key the predictions "
                            "in submit_results.tsv")


def read_tsv(path: str) -> Iterator[tuple[int, list[str]]]:
    """Yields (1-based line number, cells) for every line of a UTF-8 TSV file, quotes kept literally.

    Cells are split at tabs with no quote handling, as the reference's
    ``csv.reader(delimiter="\\t", quotechar=None)`` splits them (an empty line has no cells). A line
    ends at "\\n" or "\\r\\n" only, as every reader of the project splits files
    (albert_tf/files/text_lines.py: a lone "\\r", U+2028, U+0085, ... are characters of a cell;
    a file with old Mac line endings, "\\r" and no "\\n", reads too), and every line number this
    module reports counts lines that way. The file is read whole through ``tf.io.gfile``; a line
    that is not valid UTF-8 raises ``GlueDataError`` naming the file, the line and the offending
    byte.
    """
    with opening_user_file(path), tf.io.gfile.GFile(path, "rb") as handle:
        data = handle.read()
    for line_number, raw_line in enumerate(split_lines(data), start=1):
        try:
            line = raw_line.decode("utf-8")
        except UnicodeDecodeError as error:
            raise GlueDataError(
                f"{path}:{line_number}: not valid UTF-8 (byte {raw_line[error.start]:#04x} at byte "
                f"{error.start + 1} of the line: {error.reason}); GLUE files are UTF-8 text") from None
        yield line_number, line.split("\t") if line else []


# -- the tasks -------------------------------------------------------------------------------------

_NLI_LABELS = ("contradiction", "entailment", "neutral")


class ColaProcessor(GlueProcessor):
    """CoLA: train/dev have no header (source, label, original label, sentence); test has one."""

    task_dir = "CoLA"
    labelled_layout = RowLayout(text_a=3, label=1, has_header=False, num_columns=4)
    test_layout = RowLayout(text_a=1, guid=0)


class Sst2Processor(GlueProcessor):
    """SST-2: ``sentence label``; GLUE test: ``index sentence``."""

    task_dir = "SST-2"
    labelled_layout = RowLayout(text_a=0, label=1, label_header="label")
    test_layout = RowLayout(text_a=1, guid=0)


class MrpcProcessor(GlueProcessor):
    """MRPC: ``Quality #1_ID #2_ID #1_String #2_String``; GLUE test starts with ``index`` instead."""

    task_dir = "MRPC"
    labelled_layout = RowLayout(text_a=3, text_b=4, label=0, label_header="Quality")
    test_layout = RowLayout(text_a=3, text_b=4, guid=0)


class StsbProcessor(GlueProcessor):
    """STS-B: sentences in columns 7 and 8, the float score last (absent from GLUE test)."""

    task_dir = "STS-B"
    labels = None
    score_range = (0.0, 5.0)  # the similarity scale of the STS-B annotations
    labelled_layout = RowLayout(text_a=7, text_b=8, label=-1, guid=0, label_header="score")
    test_layout = RowLayout(text_a=7, text_b=8, guid=0)


class QqpProcessor(GlueProcessor):
    """QQP: ``id qid1 qid2 question1 question2 is_duplicate``; GLUE test: ``id question1 question2``.

    Labelled rows with missing columns are skipped (and counted), as in the reference.
    """

    task_dir = "QQP"
    labelled_layout = RowLayout(text_a=3, text_b=4, label=5, guid=0, label_header="is_duplicate")
    test_layout = RowLayout(text_a=1, text_b=2, guid=0)
    skip_short_rows = True


class MnliProcessor(GlueProcessor):
    """MNLI matched: sentences in columns 8 and 9, ``gold_label`` last."""

    task_dir = "MNLI"
    labels = _NLI_LABELS
    split_files = {"train": "train.tsv", "dev": "dev_matched.tsv", "test": "test_matched.tsv"}
    labelled_layout = RowLayout(text_a=8, text_b=9, label=-1, guid=0, label_header="gold_label")
    test_layout = RowLayout(text_a=8, text_b=9, guid=0)


class MisMnliProcessor(MnliProcessor):
    """MNLI mismatched: MNLI's train file, the mismatched dev/test files."""

    split_files = {"train": "train.tsv", "dev": "dev_mismatched.tsv", "test": "test_mismatched.tsv"}


class QnliProcessor(GlueProcessor):
    """QNLI: ``index question sentence label``."""

    task_dir = "QNLI"
    labels = ("entailment", "not_entailment")
    labelled_layout = RowLayout(text_a=1, text_b=2, label=-1, guid=0, label_header="label")
    test_layout = RowLayout(text_a=1, text_b=2, guid=0)


class RteProcessor(QnliProcessor):
    """RTE: ``index sentence1 sentence2 label`` (labels as QNLI)."""

    task_dir = "RTE"


class WnliProcessor(GlueProcessor):
    """WNLI: ``index sentence1 sentence2 label`` with labels "0"/"1"."""

    task_dir = "WNLI"
    labelled_layout = RowLayout(text_a=1, text_b=2, label=-1, guid=0, label_header="label")
    test_layout = RowLayout(text_a=1, text_b=2, guid=0)


class AxProcessor(GlueProcessor):
    """GLUE diagnostic (AX): ``index sentence1 sentence2``, predict-only, with MNLI's labels."""

    task_dir = "diagnostic"
    labels = _NLI_LABELS
    split_files = {"test": "diagnostic.tsv"}
    test_layout = RowLayout(text_a=1, text_b=2, guid=0)
    labelled_layout = test_layout  # never used: AX has only the unlabelled test split
