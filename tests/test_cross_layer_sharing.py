"""cross_layer_sharing (the paper's Table 4 strategies): forward pass against the NumPy reference,
which variables exist and receive gradient, TF1 round trip, parameter counts, config checks."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints.object_format import require_same_model
from albert_tf.checkpoints.report import CheckpointMismatchError
from albert_tf.checkpoints.tf1_format import export_tf1_checkpoint, load_tf1_checkpoint
from albert_tf.checkpoints.tf1_names import tf1_variable_map
from albert_tf.checkpoints.warm_start import load_checkpoint, resolve_checkpoint_source
from albert_tf.models.config import AlbertConfig, ConfigError
from albert_tf.models.encoder import AlbertModel
from albert_tf.models.parameters import encoder_parameter_count, parameter_report
from albert_tf.tasks.pretraining.hub_export import CONFIG_ASSET, export_encoder
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from tests import numpy_albert
from tests.command_runner import run_command
from tests.shared_setup import EN8K_MODEL, randomized, require_shared_data, tiny_config
from tests.test_checkpoints import save_object_checkpoint
from tests.test_modeling import TOLERANCE, make_config, padded_batch, weights_of
from tests.test_training import make_trainer, synthetic_dataset_fn
from tests.tolerances import sum_tolerance

STRATEGIES = ("all", "attention", "ffn", "none")
# (strategy, L, G, K): one group, several groups of unequal size, two inner blocks.
CASES = [(s, 3, 1, 1) for s in STRATEGIES] + [
    ("attention", 5, 2, 2), ("ffn", 5, 2, 2), ("none", 4, 4, 1), ("none", 3, 1, 2)]


def sharing_config(strategy, layers=3, groups=1, inner=1, **overrides):
    return make_config(embedding_size=8, hidden_size=12, num_hidden_layers=layers,
                       num_hidden_groups=groups, inner_group_num=inner, num_attention_heads=3,
                       intermediate_size=16, cross_layer_sharing=strategy, **overrides)


@pytest.mark.parametrize("strategy,layers,groups,inner", CASES)
def test_forward_matches_numpy_reference(strategy, layers, groups, inner):
    cfg = sharing_config(strategy, layers, groups, inner)
    model = AlbertPretrainingModel(cfg)
    randomized(model)
    assert {n: tuple(v.shape) for n, v in tf1_variable_map(model).items()} == \
        numpy_albert.reference_variable_shapes(cfg)
    ids, mask, segments, positions = padded_batch(cfg)
    out = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                 "masked_lm_positions": positions})
    expected = numpy_albert.forward(weights_of(model), cfg, ids, mask, segments, positions)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        assert np.max(np.abs(out[key].numpy() - expected[key])) <= TOLERANCE, key
    assert len(out["encoder_outputs"]) == layers * inner
    for got, want in zip(out["encoder_outputs"], expected["encoder_outputs"]):
        assert np.max(np.abs(got.numpy() - want)) <= TOLERANCE


def test_part_names_follow_the_strategy():
    def transformer_scopes(strategy):
        names = tf1_variable_map(AlbertModel(sharing_config(strategy)))
        return sorted({"/".join(n.split("/")[3:6:2]) for n in names if "/transformer/" in n})

    assert transformer_scopes("all") == ["group_0/LayerNorm", "group_0/LayerNorm_1",
                                         "group_0/attention_1", "group_0/ffn_1"]
    assert transformer_scopes("attention") == [
        "group_0/LayerNorm", "group_0/LayerNorm_1", "group_0/attention_1", "group_0/ffn_1",
        "group_1/LayerNorm_1", "group_1/ffn_1", "group_2/LayerNorm_1", "group_2/ffn_1"]
    assert transformer_scopes("ffn") == [
        "group_0/LayerNorm", "group_0/LayerNorm_1", "group_0/attention_1", "group_0/ffn_1",
        "group_1/LayerNorm", "group_1/attention_1", "group_2/LayerNorm", "group_2/attention_1"]
    assert transformer_scopes("none") == [f"group_{n}/{part}" for n in range(3) for part in
                                          ("LayerNorm", "LayerNorm_1", "attention_1", "ffn_1")]
    # "none" is the reference's not-shared model (G = L), variable for variable.
    assert sorted(tf1_variable_map(AlbertModel(sharing_config("none")))) == \
        sorted(tf1_variable_map(AlbertModel(sharing_config("all", groups=3))))


def _gradients(model, ids, mask):
    with tf.GradientTape() as tape:
        out = model({"input_ids": ids, "input_mask": mask})
        loss = tf.reduce_sum(out["sequence_output"] ** 2)
    names = {n: v for n, v in tf1_variable_map(model).items() if "/transformer/" in n}
    grads = tape.gradient(loss, list(names.values()))
    return out, {name: tf.convert_to_tensor(g).numpy() for name, g in zip(names, grads)}


@pytest.mark.parametrize("strategy,shared", [("attention", "attention_1/self/query/kernel"),
                                             ("ffn", "ffn_1/intermediate/dense/kernel")])
def test_shared_part_gets_the_gradient_of_every_layer(strategy, shared):
    """A shared part's gradient is the sum of the gradients its copies get in the not-shared model
    holding the same values; each layer's own part gets exactly its copy's gradient."""
    shared_model = AlbertModel(sharing_config(strategy))
    randomized(shared_model)
    unshared = AlbertModel(sharing_config("none"))
    shared_names = tf1_variable_map(shared_model)
    for name, variable in tf1_variable_map(unshared).items():
        source = name if name in shared_names else name.replace(
            name.split("/")[3], "group_0")
        variable.assign(shared_names[source])
    ids, mask, _, _ = padded_batch(shared_model.config)
    out, grads = _gradients(shared_model, ids, mask)
    out_unshared, grads_unshared = _gradients(unshared, ids, mask)
    # The same ops on the same values: the outputs and every layer's own gradient are equal bit
    # for bit (measured), so only the shared part's sum of three can round differently.
    np.testing.assert_array_equal(out["sequence_output"], out_unshared["sequence_output"])
    assert all(np.any(g != 0) for g in grads.values())
    prefix = "bert/encoder/transformer/group_{}/inner_group_0/"
    copies = np.stack([grads_unshared[prefix.format(n) + shared] for n in range(3)])
    assert all(np.any(c != 0) for c in copies)
    # The tape adds the three copies' gradients in its own order: element by element within
    # sum_tolerance of 3 terms and their absolute sum (a proven bound; measured up to 0.52 of it).
    difference = np.abs(grads[prefix.format(0) + shared] - copies.sum(0))
    assert np.all(difference <= sum_tolerance(3, np.abs(copies).sum(0))), difference.max()
    for name, grad in grads.items():
        if name.startswith(prefix.format(2)):
            np.testing.assert_array_equal(grad, grads_unshared[name], err_msg=name)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_tf1_round_trip_is_bit_for_bit(strategy, tmp_path):
    cfg = sharing_config(strategy, layers=4, groups=2 if strategy != "none" else 1, inner=2)
    source = AlbertPretrainingModel(cfg)
    randomized(source, seed=3)
    prefix = export_tf1_checkpoint(source, str(tmp_path / "model.ckpt"))
    stored = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert set(stored) - {"global_step"} == set(numpy_albert.reference_variable_shapes(cfg))
    target = AlbertPretrainingModel(cfg)
    report = load_tf1_checkpoint(target, prefix)
    assert not report.missing and not report.unused
    for name, variable in tf1_variable_map(target).items():
        np.testing.assert_array_equal(variable.numpy(), tf1_variable_map(source)[name].numpy())


def test_attention_model_grows_from_an_all_shared_checkpoint(tmp_path):
    """init_from_group0: every layer's own feed-forward part starts from the shared block's."""
    source = AlbertPretrainingModel(sharing_config("all"))
    randomized(source, seed=4)
    prefix = export_tf1_checkpoint(source, str(tmp_path / "model.ckpt"))
    grown = AlbertPretrainingModel(sharing_config("attention"))
    report = load_tf1_checkpoint(grown, prefix, init_from_group0=True)
    assert not report.missing
    kernel = "bert/encoder/transformer/group_{}/inner_group_0/ffn_1/intermediate/dense/kernel"
    np.testing.assert_array_equal(tf1_variable_map(grown)[kernel.format(2)].numpy(),
                                  tf1_variable_map(source)[kernel.format(0)].numpy())


@pytest.mark.parametrize("strategy,layers,groups,inner", CASES)
def test_parameter_count_equals_closed_form(strategy, layers, groups, inner):
    cfg = sharing_config(strategy, layers, groups, inner)
    assert parameter_report(AlbertModel(cfg))["encoder total"] == encoder_parameter_count(cfg)


# The paper's rounded counts (embeddings + transformer) for ALBERT-base: Tables 3 and 4.
PAPER_MILLIONS = {(768, "all"): 31, (768, "attention"): 83, (768, "ffn"): 57, (768, "none"): 108,
                  (128, "all"): 12, (128, "attention"): 64, (128, "ffn"): 38, (128, "none"): 89,
                  (64, "all"): 10, (64, "none"): 87, (256, "all"): 16, (256, "none"): 93}
# Exact counts of the same (closed form, no pooler).
EXACT = {(768, "all"): 30_524_160, (768, "attention"): 82_487_808, (768, "ffn"): 56_527_104,
         (768, "none"): 108_490_752, (128, "all"): 11_092_992, (128, "attention"): 63_056_640,
         (128, "ffn"): 37_095_936, (128, "none"): 89_059_584, (64, "all"): 9_090_816,
         (64, "none"): 87_057_408, (256, "all"): 15_097_344, (256, "none"): 93_063_936}


@pytest.mark.parametrize("embedding_size,strategy", sorted(PAPER_MILLIONS))
def test_base_counts_match_the_paper(embedding_size, strategy):
    cfg = AlbertConfig(vocab_size=30000, embedding_size=embedding_size, hidden_size=768,
                       num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                       cross_layer_sharing=strategy)
    count = encoder_parameter_count(cfg) - (768 * 768 + 768)  # the paper counts no pooler
    assert count == EXACT[embedding_size, strategy]
    assert abs(count - PAPER_MILLIONS[embedding_size, strategy] * 1e6) < 1e6


@pytest.mark.parametrize("values,message", [
    ({"cross_layer_sharing": "layers"}, "'cross_layer_sharing' 'layers' is not one of"),
    ({"cross_layer_sharing": ["all"]}, "'cross_layer_sharing' ['all'] is not one of"),
    ({"cross_layer_sharing": "attention", "num_hidden_groups": 3},
     "'num_hidden_groups' (3) equals 'num_hidden_layers' (3)"),
    ({"cross_layer_sharing": "ffn", "num_hidden_groups": 3}, "'cross_layer_sharing' 'ffn'"),
    ({"cross_layer_sharing": "none", "num_hidden_groups": 2, "num_hidden_layers": 4},
     "'num_hidden_groups' (2) asks for groups"),
])
def test_nonsensical_combinations_are_refused_from_a_file(values, message, tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({"vocab_size": 30, "num_hidden_layers": 3, **values}))
    with pytest.raises(ConfigError) as error:
        AlbertConfig.from_json_file(str(path))
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value)
    assert "cross_layer_sharing" in str(error.value)


def test_the_key_is_written_only_when_given(tmp_path):
    default = AlbertConfig(vocab_size=30)
    assert default.cross_layer_sharing == "all" and default.shares("ffn")
    assert "cross_layer_sharing" not in default.to_json_string()
    path = str(tmp_path / "config.json")
    AlbertConfig(vocab_size=30, cross_layer_sharing="ffn").to_json_file(path)
    assert json.loads(open(path).read())["cross_layer_sharing"] == "ffn"
    read = AlbertConfig.from_json_file(path)
    assert read.cross_layer_sharing == "ffn" and not read.shares("attention")


def _model_report(config_path):
    return run_command("-m albert_tf.model_report", f"--albert_config_file={config_path}",
                       "--max_seq_length=8")


def test_model_report_prints_the_strategy_and_its_count(tmp_path):
    cfg = sharing_config("ffn", layers=4, groups=2, inner=2)
    path = tmp_path / "albert_config.json"
    cfg.to_json_file(str(path))
    result = _model_report(path)
    assert result.returncode == 0, result.stderr[-2000:]
    paper_count = encoder_parameter_count(cfg) - (12 * 12 + 12)
    assert "cross_layer_sharing: ffn" in result.stdout
    assert (f"embeddings + transformer (no pooler, no heads; the tables' count): "
            f"{paper_count:,d}") in result.stdout


def test_model_report_refuses_a_nonsensical_config_in_one_line(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({"vocab_size": 30, "num_hidden_layers": 2, "num_hidden_groups": 2,
                                "cross_layer_sharing": "attention"}))
    result = _model_report(path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"model_report: error: {path}: AlbertConfig: 'cross_layer_sharing' 'attention'")


def test_model_report_estimates_only_runs_the_config_allows(tmp_path):
    """Its memory estimate was printed for a --max_seq_length above max_position_embeddings (a run
    no training script starts) and for --batch_size=0; both are one-line errors now."""
    path = tmp_path / "albert_config.json"
    sharing_config("all", layers=2, groups=1, inner=1).to_json_file(str(path))
    too_long = run_command("-m albert_tf.model_report", f"--albert_config_file={path}",
                           "--max_seq_length=17")
    assert too_long.returncode == 1 and too_long.stdout == ""
    assert too_long.stderr.strip() == (f"model_report: error: --max_seq_length=17 exceeds "
                                       f"max_position_embeddings=16 of {path}.")
    no_batch = run_command("-m albert_tf.model_report", f"--albert_config_file={path}",
                           "--batch_size=0")
    assert no_batch.returncode == 1 and no_batch.stdout == ""
    assert no_batch.stderr.strip().startswith("model_report: error: flag --batch_size=0: expected "
                                              "a finite value >= 1")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_albert_tf_checkpoint_round_trip_and_strategy_change(strategy, tmp_path):
    """An albert_tf (object-based) checkpoint restores bit for bit; resuming it with another
    strategy in the config is one CheckpointMismatchError."""
    cfg = sharing_config(strategy, layers=4, groups=2 if strategy != "none" else 1, inner=2)
    source = AlbertPretrainingModel(cfg)
    randomized(source, seed=5)
    prefix = save_object_checkpoint(source, tmp_path)
    target = AlbertPretrainingModel(cfg)
    require_same_model(target, prefix)
    report = load_checkpoint(target, resolve_checkpoint_source(prefix))
    assert not report.missing and not report.unused
    for name, variable in tf1_variable_map(target).items():
        np.testing.assert_array_equal(variable.numpy(), tf1_variable_map(source)[name].numpy())
    other = "attention" if strategy != "attention" else "ffn"
    with pytest.raises(CheckpointMismatchError, match="written by another model"):
        require_same_model(AlbertPretrainingModel(sharing_config(other, layers=4, inner=2)),
                           prefix)


@pytest.mark.parametrize("strategy", ["attention", "ffn"])
def test_trainer_updates_each_shared_variable_once(strategy, tmp_path):
    """The training loop sees a shared part once (one optimizer slot per variable) and updates it;
    after training the layers still run the very same variables."""
    trainer = make_trainer(tmp_path, config=tiny_config(cross_layer_sharing=strategy,
                                                        num_hidden_layers=3), steps=2,
                           iterations_per_loop=2)
    variables = tf1_variable_map(trainer.model)
    assert len({id(v) for v in trainer.model.trainable_variables}) == \
        len(trainer.model.trainable_variables) == len(variables)
    before = {name: v.numpy().copy() for name, v in variables.items()}
    trainer.train(synthetic_dataset_fn())
    assert trainer.global_step == 2
    changed = [name for name, v in variables.items()
               if "/transformer/" in name and np.any(v.numpy() != before[name])]
    assert len(changed) == sum("/transformer/" in name for name in variables)
    layers = trainer.model.albert.transformer.layer_blocks
    part = "query" if strategy == "attention" else "ffn_intermediate"
    assert getattr(layers[2][0], part) is getattr(layers[0][0], part)


@pytest.mark.requires_shared_data
def test_hub_export_carries_the_strategy_and_computes_like_the_model(tmp_path):
    require_shared_data()
    cfg = tiny_config(cross_layer_sharing="attention", num_hidden_layers=3)
    model = AlbertPretrainingModel(cfg)
    randomized(model, seed=6)
    tokenizer = FullTokenizer(spm_model_file=EN8K_MODEL)
    export_path = str(tmp_path / "hub")
    export_encoder(model, tokenizer, export_path, seq_length=16)
    asset = json.loads(open(os.path.join(export_path, "assets", CONFIG_ASSET)).read())
    assert asset["cross_layer_sharing"] == "attention"
    ids, mask, segments, _ = padded_batch(cfg)
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    exported = tf.saved_model.load(export_path).signatures["tokens"](**inputs)
    expected = model.albert(inputs)
    for key in ("sequence_output", "pooled_output"):
        assert np.max(np.abs(exported[key].numpy() - expected[key].numpy())) <= TOLERANCE
