"""The config beside a checkpoint (albert_tf/checkpoints/config_beside.py): a config that differs
from it where the weights cannot tell (attention heads, activation) is refused by every loader of
reference TF1 and albert_tf checkpoints, naming both files (and first the keys the weights do
show, when those differ too); another depth is warned of by a warm start and refused by a conversion
or an export; the same file, or no config beside, loads as before (a conversion or an export then
says in one line what it took unchecked)."""

from __future__ import annotations

import re
import types

import numpy as np
import pytest
from absl import logging

from albert_tf.checkpoints.object_format import load_object_checkpoint
from albert_tf.checkpoints.report import CheckpointMismatchError
from albert_tf.checkpoints.tf1_format import load_tf1_checkpoint
from albert_tf.files.run_manifest import read_manifest
from albert_tf.checkpoints.warm_start import CheckpointSource, resolve_checkpoint_source
from albert_tf.cli import training_run
from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.pretraining.hub_export import load_pretraining_weights
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from tests import numpy_albert
from tests.command_runner import run_command
from tests.shared_setup import EN8K_MODEL, tiny_config
from tests.test_checkpoints import run_model, save_object_checkpoint, small_config
from tests.test_cli_errors import assert_one_line_error
from tests.tf1_fixtures import write_reference_checkpoint


def write_config(path, config: AlbertConfig) -> str:
    path.write_text(config.to_json_string())
    return str(path)


@pytest.fixture(params=["reference", "albert_tf"])
def checkpoint_with_config(request, tmp_path):
    """(loader, checkpoint prefix) of a checkpoint of small_config() (3 heads of a hidden size of
    12, gelu, 4 layers) with that config beside it as albert_config.json."""
    config = small_config()
    directory = tmp_path / "released"
    directory.mkdir()
    write_config(directory / "albert_config.json", config)
    if request.param == "reference":
        write_reference_checkpoint(str(directory / "model.ckpt"),
                                   numpy_albert.reference_variable_shapes(config))
        return load_tf1_checkpoint, str(directory / "model.ckpt-123")
    model = AlbertPretrainingModel(config)
    run_model(model, config)
    return load_object_checkpoint, save_object_checkpoint(model, str(directory))


@pytest.mark.parametrize("key, value", [("num_attention_heads", 4), ("hidden_act", "relu")])
def test_a_config_that_differs_where_the_weights_cannot_tell_is_refused(
        tmp_path, checkpoint_with_config, key, value):
    load, prefix = checkpoint_with_config
    mine = write_config(tmp_path / "mine.json", small_config(**{key: value}))
    model = AlbertPretrainingModel(small_config(**{key: value}))
    run_model(model, model.config)
    before = [weight.numpy() for weight in model.weights]
    with pytest.raises(CheckpointMismatchError, match=(
            rf"^the model of {mine} does not match .*released/albert_config.json, the config "
            rf"beside checkpoint .*released/model.ckpt.*: {key}={value!r} \(beside it: "
            r".*\)\. The weights fit both")):
        load(model, prefix, config_file=mine)
    assert all(np.array_equal(weight.numpy(), old) for weight, old in zip(model.weights, before))


@pytest.mark.parametrize("overrides, shaped, unseen", [
    (dict(num_attention_heads=4, hidden_size=16, intermediate_size=20),
     "hidden_size=16 (beside it: 12), intermediate_size=20 (beside it: 16)",
     "num_attention_heads=4 (beside it: 3)"),
    (dict(hidden_act="relu", vocab_size=40, num_hidden_groups=4),
     "vocab_size=40 (beside it: 30), num_hidden_groups=4 (beside it: 2)",
     "hidden_act='relu' (beside it: 'gelu')"),
])
def test_a_config_that_also_differs_where_the_weights_show_is_named_so(
        tmp_path, checkpoint_with_config, overrides, shaped, unseen):
    """Other heads or activation and other shapes: the message said "The weights fit both",
    which they do not; it names the keys the shapes show first."""
    load, prefix = checkpoint_with_config
    mine = write_config(tmp_path / "mine.json", small_config(**overrides))
    model = AlbertPretrainingModel(small_config(**overrides))
    run_model(model, model.config)
    with pytest.raises(CheckpointMismatchError) as raised:
        load(model, prefix, config_file=mine)
    message = str(raised.value)
    assert re.match(rf"^the model of {mine} does not match .*released/albert_config.json, the "
                    rf"config beside checkpoint .*: it differs in keys the weights' shapes show, "
                    rf"{re.escape(shaped)}, so the weights cannot fit both, and in "
                    rf"{re.escape(unseen)}\. Use .*albert_config.json if it is the checkpoint's "
                    "config, or correct it if it is not.$", message), message
    assert "fit both," not in message.replace("cannot fit both", "")


