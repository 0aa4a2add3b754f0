"""One run per output directory: a lock file in the directory names the run that holds it.

Two runs writing one output directory overwrite each other's checkpoints, and an evaluation sweep
then scores a mix of both. A run takes the lock before any work (``acquire``) and releases it when
it exits; a second run is refused at start with a ``DirectoryInUseError`` naming the holder: its
machine, process id, start time and command line.

Roles: a directory has one lock per role, ``TRAINING`` (the run that trains there) and
``EVALUATION`` (the run that evaluates its checkpoints, predicts or exports from them). A run takes
the lock of each role it plays, so one training job and one separate evaluation job share a
directory (the supported set-up: an evaluation job beside training), while a second training job,
or a second evaluation job, is refused.

Stale locks: a lock whose holder is a process of this machine that no longer runs (killed with
``kill -9``, or its id now taken by another process, told apart by the start time in ``/proc``) is
taken over, so a killed run restarted on the same machine resumes. A holder on another machine
cannot be checked: its lock stays until it is released or deleted.

Local directories: the lock is written complete under a temporary name and hard-linked to its name,
which fails when the name exists (``O_EXCL`` creation where the file system has no hard links), so
two runs can never both create it; a takeover runs under ``flock`` of the directory, so two runs
cannot both take over one stale lock. Other file systems (``gs://``): ``tf.io.gfile`` cannot create
a file only if absent, so the lock is a best-effort check: it is looked for, written, then read
back, and two runs started within the time of that write can both proceed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import errno
import fcntl
import json
import os
import shlex
import socket
import sys
import uuid
from typing import Any, Iterator

import tensorflow as tf
from absl import logging

from albert_tf.errors.user_error import UserError
from albert_tf.files.processes import is_running, process_start_time

TRAINING = "training"
EVALUATION = "evaluation"
ROLES = (TRAINING, EVALUATION)


class DirectoryInUseError(UserError):
    """Another run holds the directory's lock of this role (or its lock cannot be read)."""


def lock_name(role: str) -> str:
    """The name of the lock file of ``role`` (hidden: input patterns never match it)."""
    if role not in ROLES:
        raise ValueError(f"unknown lock role {role!r}; expected one of {list(ROLES)}")
    return f".albert_tf-{role}.lock"


def lock_path(directory: str, role: str) -> str:
    """The lock file of ``role`` in ``directory``."""
    return os.path.join(directory, lock_name(role))


@dataclasses.dataclass(frozen=True)
class Holder:
    """The run a lock belongs to.

    host, pid, process_start: where it runs (process_start: its /proc start time, None without
    /proc); started: when it took the lock (local time, ISO 8601); command: its command line;
    cluster: the multi-worker cluster (TF_CONFIG's) it is the chief of, or None; token: tells this
    lock from any other one.
    """

    host: str
    pid: int
    process_start: int | None
    started: str
    command: str
    cluster: dict[str, Any] | None
    token: str

    @classmethod
    def this_process(cls, cluster: dict[str, Any] | None = None) -> Holder:
        pid = os.getpid()
        return cls(host=socket.gethostname(), pid=pid, process_start=process_start_time(pid),
                   started=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                   command=shlex.join(sys.argv), cluster=_as_json(cluster), token=uuid.uuid4().hex)

    @classmethod
    def from_text(cls, text: str) -> Holder:
        """Raises ValueError when ``text`` is not a lock's JSON."""
        try:
            return cls(**json.loads(text))
        except (TypeError, json.JSONDecodeError) as error:
            raise ValueError(f"not a lock file ({error})") from None

    def to_text(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1) + "\n"

    def describe(self) -> str:
        return f"the run of {self.host} pid {self.pid} started {self.started} ({self.command})"

    def is_stale(self) -> bool:
        """Whether the holder is gone: a process of this machine that no longer runs. A holder on
        another machine is never known to be gone."""
        return self.host == socket.gethostname() and not is_running(self.pid, self.process_start)


class RunLock:
    """A lock this process holds; ``release`` removes it (only while it is still this lock)."""

    def __init__(self, path: str, holder: Holder):
        self.path = path
        self.holder = holder
        self._held = True

    def release(self) -> None:
        """Removes the lock file if it is still this run's; safe to call more than once."""
        if not self._held:
            return
        self._held = False
        try:
            current = _read(self.path)
            if isinstance(current, Holder) and current.token == self.holder.token:
                tf.io.gfile.remove(self.path)
        except (OSError, tf.errors.OpError) as error:
            logging.warning("could not remove the lock %s: %s; delete it by hand", self.path, error)


