"""What a command reads and writes, declared once before any work, and the one check of it all.

Every command declares a ``RunFiles``: the files it reads (``Input``), every file it writes
(``Output``: a flag's path, or a fixed name inside a directory such as ``predictions.json`` in
``--output_dir``, or a family of files such as the checkpoints ``model.ckpt-*``), the directories it
writes into (``WorkDirectory``: ``--output_dir``, ``--cached_dir``) and those it writes whole
(``NewDirectory``: an export). ``check_run_files`` then refuses, before any work:

- an output that is an input (through links and other spellings), an input in a family the run
  writes or deletes (its own checkpoints), a directory written whole that is, or holds, an input;
- two outputs on one path (a flag's output on a fixed name of the run: ``--tflite_file`` on the
  ``checkpoint`` state file), a file inside a directory written whole, nested exports, an output
  inside a fixed name of the run (``--tflite_file`` in the TensorBoard directory ``eval/``);
- an output named by a flag over an existing checkpoint file (a ``checkpoint`` state file, an
  ``.index`` or a data shard): it belongs to a run;
- a directory written whole that holds anything but what the command wrote there earlier (and even
  that only when the user asked to replace it), naming what it holds;
- a file or directory under a fixed name of the run that albert_tf did not write: the owned names
  of the directory's run manifest (albert_tf/files/run_manifest.py) do not list the name, and the
  directory is no run directory of a version before the list of owned names (its ``checkpoint``
  state file names no albert_tf checkpoint of the run there: a user's state file proves
  nothing). Once every check passed, the manifest lists all the run's fixed names there;
- directories that cannot be created or written, outputs whose place is taken by a directory.

Because a command's fixed names are declared whatever its actions, a file one run of a command
wrote into its directory is never replaced by another output of a later run, and a user's file of
such a name is never taken for the run's. Messages name the flag (or the fixed name and its
directory) and both paths. Local paths and anything
``tf.io.gfile`` handles (``gs://``) work; local paths are compared as files (device and inode).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import uuid
from typing import Iterable

import tensorflow as tf

from albert_tf.files.created_directories import make_directories
from albert_tf.files.paths import OutputPathError, absolute_path, path_identity
from albert_tf.files.run_manifest import (MANIFEST_NAME, manifest_path, read_manifest,
                                          update_manifest)

# Names of the files a checkpoint is made of, wherever it lies: an output named by a flag never
# replaces one of them (they belong to a run).
CHECKPOINT_FILE_PATTERNS = ("checkpoint", "*.index", "*.data-[0-9]*-of-[0-9]*")
# The key under which tf.train.Checkpoint stores its object graph (a TF1 checkpoint has none).
_OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


@dataclasses.dataclass(frozen=True)
class Input:
    """A file or directory the command reads. ``what`` names it in messages ("--train_file",
    "a file of --data_dir")."""

    what: str
    path: str


@dataclasses.dataclass(frozen=True)
class Output:
    """A file the command writes (or, with ``family``, the glob pattern of a family of files it
    writes, renames and deletes, e.g. ``<output_dir>/model.ckpt-*``).

    ``what`` names it in messages ("--tflite_file", "predictions.json (written in --output_dir)"). ``within``:
    for a fixed name of the command inside a directory, how messages name that directory
    ("--output_dir"; a file an earlier run of the command wrote there is its own result, replaced);
    empty for a path given by a flag. ``consequence`` says, for a family, what the run does to its
    files (shown when an input lies among them). ``is_directory``: a fixed name the command writes as
    a directory (e.g. the TensorBoard logs ``train/``); every other output is a file.
    ``listed_as_owned``: False for a fixed name the command takes for its own without the owned
    names of the directory's run manifest: a name no user's file would bear (a hidden lock, a cache file
    named by a digest), or a file the command writes only where absent (``albert_config.json``),
    so that it never replaces one. ``touched``: False
    for a fixed name this run neither writes, replaces nor deletes (declared all the same, so that
    no other output lands on it), e.g. the checkpoints of a run that only predicts from the
    ``model.ckpt-best`` the user put there: a file under it need not be albert_tf's, and the run
    does not record the name.
    """

    what: str
    path: str
    within: str = ""
    family: bool = False
    consequence: str = "the run writes, replaces and deletes files of that name there"
    is_directory: bool = False
    listed_as_owned: bool = True
    touched: bool = True

    @property
    def fixed(self) -> bool:
        return bool(self.within)


@dataclasses.dataclass(frozen=True)
class WorkDirectory:
    """A directory the command writes its files into (created when absent)."""

    what: str
    path: str


@dataclasses.dataclass(frozen=True)
class NewDirectory:
    """A directory the command writes whole (an export): absent or empty, or, when ``replace`` (the
    user asked for it), holding only ``replaceable`` names (what the command itself writes there)."""

    what: str
    path: str
    replaceable: tuple[str, ...] = ()
    replace: bool = False


@dataclasses.dataclass(frozen=True)
class RunFiles:
    """Everything a command reads and writes; ``+`` joins two declarations."""

    inputs: tuple[Input, ...] = ()
    outputs: tuple[Output, ...] = ()
    work_directories: tuple[WorkDirectory, ...] = ()
    new_directories: tuple[NewDirectory, ...] = ()

    def __add__(self, other: "RunFiles") -> "RunFiles":
        return RunFiles(*(getattr(self, field.name) + getattr(other, field.name)
                          for field in dataclasses.fields(self)))

    def declared(self, path: str) -> str:
        """``path`` itself when it is a declared output (one file, or one of a family, or the run
        manifest beside fixed names); KeyError otherwise: a command writes only what
        it declared, which is what the check guarded."""
        for output in self.outputs:
            if (_in_family(path, output) if output.family
                    else path_identity(path) == path_identity(output.path)):
                return path
            if output.fixed and path_identity(path) == path_identity(
                    manifest_path(_parent(output.path))):
                return path
        raise KeyError(f"{path} is not among the declared outputs")


def inputs(*pairs: tuple[str, str | None]) -> tuple[Input, ...]:
    """``Input``s of the ``(what, path)`` pairs whose path is set."""
    return tuple(Input(what, path) for what, path in pairs if path)


def fixed_outputs(directory: WorkDirectory, names: Iterable[str], **options) -> tuple[Output, ...]:
    """The ``Output`` of each fixed name (a file, or a glob pattern for a family) in ``directory``;
    ``options``: further fields of every ``Output`` (e.g. ``consequence``)."""
    return tuple(Output(f"{name} (written in {directory.what})",
                        tf.io.gfile.join(directory.path, name),
                        within=directory.what,
                        family=any(character in name for character in "*?["), **options)
                 for name in names)


# ----------------------------------------------------------------------------------- the check


def _parent(path: str) -> str:
    return os.path.dirname(path.rstrip("/") or "/") or "."


def _in_family(path: str, family: Output) -> bool:
    """Whether ``path`` is one of the files the glob pattern ``family.path`` names."""
    return (path_identity(_parent(path)) == path_identity(_parent(family.path))
            and fnmatch.fnmatchcase(os.path.basename(path.rstrip("/")),
                                    os.path.basename(family.path)))


def _is_inside(path: str, directory: str) -> bool:
    """Whether ``path`` lies (at any depth) inside ``directory``."""
    target = path_identity(directory)
    current = absolute_path(path)
    while True:
        parent = _parent(current)
        if parent == current or ("://" in parent) != ("://" in current):
            return False
        if path_identity(parent) == target:
            return True
        current = parent


def _is_checkpoint_file(path: str) -> bool:
    """An existing file that belongs to a checkpoint: the ``checkpoint`` state file (by its
    content), an ``.index`` or a data shard."""
    name = os.path.basename(path)
    if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
        return False
    if name == CHECKPOINT_FILE_PATTERNS[0]:
        with tf.io.gfile.GFile(path, "rb") as handle:
            return handle.read(64).startswith(b"model_checkpoint_path")
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in CHECKPOINT_FILE_PATTERNS[1:])


def _named(item: Input | Output | WorkDirectory | NewDirectory) -> str:
    return f"{item.what} {item.path!r}"


def _check_outputs_spare_inputs(files: RunFiles) -> None:
    read = {path_identity(item.path): item for item in files.inputs}
    written = [*files.outputs, *files.work_directories, *files.new_directories]
    for output in written:
        if isinstance(output, Output) and output.family:
            for item in files.inputs:
                if _in_family(item.path, output):
                    raise OutputPathError(f"{output.within} {_parent(output.path)!r} holds the "
                                          f"input {_named(item)}: {output.consequence}")
            continue
        item = read.get(path_identity(output.path))
        if item is not None:
            raise OutputPathError(f"{_named(output)} is also an input ({_named(item)}): writing "
                                  "it would replace that input; choose another output path")
    for directory in files.new_directories:
        for item in files.inputs:
            if _is_inside(item.path, directory.path):
                raise OutputPathError(f"{_named(directory)} holds the input {_named(item)}: it is "
                                      "written whole; choose another directory")


def _check_outputs_apart(files: RunFiles) -> None:
    seen: dict[tuple, Output | NewDirectory | WorkDirectory] = {}
    singles = [output for output in files.outputs if not output.family]
    for output in [*singles, *files.new_directories]:
        identity = path_identity(output.path)
        first = seen.get(identity)
        if first is not None:
            noun = "directory" if isinstance(output, NewDirectory) else "file"
            raise OutputPathError(f"{_named(output)} and {_named(first)} are the same {noun}: "
                                  f"every output of a run must be a different {noun}")
        seen[identity] = output
    for directory in files.work_directories:
        for output in files.new_directories:
            if path_identity(output.path) == path_identity(directory.path):
                raise OutputPathError(f"{_named(output)} and {_named(directory)} are the same "
                                      "directory: an export is written whole, in a directory of "
                                      "its own")
    for output in [*singles, *files.new_directories]:
        for family in files.outputs:
            if family.family and _in_family(output.path, family):
                raise OutputPathError(f"{_named(output)} is one of the files {family.what} "
                                      f"({family.path!r}): {family.consequence}; choose another "
                                      "path")
        for directory in files.new_directories:
            if directory is not output and _is_inside(output.path, directory.path):
                raise OutputPathError(f"{_named(output)} is inside {_named(directory)}: each is "
                                      "written whole, so neither may hold the other")
        for fixed in singles:
            if fixed.fixed and fixed is not output and _is_inside(output.path, fixed.path):
                raise OutputPathError(f"{_named(output)} is inside {_named(fixed)}, which the "
                                      "run writes (e.g. its TensorBoard logs): choose a path "
                                      "outside it")


def _check_flag_outputs_spare_checkpoints(files: RunFiles) -> None:
    for output in files.outputs:
        if not output.fixed and _is_checkpoint_file(output.path):
            raise OutputPathError(f"{_named(output)} is a file of a checkpoint (a training run's "
                                  "or a model's): writing it would destroy that checkpoint; "
                                  "choose another output path")


def _directory_problem(path: str) -> str | None:
    """Why ``path`` cannot be a directory this run writes to, or None: it is created when absent
    (removed again if the command ends with an error while it is empty, created_directories.py),
    and a hidden probe file is written in it and removed."""
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        return f"{path} is a file, not a directory"
    probe = os.path.join(path, f".albert_tf_write_check.{uuid.uuid4().hex}")
    try:
        make_directories(path)
        with tf.io.gfile.GFile(probe, "w") as handle:
            handle.write("")
        tf.io.gfile.remove(probe)
    except (OSError, tf.errors.OpError) as error:
        reason = error.message if isinstance(error, tf.errors.OpError) else str(error)
        return f"{path} cannot be written: {reason}"
    return None


def _check_new_directory(directory: NewDirectory) -> None:
    path = directory.path
    if tf.io.gfile.exists(path):
        if not tf.io.gfile.isdir(path):
            raise OutputPathError(f"{directory.what}: {path} is a file, not a directory")
        present = sorted(name.rstrip("/") for name in tf.io.gfile.listdir(path))
        if present and not directory.replace:
            raise OutputPathError(f"{_named(directory)} exists and is not an empty directory; "
                                  "choose a new directory (an export is never overwritten)")
        foreign = [name for name in present if name not in directory.replaceable]
        if foreign:
            raise OutputPathError(
                f"{_named(directory)} holds {', '.join(foreign[:5])}"
                f"{', ...' if len(foreign) > 5 else ''}, which this command did not write: it "
                "replaces only what it wrote there; choose a new or empty directory")
    problem = _directory_problem(_parent(path))
    if problem:
        raise OutputPathError(f"{directory.what}: {problem}")


def _names_a_directory(path: str) -> bool:
    """Whether ``path`` can only name a directory, existing or not: it ends with a separator, or
    its last part is '.' or '..' (a file written there could only be renamed onto a directory)."""
    return path.endswith(("/", os.sep)) or os.path.basename(path) in (".", "..")


def _check_writable(files: RunFiles) -> None:
    for directory in files.work_directories:
        problem = _directory_problem(directory.path)
        if problem:
            raise OutputPathError(f"{directory.what}: {problem}")
    for directory in files.new_directories:
        _check_new_directory(directory)
    for output in files.outputs:
        if output.family:
            continue
        if tf.io.gfile.isdir(output.path) and not output.fixed:
            raise OutputPathError(f"{_named(output)} is a directory: give a file path (e.g. "
                                  "inside it)")
        if output.fixed and tf.io.gfile.exists(output.path):
            if output.is_directory and not tf.io.gfile.isdir(output.path):
                raise OutputPathError(f"{output.within} {_parent(output.path)!r} holds a file "
                                      f"{os.path.basename(output.path)!r} where the run writes its "
                                      f"directory {os.path.basename(output.path)}/: move that "
                                      f"file, or use another {output.within}")
            if not output.is_directory and tf.io.gfile.isdir(output.path):
                raise OutputPathError(f"{output.within} {_parent(output.path)!r} holds a "
                                      f"directory {os.path.basename(output.path)!r} where the run "
                                      f"writes its file {os.path.basename(output.path)}: move "
                                      f"that directory, or use another {output.within}")
        if not output.fixed and _names_a_directory(output.path):
            raise OutputPathError(f"{_named(output)} names a directory (it ends with "
                                  f"{output.path[-1]!r}), but the run writes a file there: give a "
                                  "file path (e.g. inside it)")
        if "://" not in output.path:
            parent = os.path.dirname(os.path.abspath(output.path))
            while not os.path.exists(parent):
                parent = os.path.dirname(parent)
            if not os.path.isdir(parent):
                raise OutputPathError(f"{_named(output)} cannot be created: {parent!r} is a "
                                      "file, not a directory")


def _fixed_outputs_by_directory(files: RunFiles) -> dict[str, list[Output]]:
    """The fixed names of the run, touched or not, grouped by their directory (each a work
    directory, which the check created)."""
    by_directory: dict[str, list[Output]] = {}
    for output in files.outputs:
        if output.fixed and tf.io.gfile.isdir(_parent(output.path)):
            by_directory.setdefault(_parent(output.path), []).append(output)
    return by_directory


def _present_names(directory: str) -> list[str]:
    return sorted(name.rstrip("/") for name in tf.io.gfile.listdir(directory))


def _holds_a_run_checkpoint(directory: str, names: list[str] | None) -> bool:
    """Whether the ``checkpoint`` state file of ``directory`` names a checkpoint that lies there,
    was written through an object graph (``tf.train.Checkpoint``, as albert_tf's runs write
    theirs) and, unless ``names`` is None, bears one of those names (glob patterns). A state file
    alone proves nothing: a user's directory of a reference or Estimator run, of another program's
    checkpoints, or of a state file written by hand, holds one too."""
    if not _is_checkpoint_file(tf.io.gfile.join(directory, CHECKPOINT_FILE_PATTERNS[0])):
        return False
    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return False
    prefix = state.model_checkpoint_path
    if (path_identity(_parent(prefix)) != path_identity(directory)
            or not tf.io.gfile.exists(prefix + ".index")
            or (names is not None and not any(fnmatch.fnmatchcase(os.path.basename(prefix), name)
                                              for name in names))):
        return False
    try:
        return tf.train.load_checkpoint(prefix).has_tensor(_OBJECT_GRAPH)
    except tf.errors.OpError:
        return False  # an index that is not one


def _is_earlier_run_directory(directory: str, present: list[str], outputs: list[Output]) -> bool:
    """Whether ``directory`` (which records no owned names) is a run directory of an earlier
    version: its ``checkpoint`` state file names one of the run's own checkpoints there (of a
    family of checkpoints the run declares in it, e.g. ``model.ckpt-*``), or one of the run's fixed
    names is a directory whose state file names a checkpoint of a run there (run_seeds'
    ``seed_<S>``: its parent holds no checkpoint). See ``_holds_a_run_checkpoint``."""
    families = [os.path.basename(output.path) for output in outputs if output.family]
    if _holds_a_run_checkpoint(directory, families):
        return True
    patterns = [os.path.basename(output.path) for output in outputs]
    return any(_holds_a_run_checkpoint(tf.io.gfile.join(directory, name), None)
               for name in present
               if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns))


def _check_fixed_names_are_ours(directory: str, outputs: list[Output]) -> None:
    """Refuses a file or directory of ``directory`` under one of the run's fixed names that it
    touches and that the owned names of the directory's run manifest do not list. A directory
    that records none and is an earlier version's run directory (``_is_earlier_run_directory``,
    which looks at every fixed name of the run, touched or not) holds the run's names."""
    recorded = read_manifest(directory).owned_names
    present = _present_names(directory)
    if recorded is None and _is_earlier_run_directory(directory, present, outputs):
        return
    for output in outputs:
        name = os.path.basename(output.path)
        if not (output.touched and output.listed_as_owned) or name in (recorded or ()):
            continue
        found = [present_name for present_name in present
                 if fnmatch.fnmatchcase(present_name, name)]
        if found:
            more = f" (and {len(found) - 1} more of {name})" if len(found) > 1 else ""
            what_happens = ("the run writes, replaces and deletes files of that name there"
                            if output.family
                            else f"the run writes its {name} there, replacing what is there")
            raise OutputPathError(
                f"{output.within} {directory!r} holds {found[0]!r}{more}, which albert_tf did not "
                f"write there (its {MANIFEST_NAME} does not list it): {what_happens}. Move "
                f"it elsewhere, or use another {output.within}")


