"""Checkpoints: reference TF1 load (names, variants, slots, groups), albert_tf (object-based) load
and its report, shape and model mismatches, export round trip, and the conversion command (which
never overwrites without --overwrite and never writes into another run's directory)."""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints.conversion import (ConversionError, albert_tf_to_tf1, check_output_dir,
                                              tf1_to_albert_tf)
from albert_tf.checkpoints.object_format import (checkpoint_root, object_variable_paths,
                                                 require_same_model, restore_object_checkpoint)
from albert_tf.checkpoints.report import CheckpointMismatchError
from albert_tf.checkpoints.tf1_format import export_tf1_checkpoint, load_tf1_checkpoint
from albert_tf.checkpoints.tf1_names import tf1_variable_map
from albert_tf.checkpoints.warm_start import load_checkpoint, resolve_checkpoint_source
from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import AlbertModel
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from tests import numpy_albert
from tests.command_runner import run_command, run_command_checked
from tests.tf1_fixtures import write_reference_checkpoint


def small_config(**overrides):
    values = dict(vocab_size=30, embedding_size=8, hidden_size=12, num_hidden_layers=4,
                  num_hidden_groups=2, num_attention_heads=3, intermediate_size=16,
                  inner_group_num=1, max_position_embeddings=12, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    values.update(overrides)
    return AlbertConfig.from_dict(values)


def batch(cfg):
    rng = np.random.default_rng(5)
    ids = rng.integers(0, cfg.vocab_size, (2, 7)).astype(np.int32)
    mask = np.array([[1] * 7, [1] * 4 + [0] * 3], np.int32)
    segments = np.array([[0] * 3 + [1] * 4] * 2, np.int32)
    positions = np.array([[1, 3], [0, 2]], np.int32)
    return ids, mask, segments, positions


def run_model(model, cfg):
    ids, mask, segments, positions = batch(cfg)
    return model({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                  "masked_lm_positions": positions})


def assert_matches_numpy(model, cfg, values):
    out = run_model(model, cfg)
    ids, mask, segments, positions = batch(cfg)
    want = numpy_albert.forward(values, cfg, ids, mask, segments, positions)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        assert np.max(np.abs(out[key].numpy() - want[key])) <= 1e-5, key


def test_reference_checkpoint_loads_completely_and_reproduces_numpy(tmp_path):
    cfg = small_config()
    values = write_reference_checkpoint(str(tmp_path / "model.ckpt"),
                                        numpy_albert.reference_variable_shapes(cfg))
    model = AlbertPretrainingModel(cfg)
    report = load_tf1_checkpoint(model, str(tmp_path))  # a directory resolves to the latest
    assert report.missing == [] and report.unused == []
    assert len(report.loaded) == len(values)
    assert report.ignored == 2 * len(values) + 1  # adam_m, adam_v per variable + global_step
    assert_matches_numpy(model, cfg, values)
    assert "missing from the checkpoint (0): none" in report.format()


def test_encoder_only_model_reports_heads_as_unused(tmp_path):
    cfg = small_config()
    values = write_reference_checkpoint(str(tmp_path / "model.ckpt"),
                                        numpy_albert.reference_variable_shapes(cfg))
    report = load_tf1_checkpoint(AlbertModel(cfg), str(tmp_path / "model.ckpt-123"))
    assert report.missing == []
    assert sorted(report.unused) == sorted(n for n in values if n.startswith("cls/"))


def test_layer_normalization_name_variants_load(tmp_path):
    cfg = small_config()

    def keras_style(name):
        return name.replace("LayerNorm_1/", "layer_normalization_1/").replace(
            "LayerNorm/", "layer_normalization/")

    values = write_reference_checkpoint(str(tmp_path / "model.ckpt"),
                                        numpy_albert.reference_variable_shapes(cfg),
                                        rename=keras_style, with_slots=False)
    model = AlbertPretrainingModel(cfg)
    report = load_tf1_checkpoint(model, str(tmp_path))
    assert report.missing == [] and report.unused == []
    assert_matches_numpy(model, cfg, values)


def test_missing_encoder_variables_are_reported_and_can_be_required(tmp_path):
    cfg = small_config()
    shapes = numpy_albert.reference_variable_shapes(cfg)
    del shapes["bert/pooler/dense/kernel"]
    write_reference_checkpoint(str(tmp_path / "model.ckpt"), shapes, with_slots=False)
    report = load_tf1_checkpoint(AlbertPretrainingModel(cfg), str(tmp_path))
    assert report.missing == ["bert/pooler/dense/kernel"]
    with pytest.raises(ValueError, match="bert/pooler/dense/kernel"):
        report.require_complete_encoder()


def test_shape_mismatch_names_checkpoint_config_variable_and_both_shapes(tmp_path):
    written = small_config(vocab_size=30)
    write_reference_checkpoint(str(tmp_path / "model.ckpt"),
                               numpy_albert.reference_variable_shapes(written), with_slots=False)
    model = AlbertPretrainingModel(small_config(vocab_size=31))
    with pytest.raises(CheckpointMismatchError, match=r"model\.ckpt-123.*my_config\.json.*"
                       r"bert/embeddings/word_embeddings.*\(30, 8\).*\(31, 8\)"):
        load_tf1_checkpoint(model, str(tmp_path), config_file="my_config.json")


def test_nonexistent_checkpoint_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does_not_exist"):
        load_tf1_checkpoint(AlbertModel(small_config()), str(tmp_path / "does_not_exist"))
    with pytest.raises(FileNotFoundError, match="No checkpoint"):
        load_tf1_checkpoint(AlbertModel(small_config()), str(tmp_path))


def test_init_from_group0_grows_one_group_into_many(tmp_path):
    one_group = small_config(num_hidden_groups=1)
    values = write_reference_checkpoint(str(tmp_path / "model.ckpt"),
                                        numpy_albert.reference_variable_shapes(one_group))
    grown_cfg = small_config(num_hidden_groups=2)
    model = AlbertPretrainingModel(grown_cfg)
    report = load_tf1_checkpoint(model, str(tmp_path), init_from_group0=True)
    assert report.missing == [] and report.unused == []
    group1 = [n for n in report.loaded if "/group_1/" in n]
    assert group1 and all(report.loaded[n] == n.replace("/group_1/", "/group_0/") for n in group1)
    # Every group holds group 0's weights, so the 2-group model equals the 1-group reference.
    assert_matches_numpy(model, one_group, values)
    without = load_tf1_checkpoint(AlbertPretrainingModel(grown_cfg), str(tmp_path))
    assert sorted(without.missing) == sorted(group1)


def test_export_then_reload_is_bit_exact(tmp_path):
    cfg = small_config()
    model = AlbertPretrainingModel(cfg)
    prefix = export_tf1_checkpoint(model, str(tmp_path / "export" / "model.ckpt"))
    stored = dict(tf.train.list_variables(prefix))
    assert set(stored) == set(numpy_albert.reference_variable_shapes(cfg)) | {"global_step"}
    assert not any(n.endswith(("adam_m", "adam_v")) for n in stored)
    assert tf.train.latest_checkpoint(str(tmp_path / "export")).endswith("model.ckpt")
    assert not [f for f in os.listdir(tmp_path / "export") if "tmp" in f]
    shutil.copytree(tmp_path / "export", tmp_path / "copied")  # the state file names it relatively
    assert tf.train.latest_checkpoint(str(tmp_path / "copied")) == str(tmp_path / "copied" /
                                                                       "model.ckpt")
    reloaded = AlbertPretrainingModel(cfg)
    report = load_tf1_checkpoint(reloaded, prefix)
    assert report.missing == [] and report.unused == []
    for name, variable in tf1_variable_map(model).items():
        np.testing.assert_array_equal(variable.numpy(), tf1_variable_map(reloaded)[name].numpy())


def test_object_checkpoint_is_refused_by_the_tf1_loader(tmp_path):
    cfg = small_config()
    model = AlbertPretrainingModel(cfg)
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ours"))
    with pytest.raises(ValueError, match="object-based"):
        load_tf1_checkpoint(AlbertPretrainingModel(cfg), path)
    restored = AlbertPretrainingModel(cfg)
    restore_object_checkpoint(restored, path)
    np.testing.assert_array_equal(restored.albert.pooler.kernel.numpy(),
                                  model.albert.pooler.kernel.numpy())


def test_conversion_command_both_directions(tmp_path):
    cfg = small_config()
    config_file = tmp_path / "config.json"
    config_file.write_text(cfg.to_json_string())
    values = write_reference_checkpoint(str(tmp_path / "ref" / "model.ckpt"),
                                        numpy_albert.reference_variable_shapes(cfg))

    def convert(*args):
        return run_command_checked("-m albert_tf.convert_checkpoint",
                                   f"--albert_config_file={config_file}", *args).stdout

    out = convert(f"--tf1_checkpoint={tmp_path / 'ref'}", f"--output_dir={tmp_path / 'tf2'}")
    assert "missing from the checkpoint (0)" in out
    convert(f"--checkpoint={tmp_path / 'tf2'}", f"--output_dir={tmp_path / 'back'}")
    back = tf.train.load_checkpoint(str(tmp_path / "back" / "model.ckpt"))
    for name, value in values.items():
        np.testing.assert_array_equal(back.get_tensor(name), value)


# ---------------------------------------------------------- albert_tf (object-based) checkpoints
def save_object_checkpoint(model, directory, step=1):
    """An albert_tf checkpoint of ``model`` as the scripts write one; returns its prefix."""
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(directory),
                                         max_to_keep=None, checkpoint_name="model.ckpt")
    return manager.save(checkpoint_number=step)


