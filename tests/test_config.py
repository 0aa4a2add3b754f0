"""AlbertConfig JSON semantics, validation errors and the parameter counts of the released configs."""

import json
import os
import uuid

import pytest
import tensorflow as tf

from albert_tf.models.config import AlbertConfig, ConfigError
from albert_tf.models.parameters import encoder_parameter_count, parameter_report
from albert_tf.tasks.pretraining.memory import heads_parameter_count, training_memory_bytes
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from tests.command_runner import run_command
from tests.shared_setup import REPO_ROOT

CONFIG_DIR = os.path.join(REPO_ROOT, "configs")


def test_missing_keys_take_xxlarge_defaults_and_unknown_keys_are_kept(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"vocab_size": 99, "hidden_size": 37 * 1, "num_attention_heads": 1,
                                "net_structure_type": 0, "layers_to_keep": []}))
    cfg = AlbertConfig.from_json_file(str(path))
    assert cfg.vocab_size == 99 and cfg.hidden_size == 37
    assert cfg.intermediate_size == 16384 and cfg.embedding_size == 128
    assert cfg.num_hidden_layers == 12 and cfg.hidden_act == "gelu"
    assert cfg.net_structure_type == 0 and cfg.layers_to_keep == []
    assert cfg.to_dict()["layers_to_keep"] == []


def test_json_round_trip_sorted_keys():
    cfg = AlbertConfig.from_json_file(os.path.join(CONFIG_DIR, "albert_base_v2.json"))
    text = cfg.to_json_string()
    assert text.endswith("\n")
    keys = list(json.loads(text))
    assert keys == sorted(keys)
    assert AlbertConfig.from_dict(json.loads(text)).to_dict() == cfg.to_dict()


def test_to_json_file_is_atomic(tmp_path):
    cfg = AlbertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, intermediate_size=4)
    cfg.to_json_file(str(tmp_path / "out.json"))
    assert os.listdir(tmp_path) == ["out.json"]
    assert AlbertConfig.from_json_file(str(tmp_path / "out.json")).to_dict() == cfg.to_dict()


@pytest.mark.parametrize("values, key", [
    ({"hidden_size": 768, "num_attention_heads": 7}, "num_attention_heads"),
    ({"hidden_size": 768, "num_attention_heads": 12, "vocab_size": None}, "vocab_size"),
    ({"num_hidden_groups": 13, "num_hidden_layers": 12}, "num_hidden_groups"),
    ({"hidden_act": "swish"}, "hidden_act"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
    ({"embedding_size": 0}, "embedding_size"),
])
def test_invalid_values_name_the_key(values, key):
    base = {"vocab_size": 100, "hidden_size": 64, "num_attention_heads": 4}
    base.update(values)
    with pytest.raises(ConfigError, match=f"'{key}'"):
        AlbertConfig.from_dict(base)


def test_missing_vocab_size_in_file_names_file_and_key(tmp_path):
    path = tmp_path / "no_vocab.json"
    path.write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 4}))
    with pytest.raises(ConfigError, match=r"no_vocab\.json.*'vocab_size'"):
        AlbertConfig.from_json_file(str(path))


def test_unreadable_files_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        AlbertConfig.from_json_file(str(tmp_path / "absent.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json is not valid JSON"):
        AlbertConfig.from_json_file(str(bad))


def test_reads_through_gfile():
    """A ram:// file is reachable only through tf.io.gfile, like gs:// ones."""
    directory = f"ram://config_test_{uuid.uuid4().hex}"
    path = f"{directory}/albert_config.json"
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps({"vocab_size": 30, "hidden_size": 16, "num_attention_heads": 4}))
    cfg = AlbertConfig.from_json_file(path)
    assert (cfg.vocab_size, cfg.hidden_size, cfg.head_size) == (30, 16, 4)
    with pytest.raises(ConfigError, match=f"not found: {directory}/absent.json"):
        AlbertConfig.from_json_file(f"{directory}/absent.json")
    tf.io.gfile.remove(path)


@pytest.mark.parametrize("size, millions", [("base", 11.68), ("large", 17.68),
                                            ("xlarge", 58.72), ("xxlarge", 222.6)])
def test_released_config_parameter_counts(size, millions):
    for version in ("v1", "v2"):
        cfg = AlbertConfig.from_json_file(os.path.join(CONFIG_DIR, f"albert_{size}_{version}.json"))
        expected = encoder_parameter_count(cfg)
        assert round(expected / 1e6, 2 if millions < 100 else 1) == millions
    counts = parameter_report(AlbertPretrainingModel(cfg))
    assert counts["encoder total"] == expected
    h, e, v = cfg.hidden_size, cfg.embedding_size, cfg.vocab_size
    assert counts["MLM head (excluding tied embeddings)"] == h * e + e + 2 * e + v
    assert counts["SOP head"] == 2 * h + 2
    assert counts["total"] == expected + heads_parameter_count(cfg)


def test_training_memory_estimate_by_hand():
    cfg = AlbertConfig(vocab_size=10, embedding_size=4, hidden_size=8, num_hidden_layers=3,
                       num_attention_heads=2, intermediate_size=16, max_position_embeddings=6)
    memory = training_memory_bytes(cfg, batch_size=2, seq_length=5, compute_bytes=2)
    parameters = parameter_report(AlbertPretrainingModel(cfg))["total"]
    assert memory["weights_and_optimizer"] == 16 * parameters
    per_token = 9 * 8 + 2 * 16 + 2 * 2 * 5  # 9H + 2I + 2AS
    assert memory["activations"] == per_token * 5 * 2 * 3 * 2  # x S x B x L x bytes


def test_v2_configs_have_no_dropout_and_v1_base_does():
    v2 = AlbertConfig.from_json_file(os.path.join(CONFIG_DIR, "albert_large_v2.json"))
    v1 = AlbertConfig.from_json_file(os.path.join(CONFIG_DIR, "albert_base_v1.json"))
    assert v2.hidden_dropout_prob == 0 and v2.attention_probs_dropout_prob == 0
    assert v1.hidden_dropout_prob == 0.1


def test_parameter_report_command():
    result = run_command("-m albert_tf.model_report",
                         f"--albert_config_file={os.path.join(CONFIG_DIR, 'albert_base_v2.json')}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "encoder total" in result.stdout and "11,683,584" in result.stdout
    assert "cross_layer_sharing: all" in result.stdout
    assert ("embeddings + transformer (no pooler, no heads; the tables' count): 11,092,992 "
            "(11.09M)") in result.stdout
    assert "Estimated training memory, batch 8 x seq 512, float32" in result.stdout
