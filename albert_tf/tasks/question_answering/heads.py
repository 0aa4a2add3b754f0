"""The SQuAD heads on the encoder's sequence output, with the reference's TF1 variable names.

- ``SquadV1Head`` (SQuAD 1.1): one linear layer per token -> start / end logits [B, S].
- ``SquadV2Head`` (SQuAD 2.0): the XLNet-style answer verifier. Start log-probs; end log-probs
  conditioned on a start position (the gold one in training, the ``start_n_top`` best ones in
  inference); an answerability logit from the [CLS] state and the start-weighted average state.
- ``squad_v1_loss`` / ``squad_v2_loss``: per-example losses [B]; the training loop averages them.

Positions the answer cannot occupy (query, [SEP], padding: ``p_mask`` 1) get the logit
``l * (1 - p) - 1e30 * p`` before every softmax, as in the reference. All outputs are float32: the
heads are float32 layers whatever the global precision policy (the -1e30 mask needs the range,
and a mixed policy would otherwise read the weights rounded to bfloat16).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.models.config import AlbertConfig
from albert_tf.models.heads import gather_positions
from albert_tf.models.layers import Dense, LayerNorm, dropout, truncated_normal

MASKED_LOGIT = -1e30
# The reference initialises cls/squad/output_weights with stddev 0.02, not config.initializer_range.
SQUAD_V1_INITIALIZER_STDDEV = 0.02
# The reference's run_squad_v2 defaults (--start_n_top, --end_n_top, --dropout_prob).
DEFAULT_START_N_TOP = 5
DEFAULT_END_N_TOP = 5
DEFAULT_V2_DROPOUT = 0.1


class SquadHeadError(ValueError):
    """A SQuAD head was given inputs or settings it cannot use (its caller's mistake: a bug)."""


class SquadHeadSettingsError(UserError, SquadHeadError):
    """The user's settings do not go together: --start_n_top or --end_n_top exceed the sequence
    length (--max_seq_length)."""


def mask_logits(logits: tf.Tensor, p_mask: tf.Tensor) -> tf.Tensor:
    """``logits * (1 - p_mask) - 1e30 * p_mask`` in float32 (p_mask broadcast against logits)."""
    p_mask = tf.cast(p_mask, tf.float32)
    return tf.cast(logits, tf.float32) * (1.0 - p_mask) + MASKED_LOGIT * p_mask


class SquadV1Head(keras.layers.Layer):
    """sequence_output [B, S, H] -> ``{"start_logits", "end_logits"}`` float32 [B, S].

    Weights ``output_weights`` [2, H] (row 0 start, row 1 end) and ``output_bias`` [2], saved as
    the reference's root-scoped ``cls/squad/output_weights`` / ``cls/squad/output_bias``. No
    dropout, no masking: the logits cover all S positions.
    """

    def __init__(self, config: AlbertConfig, name: str = "squad", **kwargs):
        super().__init__(name=name, dtype="float32", **kwargs)
        self.output_weights = self.add_weight(
            shape=(2, config.hidden_size), name="output_weights",
            initializer=truncated_normal(SQUAD_V1_INITIALIZER_STDDEV))
        self.output_bias = self.add_weight(shape=(2,), name="output_bias", initializer="zeros")
        self.built = True

    def tf1_variables(self) -> dict[str, keras.Variable]:
        """{reference TF1 name: variable}."""
        return {"cls/squad/output_weights": self.output_weights,
                "cls/squad/output_bias": self.output_bias}

    def call(self, sequence_output: tf.Tensor) -> dict[str, tf.Tensor]:
        hidden = tf.cast(sequence_output, tf.float32)
        logits = tf.tensordot(hidden, self.output_weights, axes=[[-1], [1]])  # [B, S, 2]
        logits += self.output_bias
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}