def test_object_variable_paths_are_where_tf_train_checkpoint_saves_each_variable(tmp_path):
    for model in (AlbertPretrainingModel(small_config()), AlbertModel(small_config())):
        root = checkpoint_root(model)
        prefix = root.write(str(tmp_path / type(model).__name__))
        saved = {name for name, _ in tf.train.list_variables(prefix)
                 if name.endswith("/.ATTRIBUTES/VARIABLE_VALUE")}
        paths = object_variable_paths(root)
        assert {"/".join(p) + "/.ATTRIBUTES/VARIABLE_VALUE" for p in paths} == saved
        assert len(paths) == len(model.weights)
        assert all(p[:2] == ("model", "albert") for p in paths if "albert" in p)


def test_another_tasks_checkpoint_loads_the_encoder_and_reports_heads_left_random(tmp_path):
    cfg = small_config()
    classifier = AlbertClassifierModel(cfg, 3)
    save_object_checkpoint(classifier, tmp_path, step=7)
    model = AlbertPretrainingModel(cfg)
    report = load_checkpoint(model, resolve_checkpoint_source(str(tmp_path)))
    heads = [name for name in tf1_variable_map(model) if name.startswith("cls/")]
    assert report.kind == "albert_tf" and report.checkpoint.endswith("model.ckpt-7")
    assert report.missing == heads and len(heads) == 7
    assert report.unused == ["model/classifier/output_bias", "model/classifier/output_weights"]
    assert f"WARNING: 7 head variable(s) are not in {report.checkpoint}" in report.format()
    report.require_complete_encoder()  # missing heads are allowed (and reported)
    loaded = tf1_variable_map(model)
    for name, variable in tf1_variable_map(classifier.albert).items():
        np.testing.assert_array_equal(loaded[name].numpy(), variable.numpy())


