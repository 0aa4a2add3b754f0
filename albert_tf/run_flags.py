"""Wiring of the shared flags (defined in ``flag_definitions``) into library objects.

Only scripts call these (after absl parsed the command line); library modules never read flags.
"""

from __future__ import annotations


import tensorflow as tf
from absl import app, flags

from albert_tf import distribute, optimization, training
from albert_tf.checkpoints import resolve_checkpoint_path
from albert_tf.config import AlbertConfig
from albert_tf.io_utils import absolute_path
from albert_tf.tokenization import FullTokenizer


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
        resolve_checkpoint_path(path)


def require_flags(*names: str) -> None:
    """UsageError naming the first of ``names`` that has no value."""
    for name in names:
        if flags.FLAGS[name].value in (None, ""):
            raise app.UsageError(f"--{name} is required.")


def reject_hub_module_handle() -> None:
    """The reference's --albert_hub_module_handle (TF1 hub format) is not supported: say what to do."""
    if flags.FLAGS.albert_hub_module_handle:
        raise app.UsageError(
            "--albert_hub_module_handle: TF-Hub modules (the TF1 hub format) are not supported. "
            "Use the released checkpoint tarball instead (model.ckpt-best, albert_config.json, "
            "30k-clean.model): --init_checkpoint=<dir>/model.ckpt-best "
            "--albert_config_file=<dir>/albert_config.json --spm_model_file=<dir>/30k-clean.model. "
            "Reference checkpoints are read directly.")


def tokenizer_from_flags(config: AlbertConfig) -> FullTokenizer:
    """The tokenizer of --spm_model_file (or --vocab_file) and --do_lower_case, checked against the
    config's vocab_size (config, SentencePiece model and checkpoint must come from one model)."""
    values = flags.FLAGS
    if not (values.spm_model_file or values.vocab_file):
        raise app.UsageError("--spm_model_file is required (or --vocab_file for a WordPiece "
                             "model).")
    tokenizer = FullTokenizer(vocab_file=values.vocab_file, do_lower_case=values.do_lower_case,
                              spm_model_file=values.spm_model_file)
    if config.vocab_size != tokenizer.vocab_size:
        raise ValueError(
            f"vocab_size={config.vocab_size} in {values.albert_config_file} does not match the "
            f"{tokenizer.vocab_size} pieces of {tokenizer.source_file}; the config, the "
            "SentencePiece model and the checkpoint must come from the same pretrained model.")
    return tokenizer


def trainer_from_flags(task: training.Task, num_train_steps: int, num_warmup_steps: int,
                       poly_power: float = 1.0, start_warmup_step: int = 0,
                       evaluates: bool | None = None) -> training.Trainer:
    """The Trainer of a script: strategy, loop and checkpoint flags, optimizer and schedule.

    A run that evaluates (``evaluates``, by default --do_eval) refuses a multi-worker strategy:
    the checkpoint sweep writes and deletes files.
    """
    values = flags.FLAGS
    strategy = strategy_from_flags()
    if values.do_eval if evaluates is None else evaluates:
        check_eval_strategy(strategy)
    run_config = run_config_from_flags(num_train_steps)
    optimizer_fn = optimizer_factory(values.optimizer, values.learning_rate, num_train_steps,
                                     num_warmup_steps, poly_power, start_warmup_step)
    return training.Trainer(strategy, task, optimizer_fn, run_config)


def optimizer_factory(name: str, learning_rate: float, num_train_steps: int, num_warmup_steps: int,
                      poly_power: float = 1.0, start_warmup_step: int = 0):
    """A zero-argument optimizer constructor for the Trainer (built inside the strategy scope);
    ``create_optimizer`` rejects an unknown name."""
    return lambda: optimization.create_optimizer(
        name, learning_rate=learning_rate, num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps, poly_power=poly_power,
        start_warmup_step=start_warmup_step)


def run_config_from_flags(num_train_steps: int) -> training.RunConfig:
    """The loop settings from the shared flags (--output_dir is created)."""
    values = flags.FLAGS
    tf.io.gfile.makedirs(values.output_dir)
    return training.RunConfig(
        output_dir=absolute_path(values.output_dir),
        train_batch_size=values.train_batch_size, num_train_steps=num_train_steps,
        save_checkpoints_steps=values.save_checkpoints_steps,
        keep_checkpoint_max=values.keep_checkpoint_max,
        iterations_per_loop=values.iterations_per_loop,
        gradient_accumulation_steps=values.gradient_accumulation_steps,
        use_xla=values.use_xla, dtype=values.dtype, seed=values.seed,
        replay_input_on_resume=values.replay_input_on_resume)
