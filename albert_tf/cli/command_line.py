"""The command line of every command, parsed before TensorFlow is imported.

A command defines its flags (absl only, no TensorFlow), then calls ``parse_before_imports(__name__)``
and only then imports the library::

    flags.DEFINE_string("train_file", None, "...")
    flag_definitions.define("output_dir", ...)
    command_line.parse_before_imports(__name__)

    from albert_tf.training.trainer import Trainer  # noqa: E402 - after the flags are parsed

so that ``--help`` and a flag mistake are answered in a fraction of a second instead of after the
2-4 s TensorFlow takes to load. When the module runs as the program:

- ``--help`` (``-h``, ``--helpshort``, ``--helpfull``) prints every flag the command accepts, its own
  first, then the shared ones by group, then absl's logging flags, and exits with status 0 (also
  when its reader stops early, ``--help | head``: the rest is discarded, no traceback);
- a misspelt flag or a bad value ends in ``<program>: error: <absl's message, with its "Did you
  mean" suggestion>`` and exit status 1; so does a float flag given ``nan`` or ``inf``
  (``check_finite_floats``), in every command;
- TensorFlow is then imported with the lines its C++ libraries print while loading (oneDNN notices,
  "Could not find cuda drivers", a CUDA "failed call to cuInit" error on machines without a GPU)
  held back, and ``TF_CPP_MIN_LOG_LEVEL`` defaults to 2 (TensorFlow's C++ INFO and WARNING lines
  hidden while running). ``--verbosity=1`` (or more) shows all of them. If the import fails, the
  held-back lines are shown with the error.

Ctrl-C and SIGTERM while the command starts (its flags parsed, TensorFlow and the library
imported), before the error boundary runs its main (albert_tf/cli/error_boundary.py), end it at
once with one line, ``<program>: stopped by SIGTERM while starting; nothing was written``, and
the shell's status of such a stop (130, 143): no traceback of the import they interrupted (Ctrl-C)
and not a silent exit (SIGTERM). ``start_up_over`` gives both signals back their handlers, but
for one the error boundary has set already (its SIGTERM handler, set first so that no SIGTERM
meets the default action in between); a signal the command was started with ignored (``nohup``,
a shell's background job) stays ignored while it starts.

Imported as a module (by tests), ``parse_before_imports`` does nothing.
"""

from __future__ import annotations

import math
import os
import re
import signal
import sys
import tempfile
import textwrap
from typing import Any, Callable, NoReturn, Sequence

from absl import app, flags
from absl import logging as absl_logging  # noqa: F401 - defines --verbosity and the logging flags

from albert_tf.cli import flag_definitions

HELP_ARGUMENTS = ("--help", "-help", "-h", "-?", "--helpshort", "--helpfull")
_ABSL_GROUP = "Logging (absl)"
# absl's message for a required flag that was not given.
_REQUIRED_FLAG = re.compile(r"^flag --(\w+)=None: Flag --\1 must have a value other than None\.$")
_LINE_WIDTH = 100
# The stops a command handles while it starts, by the names its messages give them.
_STOPS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
# The handlers those signals had before the command started; empty once start-up is over.
_handlers_before_start_up: dict[int, Any] = {}
# Where stderr is: file descriptor 2, or its copy while TensorFlow's import holds fd 2 back.
_stderr_fd = 2


def program_name() -> str:
    """The name messages start with: the script's file name without its extension."""
    return os.path.splitext(os.path.basename(sys.argv[0]))[0] or "albert_tf"