def test_object_checkpoint_with_fewer_groups_needs_init_from_group0(tmp_path):
    one_group = AlbertPretrainingModel(small_config(num_hidden_groups=1))
    save_object_checkpoint(one_group, tmp_path)
    report = load_checkpoint(AlbertPretrainingModel(small_config()),
                             resolve_checkpoint_source(str(tmp_path)))
    assert report.missing and all("/group_1/" in name for name in report.missing)
    with pytest.raises(CheckpointMismatchError, match="encoder variable.*group_1"):
        report.require_complete_encoder()
    grown = AlbertPretrainingModel(small_config())
    report = load_checkpoint(grown, resolve_checkpoint_source(str(tmp_path)), init_from_group0=True)
    assert report.missing == [] and report.unused == []
    np.testing.assert_allclose(run_model(grown, small_config())["mlm_logits"].numpy(),
                               run_model(one_group, small_config())["mlm_logits"].numpy(),
                               atol=1e-5)


def test_object_checkpoint_shape_mismatch_is_one_error_and_changes_nothing(tmp_path):
    save_object_checkpoint(AlbertPretrainingModel(small_config(vocab_size=30)), tmp_path)
    model = AlbertPretrainingModel(small_config(vocab_size=31))
    before = [variable.numpy() for variable in model.weights]
    with pytest.raises(CheckpointMismatchError, match=r"model\.ckpt-1.*my_config\.json.*"
                       r"bert/embeddings/word_embeddings.*\(30, 8\).*\(31, 8\)"):
        load_checkpoint(model, resolve_checkpoint_source(str(tmp_path)),
                        config_file="my_config.json")
    for value, variable in zip(before, model.weights):
        np.testing.assert_array_equal(value, variable.numpy())


