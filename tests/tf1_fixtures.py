"""Test fixture: checkpoints written the way the reference writes them (TF1 graph + compat.v1 Saver)."""

import numpy as np
import tensorflow as tf


def write_reference_checkpoint(prefix, shapes, seed=0, rename=None, with_slots=True):
    """Writes a checkpoint the way the reference does: TF1 graph variables + tf.compat.v1 Saver.

    Adds adam_m/adam_v slots and global_step like a reference training run. Returns
    {reference name: value} (before ``rename`` is applied to the stored names).
    """
    rng = np.random.default_rng(seed)
    values = {name: rng.normal(0, 0.3, shape).astype(np.float32) for name, shape in shapes.items()}
    rename = rename or (lambda n: n)
    with tf.Graph().as_default():
        for name, value in values.items():
            tf.compat.v1.get_variable(rename(name), initializer=value)
            if with_slots:
                tf.compat.v1.get_variable(rename(name) + "/adam_m", initializer=np.ones_like(value))
                tf.compat.v1.get_variable(rename(name) + "/adam_v", initializer=np.ones_like(value))
        tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, prefix, global_step=123)
    return values
