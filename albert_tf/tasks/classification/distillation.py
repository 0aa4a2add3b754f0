"""Self-distillation of two-stage training's stage 2 (``--early_exit_distillation``;
docs/early_exit.md): each internal classifier learns the labels and the frozen full depth's
answers.

Patience-based exit stops where consecutive internal classifiers agree, and with two-stage
training the full depth is the ordinary model: an internal classifier that answers as the full
depth does lets an example exit with the ordinary model's answer. Trained on the labels alone, a
linear head on a frozen early layer learns the labels as well as that layer allows, and where it
cannot, nothing asks it to answer as the full depth does; the full depth's probabilities say
what the ordinary model answers and how sure it is. The teacher is frozen (stage 2 trains the
internal classifiers alone), so no gradient would reach it anyway; it is stopped explicitly so
that the loss means the same under any training.
"""

from __future__ import annotations

import tensorflow as tf


def distillation_loss(student: tf.Tensor, teacher: tf.Tensor, is_regression: bool) -> tf.Tensor:
    """float32 [B]: how far each example's ``student`` logits [B, C] are from the ``teacher``'s
    (the full depth's, [B, C]): KL(softmax(teacher) || softmax(student)), 0 when they give the
    same probabilities; a regression ([B, 1] scores): the squared difference of the scores."""
    teacher = tf.stop_gradient(teacher)
    if is_regression:
        return tf.square(student[:, 0] - teacher[:, 0])
    teacher_log_probs = tf.nn.log_softmax(teacher)
    return tf.reduce_sum(tf.exp(teacher_log_probs)
                         * (teacher_log_probs - tf.nn.log_softmax(student)), axis=-1)


def mixed_loss(label_loss: tf.Tensor, student: tf.Tensor, teacher: tf.Tensor,
               is_regression: bool, weight: float) -> tf.Tensor:
    """float32 [B]: (1 - ``weight``) x ``label_loss`` [B] (the loss on the labels) + ``weight`` x
    ``distillation_loss`` of ``student`` toward ``teacher``; weight 0 is the labels' loss itself
    (the teacher's term is not computed), 1 the teacher's alone."""
    if weight == 0:
        return label_loss
    return ((1.0 - weight) * label_loss
            + weight * distillation_loss(student, teacher, is_regression))
