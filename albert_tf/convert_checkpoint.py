"""Command line: converts checkpoints between the reference TF1 format and albert_tf's own.

    # reference TF1 checkpoint -> albert_tf checkpoint (output_dir/model.ckpt-0)
    python -m albert_tf.convert_checkpoint --albert_config_file=albert_config.json \\
        --tf1_checkpoint=model.ckpt-best --output_dir=converted/ [--init_from_group0]
    # albert_tf checkpoint (prefix or directory) -> reference TF1 checkpoint (output_dir/model.ckpt)
    python -m albert_tf.convert_checkpoint --albert_config_file=albert_config.json \\
        --checkpoint=runs/pretrain/ --output_dir=exported/

Both directions go through the pretraining model (encoder + MLM and SOP heads), print the load
report and require the whole encoder; a head the source lacks is left out of the output. An output
directory holding any other checkpoint is refused; an earlier conversion is replaced only with
``--overwrite``. Flags, source format and output directory are checked before anything is loaded.

This module holds the flags and the wiring only; the conversion is
albert_tf/checkpoints/conversion.py.
"""

from __future__ import annotations

from absl import app, flags

from albert_tf.cli import command_line, flag_definitions

flag_definitions.define("albert_config_file", "init_from_group0")
flags.DEFINE_string("tf1_checkpoint", None, "Reference TF1 checkpoint to convert to albert_tf.")
flags.DEFINE_string("checkpoint", None,
                    "albert_tf checkpoint to convert to the reference format.")
flags.DEFINE_string("output_dir", None,
                    "Directory for the converted checkpoint: new, empty, or holding only an "
                    "earlier conversion (replaced with --overwrite). A directory holding other "
                    "checkpoints (a training run) is refused.")
flags.DEFINE_bool("overwrite", False,
                  "Replace an earlier conversion in --output_dir (never other checkpoints).")
flags.mark_flags_as_required(["albert_config_file", "output_dir"])

command_line.parse_before_imports(__name__)  # --help, flag mistakes: before TensorFlow loads

from albert_tf.checkpoints.conversion import albert_tf_to_tf1, tf1_to_albert_tf  # noqa: E402
from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.models.config import AlbertConfig  # noqa: E402
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel  # noqa: E402


def main(argv: list[str]) -> None:
    del argv
    values = flags.FLAGS
    if bool(values.tf1_checkpoint) == bool(values.checkpoint):
        raise app.UsageError("Give exactly one of --tf1_checkpoint (reference -> albert_tf) or "
                             "--checkpoint (albert_tf -> reference).")
    # The pretraining model: a released checkpoint holds its MLM and SOP heads.
    model = AlbertPretrainingModel(AlbertConfig.from_json_file(values.albert_config_file))
    options = dict(init_from_group0=values.init_from_group0, overwrite=values.overwrite,
                   config_file=values.albert_config_file)
    if values.tf1_checkpoint:
        prefix = tf1_to_albert_tf(model, values.tf1_checkpoint, values.output_dir, **options)
        print(f"Wrote albert_tf checkpoint {prefix}")
    else:
        source, prefix, count = albert_tf_to_tf1(model, values.checkpoint, values.output_dir,
                                                 **options)
        print(f"Read {source}; wrote reference TF1 checkpoint {prefix} ({count} variables).")


if __name__ == "__main__":
    error_boundary.run(main)