def test_groups_grown_from_group0_are_not_named_as_the_difference(tmp_path,
                                                                  checkpoint_with_config):
    """--init_from_group0 changes the number of groups on purpose: other heads are the difference
    named, and the weights fit both, by the loaders and by a fine-tuning run's check before work."""
    load, prefix = checkpoint_with_config
    overrides = dict(num_attention_heads=4, num_hidden_groups=4)
    mine = write_config(tmp_path / "mine.json", small_config(**overrides))
    model = AlbertPretrainingModel(small_config(**overrides))
    run_model(model, model.config)
    heads_only = r": num_attention_heads=4 \(beside it: 3\)\. The weights fit both"
    with pytest.raises(CheckpointMismatchError, match=heads_only):
        load(model, prefix, init_from_group0=True, config_file=mine)
    settings = types.SimpleNamespace(albert_config_file=mine, init_from_group0=True)
    with pytest.raises(CheckpointMismatchError, match=heads_only):
        training_run.check_init_checkpoint_config(settings, CheckpointSource(prefix, prefix),
                                                  model.config)


def test_the_config_beside_itself_or_an_equal_one_loads(tmp_path, checkpoint_with_config):
    load, prefix = checkpoint_with_config
    beside = str(tmp_path / "released" / "albert_config.json")
    for config_file in (beside, write_config(tmp_path / "copy.json", small_config()), None):
        report = load(AlbertPretrainingModel(small_config()), prefix, config_file=config_file)
        assert report.missing == []


def test_another_depth_is_warned_of_and_loads(tmp_path, checkpoint_with_config, monkeypatch):
    load, prefix = checkpoint_with_config
    warnings = []
    monkeypatch.setattr(logging, "warning", lambda message, *args: warnings.append(message % args))
    deeper = write_config(tmp_path / "deeper.json", small_config(num_hidden_layers=8))
    report = load(AlbertPretrainingModel(small_config(num_hidden_layers=8)), prefix,
                  config_file=deeper)
    assert report.missing == []
    assert len(warnings) == 1 and "runs the shared layers 8 times" in warnings[0], warnings
    assert "says 4" in warnings[0]


@pytest.mark.requires_shared_data
def test_fine_tuning_refuses_it_before_any_work(tmp_path):
    """run_classifier warm-starting from a checkpoint whose albert_config.json says 2 heads, given
    a config of 4: one line naming both, before its features are built."""
    released = tmp_path / "released"
    released.mkdir()
    config = tiny_config()
    write_config(released / "albert_config.json", config)
    model = AlbertPretrainingModel(config)
    run_model(model, config)
    save_object_checkpoint(model, str(released))
    mine = write_config(tmp_path / "mine.json", tiny_config(num_attention_heads=4))
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("text,label\na fine film,pos\na dull film,neg\n")
    output_dir = tmp_path / "out"
    result = run_command("run_classifier.py", f"--train_file={data / 'train.csv'}",
                         f"--albert_config_file={mine}", f"--spm_model_file={EN8K_MODEL}",
                         f"--init_checkpoint={released}",
                         f"--output_dir={output_dir}", "--do_train", "--max_seq_length=16")
    assert_one_line_error(result, "run_classifier", f"the model of {mine} does not match",
                          "num_attention_heads=4 (beside it: 2)")
    assert not output_dir.exists()


@pytest.mark.requires_shared_data
def test_a_fine_tuning_run_records_its_config_and_a_rerun_with_other_heads_is_refused(tmp_path):
    """A fine-tuning run keeps its config beside its checkpoints, as pretraining does: a resume or
    evaluation with a config of other heads (the same shapes) stopped nowhere and computed with
    the wrong heads; now it stops before any work, naming the key. The recorded config itself is
    accepted as --albert_config_file, and a warm start from the run's checkpoint is checked
    against it."""
    config_file = write_config(tmp_path / "config.json", tiny_config())
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("text,label\na fine film,pos\na dull film,neg\n")
    output_dir = tmp_path / "out"
    common = [f"--train_file={data / 'train.csv'}", f"--spm_model_file={EN8K_MODEL}",
              "--max_seq_length=16", "--train_batch_size=2", "--train_step=1",
              "--save_checkpoints_steps=1"]
    result = run_command("run_classifier.py", *common, f"--albert_config_file={config_file}",
                         f"--output_dir={output_dir}", "--do_train")
    assert result.returncode == 0, result.stderr[-3000:]
    assert AlbertConfig.from_dict(read_manifest(str(output_dir)).fact("config")).to_dict() == (
        tiny_config().to_dict())
    # Also written beside the checkpoints, as a released model's directory has it.
    assert AlbertConfig.from_json_file(str(output_dir / "albert_config.json")).to_dict() == (
        tiny_config().to_dict())

    other_heads = write_config(tmp_path / "heads.json", tiny_config(num_attention_heads=4))
    result = run_command("run_classifier.py", *common, f"--albert_config_file={other_heads}",
                         f"--output_dir={output_dir}", "--do_train", "--train_step=2")
    assert_one_line_error(result, "run_classifier", f"--output_dir={output_dir} holds checkpoints "
                          "trained with the config num_attention_heads=2 (run_manifest.json); this "
                          f"run has num_attention_heads=4 ({other_heads})")
    assert not (output_dir / "model.ckpt-2.index").exists()
    result = run_command("run_classifier.py", *common,
                         f"--albert_config_file={output_dir / 'albert_config.json'}",
                         f"--output_dir={output_dir}", "--do_train", "--train_step=2")
    assert result.returncode == 0, result.stderr[-3000:]

    result = run_command("run_classifier.py", *common, f"--albert_config_file={other_heads}",
                         f"--init_checkpoint={output_dir}", f"--output_dir={tmp_path / 'next'}",
                         "--do_train")
    assert_one_line_error(result, "run_classifier", "num_attention_heads=4 (beside it: 2)")