def test_require_same_model_accepts_only_the_model_that_wrote_the_checkpoint(tmp_path):
    cfg = small_config()
    prefix = save_object_checkpoint(AlbertPretrainingModel(cfg), tmp_path / "ours")
    require_same_model(AlbertPretrainingModel(cfg), prefix)
    with pytest.raises(CheckpointMismatchError,
                       match=r"c\.json.*lacks 2 .*output_weights.*holds 7 .*model/mlm_head"):
        require_same_model(AlbertClassifierModel(cfg, 2), prefix, "c.json")
    wider = AlbertPretrainingModel(small_config(intermediate_size=20))
    with pytest.raises(CheckpointMismatchError,
                       match=r"ffn_1/intermediate/dense/kernel has shape \(12, 16\) in the "
                             r"checkpoint, the model expects \(12, 20\)"):
        require_same_model(wider, prefix)
    write_reference_checkpoint(str(tmp_path / "ref" / "model.ckpt"),
                               numpy_albert.reference_variable_shapes(cfg), with_slots=False)
    with pytest.raises(CheckpointMismatchError, match="reference TF1 checkpoint"):
        require_same_model(AlbertPretrainingModel(cfg), str(tmp_path / "ref" / "model.ckpt-123"))


# ---------------------------------------------------------------------- the conversion command
def test_conversion_replaces_an_earlier_one_only_with_overwrite(tmp_path):
    cfg = small_config()
    shapes = numpy_albert.reference_variable_shapes(cfg)
    first = write_reference_checkpoint(str(tmp_path / "a" / "model.ckpt"), shapes, seed=0)
    second = write_reference_checkpoint(str(tmp_path / "b" / "model.ckpt"), shapes, seed=1)
    out = str(tmp_path / "out")
    pooler = "model/albert/pooler/kernel/.ATTRIBUTES/VARIABLE_VALUE"

    def stored_pooler():
        return tf.train.load_checkpoint(tf.train.latest_checkpoint(out)).get_tensor(pooler)

    prefix = tf1_to_albert_tf(AlbertPretrainingModel(cfg), str(tmp_path / "a"), out)
    assert prefix == os.path.join(out, "model.ckpt-0")
    np.testing.assert_array_equal(stored_pooler(), first["bert/pooler/dense/kernel"])
    with pytest.raises(ConversionError, match=r"model\.ckpt-0 already exists.*--overwrite"):
        tf1_to_albert_tf(AlbertPretrainingModel(cfg), str(tmp_path / "b"), out)
    np.testing.assert_array_equal(stored_pooler(), first["bert/pooler/dense/kernel"])
    tf1_to_albert_tf(AlbertPretrainingModel(cfg), str(tmp_path / "b"), out, overwrite=True)
    np.testing.assert_array_equal(stored_pooler(), second["bert/pooler/dense/kernel"])
    with pytest.raises(ConversionError, match="is a file"):
        check_output_dir(str(tmp_path / "a" / "checkpoint"), "model.ckpt", overwrite=True)