def _as_json(value: Any) -> Any:
    """``value`` as it reads back from a lock file (tuples become lists), so that it compares."""
    return json.loads(json.dumps(value))


def _is_local(path: str) -> bool:
    return "://" not in path


def _read(path: str) -> Holder | str | None:
    """The holder written in the lock at ``path``; None when there is no lock; a string saying why
    when the file is not a lock (empty, truncated: written by hand, or by a crash)."""
    try:
        with tf.io.gfile.GFile(path, "r") as handle:
            text = handle.read()
    except tf.errors.NotFoundError:
        return None
    try:
        return Holder.from_text(text)
    except ValueError as error:
        return str(error)


def _in_use_error(directory: str, what: str, path: str,
                  current: Holder | str) -> DirectoryInUseError:
    """The refusal, naming the holder; the lock's path where only deleting it can help."""
    if isinstance(current, str):
        return DirectoryInUseError(
            f"{directory} is locked by {path}, which cannot be read ({current}); if no run uses "
            f"{directory}, delete {path}")
    message = (f"{directory} is in use by {current.describe()}; wait for it or use another {what}")
    if current.host != socket.gethostname():
        message += (f" (if that run of another machine no longer runs, which this one cannot "
                    f"check, delete {path})")
    return DirectoryInUseError(message)


@contextlib.contextmanager
def directory_flock(directory: str) -> Iterator[None]:
    """Holds ``flock`` on ``directory`` in the block, so that processes of this machine examine and
    take its locks (or update its run manifest) one at a time; nothing where the file system has
    no flock."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the flock


def _create_exclusive(path: str, text: str) -> bool:
    """Creates ``path`` holding ``text`` unless it exists (False then), in one step: the text is
    written to a temporary file that is hard-linked to ``path`` (O_EXCL creation where the file
    system has no hard links)."""
    temporary = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temporary, path)
        return True
    except FileExistsError:
        return False
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
    finally:
        os.remove(temporary)
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def _take_over(path: str, current: Holder) -> None:
    logging.warning("taking over %s: %s no longer runs", path, current.describe())
    tf.io.gfile.remove(path)


def _acquire_local(path: str, holder: Holder, directory: str, what: str) -> None:
    with directory_flock(directory):
        while not _create_exclusive(path, holder.to_text()):
            current = _read(path)
            if current is None:
                continue  # released meanwhile by a run of another machine
            if isinstance(current, str) or not current.is_stale():
                raise _in_use_error(directory, what, path, current)
            _take_over(path, current)


def _acquire_remote(path: str, holder: Holder, directory: str, what: str) -> None:
    """Best effort (see the module doc): look, write, read back."""
    current = _read(path)
    if current is not None:
        if isinstance(current, str) or not current.is_stale():
            raise _in_use_error(directory, what, path, current)
        _take_over(path, current)
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(holder.to_text())
    current = _read(path)
    if not isinstance(current, Holder) or current.token != holder.token:
        raise _in_use_error(directory, what, path, current or "removed as it was written")


def acquire(directory: str, role: str, cluster: dict[str, Any] | None = None,
            what: str = "--output_dir") -> RunLock:
    """Takes the lock of ``role`` in the existing ``directory`` for this process; returns it.

    cluster: the multi-worker cluster this process is the chief of (recorded, so that its workers
    recognise the lock, see ``check_lock_of_cluster``). what: how the user names the directory.
    Raises DirectoryInUseError naming the holder when another run holds it; a stale lock of this
    machine is taken over (a warning names it).
    """
    path = lock_path(directory, role)
    holder = Holder.this_process(cluster)
    if _is_local(directory):
        _acquire_local(path, holder, directory, what)
    else:
        _acquire_remote(path, holder, directory, what)
    return RunLock(path, holder)


def is_held(directory: str, role: str) -> bool:
    """Whether a run holds the lock of ``role`` in ``directory``: a lock that is not stale (one of
    another machine always counts; an unreadable one too)."""
    current = _read(lock_path(directory, role))
    return current is not None and (isinstance(current, str) or not current.is_stale())


def check_lock_of_cluster(directory: str, role: str, cluster: dict[str, Any],
                          what: str = "--output_dir") -> None:
    """For a worker of a multi-worker job, which takes no lock (its chief does): raises
    DirectoryInUseError when another run holds the lock of ``role``, one that is not the chief of
    ``cluster`` and not stale, so that the workers of a refused job stop too."""
    path = lock_path(directory, role)
    current = _read(path)
    if current is None:
        return
    if isinstance(current, str) or (current.cluster != _as_json(cluster)
                                    and not current.is_stale()):
        raise _in_use_error(directory, what, path, current)
