"""Wiring of the shared flags (defined in albert_tf/cli/flag_definitions.py) into library objects.

The strategy, config, tokenizer, optimizer, ``RunConfig`` and ``Trainer`` of a script, and the
checks that run before any work (output directories writable and sparing the inputs, the lock of
``--output_dir`` taken, ``--init_checkpoint`` present, required flags given). Only scripts call
these (after absl parsed the command line); library modules never read flags.
"""

from __future__ import annotations

import atexit
import functools
import os
import uuid
from typing import Callable

import keras
import tensorflow as tf
from absl import app, flags

from albert_tf.checkpoints.files import resolve_checkpoint_path
from albert_tf.checkpoints.hf_format import is_hf_directory
from albert_tf.evaluation.checkpoint_sweep import BEST_PREFIX
from albert_tf.files import run_lock
from albert_tf.files.paths import (OutputPathError, absolute_path, check_directory_holds_no_input,
                                   check_outputs_are_not_inputs, expand_input_patterns)
from albert_tf.models.config import AlbertConfig
from albert_tf.serving.saved_model import check_new_directory
from albert_tf.serving.tflite import check_tflite_path
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.training.distribute import create_strategy
from albert_tf.training.input_pipeline import ParseFn, record_train_dataset_fn
from albert_tf.training.optimization import create_optimizer
from albert_tf.training.task import Task
from albert_tf.training.trainer import RunConfig, Trainer, is_chief

# Directories a run writes to, checked by ``check_output_directories`` where a script defines them.
_WRITTEN_DIRECTORY_FLAGS = ("output_dir", "cached_dir")
# What a run_* script reads, wherever it defines the flag: files, and comma-separated globs.
_INPUT_FILE_FLAGS = ("albert_config_file", "spm_model_file", "vocab_file", "train_file",
                     "eval_file", "dev_file", "test_file", "predict_file")
_INPUT_PATTERN_FLAGS = ("input_file", "eval_input_file")
# The flags whose run evaluates, predicts or exports from the checkpoints of --output_dir.
_EVALUATION_FLAGS = ("do_eval", "do_predict", "export_dir", "tflite_file")


