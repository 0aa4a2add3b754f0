"""The SQuAD v1 / v2 heads and losses against an independent NumPy implementation (float64)."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.question_answering.heads import (SquadHeadError, SquadV1Head, SquadV2Head,
                                                      squad_v1_loss, squad_v2_loss)
from albert_tf.training.optimization import DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY
from tests.shared_setup import randomized

TOLERANCE = 1e-5
HIDDEN = 8
BATCH, SEQ = 3, 9
START_N_TOP, END_N_TOP = 3, 2


def make_config():
    return AlbertConfig.from_dict(dict(vocab_size=20, hidden_size=HIDDEN, num_attention_heads=2,
                                       intermediate_size=16, embedding_size=4))



def inputs(seed=1):
    """sequence_output [B, S, H]; p_mask [B, S] with [CLS] 0, query + [SEP] 1, document 0, padding 1
    (each row keeps at least START_N_TOP unmasked positions, so no top-k picks among ties)."""
    rng = np.random.default_rng(seed)
    sequence = rng.normal(0.0, 1.0, (BATCH, SEQ, HIDDEN)).astype(np.float32)
    p_mask = np.zeros((BATCH, SEQ), np.int32)
    p_mask[:, 1:3] = 1           # query
    p_mask[:, 3] = 1             # [SEP]
    p_mask[1, 7:] = 1            # padding
    p_mask[2, 6] = 1             # final [SEP]
    p_mask[2, 7:] = 1
    start_positions = np.array([4, 0, 5], np.int32)
    return sequence, p_mask, start_positions


def tf1_values(head):
    return {name: v.numpy().astype(np.float64) for name, v in head.tf1_variables().items()}


# -------------------------------------------------------------------------------------------------
# NumPy reference.

def np_log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def np_mask(logits, p_mask):
    return logits * (1 - p_mask) - 1e30 * p_mask


def np_layer_norm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-12) * gamma + beta


def np_top_k(x, k):
    """Largest k along the last axis, best first; ties keep the lower index first."""
    index = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, index, axis=-1), index


def np_v1(w, sequence):
    logits = sequence @ w["cls/squad/output_weights"].T + w["cls/squad/output_bias"]
    return logits[..., 0], logits[..., 1]


def np_v2_start_logits(w, sequence, p_mask):
    logits = sequence @ w["start_logits/dense/kernel"] + w["start_logits/dense/bias"]
    return np_mask(logits[..., 0], p_mask)


def np_v2_end_logits(w, sequence, start_state, p_mask_row):
    """Masked end logits [S] of one example given the hidden state at its start position."""
    rows = []
    for state in sequence:
        features = np.concatenate([state, start_state])
        features = np.tanh(features @ w["end_logits/dense_0/kernel"] + w["end_logits/dense_0/bias"])
        features = np_layer_norm(features, w["end_logits/LayerNorm/gamma"],
                                 w["end_logits/LayerNorm/beta"])
        rows.append(features @ w["end_logits/dense_1/kernel"][:, 0]
                    + w["end_logits/dense_1/bias"][0])
    return np_mask(np.array(rows), p_mask_row)


def np_v2_cls_logits(w, sequence, masked_start_logits):
    probs = np.exp(np_log_softmax(masked_start_logits))
    start_feature = np.einsum("bs,bsh->bh", probs, sequence)
    features = np.concatenate([start_feature, sequence[:, 0]], axis=-1)
    features = np.tanh(features @ w["answer_class/dense_0/kernel"] + w["answer_class/dense_0/bias"])
    return (features @ w["answer_class/dense_1/kernel"])[:, 0]


def np_v2_training(w, sequence, p_mask, start_positions):
    start_logits = np_v2_start_logits(w, sequence, p_mask)
    end_log_probs = np.stack([
        np_log_softmax(np_v2_end_logits(w, sequence[b], sequence[b, start_positions[b]], p_mask[b]))
        for b in range(len(sequence))])
    return {"start_log_probs": np_log_softmax(start_logits), "end_log_probs": end_log_probs,
            "cls_logits": np_v2_cls_logits(w, sequence, start_logits)}


def np_v2_inference(w, sequence, p_mask, start_n_top, end_n_top):
    start_logits = np_v2_start_logits(w, sequence, p_mask)
    start_top_log_probs, start_top_index = np_top_k(np_log_softmax(start_logits), start_n_top)
    end_top_log_probs, end_top_index = [], []
    for b in range(len(sequence)):
        log_probs, index = [], []
        for start in start_top_index[b]:  # start i's ends go to slots i*end_n_top ... +end_n_top-1
            end = np_log_softmax(np_v2_end_logits(w, sequence[b], sequence[b, start], p_mask[b]))
            top_values, top_index = np_top_k(end, end_n_top)
            log_probs.extend(top_values)
            index.extend(top_index)
        end_top_log_probs.append(log_probs)
        end_top_index.append(index)
    return {"start_top_log_probs": start_top_log_probs, "start_top_index": start_top_index,
            "end_top_log_probs": np.array(end_top_log_probs),
            "end_top_index": np.array(end_top_index),
            "cls_logits": np_v2_cls_logits(w, sequence, start_logits)}


def assert_log_probs_close(actual, expected, p_mask):
    """Max abs difference <= 1e-5 where p_mask is 0; both around -1e30 where it is 1."""
    actual = np.asarray(actual)
    real = np.broadcast_to(p_mask == 0, actual.shape)
    assert np.max(np.abs(actual[real] - expected[real])) <= TOLERANCE
    assert np.all(actual[~real] < -1e29) and np.all(expected[~real] < -1e29)


# -------------------------------------------------------------------------------------------------
# Variables.

def test_variable_names_and_shapes_are_the_references():
    config = make_config()
    h = HIDDEN
    v1 = {name: tuple(v.shape) for name, v in SquadV1Head(config).tf1_variables().items()}
    assert v1 == {"cls/squad/output_weights": (2, h), "cls/squad/output_bias": (2,)}
    v2_head = SquadV2Head(config)
    v2 = {name: tuple(v.shape) for name, v in v2_head.tf1_variables().items()}
    assert v2 == {
        "start_logits/dense/kernel": (h, 1), "start_logits/dense/bias": (1,),
        "end_logits/dense_0/kernel": (2 * h, h), "end_logits/dense_0/bias": (h,),
        "end_logits/LayerNorm/beta": (h,), "end_logits/LayerNorm/gamma": (h,),
        "end_logits/dense_1/kernel": (h, 1), "end_logits/dense_1/bias": (1,),
        "answer_class/dense_0/kernel": (2 * h, h), "answer_class/dense_0/bias": (h,),
        "answer_class/dense_1/kernel": (h, 1),
    }
    # Every weight of the head has a reference name (nothing would be left out of a TF1 export).
    assert {id(v) for v in v2_head.tf1_variables().values()} == {id(v) for v in v2_head.weights}


@pytest.mark.parametrize("head_class", [SquadV1Head, SquadV2Head])
def test_weight_decay_exclusions_see_the_same_names_as_in_the_reference(head_class):
    """The optimizers match variable.path; it must hit LayerNorm and bias exactly where the TF1
    name does."""
    patterns = [re.compile(p) for p in DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY]
    for name, variable in head_class(make_config()).tf1_variables().items():
        assert (any(p.search(name) for p in patterns)
                == any(p.search(variable.path) for p in patterns)), (name, variable.path)


def test_v1_initialisation_is_the_references():
    head = SquadV1Head(make_config())
    weights = head.output_weights.numpy()
    assert np.all(np.abs(weights) <= 2 * 0.02) and weights.std() > 0.005
    np.testing.assert_array_equal(head.output_bias.numpy(), 0.0)


# -------------------------------------------------------------------------------------------------
# v1.

def test_v1_head_matches_numpy_and_has_no_dropout():
    head = SquadV1Head(make_config())
    randomized(head, stddev=0.5)
    sequence, _, _ = inputs()
    expected_start, expected_end = np_v1(tf1_values(head), sequence.astype(np.float64))
    for training in (False, True):
        out = head(tf.constant(sequence), training=training)
        assert out["start_logits"].dtype == tf.float32 and out["start_logits"].shape == (BATCH, SEQ)
        assert np.max(np.abs(out["start_logits"].numpy() - expected_start)) <= TOLERANCE
        assert np.max(np.abs(out["end_logits"].numpy() - expected_end)) <= TOLERANCE


def test_v1_loss_matches_numpy():
    rng = np.random.default_rng(5)
    start_logits = rng.normal(0, 2, (BATCH, SEQ)).astype(np.float32)
    end_logits = rng.normal(0, 2, (BATCH, SEQ)).astype(np.float32)
    starts, ends = np.array([0, 4, 8]), np.array([0, 6, 8])
    expected = -0.5 * (np_log_softmax(start_logits.astype(np.float64))[np.arange(BATCH), starts]
                       + np_log_softmax(end_logits.astype(np.float64))[np.arange(BATCH), ends])
    loss = squad_v1_loss(start_logits, end_logits, starts.reshape(-1, 1), ends)
    assert loss.shape == (BATCH,)
    assert np.max(np.abs(loss.numpy() - expected)) <= TOLERANCE


# -------------------------------------------------------------------------------------------------
# v2.

def v2_head(dropout_rate=0.0, seed=0):
    head = SquadV2Head(make_config(), start_n_top=START_N_TOP, end_n_top=END_N_TOP,
                       dropout_rate=dropout_rate)
    randomized(head, seed, stddev=0.5)
    return head


def test_v2_training_mode_matches_numpy():
    head = v2_head()
    sequence, p_mask, starts = inputs()
    out = head(tf.constant(sequence), p_mask, start_positions=starts, training=True)
    expected = np_v2_training(tf1_values(head), sequence.astype(np.float64), p_mask, starts)
    assert set(out) == {"start_log_probs", "end_log_probs", "cls_logits"}
    assert all(t.dtype == tf.float32 for t in out.values())
    assert out["end_log_probs"].shape == (BATCH, SEQ) and out["cls_logits"].shape == (BATCH,)
    assert_log_probs_close(out["start_log_probs"], expected["start_log_probs"], p_mask)
    assert_log_probs_close(out["end_log_probs"], expected["end_log_probs"], p_mask)
    assert np.max(np.abs(out["cls_logits"].numpy() - expected["cls_logits"])) <= TOLERANCE


def test_v2_inference_mode_matches_numpy_with_the_top_k_layout():
    head = v2_head()
    sequence, p_mask, _ = inputs()
    # A huge logit on a masked position must not win: masking comes before the softmax.
    sequence[0, 2] *= 50.0
    out = head(tf.constant(sequence), tf.constant(p_mask), training=False)
    expected = np_v2_inference(tf1_values(head), sequence.astype(np.float64), p_mask,
                               START_N_TOP, END_N_TOP)
    assert set(out) == set(expected)
    assert out["start_top_index"].shape == (BATCH, START_N_TOP)
    assert out["end_top_index"].shape == (BATCH, START_N_TOP * END_N_TOP)
    np.testing.assert_array_equal(out["start_top_index"].numpy(), expected["start_top_index"])
    np.testing.assert_array_equal(out["end_top_index"].numpy(), expected["end_top_index"])
    for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
        assert out[key].dtype == tf.float32
        assert np.max(np.abs(out[key].numpy() - expected[key])) <= TOLERANCE, key
    assert np.all(np.take_along_axis(p_mask, out["start_top_index"].numpy(), axis=1) == 0)
    assert np.all(np.take_along_axis(p_mask, out["end_top_index"].numpy(), axis=1) == 0)


def test_v2_end_top_index_layout_groups_ends_by_start():
    """Slots i*end_n_top .. (i+1)*end_n_top - 1 hold the ends of start i, each group sorted."""
    head = v2_head(seed=3)
    sequence, p_mask, _ = inputs(seed=4)
    out = head(tf.constant(sequence), p_mask)
    log_probs = out["end_top_log_probs"].numpy().reshape(BATCH, START_N_TOP, END_N_TOP)
    assert np.all(np.diff(log_probs, axis=-1) <= 0)
    # Teacher forcing on start i reproduces group i.
    for i in range(START_N_TOP):
        starts = out["start_top_index"].numpy()[:, i]
        forced = head(tf.constant(sequence), p_mask, start_positions=starts, training=True)
        top = np.sort(forced["end_log_probs"].numpy(), axis=-1)[:, ::-1][:, :END_N_TOP]
        assert np.max(np.abs(top - log_probs[:, i])) <= TOLERANCE


def test_v2_dropout_only_in_answer_class_and_only_in_training():
    head = v2_head(dropout_rate=0.5)
    sequence, p_mask, starts = inputs()
    expected = np_v2_training(tf1_values(head), sequence.astype(np.float64), p_mask, starts)
    tf.random.set_seed(0)
    trained = head(tf.constant(sequence), p_mask, start_positions=starts, training=True)
    assert_log_probs_close(trained["start_log_probs"], expected["start_log_probs"], p_mask)
    assert_log_probs_close(trained["end_log_probs"], expected["end_log_probs"], p_mask)
    assert np.max(np.abs(trained["cls_logits"].numpy() - expected["cls_logits"])) > 1e-3
    inferred = head(tf.constant(sequence), p_mask, training=False)
    assert np.max(np.abs(inferred["cls_logits"].numpy() - expected["cls_logits"])) <= TOLERANCE


def test_v2_loss_matches_numpy():
    head = v2_head()
    sequence, p_mask, starts = inputs()
    ends = np.array([5, 0, 5], np.int32)
    is_impossible = np.array([0, 1, 0], np.int64)
    out = head(tf.constant(sequence), p_mask, start_positions=starts, training=True)
    rows = np.arange(BATCH)
    start_lp = out["start_log_probs"].numpy().astype(np.float64)
    end_lp = out["end_log_probs"].numpy().astype(np.float64)
    x = out["cls_logits"].numpy().astype(np.float64)
    sigmoid_ce = np.maximum(x, 0) - x * is_impossible + np.log1p(np.exp(-np.abs(x)))
    expected = -0.5 * (start_lp[rows, starts] + end_lp[rows, ends]) + 0.5 * sigmoid_ce
    loss = squad_v2_loss(out["start_log_probs"], out["end_log_probs"], out["cls_logits"], starts,
                         ends.reshape(-1, 1), is_impossible.reshape(-1, 1))
    assert loss.shape == (BATCH,) and loss.dtype == tf.float32
    assert np.max(np.abs(loss.numpy() - expected)) <= TOLERANCE


def test_v2_errors_are_clear():
    head = v2_head()
    sequence, p_mask, _ = inputs()
    with pytest.raises(SquadHeadError, match="start_positions"):
        head(tf.constant(sequence), p_mask, training=True)
    with pytest.raises(SquadHeadError, match="sequence length 2"):
        head(tf.constant(sequence[:, :2]), p_mask[:, :2])
    with pytest.raises(SquadHeadError, match="start_n_top"):
        SquadV2Head(make_config(), start_n_top=0)


def test_heads_compute_in_float32_under_mixed_bfloat16():
    """Float32 outputs, and float32 weights (not rounded to bfloat16) applied to the encoder's
    bfloat16 output: the same numbers as NumPy on the bfloat16-rounded input."""
    sequence, p_mask, starts = inputs()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        v1, v2 = SquadV1Head(make_config()), v2_head()
        randomized(v1, stddev=0.5)
        bf16 = tf.cast(tf.constant(sequence), tf.bfloat16)
        v1_out = v1(bf16)
        trained = v2(bf16, p_mask, start_positions=starts, training=True)
        inferred = v2(bf16, p_mask)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    rounded = tf.cast(bf16, tf.float64).numpy()
    assert all(t.dtype == tf.float32 for t in [*v1_out.values(), *trained.values()])
    assert inferred["end_top_log_probs"].dtype == tf.float32
    expected_start, _ = np_v1(tf1_values(v1), rounded)
    assert np.max(np.abs(v1_out["start_logits"].numpy() - expected_start)) <= TOLERANCE
    expected = np_v2_training(tf1_values(v2), rounded, p_mask, starts)
    assert_log_probs_close(trained["end_log_probs"], expected["end_log_probs"], p_mask)
    assert np.max(np.abs(trained["cls_logits"].numpy() - expected["cls_logits"])) <= TOLERANCE
