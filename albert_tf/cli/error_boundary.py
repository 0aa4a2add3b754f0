"""The error boundary at the top of every command line: ``error_boundary.run(main)``, not
``app.run(main)``. It tells a user's mistake from a bug of albert_tf.

A user's mistake ends in one short message on stderr, ``<program>: error: <what is wrong>``, and
exit status 1, never a traceback. User errors are:

- ``UserError`` (albert_tf/errors/user_error.py), the base of every project error class that
  reports a mistake in the user's data, flags, paths or checkpoints (``ConfigError``,
  ``RecordFileError``, ``UserFileError``, ...), absl's ``app.UsageError`` and flag errors;
- the two TensorFlow errors whose cause is the user's data or machine: ``DataLossError`` (a corrupt
  TFRecord, which TensorFlow reports without a file name, traced to its file by
  albert_tf/files/records.py) and ``ResourceExhaustedError`` (out of memory, with a hint), their
  graph tracebacks cut down to the message. TensorFlow's other errors that user data causes are
  turned into user errors where the data is read (e.g. records of another length, named by their
  file: ``records.reading_records`` around the Trainer's loops).

Anything else is a bug (a plain ``ValueError``, ``KeyError``, ``OSError`` ... of our code, any
other TensorFlow error): its traceback is printed as Python prints it, followed by the line
``<program>: this is a bug in albert_tf, not a mistake in your input: ...``, exit status 1.
``ALBERT_TF_TRACEBACK=1`` in the environment shows the traceback of user errors too.

A command that ends with an error or a stop removes the directories its pre-flight check created
and nothing was written into (albert_tf/files/created_directories.py): a refused run leaves no
empty --output_dir behind.

A command whose stdout is a pipe that its reader closed (``python -m albert_tf.paper_tables --plan
... | head``) stops quietly at its next write, with the status 141 of a process ended by SIGPIPE, as
the shell's tools do; --help and --print_recipe end with status 0 then
(albert_tf/cli/command_line.py).

Ctrl-C and SIGTERM (``kill``, a job scheduler's stop) end the same way in every command: the
cleanup runs, one line ``<program>: stopped by SIGTERM; <what is left>``, exit status 130 (Ctrl-C)
or 143 (SIGTERM); before main, while the command starts, albert_tf/cli/command_line.py stops it
the same way at once (``... stopped by SIGTERM while starting; nothing was written``), and the
boundary's SIGTERM handler replaces that one directly, so that no SIGTERM meets the default action
(a silent exit) in between. Only within ``sigterm_ends_at_once`` (a training script's training
loop) does SIGTERM keep its default action: the process ends at once, its checkpoints are
complete files and its run lock is recognised as stale by the next run.

``run`` also silences TensorFlow's Python INFO lines (e.g. each checkpoint save's "Sharding callback
duration"), which would interleave with the progress display; ``--verbosity=1`` keeps them. Checks
given as ``checks`` run after the flags are parsed and before ``main``: a run that cannot work fails
in its first seconds, before any model is built. ``logger_levels`` sets logger levels for the
length of a block (the Beam code of data_prep quiets Beam's loggers with it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import traceback
from typing import Any, Callable, Iterator, Mapping, NoReturn, Sequence

import tensorflow as tf
from absl import app
from absl import logging as absl_logging

from albert_tf.cli import command_line
from albert_tf.errors.user_error import UserError
from albert_tf.files import created_directories
from albert_tf.files.records import record_file_error

TRACEBACK_VARIABLE = "ALBERT_TF_TRACEBACK"

_TENSORFLOW_DIR = os.path.dirname(tf.__file__) + os.sep
# The line after a bug's traceback (after "<program>: ").
BUG_LINE = ("this is a bug in albert_tf, not a mistake in your input: please report it with the "
            "traceback above")
_OUT_OF_MEMORY_HINT = ("out of memory: lower the batch size, or use --gradient_accumulation_steps "
                       "or --dtype=bfloat16")
_DISK_FULL_HINT = "the disk is full: free space or write elsewhere"
# Pieces of TensorFlow's messages that name graph internals, not the problem.
_FUNCTION_NODE = re.compile(r"\{\{function_node [^}]*\}\}\s*")
_OP_SUFFIX = re.compile(r"\s*\[Op:[^\]]*\](\s*name:.*)?$")
_USER_FUNCTION = re.compile(r"Error in user-defined function passed to .*? transformation with "
                            r"iterator: \S+: ")
_NOISE_LINE = re.compile(r"^(\s*\[\[.*|Graph execution error:|Detected at node .*|"
                         r"<stack traces unavailable>|\s+File \".*|\s{4,}\S.*)$")


# The exit status of a command whose stdout reader stopped reading (| head): 128 + SIGPIPE.
STDOUT_CLOSED_STATUS = 141

# What a training script leaves when stopped (SIGTERM within its training loop ends it at once).
TRAINING_STOPPED = ("the checkpoints saved so far are kept; rerun the same command to resume from "
                    "the latest")


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a job scheduler's stop), raised like Ctrl-C's KeyboardInterrupt so that
    the run stops and cleans up (temporary outputs removed) the same way."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def sigterm_stops_like_ctrl_c() -> Iterator[None]:
    """Within the block SIGTERM raises ``Terminated``; after it, SIGTERM has the handler it had
    before the command started. Entered while the command starts, it replaces the start-up handler
    (albert_tf/cli/command_line.py) at once, which ``command_line.start_up_over`` then leaves."""
    previous = command_line.handler_before_start_up(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def sigterm_ends_at_once() -> Iterator[None]:
    """Within the block SIGTERM has its default action: the process ends at once, without the
    cleanup and the line of a stop. For long TensorFlow calls, a training script's training loop:
    Python runs a signal handler only between bytecodes, so a stop would wait until the running
    call returns (up to --iterations_per_loop steps later). Its checkpoints are complete files and
    the next run takes over its run lock as stale. The handler before comes back after the block."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(main: Callable[[list[str]], Any], checks: Sequence[Callable[[], None]] = (),
        flags_parser: Callable[[list[str]], list[str]] = command_line.parse_flags,
        when_stopped: str = "no partial output was left") -> None:
    """``app.run(main)`` behind the error boundary; ``checks`` run first, after flag parsing.

    ``flags_parser``: absl's parsing by default (an unknown flag is a one-line error); it returns
    the arguments that ``main`` receives. The command parsed its flags before importing TensorFlow
    (albert_tf/cli/command_line.py); absl parses them again here, with the same result.
    ``when_stopped``: what a stop by Ctrl-C or SIGTERM leaves, said after "stopped by ...;"."""
    app.run(guarded(main, checks, when_stopped), flags_parser=flags_parser)