def test_conversion_never_writes_into_a_training_runs_directory(tmp_path):
    cfg = small_config()
    config_file = tmp_path / "config.json"
    config_file.write_text(cfg.to_json_string())
    write_reference_checkpoint(str(tmp_path / "ref" / "model.ckpt"),
                               numpy_albert.reference_variable_shapes(cfg))
    run = tmp_path / "run"
    save_object_checkpoint(AlbertPretrainingModel(cfg), run, step=2)
    state, files = (run / "checkpoint").read_bytes(), sorted(os.listdir(run))

    result = run_command("-m albert_tf.convert_checkpoint", f"--albert_config_file={config_file}",
                         f"--tf1_checkpoint={tmp_path / 'ref'}", f"--output_dir={run}",
                         "--overwrite")
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert f"--output_dir={run} holds other checkpoints (model.ckpt-2)" in last_line
    with pytest.raises(ConversionError, match=r"model\.ckpt-2"):  # the other direction
        albert_tf_to_tf1(AlbertPretrainingModel(cfg), str(run), str(run), overwrite=True)
    assert (run / "checkpoint").read_bytes() == state and sorted(os.listdir(run)) == files


def test_conversion_flags_must_name_the_right_format(tmp_path):
    cfg = small_config()
    write_reference_checkpoint(str(tmp_path / "ref" / "model.ckpt"),
                               numpy_albert.reference_variable_shapes(cfg), with_slots=False)
    save_object_checkpoint(AlbertPretrainingModel(cfg), tmp_path / "ours")
    with pytest.raises(ConversionError,
                       match="ref is a reference TF1 checkpoint.*--tf1_checkpoint"):
        albert_tf_to_tf1(AlbertPretrainingModel(cfg), str(tmp_path / "ref"), str(tmp_path / "out"))
    with pytest.raises(ConversionError, match="ours is an albert_tf checkpoint.*--checkpoint"):
        tf1_to_albert_tf(AlbertPretrainingModel(cfg), str(tmp_path / "ours"), str(tmp_path / "out"))
    with pytest.raises(ConversionError, match="--checkpoint: .*nowhere"):
        albert_tf_to_tf1(AlbertPretrainingModel(cfg), str(tmp_path / "nowhere"), str(tmp_path / "out"))
    assert not os.path.exists(tmp_path / "out")


def test_conversion_writes_only_what_the_source_holds(tmp_path):
    cfg = small_config()
    classifier = AlbertClassifierModel(cfg, 3)
    save_object_checkpoint(classifier, tmp_path / "cls")
    _, prefix, count = albert_tf_to_tf1(AlbertPretrainingModel(cfg), str(tmp_path / "cls"),
                                        str(tmp_path / "tf1"))
    encoder = tf1_variable_map(classifier.albert)
    stored = tf.train.load_checkpoint(prefix)
    assert set(stored.get_variable_to_shape_map()) == set(encoder) | {"global_step"}
    assert count == len(encoder)
    for name, variable in encoder.items():
        np.testing.assert_array_equal(stored.get_tensor(name), variable.numpy())

    # A reference checkpoint without heads converts to an encoder-only albert_tf checkpoint, so a
    # warm start from it reports the heads as missing instead of loading random ones.
    write_reference_checkpoint(str(tmp_path / "ref" / "model.ckpt"),
                               numpy_albert.reference_variable_shapes(cfg, with_heads=False))
    converted = tf1_to_albert_tf(AlbertPretrainingModel(cfg), str(tmp_path / "ref"),
                                 str(tmp_path / "converted"))
    assert not [name for name, _ in tf.train.list_variables(converted) if "_head/" in name]
    model = AlbertPretrainingModel(cfg)
    report = load_checkpoint(model, resolve_checkpoint_source(converted))
    assert report.missing == [name for name in tf1_variable_map(model) if name.startswith("cls/")]
    assert report.missing_encoder() == []
