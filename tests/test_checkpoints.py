"""Reference TF1 checkpoints: load (names, variants, slots, groups), errors, export round trip, CLI."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import (export_tf1_checkpoint, load_tf1_checkpoint,
                                   restore_object_checkpoint, tf1_variable_map)
from albert_tf.config import AlbertConfig
from albert_tf.heads import AlbertPretrainingModel
from albert_tf.modeling import AlbertModel
from tests import numpy_albert
from tests.shared_setup import REPO_ROOT, subprocess_env
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


def test_shape_mismatch_names_variable_and_both_shapes(tmp_path):
    written = small_config(vocab_size=30)
    write_reference_checkpoint(str(tmp_path / "model.ckpt"),
                               numpy_albert.reference_variable_shapes(written), with_slots=False)
    model = AlbertPretrainingModel(small_config(vocab_size=31))
    with pytest.raises(ValueError, match=r"bert/embeddings/word_embeddings.*\(30, 8\).*\(31, 8\)"):
        load_tf1_checkpoint(model, str(tmp_path))


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
        result = subprocess.run([sys.executable, "-m", "albert_tf.convert_checkpoint",
                                 f"--albert_config_file={config_file}", *args],
                                capture_output=True, text=True, env=subprocess_env(),
                                cwd=REPO_ROOT)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    out = convert(f"--tf1_checkpoint={tmp_path / 'ref'}", f"--output_dir={tmp_path / 'tf2'}")
    assert "missing from the checkpoint (0)" in out
    convert(f"--checkpoint={tmp_path / 'tf2'}", f"--output_dir={tmp_path / 'back'}")
    back = tf.train.load_checkpoint(str(tmp_path / "back" / "model.ckpt"))
    for name, value in values.items():
        np.testing.assert_array_equal(back.get_tensor(name), value)