class SquadV2Head(keras.layers.Layer):
    """The SQuAD 2.0 answer verifier. Sub-layers (kernels [in, out], initializer_range, zero bias):

    ``start_logits/dense`` H->1; ``end_logits/dense_0`` 2H->H tanh, ``end_logits/LayerNorm``,
    ``end_logits/dense_1`` H->1; ``answer_class/dense_0`` 2H->H tanh, dropout ``dropout_rate``
    (training only), ``answer_class/dense_1`` H->1 without bias. All names are root-scoped.

    ``call(sequence_output [B, S, H], p_mask [B, S], start_positions [B] or [B, 1], training)``:

    - training (teacher forcing on the gold ``start_positions``, required): ``start_log_probs``
      [B, S], ``end_log_probs`` [B, S], ``cls_logits`` [B];
    - inference: ``start_top_log_probs`` / ``start_top_index`` [B, start_n_top] (best first),
      ``end_top_log_probs`` / ``end_top_index`` [B, start_n_top * end_n_top] (end j of start i at
      ``i * end_n_top + j``), ``cls_logits`` [B].

    The end layers see ``concat(hidden at the end position, hidden at the start position)``.
    ``cls_logits`` depends only on the start distribution, so it is the same in both modes (but
    for dropout).
    """

    def __init__(self, config: AlbertConfig, start_n_top: int = DEFAULT_START_N_TOP,
                 end_n_top: int = DEFAULT_END_N_TOP, dropout_rate: float = DEFAULT_V2_DROPOUT,
                 name: str = "squad_v2", **kwargs):
        super().__init__(name=name, dtype="float32", **kwargs)
        if start_n_top < 1 or end_n_top < 1:
            raise SquadHeadError(f"start_n_top and end_n_top must be at least 1, got {start_n_top} "
                                 f"and {end_n_top}.")
        if not 0.0 <= dropout_rate < 1.0:
            raise SquadHeadError(f"dropout_rate must lie in [0, 1), got {dropout_rate}.")
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout_rate
        hidden, init_range = config.hidden_size, config.initializer_range
        self.hidden_size = hidden

        def dense(width_in: int, width_out: int, name: str, **options) -> Dense:
            return Dense(width_in, width_out, init_range, name=name, dtype="float32", **options)

        self.start_dense = dense(hidden, 1, "start_logits_dense")
        self.end_dense_0 = dense(2 * hidden, hidden, "end_logits_dense_0", activation="tanh")
        self.end_layer_norm = LayerNorm(hidden, name="end_logits_LayerNorm")
        self.end_dense_1 = dense(hidden, 1, "end_logits_dense_1")
        self.answer_dense_0 = dense(2 * hidden, hidden, "answer_class_dense_0", activation="tanh")
        self.answer_dense_1 = dense(hidden, 1, "answer_class_dense_1", use_bias=False)
        self.built = True

    def tf1_variables(self) -> dict[str, keras.Variable]:
        """{reference TF1 name: variable}."""
        return {
            "start_logits/dense/kernel": self.start_dense.kernel,
            "start_logits/dense/bias": self.start_dense.bias,
            "end_logits/dense_0/kernel": self.end_dense_0.kernel,
            "end_logits/dense_0/bias": self.end_dense_0.bias,
            "end_logits/LayerNorm/beta": self.end_layer_norm.beta,
            "end_logits/LayerNorm/gamma": self.end_layer_norm.gamma,
            "end_logits/dense_1/kernel": self.end_dense_1.kernel,
            "end_logits/dense_1/bias": self.end_dense_1.bias,
            "answer_class/dense_0/kernel": self.answer_dense_0.kernel,
            "answer_class/dense_0/bias": self.answer_dense_0.bias,
            "answer_class/dense_1/kernel": self.answer_dense_1.kernel,
        }

    def _end_logits(self, hidden: tf.Tensor, start_features: tf.Tensor) -> tf.Tensor:
        """End logits (unmasked) [B, K, S] for K start states [B, K, H] over hidden [B, S, H].

        ``dense_0(concat(hidden_s, start_k))`` is computed as ``hidden_s @ W[:H] + start_k @ W[H:]
        + b``: the same numbers without building the [B, K, S, 2H] concatenation.
        """
        kernel = self.end_dense_0.kernel
        position_part = tf.tensordot(hidden, kernel[:self.hidden_size], axes=[[-1], [0]])
        start_part = tf.tensordot(start_features, kernel[self.hidden_size:], axes=[[-1], [0]])
        start_part += self.end_dense_0.bias
        features = self.end_dense_0.activation(position_part[:, tf.newaxis]
                                               + start_part[:, :, tf.newaxis])  # [B, K, S, H]
        return tf.squeeze(self.end_dense_1(self.end_layer_norm(features)), -1)

    def _cls_logits(self, hidden: tf.Tensor, masked_start_logits: tf.Tensor,
                    training: bool | None) -> tf.Tensor:
        """Answerability logit [B] from concat(start-probability-weighted state, [CLS] state)."""
        start_probs = tf.nn.softmax(masked_start_logits, axis=-1)
        start_feature = tf.einsum("bs,bsh->bh", start_probs, hidden)
        features = self.answer_dense_0(tf.concat([start_feature, hidden[:, 0]], axis=-1))
        features = dropout(features, self.dropout_rate, training)
        return tf.squeeze(self.answer_dense_1(features), -1)

    def call(self, sequence_output: tf.Tensor, p_mask: tf.Tensor,
             start_positions: tf.Tensor | None = None,
             training: bool | None = None) -> dict[str, tf.Tensor]:
        hidden = tf.cast(sequence_output, tf.float32)
        seq_length = hidden.shape[1]
        if not training and seq_length is not None and max(self.start_n_top,
                                                           self.end_n_top) > seq_length:
            raise SquadHeadSettingsError(
                f"start_n_top={self.start_n_top} and end_n_top={self.end_n_top} must not exceed "
                f"the sequence length {seq_length} (--max_seq_length).")
        p_mask = tf.cast(p_mask, tf.float32)
        start_logits = mask_logits(tf.squeeze(self.start_dense(hidden), -1), p_mask)
        start_log_probs = tf.nn.log_softmax(start_logits, axis=-1)
        outputs = {"cls_logits": self._cls_logits(hidden, start_logits, training)}
        if training:
            if start_positions is None:
                raise SquadHeadError("SquadV2Head in training needs the gold start_positions "
                                     "(training features carry start_positions).")
            gold = tf.reshape(tf.cast(start_positions, tf.int32), [-1, 1])
            end_logits = self._end_logits(hidden, gather_positions(hidden, gold))[:, 0]
            outputs["start_log_probs"] = start_log_probs
            outputs["end_log_probs"] = tf.nn.log_softmax(mask_logits(end_logits, p_mask), axis=-1)
            return outputs
        start_top_log_probs, start_top_index = tf.math.top_k(start_log_probs, k=self.start_n_top)
        end_logits = self._end_logits(hidden, gather_positions(hidden, start_top_index))
        end_log_probs = tf.nn.log_softmax(mask_logits(end_logits, p_mask[:, tf.newaxis]), axis=-1)
        end_top_log_probs, end_top_index = tf.math.top_k(end_log_probs, k=self.end_n_top)
        flat = [-1, self.start_n_top * self.end_n_top]
        outputs.update(start_top_log_probs=start_top_log_probs, start_top_index=start_top_index,
                       end_top_log_probs=tf.reshape(end_top_log_probs, flat),
                       end_top_index=tf.reshape(end_top_index, flat))
        return outputs


