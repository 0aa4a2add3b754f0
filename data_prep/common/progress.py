"""The progress lines of a long data conversion, the same in every data command (pretraining data,
GLUE, SQuAD, RACE): a conversion of minutes shows it is moving, and how fast.

They go to absl's log (INFO, on stderr, beside the commands' other log lines), at most one every
``PROGRESS_INTERVAL_S`` seconds while the conversion runs, then one last line when it ends:

    I... 30000/60614 examples converted, 5970 examples/s
    I... done: 60614/60614 examples converted, 6012 examples/s
"""

from __future__ import annotations

import time
from typing import Callable

from absl import logging

PROGRESS_INTERVAL_S = 5.0


class Progress:
    """Counts ``done`` things of a conversion (``noun`` ``verb``: "examples converted") out of
    ``total`` (None: unknown, e.g. a corpus read as it streams) and logs the count and the rate."""

    def __init__(self, noun: str, verb: str, total: int | None = None):
        self._noun, self._verb, self._total = noun, verb, total
        self._start = self._last = time.monotonic()

    def update(self, done: int, detail: Callable[[], str] | None = None,
               final: bool = False) -> None:
        """Logs ``done`` (and ``detail()``, more counts, e.g. "12 documents read") if
        ``PROGRESS_INTERVAL_S`` have passed since the last line, or, with ``final``, the end's line.
        ``detail`` is called only for a line that is logged."""
        now = time.monotonic()
        if not final and now - self._last < PROGRESS_INTERVAL_S:
            return
        self._last = now
        count = f"{done}/{self._total}" if self._total is not None else str(done)
        more = f", {detail()}" if detail is not None else ""
        logging.info("%s%s %s %s%s, %.0f %s/s", "done: " if final else "", count, self._noun,
                     self._verb, more, done / max(now - self._start, 1e-9), self._noun)
