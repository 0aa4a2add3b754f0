"""absl flags shared by the run_* scripts (training loop, strategy, precision) and their wiring.

Only scripts call ``define_*`` (once, at import); library modules never read flags.
"""

from __future__ import annotations


import tensorflow as tf
from absl import flags

from albert_tf import distribute, optimization, training
from albert_tf.config import AlbertConfig
from albert_tf.io_utils import absolute_path


def define_tpu_flags() -> None:
    """The reference's TPU flags (``use_tpu`` selects the tpu strategy)."""
    flags.DEFINE_bool("use_tpu", False, "Run on TPU (same as --strategy=tpu).")
    flags.DEFINE_string("tpu_name", None, "Cloud TPU name or grpc:// address.")
    flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU.")
    flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU.")
    flags.DEFINE_string("master", None, "[Reference flag, unused] TensorFlow master URL; use "
                        "--tpu_name.")
    flags.DEFINE_integer("num_tpu_cores", 8, "[Reference flag, informational] TPU cores; the TPU "
                         "strategy uses every core of the slice.")


def define_loop_flags() -> None:
    """Flags of albert_tf's loop that the reference does not have."""
    flags.DEFINE_enum("strategy", "one_device", list(distribute.STRATEGY_NAMES),
                      "tf.distribute strategy. multi_worker_mirrored reads TF_CONFIG.")
    flags.DEFINE_integer("num_gpus", 0, "GPUs for mirrored (0: all visible); one_device takes the "
                         "first GPU when there is one, else the CPU.")
    flags.DEFINE_bool("use_xla", False, "XLA-compile the forward and backward pass.")
    flags.DEFINE_enum("dtype", "float32", sorted(training.DTYPE_POLICIES),
                      "Compute precision: float32, or mixed bfloat16 / float16 (float32 variables; "
                      "float16 adds dynamic loss scaling).")
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Split each train batch into this many micro-batches and sum their "
                         "gradients before one update (train_batch_size stays the global batch).")
    flags.DEFINE_integer("input_seed", 12345, "Seed of the training input shuffles.")
    flags.DEFINE_integer("seed", None, "Seed of the model initialisation and dropout (Python, "
                         "NumPy, TF); unset = random, as the reference.")
    flags.DEFINE_bool("replay_input_on_resume", True,
                      "On restart, skip the batches the run already consumed so the data order "
                      "equals an uninterrupted run (costs one read of the consumed records).")


def define_eval_flags() -> None:
    """Flags of the checkpoint sweep run by --do_eval."""
    flags.DEFINE_integer("max_eval_wait_secs", 3600,
                         "--do_eval without --do_train (an eval job beside training): how long the "
                         "sweep waits for a new checkpoint (polling every 60 s) before finishing "
                         "with the checkpoints it has.")


def strategy_from_flags() -> tf.distribute.Strategy:
    """The strategy named by --strategy (or tpu when --use_tpu)."""
    values = flags.FLAGS
    name = "tpu" if values.use_tpu else values.strategy
    return distribute.create_strategy(name, num_gpus=values.num_gpus, tpu_name=values.tpu_name,
                                      tpu_zone=values.tpu_zone, gcp_project=values.gcp_project)


def check_eval_strategy(strategy: tf.distribute.Strategy) -> None:
    """The checkpoint sweep writes and deletes files: it runs as one process, not multi-worker."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        raise ValueError("--do_eval runs the checkpoint sweep in one process: start it as a "
                         "separate job with --nodo_train and --strategy=one_device or mirrored.")


def load_config(path: str, max_seq_length: int) -> AlbertConfig:
    """Reads the config and checks that max_seq_length fits its position embeddings."""
    config = AlbertConfig.from_json_file(path)
    if max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={max_seq_length} exceeds max_position_embeddings="
                         f"{config.max_position_embeddings} of {path}.")
    return config


def check_init_checkpoint(path: str | None) -> None:
    """Fails fast when --init_checkpoint names nothing (never a silent random init)."""
    if path:
        from albert_tf.checkpoints import resolve_checkpoint_path
        resolve_checkpoint_path(path)


def optimizer_factory(name: str, learning_rate: float, num_train_steps: int, num_warmup_steps: int,
                      poly_power: float = 1.0, start_warmup_step: int = 0):
    """A zero-argument optimizer constructor for the Trainer (built inside the strategy scope);
    ``create_optimizer`` rejects an unknown name."""
    return lambda: optimization.create_optimizer(
        name, learning_rate=learning_rate, num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps, poly_power=poly_power,
        start_warmup_step=start_warmup_step)


def run_config_from_flags(output_dir: str, train_batch_size: int, num_train_steps: int,
                          save_checkpoints_steps: int, keep_checkpoint_max: int | None,
                          iterations_per_loop: int) -> training.RunConfig:
    values = flags.FLAGS
    tf.io.gfile.makedirs(output_dir)
    return training.RunConfig(
        output_dir=absolute_path(output_dir),
        train_batch_size=train_batch_size, num_train_steps=num_train_steps,
        save_checkpoints_steps=save_checkpoints_steps, keep_checkpoint_max=keep_checkpoint_max,
        iterations_per_loop=iterations_per_loop,
        gradient_accumulation_steps=values.gradient_accumulation_steps,
        use_xla=values.use_xla, dtype=values.dtype, seed=values.seed,
        replay_input_on_resume=values.replay_input_on_resume)
