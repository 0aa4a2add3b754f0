"""Atomic outputs: complete or absent, never half-written."""

import os

import pytest

from albert_tf.io_utils import atomic_open, atomic_write_text, temporary_path


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
