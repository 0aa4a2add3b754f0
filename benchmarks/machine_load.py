"""The machine's load, as every benchmark prints it beside its figures: a timing on a shared CPU
means little without it."""

from __future__ import annotations

import os


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages, e.g. "0.84 1.02 1.10"."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())
