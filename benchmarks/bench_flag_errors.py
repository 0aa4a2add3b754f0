"""Time from start to the answer of a flag mistake (and of --help), for every command.

    .venv/bin/python benchmarks/bench_flag_errors.py [--compare_with /path/to/older/checkout]

Each command runs ``--repeats`` times with a misspelt flag and with ``--help``, in a fresh process,
from this repository (and, with ``--compare_with``, from another checkout, e.g. a
``git worktree add`` of an older commit); prints the median wall time of each, the exit statuses,
and the ratio between the two checkouts. Prints figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMANDS = {
    "run_pretraining": ["run_pretraining.py"],
    "run_classifier": ["run_classifier.py"],
    "run_squad": ["run_squad.py"],
    "run_race": ["run_race.py"],
    "export_hub": ["-m", "albert_tf.export_hub"],
    "convert_checkpoint": ["-m", "albert_tf.convert_checkpoint"],
    "create_pretraining_data": ["-m", "data_prep.create_pretraining_data"],
    "data_prep.squad": ["-m", "data_prep.squad"],
}


def timed_run(checkout: str, launch: list[str], argument: str) -> tuple[float, int]:
    """(wall seconds, exit status) of one run of the command in ``checkout``."""
    env = dict(os.environ, PYTHONPATH=checkout, CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    started = time.perf_counter()
    completed = subprocess.run([sys.executable, *launch, argument], cwd=checkout, env=env,
                               capture_output=True, timeout=300)
    return time.perf_counter() - started, completed.returncode


def measure(checkout: str, repeats: int) -> dict[tuple[str, str], tuple[float, int]]:
    """{(command, case): (median seconds, exit status)} for the misspelt flag and --help."""
    figures = {}
    for name, launch in COMMANDS.items():
        for case, argument in (("misspelt flag", "--no_such_flag=1"), ("--help", "--help")):
            runs = [timed_run(checkout, launch, argument) for _ in range(repeats)]
            figures[(name, case)] = (statistics.median(t for t, _ in runs), runs[-1][1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare_with", help="another checkout of albert_tf to time as well")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    current = measure(REPO_ROOT, args.repeats)
    other = measure(os.path.abspath(args.compare_with), args.repeats) if args.compare_with else {}
    header = f"{'command':<26}{'case':<15}{'this checkout':>15}"
    if other:
        header += f"{'other checkout':>17}{'ratio':>8}"
    print(header)
    for key, (seconds, status) in current.items():
        line = f"{key[0]:<26}{key[1]:<15}{seconds:>8.2f} s (rc {status})"
        if other:
            other_seconds, other_status = other[key]
            line += f"{other_seconds:>9.2f} s (rc {other_status}){other_seconds / seconds:>7.1f}x"
        print(line)


if __name__ == "__main__":
    main()
