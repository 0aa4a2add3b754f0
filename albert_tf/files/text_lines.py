"""A user's text file line by line, as every reader of both packages splits it, and the names
(labels, tags, example ids) that the project writes into lines and tab-separated cells.

Lines. A line ends at "\\n"; a "\\r" just before it is part of the line break ("\\r\\n"), and so
is a "\\r" that ends the file. Nothing else ends a line: the other characters ``str.splitlines``
breaks at (U+2028, U+2029, U+0085, "\\x1c" to "\\x1e", "\\v", "\\f") and a lone "\\r" inside a
line are characters of that line, as they are to a JSON parser, a CSV reader or ``wc -l``. One
exception keeps old files readable: a file that holds no "\\n" at all but holds "\\r" (old Mac line
endings, as Excel for Mac still writes CSV) ends its lines at "\\r". Line numbers count lines that
way, from 1.

- ``split_lines``: the lines of a whole text (``str`` or ``bytes``), optionally with their line
  breaks (for a CSV reader, whose quoted cells may span lines);
- ``iter_file_lines``: the lines of a binary file handle, read lazily (the pretraining corpus);
- ``line_number_at``: the line that holds a character offset (e.g. a decoding error's byte);
- ``not_text_reason``: why the first bytes of a file show it is not UTF-8 text (compressed, UTF-16,
  or binary such as a TFRecord or a model), so that a reader refuses it even where it may skip a
  few undecodable lines.

Names. A label, tag or example id is written as a cell of a tab-separated line
(``submit_results.tsv``, ``test_results.tsv``' header) or as one line of a file (``labels.txt``,
``tags.txt``): ``tab_or_line_break`` finds a character in it that would split that cell or line
for some reader: a tab, or any character ``str.splitlines`` breaks at.
"""

from __future__ import annotations

from typing import BinaryIO, Iterator, TypeVar

Text = TypeVar("Text", str, bytes)

# Every character str.splitlines ends a line at, and the tab: none may appear in a name written
# into a tab-separated line or as a line of its own.
_SPLITTING = frozenset("\t\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_NAMES = {"\t": "a tab", "\n": "a line break (\\n)", "\r": "a carriage return (\\r)"}
# What iter_file_lines reads at a time.
_CHUNK_BYTES = 1 << 20


def _breaks(text: str | bytes) -> tuple:
    """("\\n", "\\r") in the type of ``text``."""
    return ("\n", "\r") if isinstance(text, str) else (b"\n", b"\r")


def _line_end(text: str | bytes) -> str | bytes:
    """What ends the lines of ``text``: "\\n", or "\\r" in a file with no "\\n" but a "\\r"."""
    newline, carriage_return = _breaks(text)
    return carriage_return if newline not in text and carriage_return in text else newline


def split_lines(text: Text, keepends: bool = False) -> list[Text]:
    """The lines of ``text`` (see the module doc): without their line breaks, or with them
    (``keepends``, "\\r\\n" kept whole). An empty text has no line; a text that ends with a line
    break has no empty last line."""
    end = _line_end(text)
    _, carriage_return = _breaks(text)
    pieces = text.split(end)
    last = pieces.pop()
    if keepends:
        lines = [piece + end for piece in pieces]
        return lines + [last] if last else lines
    lines = [piece[:-1] if piece.endswith(carriage_return) else piece for piece in pieces]
    if last.endswith(carriage_return):
        last = last[:-1]
    return lines + [last] if last else lines


def iter_file_lines(handle: BinaryIO, chunk_bytes: int = _CHUNK_BYTES) -> Iterator[bytes]:
    """The lines of a file opened in binary mode (``open(path, "rb")``, ``tf.io.gfile.GFile``),
    without their line breaks, read ``chunk_bytes`` at a time (see the module doc): memory holds a
    chunk and one line (a file without "\\n" is one line until its end shows whether it ends its
    lines at "\\r").

    The handle is read with ``read``, never iterated: iterating a ``tf.io.gfile.GFile`` drops every
    "\\r" of a line (TensorFlow's ReadLine), so an old Mac file would read as one line."""
    parts: list[bytes] = []  # the line read so far, its "\n" not yet met
    seen_newline = False
    while True:
        chunk = handle.read(chunk_bytes)
        if not chunk:
            break
        if b"\n" not in chunk:
            parts.append(chunk)
            continue
        seen_newline = True
        *lines, last = b"".join(parts + [chunk]).split(b"\n")
        parts = [last]
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    pending = b"".join(parts)
    if seen_newline:
        if pending.endswith(b"\r"):
            pending = pending[:-1]
        if pending:
            yield pending
    else:
        yield from split_lines(pending)


def line_number_at(text: str | bytes, offset: int) -> int:
    """The number (from 1) of the line of ``text`` that holds the character (byte) at ``offset``."""
    return text.count(_line_end(text), 0, offset) + 1


def tab_or_line_break(name: str) -> str | None:
    """A description of the first tab or line-splitting character in ``name`` ("a tab",
    "a line break (\\n)", "U+2028", ...), or None when it holds none."""
    for char in name:
        if char in _SPLITTING:
            return _NAMES.get(char, f"U+{ord(char):04X}")
    return None


# How much of a file ``not_text_reason`` looks at, and the signatures it names.
TEXT_CHECK_BYTES = 8192
_SIGNATURES = ((b"\x1f\x8b", "gzip-compressed: decompress it first (gunzip)"),
               (b"BZh", "bzip2-compressed: decompress it first (bunzip2)"),
               (b"\xfd7zXZ\x00", "xz-compressed: decompress it first (unxz)"),
               (b"PK\x03\x04", "a zip archive: extract its files first"),
               (b"\xff\xfe", "UTF-16 text: save it as UTF-8"),
               (b"\xfe\xff", "UTF-16 text: save it as UTF-8"))


def not_text_reason(head: bytes) -> str | None:
    """Why a file whose first bytes are ``head`` (``TEXT_CHECK_BYTES`` of them) is not UTF-8 text,
    or None: a compression or UTF-16 signature, or a NUL byte, which no text file holds (a TFRecord,
    a SentencePiece model, a checkpoint). Skipping its undecodable lines would train on the lines of
    binary data that happen to decode."""
    for signature, reason in _SIGNATURES:
        if head.startswith(signature):
            return reason
    if b"\x00" in head:
        return "a binary file (it holds NUL bytes; a TFRecord, a model?), not text"
    return None
