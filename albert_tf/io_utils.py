"""Small file helpers shared by every script: atomic writes, so nothing is ever half-written."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Iterator, IO


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Opens a temporary file beside ``path``; renames it to ``path`` only if the block succeeds.

    On an exception the temporary file is removed and ``path`` is left untouched.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp_path = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                                    dir=directory)
    os.close(fd)
    os.chmod(tmp_path, 0o666 & ~_current_umask())  # mkstemp makes 0600; use the usual mode
    try:
        kwargs = {} if "b" in mode else {"encoding": encoding}
        with open(tmp_path, mode, **kwargs) as handle:
            yield handle
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp_path)
        raise


def atomic_write_text(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` atomically."""
    with atomic_open(path, "w") as handle:
        handle.write(text)