def _log_prob_at(log_probs: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
    """log_probs [B, S] at int positions [B] or [B, 1] -> float32 [B]."""
    positions = tf.reshape(tf.cast(positions, tf.int32), [-1])
    return tf.gather(tf.cast(log_probs, tf.float32), positions, batch_dims=1)


def squad_v1_loss(start_logits: tf.Tensor, end_logits: tf.Tensor, start_positions: tf.Tensor,
                  end_positions: tf.Tensor) -> tf.Tensor:
    """Per-example (CE(start) + CE(end)) / 2 [B]: softmax over all S positions (logits [B, S])."""
    start_log_probs = tf.nn.log_softmax(tf.cast(start_logits, tf.float32), axis=-1)
    end_log_probs = tf.nn.log_softmax(tf.cast(end_logits, tf.float32), axis=-1)
    return -0.5 * (_log_prob_at(start_log_probs, start_positions)
                   + _log_prob_at(end_log_probs, end_positions))


def squad_v2_loss(start_log_probs: tf.Tensor, end_log_probs: tf.Tensor, cls_logits: tf.Tensor,
                  start_positions: tf.Tensor, end_positions: tf.Tensor,
                  is_impossible: tf.Tensor) -> tf.Tensor:
    """Per-example 0.5 (CE_start + CE_end) + 0.5 sigmoid_CE(cls_logits, is_impossible) [B].

    The cross-entropies read the head's (masked) log-probabilities [B, S] at the gold positions;
    ``is_impossible`` is 0/1 (int or bool) [B] or [B, 1].
    """
    span = -0.5 * (_log_prob_at(start_log_probs, start_positions)
                   + _log_prob_at(end_log_probs, end_positions))
    labels = tf.reshape(tf.cast(is_impossible, tf.float32), [-1])
    answerability = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(cls_logits, tf.float32))
    return span + 0.5 * answerability