@functools.cache
def strategy_from_flags() -> tf.distribute.Strategy:
    """The strategy named by --strategy (or tpu when --use_tpu), created once per process.

    Scripts create it before any check that runs TensorFlow ops: multi-worker collectives must be
    configured before the first op.
    """
    values = flags.FLAGS
    name = "tpu" if values.use_tpu else values.strategy
    return create_strategy(name, num_gpus=values.num_gpus, tpu_name=values.tpu_name,
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


def _flag_value(name: str):
    """The value of flag ``name``; None where the running script does not define it."""
    values = flags.FLAGS
    return values[name].value if name in values else None


def check_output_directories() -> None:
    """Checks before work: --output_dir and --cached_dir are directories this run can write
    (created when absent), --export_dir is absent or an empty directory whose parent can be
    written, and --tflite_file is no directory and its directory can be written, wherever the
    script defines them and they are set. OutputPathError (FileExistsError for a used
    --export_dir, TFLiteExportError for a directory at --tflite_file) naming the flag and the path
    in the way otherwise."""
    for name in _WRITTEN_DIRECTORY_FLAGS:
        path = _flag_value(name)
        problem = path and _directory_problem(path)
        if problem:
            raise OutputPathError(f"--{name}: {problem}")
    export_dir = _flag_value("export_dir")
    if export_dir:
        if tf.io.gfile.exists(export_dir) and not tf.io.gfile.isdir(export_dir):
            raise OutputPathError(f"--export_dir: {export_dir} is a file, not a directory")
        check_new_directory(export_dir, flag="export_dir")
        problem = _directory_problem(os.path.dirname(export_dir.rstrip("/")) or ".")
        if problem:
            raise OutputPathError(f"--export_dir: {problem}")
    tflite_file = _flag_value("tflite_file")
    if tflite_file:
        check_tflite_path(tflite_file, flag="tflite_file")
        problem = _directory_problem(os.path.dirname(tflite_file) or ".")
        if problem:
            raise OutputPathError(f"--tflite_file: {problem}")


def flag_paths(*names: str) -> list[tuple[str, str]]:
    """``("--<name>", value)`` of each flag among ``names`` that the running command defines and
    sets, for the path checks of albert_tf/files/paths.py."""
    return [(f"--{name}", _flag_value(name)) for name in names if _flag_value(name)]


def check_outputs_spare_inputs() -> None:
    """Checks before work of a run_* script: no output replaces or destroys an input.

    - --output_dir, --cached_dir, --export_dir and --tflite_file are none of the files read
      (config, tokenizer, data files and globs);
    - --export_dir (written whole) is not --output_dir, --cached_dir, --data_dir or
      --init_checkpoint;
    - --init_checkpoint is not a checkpoint in --output_dir, where the run writes its checkpoints
      and 'checkpoint' file, renames its best to model.ckpt-best and deletes the others.

    --output_dir and --cached_dir may be --data_dir (or hold the config and tokenizer): what a run
    writes there (model.ckpt-*, checkpoint, eval_results.txt, best_trial.txt, the prediction files,
    feature files named <task>_<split>_<digest>.tf_record, train/ and eval/) replaces no data file.
    OutputPathError naming both flags and paths otherwise.
    """
    inputs = flag_paths(*_INPUT_FILE_FLAGS)
    for name in _INPUT_PATTERN_FLAGS:
        if _flag_value(name):
            inputs += [(f"--{name}", path) for path in expand_input_patterns(_flag_value(name))]
    check_outputs_are_not_inputs(
        flag_paths("output_dir", "cached_dir", "export_dir", "tflite_file"), inputs)
    check_outputs_are_not_inputs(
        flag_paths("export_dir"),
        flag_paths("output_dir", "cached_dir", "data_dir", "init_checkpoint"))
    init_checkpoint, output_dir = _flag_value("init_checkpoint"), _flag_value("output_dir")
    if init_checkpoint and output_dir:
        try:
            prefix = resolve_checkpoint_path(init_checkpoint)
        except FileNotFoundError:
            return  # reported where the run reads it
        check_directory_holds_no_input(
            ("--output_dir", output_dir), [("--init_checkpoint", prefix)],
            "the run writes its checkpoints there, renames its best to model.ckpt-best and deletes "
            "the others. To resume the run in it, leave --init_checkpoint out; to start from that "
            "checkpoint, use another --output_dir")


def lock_output_dir() -> None:
    """Checks before work: takes the locks of --output_dir (albert_tf/files/run_lock.py) for the
    roles this run plays, released when the process exits (normally, on an error or Ctrl-C).

    Training with --do_train; evaluation with --do_eval, --do_predict or --export_dir (the sweep,
    predictions and exports read and write the checkpoints of --output_dir). So a separate
    evaluation job (--nodo_train --do_eval) runs beside a training job, and a second job of either
    kind is refused (DirectoryInUseError naming the holder). A multi-worker job is one run: its
    chief takes the locks; the other workers, which write only under <output_dir>/.worker_tmp/,
    take none and stop when another run holds them.
    """
    output_dir = _flag_value("output_dir")
    if not output_dir:
        return
    roles = [run_lock.TRAINING] if _flag_value("do_train") else []
    if any(_flag_value(name) for name in _EVALUATION_FLAGS):
        roles.append(run_lock.EVALUATION)
    cluster = None
    if _flag_value("strategy") == "multi_worker_mirrored" and not _flag_value("use_tpu"):
        strategy = strategy_from_flags()
        cluster = strategy.cluster_resolver.cluster_spec().as_dict()
        if not is_chief(strategy):
            for role in roles:
                run_lock.check_lock_of_cluster(output_dir, role, cluster)
            return
    for role in roles:
        atexit.register(run_lock.acquire(output_dir, role, cluster).release)


def _directory_problem(path: str) -> str | None:
    """Why ``path`` cannot be a directory this run writes to, or None: it is created when absent,
    and a hidden probe file is written in it and removed."""
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        return f"{path} is a file, not a directory"
    probe = os.path.join(path, f".albert_tf_write_check.{uuid.uuid4().hex}")
    try:
        tf.io.gfile.makedirs(path)
        with tf.io.gfile.GFile(probe, "w") as handle:
            handle.write("")
        tf.io.gfile.remove(probe)
    except (OSError, tf.errors.OpError) as error:
        reason = error.message if isinstance(error, tf.errors.OpError) else str(error)
        return f"{path} cannot be written: {reason}"
    return None


def check_init_checkpoint(path: str | None) -> None:
    """Fails fast when --init_checkpoint names nothing (never a silent random init): a
    checkpoint prefix, a directory of checkpoints, a SavedModel or a Hugging Face directory."""
    if path and not is_hf_directory(path):
        resolve_checkpoint_path(path)


def require_flags(*names: str) -> None:
    """UsageError naming the first of ``names`` that has no value."""
    for name in names:
        if flags.FLAGS[name].value in (None, ""):
            raise app.UsageError(f"--{name} is required.")


def require_action(*names: str) -> None:
    """UsageError "Nothing to do: set --a, --b or --c." unless one of the flags ``names`` is set."""
    if not any(flags.FLAGS[name].value for name in names):
        options = [f"--{name}" for name in names]
        raise app.UsageError(f"Nothing to do: set {', '.join(options[:-1])} or {options[-1]}.")


def train_from_flags(trainer: Trainer, record_path: str, parse: ParseFn,
                     description: str) -> None:
    """--do_train of a fine-tuning script: prints ``description`` (what the records hold) with the
    batch and step count, warm-starts from --init_checkpoint (or resumes the run in --output_dir)
    and trains on the feature records at ``record_path``, repeated and shuffled with --input_seed."""
    values = flags.FLAGS
    print(f"{description}, batch {values.train_batch_size}, {trainer.config.num_train_steps} steps")
    trainer.initialize(values.init_checkpoint, config_file=values.albert_config_file)
    trainer.train(record_train_dataset_fn(record_path, parse, seed=values.input_seed))


def write_tflite_from_flags(model: keras.Model, export: Callable[..., str]) -> None:
    """--tflite_file: ``export(model, --tflite_file, --max_seq_length, --tflite_quantization)``,
    the task's TFLite export of ``model`` (restored from model.ckpt-best by the caller)."""
    values = flags.FLAGS
    path = export(model, values.tflite_file, values.max_seq_length, values.tflite_quantization)
    print(f"Wrote the TFLite model of {BEST_PREFIX} ({values.tflite_quantization}, S="
          f"{values.max_seq_length}) to {path}")


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


def trainer_from_flags(task: Task, num_train_steps: int, num_warmup_steps: int,
                       poly_power: float = 1.0, start_warmup_step: int = 0,
                       evaluates: bool | None = None) -> Trainer:
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
    return Trainer(strategy, task, optimizer_fn, run_config)


def optimizer_factory(name: str, learning_rate: float, num_train_steps: int, num_warmup_steps: int,
                      poly_power: float = 1.0, start_warmup_step: int = 0):
    """A zero-argument optimizer constructor for the Trainer (built inside the strategy scope);
    ``create_optimizer`` rejects an unknown name."""
    return lambda: create_optimizer(
        name, learning_rate=learning_rate, num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps, poly_power=poly_power,
        start_warmup_step=start_warmup_step)


def run_config_from_flags(num_train_steps: int) -> RunConfig:
    """The loop settings from the shared flags (--output_dir is created)."""
    values = flags.FLAGS
    tf.io.gfile.makedirs(values.output_dir)
    return RunConfig(
        output_dir=absolute_path(values.output_dir),
        train_batch_size=values.train_batch_size, num_train_steps=num_train_steps,
        save_checkpoints_steps=values.save_checkpoints_steps,
        keep_checkpoint_max=values.keep_checkpoint_max,
        iterations_per_loop=values.iterations_per_loop,
        gradient_accumulation_steps=values.gradient_accumulation_steps,
        use_xla=values.use_xla, dtype=values.dtype, seed=values.seed,
        replay_input_on_resume=values.replay_input_on_resume)
