"""AlbertModel / AlbertPretrainingModel against the independent NumPy forward pass."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints.tf1_names import tf1_variable_map
from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import AlbertModel
from albert_tf.models.heads import ClassifierHead
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from tests import numpy_albert
from tests.tolerances import bfloat16_tolerance, sum_tolerance
from tests.shared_setup import randomized

# The float32 model against the float64 NumPy forward pass: outputs of size about 1 (LayerNorm'd,
# weights of deviation 0.3), after a few hundred float32 roundings: measured at most 4e-7 over the
# configs below and 4 seeds. A wrong mask, weight or sharing moves outputs by 1e-2 or more.
TOLERANCE = 1e-5

CONFIGS = {
    "E==H": dict(embedding_size=16, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=24),
    "E!=H": dict(embedding_size=8, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                 intermediate_size=20),
    "G=2,L=4": dict(embedding_size=8, hidden_size=12, num_hidden_layers=4, num_hidden_groups=2,
                    num_attention_heads=3, intermediate_size=16),
    "inner_group_num=2": dict(embedding_size=8, hidden_size=12, num_hidden_layers=3,
                              inner_group_num=2, num_attention_heads=3, intermediate_size=16),
    "G=3,L=5,K=2,relu": dict(embedding_size=6, hidden_size=12, num_hidden_layers=5,
                             num_hidden_groups=3, inner_group_num=2, num_attention_heads=4,
                             intermediate_size=10, hidden_act="relu"),
}


def make_config(**overrides):
    values = dict(vocab_size=40, max_position_embeddings=16, type_vocab_size=2,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    values.update(overrides)
    return AlbertConfig.from_dict(values)



def padded_batch(cfg, seed=1, batch=3, seq=9):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, cfg.vocab_size, (batch, seq)).astype(np.int32)
    mask = np.ones((batch, seq), np.int32)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    segments = np.zeros((batch, seq), np.int32)
    segments[:, 4:] = 1
    positions = np.array([[1, 2, 5], [0, 3, 4], [1, 2, 2]], np.int32)
    return ids, mask, segments, positions


def weights_of(model):
    return {name: v.numpy() for name, v in tf1_variable_map(model).items()}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_pretraining_model_matches_numpy(name):
    cfg = make_config(**CONFIGS[name])
    model = AlbertPretrainingModel(cfg)
    randomized(model)
    ids, mask, segments, positions = padded_batch(cfg)
    out = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                 "masked_lm_positions": positions})
    expected = numpy_albert.forward(weights_of(model), cfg, ids, mask, segments, positions)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        diff = np.max(np.abs(out[key].numpy() - expected[key]))
        assert diff <= TOLERANCE, f"{name}: {key} max-abs-diff {diff}"
    assert len(out["encoder_outputs"]) == cfg.num_hidden_layers * cfg.inner_group_num
    for got, want in zip(out["encoder_outputs"], expected["encoder_outputs"]):
        assert np.max(np.abs(got.numpy() - want)) <= TOLERANCE
    assert out["mlm_logits"].shape == (3, 3, cfg.vocab_size)
    assert out["sop_logits"].shape == (3, 2)


def test_encoder_alone_matches_numpy_and_defaults_mask_and_segments():
    cfg = make_config(**CONFIGS["E!=H"])
    model = AlbertModel(cfg)
    randomized(model, seed=3)
    ids, _, _, _ = padded_batch(cfg)
    out = model({"input_ids": ids})
    expected = numpy_albert.forward(weights_of(model), cfg, ids, np.ones_like(ids),
                                    np.zeros_like(ids))
    assert np.max(np.abs(out["sequence_output"].numpy() - expected["sequence_output"])) <= TOLERANCE
    assert out["sequence_output"].shape == (3, 9, cfg.hidden_size)
    assert out["pooled_output"].shape == (3, cfg.hidden_size)


def test_padding_does_not_change_real_positions():
    """Masked keys get -10000: appending pad tokens leaves the real positions' outputs unchanged."""
    cfg = make_config(**CONFIGS["G=2,L=4"])
    model = AlbertModel(cfg)
    randomized(model)
    ids = np.array([[5, 6, 7, 8]], np.int32)
    short = model({"input_ids": ids, "input_mask": np.ones_like(ids)})["sequence_output"].numpy()
    padded_ids = np.concatenate([ids, [[9, 9, 9]]], axis=1)
    padded_mask = np.array([[1, 1, 1, 1, 0, 0, 0]], np.int32)
    long = model({"input_ids": padded_ids, "input_mask": padded_mask})["sequence_output"].numpy()
    # The pads add exact zeros (exp(-10000) is 0 in float32): only a kernel blocking 7 rows
    # instead of 4 may round differently, per layer sums of at most max(H, I, S) terms of the
    # outputs' size (measured: equal bit for bit). An unmasked pad moves outputs by 1e-2 or more.
    terms = cfg.num_hidden_layers * max(cfg.hidden_size, cfg.intermediate_size, 7)
    assert np.max(np.abs(short - long[:, :4])) <= sum_tolerance(terms, np.max(np.abs(short)))


