"""Command line: the parameter report of an ALBERT config and a training-memory estimate.

    python -m albert_tf.model_report --albert_config_file=configs/albert_base_v2.json \\
        [--batch_size=8 --max_seq_length=512 --dtype=float32]

Prints the cross-layer sharing strategy, the parameters of the pretraining model (encoder + MLM and
SOP heads) split into embeddings, projection, transformer, pooler and heads, the count the results
tables give every run (embeddings + transformer: no pooler, no heads), then the lower-bound
training-memory estimate for one device. The paper's published sizes are not one formula of these
groups (docs/model.md, "The paper's parameter counts"). The counts are
albert_tf/models/parameters.py (``parameter_report``), the estimate
albert_tf/tasks/pretraining/memory.py (``training_memory_bytes``); this module holds the flags and
the printing. The estimate is of a run the config allows: --max_seq_length above its
max_position_embeddings, or a --batch_size below 1, is refused in one line, as a training script
refuses it.
"""

from __future__ import annotations

from absl import flags

from albert_tf.cli import command_line, flag_definitions

flags.DEFINE_integer("batch_size", 8, "Per-device batch for the memory estimate.")
# The memory estimate is for a run with these settings.
flag_definitions.define("albert_config_file", "max_seq_length", "dtype")
flag_definitions.check_ranges(batch_size=flag_definitions.AT_LEAST_ONE)
flags.mark_flag_as_required("albert_config_file")

command_line.parse_before_imports(__name__)  # --help, flag mistakes: before TensorFlow loads

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.cli.training_run import config_for_length  # noqa: E402
from albert_tf.files.run_files import RunFiles, check_run_files, inputs  # noqa: E402
from albert_tf.models.config import AlbertConfig  # noqa: E402
from albert_tf.models.parameters import format_parameter_report, parameter_report  # noqa: E402
from albert_tf.tasks.pretraining.memory import training_memory_bytes  # noqa: E402
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel  # noqa: E402

# Bytes per activation value for each --dtype.
_COMPUTE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def format_model_report(config: AlbertConfig, batch_size: int, max_seq_length: int,
                        dtype: str) -> str:
    """The parameter report of ``config``'s pretraining model and its memory estimate, as text."""
    counts = parameter_report(AlbertPretrainingModel(config))
    paper_count = counts["encoder total"] - counts["pooler"]
    lines = [f"cross_layer_sharing: {config.cross_layer_sharing}",
             format_parameter_report(counts),
             "embeddings + transformer (no pooler, no heads; the tables' count): "
             f"{paper_count:,d} ({paper_count / 1e6:.2f}M)",
             "",
             f"Estimated training memory, batch {batch_size} x seq {max_seq_length}, {dtype} "
             "(lower bound):"]
    memory = training_memory_bytes(config, batch_size, max_seq_length, _COMPUTE_BYTES[dtype])
    lines.extend(f"  {key:<22} {value / 2**30:8.2f} GiB" for key, value in memory.items())
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    del argv
    values = flags.FLAGS
    config = config_for_length(values.albert_config_file, values.max_seq_length)
    print(format_model_report(config, values.batch_size, values.max_seq_length, values.dtype))


def run_files() -> RunFiles:
    """What the report reads (the config); it writes nothing."""
    return RunFiles(inputs(("--albert_config_file", flags.FLAGS.albert_config_file)))


if __name__ == "__main__":
    error_boundary.run(main, checks=[lambda: check_run_files(run_files())])
