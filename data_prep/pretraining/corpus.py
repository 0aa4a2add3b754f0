"""Streams the raw pretraining corpus as chunks of whole documents, read lazily.

Format contract (the reference's): one sentence per line, a blank line between documents, UTF-8.
Unlike the reference, the end of an input file also ends the current document, so files holding one
document each need no trailing blank line. Files are read line by line, so memory holds one chunk of
documents at a time, never the corpus. Paths may be local or anything tf.io.gfile reads (gs://...).
Lines end at "\\n" (or "\\r\\n") only, as every reader of the project splits them
(albert_tf/files/text_lines.py): U+2028, U+0085, "\\f", a lone "\\r", ... are characters of a
sentence, never sentence or document boundaries; a file with old Mac line endings ("\\r" and no
"\\n") reads too.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import tensorflow as tf
from absl import logging

from albert_tf.errors.user_error import UserError
from albert_tf.files.text_lines import TEXT_CHECK_BYTES, iter_file_lines, not_text_reason
from data_prep.common.user_errors import opening_user_file


class CorpusError(UserError, ValueError):
    """The input corpus cannot be used; the message names the pattern, file or line."""


def _check_text_head(path: str, head: bytes) -> None:
    """CorpusError when ``head``, the start of ``path``, shows a file that is not UTF-8 text:
    refused even with --skip_invalid_lines, whose skipping would keep the lines of binary data
    that happen to decode (hundreds of "sentences" from a TFRecord)."""
    reason = not_text_reason(head)
    if reason:
        raise CorpusError(f"{path} is {reason}; the corpus is UTF-8 text files, one sentence per "
                          "line")


def check_local_text_files(files: list[str]) -> None:
    """The start of every local input file checked before any work (CorpusError naming the first
    that is not text), so that a stray binary file matched by a glob stops the run at once, not
    when the reader reaches it; remote files (gs://) are checked as they are read."""
    for path in files:
        if "://" not in path:
            with opening_user_file(path), open(path, "rb") as handle:
                _check_text_head(path, handle.read(TEXT_CHECK_BYTES))


@dataclasses.dataclass
class DocumentChunk:
    """``documents``: consecutive documents of the corpus, each a list of raw (decoded) non-blank lines;
    ``index``: position of the chunk in the corpus (0, 1, ...), which seeds its random generator."""

    index: int
    documents: list[list[str]]


class CorpusReader:
    """Reads ``files`` lazily; counts documents and skipped lines as it goes.

    skip_invalid_lines: a line that is not valid UTF-8 is skipped and counted (a warning names the
    first one) instead of stopping the run with an error naming its file and line number.
    """

    def __init__(self, files: list[str], skip_invalid_lines: bool = False):
        self.files = files
        self.skip_invalid_lines = skip_invalid_lines
        self.documents_read = 0
        self.invalid_lines_skipped = 0

    def documents(self) -> Iterator[list[str]]:
        """Each document as its list of non-blank decoded lines (trailing newline removed)."""
        for path in self.files:
            document: list[str] = []
            for line in self._lines(path):
                if line.strip():
                    document.append(line)
                elif document:
                    yield self._counted(document)
                    document = []
            if document:
                yield self._counted(document)

    def chunks(self, chunk_documents: int) -> Iterator[DocumentChunk]:
        """Consecutive documents in chunks of ``chunk_documents`` (the last one may be smaller)."""
        chunk = DocumentChunk(0, [])
        for document in self.documents():
            chunk.documents.append(document)
            if len(chunk.documents) == chunk_documents:
                yield chunk
                chunk = DocumentChunk(chunk.index + 1, [])
        if chunk.documents:
            yield chunk

    def _counted(self, document: list[str]) -> list[str]:
        self.documents_read += 1
        return document

    def _lines(self, path: str) -> Iterator[str]:
        with opening_user_file(path), tf.io.gfile.GFile(path, "rb") as handle:
            _check_text_head(path, handle.read(TEXT_CHECK_BYTES))
            handle.seek(0)
            for line_number, raw in enumerate(iter_file_lines(handle), start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    if not self.skip_invalid_lines:
                        raise CorpusError(
                            f"{path}, line {line_number}: not valid UTF-8 ({err.reason} at byte "
                            f"{err.start} of the line); fix the file or pass --skip_invalid_lines"
                        ) from err
                    if self.invalid_lines_skipped == 0:
                        logging.warning("%s, line %d: not valid UTF-8, skipped (--skip_invalid_lines)",
                                        path, line_number)
                    self.invalid_lines_skipped += 1
                    continue
                yield text
