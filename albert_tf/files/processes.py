"""Whether a process of this machine still runs: what stale locks and stale temporaries are told by.

A process id alone is not enough: after a crash the id can be reused by another process. Where
``/proc`` exists (Linux) a process is also known by its start time (clock ticks after boot, field 22
of ``/proc/<pid>/stat``), which a reused id does not share. Processes of other machines cannot be
checked at all.
"""

from __future__ import annotations

import os

_PROC = "/proc"


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first); None when there is
    no such process or no /proc."""
    try:
        with open(os.path.join(_PROC, str(pid), "stat"), encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_start_time(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks after boot; None without /proc or without
    such a process."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None  # field 22; the list starts at field 3


def is_running(pid: int, start_time: int | None = None) -> bool:
    """Whether process ``pid`` of this machine runs (not a zombie) and, when ``start_time`` is given
    and /proc can tell, is the process that started then (not a later one given the same id)."""
    fields = _stat_fields(pid)
    if fields is not None:
        return fields[0] not in ("Z", "X") and start_time in (None, int(fields[19]))
    if os.path.isdir(os.path.join(_PROC, "self")):
        return False  # /proc works, and has no such process
    try:  # no /proc (macOS): the id is all there is
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user
        return True
    return True
