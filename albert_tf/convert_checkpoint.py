"""Command line: converts checkpoints between the reference TF1 format and albert_tf's own.

    # reference TF1 checkpoint -> albert_tf checkpoint (output_dir/model.ckpt-0)
    python -m albert_tf.convert_checkpoint --albert_config_file=albert_config.json \\
        --tf1_checkpoint=model.ckpt-best --output_dir=converted/ [--init_from_group0]
    # albert_tf checkpoint (prefix or directory) -> reference TF1 checkpoint (output_dir/model.ckpt)
    python -m albert_tf.convert_checkpoint --albert_config_file=albert_config.json \\
        --checkpoint=runs/pretrain/ --output_dir=exported/

Both directions go through the pretraining model (encoder + MLM and SOP heads).
"""

from __future__ import annotations

import os

import tensorflow as tf
from absl import app, flags

from albert_tf import flag_definitions
from albert_tf.checkpoints import (TF2_CHECKPOINT_NAME, export_tf1_checkpoint, load_tf1_checkpoint,
                                   restore_object_checkpoint, tf1_variable_map)
from albert_tf.config import AlbertConfig
from albert_tf.heads import AlbertPretrainingModel


def tf1_to_albert_tf(config: AlbertConfig, tf1_checkpoint: str, output_dir: str,
                     init_from_group0: bool = False) -> str:
    """Loads a reference checkpoint (printing the load report) and saves it as
    ``output_dir/model.ckpt-0``; returns that prefix. Raises if encoder variables are missing."""
    model = AlbertPretrainingModel(config)
    report = load_tf1_checkpoint(model, tf1_checkpoint, init_from_group0=init_from_group0)
    print(report.format())
    report.require_complete_encoder()
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), output_dir,
                                         max_to_keep=None, checkpoint_name=TF2_CHECKPOINT_NAME)
    return manager.save(checkpoint_number=0)


def albert_tf_to_tf1(config: AlbertConfig, checkpoint: str, output_dir: str) -> tuple[str, int]:
    """Restores an albert_tf checkpoint and exports it as ``output_dir/model.ckpt`` under the
    reference names; returns (the checkpoint read, the number of variables written)."""
    model = AlbertPretrainingModel(config)
    source = restore_object_checkpoint(model, checkpoint)
    export_tf1_checkpoint(model, os.path.join(output_dir, TF2_CHECKPOINT_NAME))
    return source, len(tf1_variable_map(model))


def _define_flags() -> None:
    flag_definitions.define("albert_config_file", "init_from_group0")
    flags.DEFINE_string("tf1_checkpoint", None, "Reference TF1 checkpoint to convert to albert_tf.")
    flags.DEFINE_string("checkpoint", None,
                        "albert_tf checkpoint to convert to the reference format.")
    flags.DEFINE_string("output_dir", None, "Directory for the converted checkpoint.")
    flags.mark_flags_as_required(["albert_config_file", "output_dir"])


def main(argv: list[str]) -> None:
    del argv
    values = flags.FLAGS
    if bool(values.tf1_checkpoint) == bool(values.checkpoint):
        raise app.UsageError("Give exactly one of --tf1_checkpoint (reference -> albert_tf) or "
                             "--checkpoint (albert_tf -> reference).")
    config = AlbertConfig.from_json_file(values.albert_config_file)
    if values.tf1_checkpoint:
        prefix = tf1_to_albert_tf(config, values.tf1_checkpoint, values.output_dir,
                                  values.init_from_group0)
        print(f"Wrote albert_tf checkpoint {prefix}")
    else:
        source, count = albert_tf_to_tf1(config, values.checkpoint, values.output_dir)
        print(f"Read {source}; wrote reference TF1 checkpoint "
              f"{os.path.join(values.output_dir, TF2_CHECKPOINT_NAME)} ({count} variables).")


if __name__ == "__main__":
    _define_flags()
    app.run(main)