def exit_with_message(message: str) -> NoReturn:
    """Prints ``<program>: error: <message>`` on stderr and exits with status 1."""
    print(f"{program_name()}: error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def parse_flags(argv: Sequence[str], positional_arguments: bool = False) -> list[str]:
    """absl's parsing of ``argv``: every flag must be known and, unless ``positional_arguments``,
    every argument a flag (a stray word, e.g. a value after a space instead of ``=``, is refused);
    a mistake is one line and exit 1.

    Returns ``argv[0]`` and the arguments that are not flags (those after ``--`` included), what
    ``main`` receives."""
    try:
        remaining = flags.FLAGS(list(argv))
    except flags.Error as error:
        exit_with_message(f"{flag_error_message(error)} (--help lists the flags)")
    if len(remaining) > 1 and not positional_arguments:
        exit_with_message(f"unexpected argument(s) {' '.join(remaining[1:])!r}: every setting is a "
                          "--flag=value")
    return remaining


def is_flag_error(error: BaseException) -> bool:
    """Whether ``error`` is absl's error for a flag (an unknown flag, a bad value, a validator that
    failed): a user's mistake (the error boundary, albert_tf/cli/error_boundary.py)."""
    return isinstance(error, flags.Error)


def flag_error_message(error: flags.Error) -> str:
    """absl's message on one line: its problems joined by "; ", a missing required flag said as
    ``--name is required``."""
    problems = [_REQUIRED_FLAG.sub(r"--\1 is required", line.strip())
                for line in str(error).splitlines() if line.strip()]
    return "; ".join(problems)


def parse_before_imports(module_name: str,
                         parser: Callable[[list[str]], list[str]] = parse_flags,
                         checks: Sequence[Callable[[], None]] = ()) -> None:
    """For the module running as the program (``module_name == "__main__"``): answers ``--help``
    (exit 0), parses the flags with ``parser`` and runs ``checks`` (functions of the flags alone
    that raise ``app.UsageError``; a mistake: one line, exit 1), exits 0 there for absl's
    ``--only_check_args`` (a job script's flags checked in a fraction of a second), then imports
    TensorFlow quietly. Does nothing for an imported module.

    Every float flag given is checked to be finite (``check_finite_floats``) before ``checks``."""
    if module_name != "__main__":
        return
    _stop_at_once_while_starting()
    arguments = sys.argv[1:sys.argv.index("--")] if "--" in sys.argv else sys.argv[1:]
    if any(argument in HELP_ARGUMENTS for argument in arguments):
        print_and_exit(help_text(sys.modules["__main__"].__doc__))
    parser(sys.argv)
    try:
        for check in (check_finite_floats, *checks):
            check()
    except app.UsageError as error:
        exit_with_message(str(error))
    if flags.FLAGS["only_check_args"].value:
        sys.exit(0)
    import_tensorflow_quietly(verbose=flags.FLAGS["verbosity"].value >= 1)


def check_finite_floats() -> None:
    """UsageError ``flag --<name>=nan: expected a finite value`` for a float flag given NaN or an
    infinity (``nan``, ``inf``, ``-inf``, in any case), in every command, whatever the flag's own
    range check: NaN passes every comparison (absl's ``lower_bound`` lets it through, and a
    run went on with it, e.g. run_classifier's --patience_tolerance chose an arbitrary patience
    and wrote NaN into a JSON file), and no float flag of albert_tf gives either a meaning. Only
    a value given (on the command line or in a --flagfile) is checked: a default may be NaN for
    "unset" (run_classifier's --threshold_to_export), but NaN given explicitly is refused like
    any other non-finite value."""
    values = flags.FLAGS
    for name in values:
        flag = values[name]
        if (flag.present and isinstance(flag.parser, flags.FloatParser)
                and not math.isfinite(flag.value)):
            raise app.UsageError(f"flag --{flag.name}={flag.value}: expected a finite value")


def _stop_at_once_while_starting() -> None:
    """Ctrl-C and SIGTERM (unless ignored) end the process at once with one line, until
    ``start_up_over``."""
    for signum in _STOPS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            _handlers_before_start_up[signum] = signal.signal(signum, _stopped_while_starting)


def _stopped_while_starting(signum: int, frame: Any) -> None:
    """One line and the shell's status of the stop. Nothing needs cleaning up: the command has
    read its flags and imported modules, and writes nothing before the error boundary runs its
    checks and main."""
    line = f"{program_name()}: stopped by {_STOPS[signum]} while starting; nothing was written\n"
    os.write(_stderr_fd, line.encode())
    os._exit(128 + signum)


def handler_before_start_up(signum: int) -> Any:
    """The handler signal ``signum`` had before the command started (what it is now if the
    start-up left it alone)."""
    return _handlers_before_start_up.get(signum, signal.getsignal(signum))


def start_up_over() -> None:
    """Ctrl-C and SIGTERM get back the handlers they had before the command started, unless a
    handler was set in place of the start-up one since: the error boundary sets its SIGTERM
    handler first, then calls this before its checks and main, and handles both from then on."""
    for signum, handler in _handlers_before_start_up.items():
        if signal.getsignal(signum) is _stopped_while_starting:
            signal.signal(signum, handler)
    _handlers_before_start_up.clear()


def print_and_exit(text: str) -> NoReturn:
    """Prints ``text`` on stdout and exits with status 0 (--help, --print_recipe). When the reader
    stops reading first (``--help | head``), the rest is discarded: still status 0, no traceback."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        discard_stdout()
    sys.exit(0)


def stdout_is_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (``| head`` that printed its lines)."""
    try:
        import select  # pylint: disable=import-outside-toplevel
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), no file descriptor
        return False