def guarded(main: Callable[[list[str]], Any], checks: Sequence[Callable[[], None]] = (),
            when_stopped: str = "no partial output was left") -> Callable[[list[str]], Any]:
    """``main`` wrapped for ``app.run``: quiet TensorFlow logging, ``checks``, then ``main``; a user
    error exits with status 1 after one line on stderr, a bug after its traceback and a line asking
    to report it (see the module doc). Ctrl-C and SIGTERM stop the run the same way (``finally``
    blocks run, temporary outputs are removed), print ``<program>: stopped by Ctrl-C;
    <when_stopped>`` and exit with the shell's status for such a stop (130, SIGTERM 143), without a
    traceback; SIGTERM within ``sigterm_ends_at_once`` ends the process at once."""

    def guarded_main(argv: list[str]) -> Any:
        quiet_tensorflow_logging()  # (a stop here is still the start-up's: command_line.py)
        created_directories.forget()
        try:
            with sigterm_stops_like_ctrl_c():  # SIGTERM: from the start-up handler to this one
                command_line.start_up_over()  # Ctrl-C: KeyboardInterrupt again, handled below
                for check in checks:
                    check()
                result = main(argv)
                sys.stdout.flush()  # a reader that has gone is found here, not at exit
                return result
        except KeyboardInterrupt as stop:
            created_directories.remove_those_left_empty()
            signum = signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT
            cause = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
            print(f"{command_line.program_name()}: stopped by {cause}; {when_stopped}",
                  file=sys.stderr, flush=True)
            sys.stdout.flush()
            # The finally blocks have run (temporary outputs removed); exiting at once skips the
            # interpreter's joins of leftover threads, which can wait forever after a stop (a
            # process pool's result reader blocked on a message its killed worker never finished).
            os._exit(128 + signum)
        except Exception as error:  # noqa: BLE001 - sorted into user errors and bugs below
            created_directories.remove_those_left_empty()
            if isinstance(error, BrokenPipeError) and command_line.stdout_is_closed():
                # The reader of stdout stopped (| head): quiet, with the status of a process
                # that SIGPIPE ends, as the shell's tools do (what came after is not done).
                command_line.discard_stdout()
                sys.exit(STDOUT_CLOSED_STATUS)
            message = user_error_message(error)
            if message is None:
                report_bug(error)
            if os.environ.get(TRACEBACK_VARIABLE, "") not in ("", "0"):
                sys.stdout.flush()
                traceback.print_exception(error, file=sys.stderr)
            command_line.exit_with_message(message)

    return guarded_main


