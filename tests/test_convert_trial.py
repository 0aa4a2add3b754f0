"""convert_checkpoint on a hostile user's inputs: an output directory holding the user's files
under the names the conversion writes, a config that reads only part of the checkpoint's encoder,
a SentencePiece model of another vocabulary, a malformed record of the kind of classifier beside
the source (its run manifest, or an earlier version's classifier_heads.json).
Each is refused in one line before anything is written, the user's files untouched."""

import os

import pytest

from albert_tf.checkpoints.conversion import albert_tf_to_tf1, tf1_to_albert_tf
from albert_tf.checkpoints.hf_format import write_hf_directory
from albert_tf.checkpoints.report import CheckpointMismatchError
from albert_tf.files.run_manifest import update_manifest
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from tests import numpy_albert, spm_fixtures
from tests.command_runner import run_command
from tests.test_checkpoints import save_object_checkpoint, small_config
from tests.test_cli_errors import assert_one_line_error as assert_error_of
from tests.tf1_fixtures import write_reference_checkpoint


def convert(*args):
    return run_command("-m albert_tf.convert_checkpoint", *args)


def assert_one_line_error(result, *parts):
    """test_cli_errors' check of a refused command, for convert_checkpoint."""
    assert_error_of(result, "convert_checkpoint", *parts)


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


@pytest.mark.parametrize("source", ["reference", "albert_tf"])
def test_a_config_of_fewer_groups_than_the_checkpoint_is_refused_not_half_converted(tmp_path,
                                                                                     source):
    cfg = small_config()  # num_hidden_groups 2
    fewer = tmp_path / "one_group.json"
    fewer.write_text(small_config(num_hidden_groups=1).to_json_string())
    if source == "reference":
        write_reference_checkpoint(str(tmp_path / "src" / "model.ckpt"),
                                   numpy_albert.reference_variable_shapes(cfg))
        convert_function, flag = tf1_to_albert_tf, "--tf1_checkpoint"
    else:
        save_object_checkpoint(AlbertPretrainingModel(cfg), tmp_path / "src")
        convert_function, flag = albert_tf_to_tf1, "--checkpoint"
    result = convert(f"--albert_config_file={fewer}", f"{flag}={tmp_path / 'src'}",
                     f"--output_dir={tmp_path / 'out'}")
    assert_one_line_error(result, "encoder variable(s) that the model of", str(fewer),
                          "group_1")
    assert not os.path.exists(tmp_path / "out") or not os.listdir(tmp_path / "out")
    with pytest.raises(CheckpointMismatchError, match="has no place for"):
        convert_function(AlbertPretrainingModel(small_config(num_hidden_groups=1)),
                         str(tmp_path / "src"), str(tmp_path / "out2"))
    assert not os.path.exists(tmp_path / "out2") or not os.listdir(tmp_path / "out2")


def test_a_sentencepiece_model_of_another_vocabulary_is_refused_before_the_checkpoint_is_read(
        tmp_path):
    spm_model = spm_fixtures.cached_tiny_spm()
    pieces = FullTokenizer(spm_model_file=spm_model).vocab_size
    cfg = small_config(vocab_size=pieces + 7)
    config_file = tmp_path / "config.json"
    config_file.write_text(cfg.to_json_string())
    save_object_checkpoint(AlbertPretrainingModel(cfg), tmp_path / "run")
    result = convert(f"--albert_config_file={config_file}", f"--checkpoint={tmp_path / 'run'}",
                     "--to=huggingface", f"--spm_model_file={spm_model}",
                     f"--output_dir={tmp_path / 'hf'}")
    assert_one_line_error(result, f"--spm_model_file={spm_model} has {pieces} pieces",
                          f"vocab_size={pieces + 7} in {config_file}")
    assert "Loaded" not in result.stdout
    assert not os.path.exists(tmp_path / "hf") or not os.listdir(tmp_path / "hf")