# The flag of convert_checkpoint that takes each kind of checkpoint of ``checkpoint_with_config``.
CONVERSION_FLAGS = {load_tf1_checkpoint: "--tf1_checkpoint", load_object_checkpoint: "--checkpoint"}


@pytest.mark.parametrize("key, value", [("num_hidden_layers", 8), ("num_attention_heads", 4),
                                        ("hidden_act", "relu")])
@pytest.mark.parametrize("target", ["", "--to=huggingface"])
def test_a_conversion_refuses_a_config_the_weights_cannot_tell_from_the_one_beside(
        tmp_path, checkpoint_with_config, key, value, target):
    """A conversion's output is meant to be the checkpoint's model (a Hugging Face config.json
    records the depth, heads and activation given): another depth is refused too, not only warned
    of as a warm start does, before anything is written."""
    load, prefix = checkpoint_with_config
    mine = write_config(tmp_path / "mine.json", small_config(**{key: value}))
    output_dir = tmp_path / "out"
    result = run_command("-m albert_tf.convert_checkpoint", f"{CONVERSION_FLAGS[load]}={prefix}",
                         f"--albert_config_file={mine}", f"--output_dir={output_dir}",
                         *[flag for flag in (target,) if flag])
    assert_one_line_error(result, "convert_checkpoint", f"the model of {mine} does not match",
                          f"{key}={value!r} (beside it: ", "The weights fit both")
    assert not output_dir.exists()


def test_an_export_refuses_another_depth_than_the_config_beside(tmp_path, checkpoint_with_config):
    load, prefix = checkpoint_with_config
    deeper = write_config(tmp_path / "deeper.json", small_config(num_hidden_layers=8))
    model = AlbertPretrainingModel(small_config(num_hidden_layers=8))
    with pytest.raises(CheckpointMismatchError, match=r"num_hidden_layers=8 \(beside it: 4\)"):
        load_pretraining_weights(model, resolve_checkpoint_source(prefix), deeper)


def test_without_a_config_beside_a_conversion_and_an_export_say_what_they_took_unchecked(
        tmp_path, checkpoint_with_config, capsys):
    """No albert_config.json beside the checkpoint: the depth, heads and activation come from
    --albert_config_file alone, and one line says so, naming them and the file (the conversion
    and the export go ahead); with one beside, no such line."""
    load, prefix = checkpoint_with_config
    mine = write_config(tmp_path / "mine.json", small_config())
    unchecked = (f"Unchecked: num_hidden_layers=4, num_attention_heads=3, hidden_act='gelu' are "
                 f"taken from {mine}: the weights cannot show them, and there is no "
                 f"{tmp_path / 'released' / 'albert_config.json'} beside checkpoint {prefix} to "
                 "compare them with.")
    for checked in (True, False):
        if not checked:
            (tmp_path / "released" / "albert_config.json").unlink()
        output_dir = tmp_path / f"out_{checked}"
        result = run_command("-m albert_tf.convert_checkpoint",
                             f"{CONVERSION_FLAGS[load]}={prefix}", f"--albert_config_file={mine}",
                             f"--output_dir={output_dir}")
        assert result.returncode == 0, result.stderr[-3000:]
        lines = [line for line in result.stdout.splitlines() if "nchecked" in line]
        assert lines == ([] if checked else [unchecked]), result.stdout
    capsys.readouterr()
    load_pretraining_weights(AlbertPretrainingModel(small_config()),
                             resolve_checkpoint_source(prefix), mine)
    assert unchecked in capsys.readouterr().out.splitlines()