def quiet_tensorflow_logging() -> None:
    """TensorFlow's Python code logs warnings and errors only, unless --verbosity is 1 or more.

    TensorFlow logs through its "tensorflow" logger and, in places such as the checkpoint saver,
    through absl's logger, which the scripts' own INFO lines share: those are filtered by source.
    """
    if absl_logging.get_verbosity() >= absl_logging.DEBUG:
        return
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    absl_logging.get_absl_handler().addFilter(_drop_tensorflow_info)


@contextlib.contextmanager
def logger_levels(levels: Mapping[str, int]) -> Iterator[None]:
    """Within the block each named logger ("" is the root logger) has the given level; the previous
    levels come back after it."""
    previous = {name: logging.getLogger(name).level for name in levels}
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, level in previous.items():
            logging.getLogger(name).setLevel(level)


def _drop_tensorflow_info(record: logging.LogRecord) -> bool:
    """False (drop) for a record below WARNING logged by TensorFlow's own Python code."""
    return record.levelno >= logging.WARNING or not record.pathname.startswith(_TENSORFLOW_DIR)


def report_bug(error: BaseException) -> NoReturn:
    """Prints ``error``'s traceback as Python does, then the line asking to report the bug, and
    exits with status 1."""
    sys.stdout.flush()
    traceback.print_exception(error, file=sys.stderr)
    print(f"{command_line.program_name()}: {BUG_LINE}", file=sys.stderr, flush=True)
    sys.exit(1)


def user_error_message(error: BaseException) -> str | None:
    """The one-line message of a user error; None for a bug (see the module doc)."""
    if isinstance(error, (UserError, app.UsageError)) or command_line.is_flag_error(error):
        return str(error) or type(error).__name__
    if isinstance(error, (tf.errors.DataLossError, tf.errors.ResourceExhaustedError)):
        return _tensorflow_error_message(error)
    return None


def _tensorflow_error_message(error: tf.errors.OpError) -> str:
    """The cause of a TensorFlow error without graph internals; a corrupt record's file named."""
    cause = _condense_tensorflow_message(error.message)
    if isinstance(error, tf.errors.DataLossError):
        located = record_file_error(error)
        if located is not None:
            return str(located)
        return f"{cause}: an input file is truncated or corrupt"
    hint = _DISK_FULL_HINT if "No space left" in cause else _OUT_OF_MEMORY_HINT
    return f"{cause} ({hint}) ({TRACEBACK_VARIABLE}=1 shows where)"


def _condense_tensorflow_message(message: str) -> str:
    """The lines of a TensorFlow error message that state the problem, joined into one line."""
    lines = []
    for line in message.splitlines():
        if not line.strip() or _NOISE_LINE.match(line):
            continue
        line = _USER_FUNCTION.sub("", _FUNCTION_NODE.sub("", line))
        lines.append(_OP_SUFFIX.sub("", line).strip())
    return " ".join(line for line in lines if line) or message.strip()
