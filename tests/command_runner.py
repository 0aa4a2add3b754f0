"""Runs a command (a run_*.py script or ``-m <module>``) inside the test process, as its shell
command would run it: its flags defined and parsed, its checks before TensorFlow, its error
boundary, its exit status, its stdout and stderr.

A process start and TensorFlow's import cost 4-5 s per command; most command behaviour (flags,
files written, messages, exit statuses) is the same in-process. What needs a real process (Ctrl-C,
SIGTERM, kill and resume, a second process holding a lock, --help timing, "TensorFlow not
imported", several workers, Beam, the shell scripts) keeps subprocesses: ``run_subprocess``, in
tests marked ``subprocess`` (docs/testing.md).

Not isolated in-process: Ctrl-C during a command ends the test process (the error boundary exits
with os._exit after its cleanup); the strategy of a run is created once per process
(albert_tf/cli/training_run.strategy_of), which suits one_device; TensorFlow's C++ log lines go to
the process's stderr, not to the result's.

Isolation: absl keeps flags in one global registry. Before a command runs, every flag that is not
absl's own is taken out of it (and put back afterwards), so the command defines its flags from
scratch, with its own defaults, whatever other commands or test modules defined before; after it,
its flags are removed and the values of absl's flags reset.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import os
import runpy
import signal
import subprocess
import sys

from absl import flags
from absl import logging as absl_logging

from tests.shared_setup import REPO_ROOT, subprocess_env


# The flag that shows a command's INFO lines in run_command as in a process of its own: absl.app.run
# raises the verbosity to INFO the first time it runs in a process only, so the commands run
# after the first in this one log warnings and errors only unless given it.
SHOW_INFO = "--verbosity=0"

# Set by tests/conftest.py for the test being run: whether it carries the ``subprocess`` marker
# (None outside pytest). ``run_subprocess`` refuses to run in a test without it, so the marker lists
# every test that starts a command in a process of its own.
current_test_marked: bool | None = None


@dataclasses.dataclass(frozen=True)
class CommandResult:
    """What a shell would see: the exit status, stdout and stderr."""

    returncode: int
    stdout: str
    stderr: str

    def error_line(self) -> str:
        """The last line of stderr of a refused command (exit 1, no traceback)."""
        assert self.returncode == 1, self.stdout[-2000:] + self.stderr[-3000:]
        assert "Traceback" not in self.stderr, self.stderr[-3000:]
        return self.stderr.strip().splitlines()[-1]


def script_path(command: str) -> tuple[str, str]:
    """(file to run, program name) of "run_x.py", "data_prep/<command>.py" or "-m <module>"."""
    if command.startswith("-m "):
        module = command[3:].strip()
        path = os.path.join(REPO_ROOT, *module.split(".")) + ".py"
    else:
        path = os.path.join(REPO_ROOT, command)
    return path, path


def _own_flags(values: flags.FlagValues) -> dict[str, flags.Flag]:
    """The flags of ``values`` that absl did not define itself."""
    own = {}
    for name in list(values):
        module = values.find_module_defining_flag(name, default="")
        if not module.startswith("absl"):
            own[name] = values[name]
    return own


@contextlib.contextmanager
def _clean_flag_registry():
    """Within the block the global registry holds absl's flags only; afterwards the flags defined
    inside are removed and those taken out come back."""
    values = flags.FLAGS
    was_parsed = values.is_parsed()
    saved = _own_flags(values)
    saved_modules = {module: list(module_flags)
                     for module, module_flags in values.flags_by_module_dict().items()}
    for name in saved:
        delattr(values, name)
    try:
        yield
    finally:
        for name in _own_flags(values):
            delattr(values, name)
        values.unparse_flags()
        for name, flag in saved.items():
            values[name] = flag
        for module, module_flags in saved_modules.items():
            for flag in module_flags:
                if flag.name in saved and flag.name in values:
                    values.register_flag_by_module(module, flag)
        if was_parsed:  # a test module's flags parsed (or marked so) before: still usable
            values.mark_as_parsed()


def command_flags(command: str) -> dict[str, flags.Flag]:
    """The flags ``command`` defines (its own and the shared ones it takes, absl's aside), with
    their defaults: its module runs as an import, not as the program, so nothing else happens."""
    path, _ = script_path(command)
    with _clean_flag_registry():
        runpy.run_path(path, run_name="command_flags")
        return _own_flags(flags.FLAGS)


@contextlib.contextmanager
def _process_state(cwd: str, environment: dict[str, str]):
    """Within the block: the working directory ``cwd`` and the environment of a child process
    (shared_setup.subprocess_env's plus ``environment``); afterwards the
    test process's directory, environment and global settings come back: the handlers of Ctrl-C
    and SIGTERM (a command that ends before its main leaves its start-up ones set:
    albert_tf/cli/command_line.py), the logging levels and filters a command sets, absl's
    verbosity, Keras' global dtype policy (a Trainer sets it from its config) and Keras' global
    state (``clear_session``; the run's objects are freed by Python's own garbage collection)."""
    import keras  # the test process has it loaded already; a command loads it anyway

    saved_cwd, saved_environ = os.getcwd(), dict(os.environ)
    saved_handlers = {signum: signal.getsignal(signum)
                      for signum in (signal.SIGINT, signal.SIGTERM)}
    handler = absl_logging.get_absl_handler()
    saved_filters = list(handler.filters)
    saved_levels = {name: logging.getLogger(name).level for name in ("", "tensorflow", "absl")}
    saved_verbosity = absl_logging.get_verbosity()
    saved_policy = keras.mixed_precision.global_policy()
    os.environ.clear()
    os.environ.update(subprocess_env(**environment))  # the processes it starts find the repository
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)
        for signum, signal_handler in saved_handlers.items():
            signal.signal(signum, signal_handler)
        handler.filters[:] = saved_filters
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)
        absl_logging.set_verbosity(saved_verbosity)
        keras.backend.clear_session(free_memory=False)  # a gc.collect() per command costs
        # seconds once the test process is large (hundreds of commands in test_preflight.py)
        keras.mixed_precision.set_global_policy(saved_policy)


@contextlib.contextmanager
def _captured_output(stdout: io.StringIO, stderr: io.StringIO):
    """sys.stdout and sys.stderr, and absl's log handler (which holds the stream it was made with),
    write to ``stdout`` and ``stderr`` within the block."""
    handler = absl_logging.get_absl_handler().python_handler
    saved_stream = handler.stream
    handler.stream = stderr
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            yield
    finally:
        handler.stream = saved_stream


def run_command(command: str, *args: str, cwd: str = REPO_ROOT,
                **environment: str) -> CommandResult:
    """Runs ``command`` with ``args`` in this process (see the module doc), in ``cwd`` (as
    ``run_subprocess`` does) with the environment ``run_subprocess`` gives a child plus
    ``environment``."""
    path, program = script_path(command)
    stdout, stderr = io.StringIO(), io.StringIO()
    saved_argv = sys.argv
    returncode = 0
    sys.argv = [program, *args]
    try:
        with _process_state(cwd, environment), _clean_flag_registry(), \
                _captured_output(stdout, stderr):
            try:
                runpy.run_path(path, run_name="__main__")
            except SystemExit as stop:
                code = stop.code
                if isinstance(code, str):
                    print(code, file=sys.stderr)
                    returncode = 1
                else:
                    returncode = code or 0
    finally:
        sys.argv = saved_argv
    return CommandResult(returncode, stdout.getvalue(), stderr.getvalue())



def run_command_checked(command: str, *args: str, check: bool = True) -> CommandResult:
    """``run_command``; with ``check``, a failed run fails the test with the ends of its output."""
    result = run_command(command, *args)
    if check and result.returncode != 0:
        raise AssertionError(f"{command} failed:\n{result.stdout[-3000:]}\n"
                             f"{result.stderr[-5000:]}")
    return result

# Runs a command (its script's path or -m and its module, then its arguments) as its user would,
# and reports on stderr whether TensorFlow was imported when the process exited.
_REPORT_TENSORFLOW = """
import atexit, runpy, sys
atexit.register(lambda: print("tensorflow imported:", "tensorflow" in sys.modules, file=sys.stderr))
target, arguments = sys.argv[1], sys.argv[2:]
if target == "-m":
    module, arguments = arguments[0], arguments[1:]
    sys.argv = [module.replace(".", "/") + ".py"] + arguments
    runpy.run_module(module, run_name="__main__", alter_sys=True)
else:
    sys.argv = [target] + arguments
    runpy.run_path(target, run_name="__main__")
"""


def run_subprocess(command: str, *args: str, timeout: float = 900, cwd: str = REPO_ROOT,
                   report_tensorflow: bool = False, **environment: str | None) -> CommandResult:
    """Runs ``command`` with ``args`` in a new process (see the module doc) in ``cwd``, with
    shared_setup.subprocess_env's environment plus ``environment`` (None: the variable unset): a
    Python command as ``run_command`` names it, a shell script (``scripts/run_glue.sh``) or any other
    executable by its path. ``report_tensorflow``: a Python command's stderr ends with the line
    ``tensorflow imported: True`` or ``False`` (whether it was imported when the process exited).
    For what needs a real process only: the tests that call it carry the ``subprocess`` marker."""
    assert current_test_marked is not False, "a test that calls run_subprocess is marked subprocess"
    if command.startswith("-m "):
        line = [sys.executable, *command.split()]
    elif command.endswith(".py"):
        line = [sys.executable, os.path.join(REPO_ROOT, command)]
    else:
        line = [os.path.join(REPO_ROOT, command)]
    if report_tensorflow:
        line = [sys.executable, "-c", _REPORT_TENSORFLOW, *line[1:]]
    env = subprocess_env(**{name: value for name, value in environment.items() if value is not None})
    for name in [name for name, value in environment.items() if value is None]:
        env.pop(name, None)
    result = subprocess.run([*line, *args], capture_output=True, text=True, cwd=cwd,
                            timeout=timeout, env=env)
    return CommandResult(result.returncode, result.stdout, result.stderr)
