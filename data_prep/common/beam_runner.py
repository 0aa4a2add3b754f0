"""Running an Apache Beam pipeline from a command line: its options, its runner, quiet local runs,
and a worker's user error turned back into one clear message.

``--runner=DirectRunner`` runs on Beam's local runner (FnApiRunner) in this process or in
``num_workers`` local processes: Beam's own DirectRunner would first try its PrismRunner, which
downloads a binary. Any other runner name is Beam's (DataflowRunner, FlinkRunner, SparkRunner, ...).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
from typing import Any, Iterator, Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.portability.portable_runner import JobServiceHandle
from apache_beam.runners.runner import PipelineState

from albert_tf.cli.error_boundary import logger_levels
from data_prep.common.user_errors import SettingsError

DIRECT_RUNNER = "DirectRunner"
LOCAL_RUNNER = "FnApiRunner"

# Loggers of the local runner that repeat a worker's error, which reaches the driver as the
# runner's exception anyway (CRITICAL: silent), and its workers' start-up chatter.
_ERROR_ECHOES = ("apache_beam.runners.common", "apache_beam.runners.worker.bundle_processor",
                 "apache_beam.runners.worker.sdk_worker",
                 "apache_beam.runners.portability.local_job_service")
_QUIET_WORKER_LOGGERS = {"__main__": "ERROR", "apache_beam.options.pipeline_options": "ERROR",
                         **{name: "CRITICAL" for name in _ERROR_ECHOES}}
# A worker's error reaches the driver as the runner's exception, whose text holds the worker's
# traceback: "<module.Class>: <message> [while running '<stage>']".
_STAGE_SUFFIX = re.compile(r" \[while running '[^']*'\]$")


def pipeline_options(runner: str, beam_args: list[str], num_workers: int,
                     num_workers_given: bool) -> PipelineOptions:
    """Beam options for ``runner`` from the command line's remaining arguments ``beam_args``.

    DirectRunner: the local runner, ``num_workers`` processes (multi-process mode when more than
    one), quiet worker logs. Other runners: ``num_workers`` is passed on when given (Dataflow's
    initial worker count). An option given in ``beam_args`` wins. Raises ValueError for an unknown
    runner, SettingsError (a ValueError) for an unknown option, ImportError for a runner whose
    Beam extra is not installed.
    """
    is_direct = runner.lower() in ("direct", DIRECT_RUNNER.lower())
    runner = LOCAL_RUNNER if is_direct else runner
    beam.runners.create_runner(runner)  # fails now on a misspelt runner, not after the set-up
    given = PipelineOptions(beam_args)
    # The error below replaces Beam's "Discarding unparseable args" warning.
    with logger_levels({"apache_beam.options.pipeline_options": logging.ERROR}):
        known = set(given.get_all_options())
        unknown = sorted(set(given.get_all_options(retain_unknown_options=True)) - known)
        explicit = given.get_all_options(drop_default=True)
    if unknown:
        raise SettingsError(f"unknown option(s) {', '.join('--' + name for name in unknown)}: "
                            "neither a flag of this command nor a Beam pipeline option")
    defaults: dict[str, Any] = {}
    if is_direct:
        defaults = {"direct_num_workers": num_workers,
                    "direct_running_mode": "multi_processing" if num_workers > 1 else "in_memory",
                    "default_sdk_harness_log_level": "WARNING",
                    "sdk_harness_log_level_overrides": _QUIET_WORKER_LOGGERS}
    elif num_workers_given:
        defaults = {"num_workers": num_workers}
    overrides = {name: value for name, value in defaults.items() if name not in explicit}
    return PipelineOptions(beam_args, runner=runner, **overrides)


def check_paths_reach_workers(options: PipelineOptions, paths: Sequence[tuple[str, str]]) -> None:
    """Raises ValueError naming the flag and path of a local path under Dataflow, whose workers
    cannot see this machine's files (caught now rather than when the job fails). ``paths``:
    (flag, path) pairs. Other runners may share a file system with this machine."""
    if options.view_as(StandardOptions).runner.lower() not in ("dataflow", "dataflowrunner"):
        return
    for flag, path in paths:
        if "://" not in path:
            raise SettingsError(f"{flag} {path!r} is a local path, which Dataflow's workers cannot "
                                "read or write: use gs://...")


def is_local(options: PipelineOptions) -> bool:
    return options.view_as(StandardOptions).runner == LOCAL_RUNNER


def new_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A pipeline on the options' runner; the local runner is given the options its worker
    processes read (Beam's DirectRunner does the same)."""
    if not is_local(options):
        return beam.Pipeline(options=options)
    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    runner = fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))
    return beam.Pipeline(runner=runner, options=options)


def quiet_beam_logs(local: bool) -> contextlib.AbstractContextManager:
    """A context within which Beam does not log how it reads type hints; the local runner logs
    warnings only, and no echo of a worker's error."""
    levels = {"apache_beam.typehints": logging.WARNING}
    if local:
        levels.update({"apache_beam": logging.WARNING,
                       **{name: logging.CRITICAL for name in _ERROR_ECHOES}})
    return logger_levels(levels)


def run_to_completion(pipeline: beam.Pipeline, local: bool, user_error: type[Exception],
                      user_error_names: Sequence[str]) -> None:
    """Runs ``pipeline`` and waits for it to finish.

    An error of a class named in ``user_error_names`` raised on a worker (a bad input line, say) is
    raised again here as ``user_error(<its message>)``; Ctrl-C or SIGTERM cancels a remote job.
    ``local``: the local runner's worker processes print their errors' tracebacks on the standard
    error they inherit; those are shown only for an error that is not the user's.
    """
    capture = _stderr_shown_unless(user_error) if local else contextlib.nullcontext()
    with capture:
        result = None
        try:
            result = pipeline.run()
            state = result.wait_until_finish()
        except BaseException as error:
            if result is not None:
                with contextlib.suppress(Exception):
                    result.cancel()
            message = _user_error_message(error, user_error_names)
            if message is not None:
                raise user_error(message) from error
            raise
    if state != PipelineState.DONE:
        raise RuntimeError(f"the Beam pipeline ended in state {state}")


def _user_error_message(error: BaseException, names: Sequence[str]) -> str | None:
    """The message of an error named in ``names`` raised on a worker; else None.

    An in-process runner re-raises the worker's exception itself; a multi-process or remote one
    raises its own, whose text holds the worker's traceback.
    """
    if type(error).__name__ in names:
        return _STAGE_SUFFIX.sub("", str(error))
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        return None
    alternatives = "|".join(re.escape(name) for name in names)
    # The last one: a traceback prints an error's causes before it (a UserFileError after the
    # TensorFlow error it was raised from).
    matches = list(re.finditer(rf"^(?:[\w.]+\.)?(?:{alternatives}): (?P<message>.+)$",
                               str(error), re.MULTILINE))
    return _STAGE_SUFFIX.sub("", matches[-1]["message"]) if matches else None


@contextlib.contextmanager
def _stderr_shown_unless(user_error: type[Exception]) -> Iterator[None]:
    """Captures what is written to file descriptor 2 (which worker processes inherit) within the
    block, and shows it afterwards only if the block raised an error other than ``user_error``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        except user_error:
            raise
        except BaseException:
            sys.stderr.flush()
            captured.seek(0)
            os.write(saved, captured.read())
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
