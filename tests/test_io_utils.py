"""Atomic outputs (complete or absent, never half-written; temporaries of killed runs cleaned up),
input patterns that never match what is not data, and output paths that would lose data."""

import logging
import os
import signal
import subprocess
import sys

import pytest

from albert_tf.files.atomic import atomic_open, atomic_write_text, is_temporary_path, temporary_path
from albert_tf.files.paths import expand_input_patterns
from tests.shared_setup import subprocess_env


def test_file_appears_only_when_the_block_succeeds(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    atomic_write_text(str(target), "first")
    with pytest.raises(RuntimeError):
        with atomic_open(str(target)) as handle:
            handle.write("half of the second")
            raise RuntimeError("interrupted")
    assert target.read_text() == "first"  # untouched
    assert os.listdir(tmp_path / "sub") == ["out.txt"]  # no temporary left behind
    with atomic_open(str(target), "wb") as handle:
        handle.write(b"second")
    assert target.read_bytes() == b"second"
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # not mkstemp's private mode


def test_directory_variant(tmp_path):
    target = tmp_path / "export"
    with pytest.raises(ValueError):
        with temporary_path(str(target)) as temporary:
            os.makedirs(os.path.join(temporary, "variables"))
            raise ValueError("failed export")
    assert os.listdir(tmp_path) == []
    with temporary_path(str(target)) as temporary:
        os.makedirs(os.path.join(temporary, "variables"))
    assert os.listdir(target) == ["variables"]


# --- temporaries of killed runs -------------------------------------------------------------------

@pytest.mark.subprocess  # a writer killed with SIGKILL
def test_temporaries_of_a_killed_run_are_removed_by_the_next_write(tmp_path):
    """A process killed (SIGKILL) inside temporary_path leaves its temporary; the next write of the
    same path removes it, and keeps those of other outputs."""
    target, other = tmp_path / "out.tfrecord", tmp_path / "other.tfrecord"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(target), str(other)], env=subprocess_env(),
        capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = sorted(os.listdir(tmp_path))
    assert len(left) == 2 and all(is_temporary_path(name) for name in left)
    atomic_write_text(str(target), "complete")
    remaining = sorted(os.listdir(tmp_path))
    assert "out.tfrecord" in remaining and len(remaining) == 2
    assert [name for name in remaining if name != "out.tfrecord"][0].startswith(".other.tfrecord.")


KILLED_WRITER = """
import os, signal, sys
from albert_tf.files.atomic import temporary_path
with temporary_path(sys.argv[2]) as other, temporary_path(sys.argv[1]) as temporary:
    for path in (other, temporary):
        with open(path, "w") as handle:
            handle.write("half")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_temporary_of_a_live_writer_is_left_alone(tmp_path):
    target = tmp_path / "out.txt"
    with atomic_open(str(target)) as handle:
        handle.write("first writer, still running")
        atomic_write_text(str(target), "second writer")  # sees the first writer's temporary
        assert target.read_text() == "second writer"
        assert len(os.listdir(tmp_path)) == 2  # the first writer's temporary is still there
    assert target.read_text() == "first writer, still running"
    assert os.listdir(tmp_path) == ["out.txt"]


# --- input patterns ---------------------------------------------------------------------------------

def test_wildcards_skip_temporaries_statistics_and_hidden_files(tmp_path):
    for name in ("a.tfrecord", "b.tfrecord", "a.tfrecord.stats.json", ".notes.tfrecord"):
        (tmp_path / name).write_text("x")
    with temporary_path(str(tmp_path / "c.tfrecord")) as temporary:
        open(temporary, "w").close()  # a write in progress (or of a killed run)
        names = [os.path.basename(path) for path in expand_input_patterns(f"{tmp_path}/*")]
        assert names == ["a.tfrecord", "b.tfrecord"]
        # A hidden pattern matches hidden files, as in the shell, but never temporaries.
        hidden = [os.path.basename(path) for path in expand_input_patterns(f"{tmp_path}/.*")]
        assert hidden == [".notes.tfrecord"]
        # Saying only "matches no file" read as a typo in the pattern: the skipped files are named.
        with pytest.raises(FileNotFoundError) as info:
            expand_input_patterns(f"{tmp_path}/*.json")
        assert str(info.value) == (
            f"input pattern '{tmp_path}/*.json' matches no file to read: it matches only "
            "a.tfrecord.stats.json, which a wildcard skips (hidden files, temporaries of "
            "unfinished writes, .stats.json summaries); name such a file without wildcards to "
            "read it")
        with pytest.raises(FileNotFoundError, match=r"matches no file$"):
            expand_input_patterns(f"{tmp_path}/*.nothing")
    # A file named without wildcards is used as it is.
    assert expand_input_patterns(str(tmp_path / "a.tfrecord.stats.json")) == [
        str(tmp_path / "a.tfrecord.stats.json")]


def test_directories_a_pattern_matches_are_skipped_with_one_warning(tmp_path, caplog):
    for name in ("a.txt", "b.txt", "part1/c.txt", "part2/d.txt"):
        os.makedirs(os.path.dirname(tmp_path / name), exist_ok=True)
        (tmp_path / name).write_text("x")
    pattern = f"{tmp_path}/*"
    with caplog.at_level(logging.WARNING):
        for _ in range(2):  # a command's pre-flight check, then its work: said once
            assert expand_input_patterns(pattern) == [str(tmp_path / "a.txt"),
                                                      str(tmp_path / "b.txt")]
    assert [record.getMessage() for record in caplog.records] == [
        f"input pattern '{pattern}' also matches 2 directories ({tmp_path}/part1, ...), skipped: "
        f"the files in a directory are not read; add a pattern for them (e.g. {tmp_path}/part1/*) "
        "to read them"]