def test_weight_sharing_variable_counts():
    cfg = make_config(**CONFIGS["G=3,L=5,K=2,relu"])
    model = AlbertModel(cfg)
    names = tf1_variable_map(model)
    assert len(names) == len(numpy_albert.reference_variable_shapes(cfg, with_heads=False))
    transformer_vars = [n for n in names if "/transformer/" in n]
    assert len(transformer_vars) == 3 * 2 * 16  # G * K * (6 dense * 2 + 2 LayerNorm * 2)
    assert model.transformer.group_index(4) == 2 and model.transformer.group_index(1) == 0


def test_dropout_only_when_training():
    cfg = make_config(**CONFIGS["E!=H"], hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
    model = AlbertModel(cfg)
    ids, mask, segments, _ = padded_batch(cfg)
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    eval_a = model(inputs, training=False)["sequence_output"].numpy()
    eval_b = model(inputs)["sequence_output"].numpy()
    np.testing.assert_array_equal(eval_a, eval_b)
    expected = numpy_albert.forward(weights_of(model), cfg, ids, mask, segments)
    assert np.max(np.abs(eval_a - expected["sequence_output"])) <= TOLERANCE
    train = model(inputs, training=True)["sequence_output"].numpy()
    assert np.max(np.abs(train - eval_a)) > 1e-2


def test_sequence_longer_than_positions_is_a_clear_error():
    cfg = make_config(**CONFIGS["E==H"])
    model = AlbertModel(cfg)
    ids = np.zeros((1, cfg.max_position_embeddings + 1), np.int32)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model({"input_ids": ids})


def test_mixed_bfloat16_policy():
    """bfloat16 compute, float32 variables, outputs close to the float32 model's."""
    cfg = make_config(**CONFIGS["E!=H"])
    reference = AlbertPretrainingModel(cfg)
    randomized(reference)
    ids, mask, segments, positions = padded_batch(cfg)
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
              "masked_lm_positions": positions}
    want = reference(inputs)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = AlbertPretrainingModel(cfg)
        for src, dst in zip(reference.trainable_variables, model.trainable_variables):
            dst.assign(src)
        got = model(inputs)
        block = model.albert.transformer.groups[0][0]
        assert block.compute_dtype == "bfloat16"
        assert block.attention_layer_norm.compute_dtype == "float32"
        assert all(v.dtype == "float32" for v in model.trainable_variables)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert got["mlm_logits"].dtype == tf.float32
    # Each of the L layers, the embedding projection and the heads (L + 2 stages) rounds to
    # bfloat16 at most 16 times (its matmuls' inputs, weights and outputs): bfloat16_tolerance of
    # that many roundings, of the logits' size and of the pooled output's (tanh, at most 1).
    # Measured: at most 0.08 of the bound.
    roundings = 16 * (cfg.num_hidden_layers + 2)
    scale = np.max(np.abs(want["mlm_logits"].numpy()))
    assert np.max(np.abs(got["mlm_logits"].numpy() - want["mlm_logits"].numpy())) <= \
        bfloat16_tolerance(roundings, scale)
    assert np.max(np.abs(got["pooled_output"].numpy().astype(np.float32)
                         - want["pooled_output"].numpy())) <= bfloat16_tolerance(roundings, 1.0)