def check_run_files(files: RunFiles, record: bool = True) -> None:
    """The pre-flight check of a command's declaration (see the module doc): OutputPathError (a
    UserError) naming the paths, before anything is written. Creates the work directories and,
    once every check passed, records the run's fixed names in each directory's run manifest
    (``record_owned_names``); with ``record`` False the caller records them itself once its own
    checks passed, so that a run refused by them writes no manifest (the training driver: its
    checks of the run directory's facts come after the locks)."""
    files = files + RunFiles(outputs=_manifests(files))
    _check_outputs_spare_inputs(files)
    _check_outputs_apart(files)
    _check_flag_outputs_spare_checkpoints(files)
    _check_writable(files)
    for directory, outputs in _fixed_outputs_by_directory(files).items():
        _check_fixed_names_are_ours(directory, outputs)
    if record:
        record_owned_names(files)


def record_owned_names(files: RunFiles) -> None:
    """Adds the fixed names the run writes to the run manifest of each directory it writes them
    in (after ``check_run_files`` passed). In a directory of an earlier version this writes the
    manifest that supersedes its separate files."""
    for directory, outputs in _fixed_outputs_by_directory(files).items():
        _own(directory, {os.path.basename(output.path) for output in outputs
                         if output.touched and output.listed_as_owned})


def _manifests(files: RunFiles) -> tuple[Output, ...]:
    """The run manifest of every directory the run writes fixed names in that it records there:
    an output of the run too, so that no other output lands on it."""
    found: dict[tuple, Output] = {}
    for output in files.outputs:
        if output.fixed and output.listed_as_owned:
            directory = _parent(output.path)
            found.setdefault(path_identity(directory), Output(
                f"{MANIFEST_NAME} (written in {output.within})", manifest_path(directory),
                within=output.within, listed_as_owned=False))
    return tuple(found.values())


def _own(directory: str, names: set[str]) -> None:
    """Adds ``names`` to the owned names of ``directory``'s run manifest (none: nothing written,
    so that a directory the run writes no fixed name in gets no manifest)."""
    if names and not names <= (read_manifest(directory).owned_names or frozenset()):
        update_manifest(directory, lambda content: content.update(
            owned_names=sorted(set(content["owned_names"] or ()) | names)))