def test_the_classifier_heads_record_beside_the_source_is_an_input_read_before_any_work(
        tmp_path):
    cfg = small_config()
    config_file = tmp_path / "config.json"
    config_file.write_text(cfg.to_json_string())
    run = tmp_path / "run"
    save_object_checkpoint(AlbertClassifierModel(cfg, 3), run)
    (run / "classifier_heads.json").write_text("{not json")
    result = convert(f"--albert_config_file={config_file}", f"--checkpoint={run}",
                     f"--output_dir={tmp_path / 'out'}")
    assert_one_line_error(result, f"{run / 'classifier_heads.json'} is not valid JSON")
    assert result.stdout == ""  # stopped in the checks, before the checkpoint was read

    (run / "classifier_heads.json").write_text('{"early_exit": "shared"}\n')
    result = convert(f"--albert_config_file={config_file}", f"--checkpoint={run}",
                     "--to=huggingface", f"--output_dir={tmp_path / 'hf'}")
    assert result.returncode == 0, result.stderr[-2000:]
    note = next(line for line in result.stdout.splitlines() if "records shared" in line)
    assert "TF1" not in note and "Hugging Face format has no place for them" in note


def test_the_run_manifest_beside_the_source_is_read_before_any_work(tmp_path):
    """A run of this version records its kind of classifier in its run manifest: a record that is
    not one stops the conversion in one line before the checkpoint is read."""
    cfg = small_config()
    config_file = tmp_path / "config.json"
    config_file.write_text(cfg.to_json_string())
    run = tmp_path / "run"
    save_object_checkpoint(AlbertClassifierModel(cfg, 3), run)
    update_manifest(str(run), lambda content: content["facts"].update(classifier_heads="many"))
    result = convert(f"--albert_config_file={config_file}", f"--checkpoint={run}",
                     f"--output_dir={tmp_path / 'out'}")
    assert_one_line_error(result, f"{run}/run_manifest.json: the recorded kind of classifier "
                                  "'many' is not null")
    assert result.stdout == ""
    assert not os.path.exists(tmp_path / "out") or not os.listdir(tmp_path / "out")


@pytest.mark.parametrize("suffix", [".index", ".data-00000-of-00001", ".meta"])
def test_a_file_of_the_checkpoint_given_for_its_prefix_is_named_with_the_prefix(tmp_path, suffix):
    cfg = small_config()
    config_file = tmp_path / "config.json"
    config_file.write_text(cfg.to_json_string())
    write_reference_checkpoint(str(tmp_path / "ref" / "model.ckpt"),
                               numpy_albert.reference_variable_shapes(cfg))
    prefix = tmp_path / "ref" / "model.ckpt-123"
    result = convert(f"--albert_config_file={config_file}", f"--tf1_checkpoint={prefix}{suffix}",
                     f"--output_dir={tmp_path / 'out'}")
    assert_one_line_error(result, f"--tf1_checkpoint: {prefix}{suffix} is a file of the "
                                  f"checkpoint {prefix}: a checkpoint is named by its prefix, "
                                  f"without .index, .data-* or .meta: give {prefix}")


def test_a_source_given_under_another_formats_flag_is_named_with_the_flag_to_give(tmp_path):
    cfg = small_config()
    config_file = tmp_path / "config.json"
    config_file.write_text(cfg.to_json_string())
    write_hf_directory(AlbertPretrainingModel(cfg), str(tmp_path / "hf"))
    save_object_checkpoint(AlbertPretrainingModel(cfg), tmp_path / "ours")
    write_reference_checkpoint(str(tmp_path / "ref" / "model.ckpt"),
                               numpy_albert.reference_variable_shapes(cfg))
    out = f"--output_dir={tmp_path / 'out'}"
    (tmp_path / "out").mkdir()  # the user's empty directory
    for flag in ("--checkpoint", "--tf1_checkpoint"):
        result = convert(f"--albert_config_file={config_file}", f"{flag}={tmp_path / 'hf'}", out)
        assert_one_line_error(result, f"{flag}={tmp_path / 'hf'} is a Hugging Face directory: "
                                      "pass it as --hf_checkpoint")
        # Refused after the pre-flight check: no run manifest recording what was not written.
        assert os.listdir(tmp_path / "out") == []
    for source, flag in (("ours", "--checkpoint"), ("ref", "--tf1_checkpoint")):
        result = convert(f"--hf_checkpoint={tmp_path / source}", out)
        assert_one_line_error(result, f"--hf_checkpoint={tmp_path / source} is not a Hugging "
                                      f"Face directory", f"pass it as {flag}")
        assert result.stdout == ""
    assert_one_line_error(convert(f"--hf_checkpoint={tmp_path / 'nowhere'}", out),
                          f"--hf_checkpoint={tmp_path / 'nowhere'} does not exist")
