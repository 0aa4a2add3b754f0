"""convert_checkpoint on a hostile user's inputs: an output directory holding the user's files
under the names the conversion writes, a config that reads only part of the checkpoint's encoder,
a SentencePiece model of another vocabulary, a malformed classifier_heads.json beside the source.
Each is refused in one line before anything is written, the user's files untouched."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints.conversion import ConversionError, albert_tf_to_tf1, tf1_to_albert_tf
from albert_tf.checkpoints.hf_format import write_hf_directory
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from tests import numpy_albert
from tests.command_runner import run_command
from tests.test_checkpoints import save_object_checkpoint, small_config
from tests.tf1_fixtures import write_reference_checkpoint


def convert(*args):
    return run_command("-m albert_tf.convert_checkpoint", *args)


def assert_one_line_error(result, *parts):
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("convert_checkpoint: error: "), last
    for part in parts:
        assert part in last, last


def snapshot(directory):
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


def test_the_users_files_under_the_names_a_conversion_writes_are_never_replaced(tmp_path):
    cfg = small_config()
    config_file = tmp_path / "config.json"
    config_file.write_text(cfg.to_json_string())
    write_hf_directory(AlbertPretrainingModel(cfg), str(tmp_path / "hf"))
    write_reference_checkpoint(str(tmp_path / "ref" / "model.ckpt"),
                               numpy_albert.reference_variable_shapes(cfg))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "albert_config.json").write_text('{"my": "edited config"}')
    (mine / "spiece.model").write_bytes(b"my tokenizer")
    (mine / "notes.txt").write_text("notes")
    before = snapshot(mine)

    result = convert(f"--hf_checkpoint={tmp_path / 'hf'}", f"--output_dir={mine}")
    assert_one_line_error(result, f"--output_dir={mine} holds albert_config.json, spiece.model",
                          "no earlier conversion")
    assert snapshot(mine) == before
    result = convert(f"--hf_checkpoint={tmp_path / 'hf'}", f"--output_dir={mine}", "--overwrite")
    assert_one_line_error(result, "albert_config.json")
    assert snapshot(mine) == before

    # A file named 'checkpoint' that is not a checkpoint state file (the user's own), both ways.
    other = tmp_path / "other"
    other.mkdir()
    (other / "checkpoint").write_text("my notes on the checkpoints\n")
    result = convert(f"--albert_config_file={config_file}", f"--tf1_checkpoint={tmp_path / 'ref'}",
                     f"--output_dir={other}")
    assert_one_line_error(result, f"--output_dir={other} holds checkpoint")
    assert snapshot(other) == {"checkpoint": b"my notes on the checkpoints\n"}

    # An earlier conversion's own files are replaced with --overwrite (and only then).
    back = tmp_path / "back"
    assert convert(f"--hf_checkpoint={tmp_path / 'hf'}", f"--output_dir={back}").returncode == 0
    assert_one_line_error(convert(f"--hf_checkpoint={tmp_path / 'hf'}", f"--output_dir={back}"),
                          "already exists")
    assert convert(f"--hf_checkpoint={tmp_path / 'hf'}", f"--output_dir={back}",
                   "--overwrite").returncode == 0