def discard_stdout() -> None:
    """Sends what is left for stdout (buffered text included) to the null device: its reader has
    closed the pipe, and writing there again would raise BrokenPipeError (at exit too)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (AttributeError, OSError, ValueError):
        pass


def help_text(description: str | None) -> str:
    """The command's description, then every flag it accepts, grouped: its own, the shared ones
    (by the groups of flag_definitions.SECTIONS), absl's logging flags."""
    by_module = flags.FLAGS.flags_by_module_dict()
    shared = {flag.name: flag for flag in by_module.get(flag_definitions.__name__, [])}
    own = [flag for module, module_flags in by_module.items()
           if module != flag_definitions.__name__ and not module.startswith("absl.")
           for flag in module_flags]
    groups = [(f"{program_name()} flags", own)]
    groups += [(title, [shared[name] for name in names if name in shared])
               for title, names in flag_definitions.SECTIONS.items()]
    groups.append((_ABSL_GROUP, [flag for module, module_flags in by_module.items()
                                 if module.startswith("absl.") for flag in module_flags]))
    lines = [(description or "").strip(), "", f"Usage: {program_name()} --flag=value ...",
             "(--flagfile=FILE reads flags from FILE, one per line)"]
    for title, group_flags in groups:
        if group_flags:
            lines += ["", f"{title}:"]
            lines += [_flag_help(flag) for flag in sorted(group_flags, key=lambda f: f.name)]
    return "\n".join(lines)


def _flag_help(flag: flags.Flag) -> str:
    """``  --name: help (default: value)``, wrapped to the line width."""
    name = f"--[no]{flag.name}" if flag.boolean else f"--{flag.name}"
    default = "" if flag.default is None else f" (default: {flag.default_as_str})"
    return textwrap.fill(f"{name}: {flag.help}{default}", width=_LINE_WIDTH, initial_indent="  ",
                         subsequent_indent="      ")


def import_tensorflow_quietly(verbose: bool) -> None:
    """Imports TensorFlow (and lists its devices, which initialises CUDA), holding back what its
    C++ libraries print meanwhile unless ``verbose``; they are shown if the import fails."""
    if verbose:
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        tf.config.list_physical_devices()
        return
    global _stderr_fd  # pylint: disable=global-statement
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    saved_stderr = _stderr_fd = os.dup(2)
    with tempfile.TemporaryFile() as held_back:
        os.dup2(held_back.fileno(), 2)
        try:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            tf.config.list_physical_devices()
        except BaseException:
            _restore_stderr(saved_stderr)
            held_back.seek(0)
            sys.stderr.write(held_back.read().decode("utf-8", "replace"))
            raise
        _restore_stderr(saved_stderr)


def _restore_stderr(saved_stderr: int) -> None:
    global _stderr_fd  # pylint: disable=global-statement
    sys.stderr.flush()
    os.dup2(saved_stderr, 2)
    _stderr_fd = 2
    os.close(saved_stderr)