def _weight_casts(graph: tf.Graph) -> list[str]:
    """The Cast ops of ``graph`` that turn a variable read into bfloat16."""
    return [op.name for op in graph.get_operations()
            if op.type == "Cast" and op.get_attr("DstT") == tf.bfloat16
            and op.inputs[0].op.type == "ReadVariableOp"]


def test_shared_weights_are_cast_once_per_forward_pass_and_their_gradients_stay_close():
    """Under mixed_bfloat16 the L layers running one block share one bfloat16 copy of each of
    its weights (a cast per weight and forward pass, not per layer); the summed gradients stay
    close to float32's."""
    cfg = make_config(**CONFIGS["E!=H"])  # 3 layers, one shared block
    ids, mask, segments, _ = padded_batch(cfg)
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    reference = AlbertModel(cfg)
    randomized(reference)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = AlbertModel(cfg)
        for src, dst in zip(reference.trainable_variables, model.trainable_variables):
            dst.assign(src)
    finally:
        keras.mixed_precision.set_global_policy("float32")

    def gradients(of):
        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.cast(of(inputs)["pooled_output"], tf.float32))
            return tape.gradient(loss, of.trainable_variables)
        return step, [tf.convert_to_tensor(g).numpy() for g in step()]

    step, got = gradients(model)
    casts = _weight_casts(step.get_concrete_function().graph)
    # Every weight but LayerNorm's (computed in float32) cast once: the 3 embedding tables, the
    # projection's, the shared block's 6 Dense layers' and the pooler's kernels and biases.
    cast_weights = [v for v in model.trainable_variables if "LayerNorm" not in v.path]
    assert len(casts) == len(cast_weights) == 3 + 2 * 8
    _, want = gradients(reference)
    # The backward pass rounds as often again as the forward (16 per stage, L + 2 stages):
    # bfloat16_tolerance of the variable's largest gradient (measured: at most 0.22 of it, 0.47 of
    # the 0.05 guessed before), plus 1e-3 for the key bias, whose gradient is 0 in exact
    # arithmetic (softmax ignores a shift of all scores) and bfloat16's cancellation residue
    # (measured at most 8e-5). A layer's share left out of a shared sum moves it by a third.
    roundings = 2 * 16 * (cfg.num_hidden_layers + 2)
    for g, w, v in zip(got, want, model.trainable_variables):
        assert np.max(np.abs(g - w)) <= bfloat16_tolerance(roundings, np.max(np.abs(w))) + 1e-3, \
            v.path


def test_classifier_head_keeps_float32_weights_under_mixed_bfloat16():
    """The head's logits use the float32 weights, not copies rounded to bfloat16."""
    cfg = make_config(**CONFIGS["E!=H"])
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        head = ClassifierHead(cfg, 3)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    rng = np.random.default_rng(0)
    head.output_weights.assign(rng.normal(0, 1, head.output_weights.shape).astype(np.float32))
    pooled = rng.normal(0, 1, (4, cfg.hidden_size)).astype(np.float32)
    expected = pooled.astype(np.float64) @ head.output_weights.numpy().T.astype(np.float64)
    got = head(tf.constant(pooled)).numpy()
    assert got.dtype == np.float32
    # A float32 dot product of H terms: within sum_tolerance of H and the sum of the products'
    # sizes (a proven bound); weights rounded to bfloat16 would miss by about 2**-9 of that sum.
    sizes = np.abs(pooled).astype(np.float64) @ np.abs(head.output_weights.numpy()).T
    assert np.all(np.abs(got - expected) <= sum_tolerance(cfg.hidden_size, sizes))


def test_missing_masked_lm_positions_is_a_clear_error():
    model = AlbertPretrainingModel(make_config(**CONFIGS["E==H"]))
    with pytest.raises(KeyError, match="masked_lm_positions"):
        model({"input_ids": np.zeros((1, 4), np.int32)})
