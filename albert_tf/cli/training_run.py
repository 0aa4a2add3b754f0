"""The steps every training script shares, from its frozen ``RunSettings``: what a run in
``--output_dir`` reads and writes (its declaration, checked before any work), the locks of that
directory, and the config, tokenizer, checkpoint source, strategy and ``Trainer`` of the run.

The driver of every training script (albert_tf/cli/driver.py) is built on these steps; nothing here
reads a flag.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Iterator

import tensorflow as tf

from albert_tf.checkpoints.config_beside import check_config_beside
from albert_tf.checkpoints.files import BEST_CHECKPOINT_NAME, CHECKPOINT_STATE_FILE
from albert_tf.checkpoints.run_config import (CONFIG, RUN_CONFIG_FILE, run_config_path,
                                              write_config_file)
from albert_tf.checkpoints.run_directory import trained_checkpoint
from albert_tf.checkpoints.warm_start import CheckpointSource, resolve_checkpoint_source
from albert_tf.cli.settings import RunSettings, StrategySettings
from albert_tf.errors.user_error import UserError
from albert_tf.evaluation.best_checkpoint import SWEEP_OUTPUTS
from albert_tf.files import run_lock
from albert_tf.files.earlier_layouts import EARLIER_FILE_NAMES
from albert_tf.files.paths import absolute_path, path_identity
from albert_tf.files.run_manifest import Fact, RunManifest, add_facts, require_fact
from albert_tf.files.run_files import (Input, NewDirectory, Output, RunFiles, WorkDirectory,
                                       fixed_outputs, inputs)
from albert_tf.models.config import AlbertConfig
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.training.distribute import create_strategy
from albert_tf.training.length_buckets import LengthSplit
from albert_tf.training.optimization import create_optimizer
from albert_tf.training.task import Task
from albert_tf.training.trainer import (CHECKPOINTS, EVAL_LOGS, TRAIN_LOGS, WORKER_DIR, RunConfig,
                                        Trainer, is_chief)

# What the family of checkpoints in --output_dir is to an input found among them.
CHECKPOINTS_CONSEQUENCE = ("the run writes its checkpoints there, renames its best to "
                           "model.ckpt-best and deletes the others. To resume the run in it, leave "
                           "--init_checkpoint out; to start from that checkpoint, use another "
                           "--output_dir")


class RunSettingsError(UserError, ValueError):
    """Settings that cannot work together (e.g. a max_seq_length longer than the config allows)."""


def run_files(settings: RunSettings, init_checkpoint: CheckpointSource | None, sweeps: bool,
              run_outputs: tuple[str, ...] = (), task_inputs: tuple[Input, ...] = (),
              cached_names: tuple[str, ...] = ()) -> RunFiles:
    """What a training run reads (config, tokenizer, the checkpoint it starts from, the task's
    ``task_inputs``) and writes: ``--output_dir`` with the trainer's and the sweep's files, the
    lock files, the task's ``run_outputs`` (names there), its feature caches in ``--cached_dir``
    (``cached_names``: names and patterns, each declared whatever the run builds), ``--export_dir``,
    ``--tflite_file`` and ``--onnx_file`` (and the run manifest of --output_dir,
    albert_tf/files/run_manifest.py). Every fixed name is
    declared whatever the run's actions, so no output of any run ever lands on a file another run
    of the directory owns; those that only training or the checkpoint sweep (``sweeps``) writes are
    ``touched`` only then, so a run that only predicts or exports reads a ``model.ckpt-best`` the
    user put there. The config file a training run writes (albert_tf/checkpoints/run_config.py) is
    written only where absent, so it is no output of a run given it as --albert_config_file."""
    output_dir = WorkDirectory("--output_dir", settings.output_dir)
    reads_run_config = _reads_run_config(settings)
    directories = (output_dir,)
    cache = output_dir
    if settings.cached_dir != settings.output_dir:
        cache = WorkDirectory("--cached_dir", settings.cached_dir)
        directories += (cache,)
    lock_names = tuple(run_lock.lock_name(role) for role in run_lock.ROLES)
    outputs = (fixed_outputs(output_dir, [CHECKPOINTS], consequence=CHECKPOINTS_CONSEQUENCE,
                             touched=settings.do_train or sweeps)
               + fixed_outputs(output_dir, [CHECKPOINT_STATE_FILE],
                               touched=settings.do_train or sweeps)
               + fixed_outputs(output_dir, [TRAIN_LOGS, WORKER_DIR], is_directory=True,
                               touched=settings.do_train)
               + fixed_outputs(output_dir, [EVAL_LOGS], is_directory=True, touched=sweeps)
               + fixed_outputs(output_dir, SWEEP_OUTPUTS, touched=sweeps)
               + fixed_outputs(output_dir, run_outputs)
               + fixed_outputs(output_dir, [] if reads_run_config else [RUN_CONFIG_FILE],
                               touched=settings.do_train,
                               listed_as_owned=False)
               + fixed_outputs(output_dir, lock_names, listed_as_owned=False)
               + fixed_outputs(output_dir, EARLIER_FILE_NAMES, listed_as_owned=False,
                               touched=False)
               + fixed_outputs(cache, cached_names, listed_as_owned=False))
    for flag, path in (("--tflite_file", settings.tflite_file),
                       ("--onnx_file", settings.onnx_file)):
        if path:
            outputs += (Output(flag, path),)
    read = inputs(("--albert_config_file", settings.albert_config_file),
                  ("--spm_model_file", settings.spm_model_file),
                  ("--vocab_file", settings.vocab_file))
    if init_checkpoint is not None:
        read += inputs(("--init_checkpoint", init_checkpoint.path))
    read += task_inputs
    exports = (NewDirectory("--export_dir", settings.export_dir),) if settings.export_dir else ()
    return RunFiles(read, outputs, directories, exports)


def _reads_run_config(settings: RunSettings) -> bool:
    """Whether --albert_config_file is the config the run in --output_dir recorded."""
    return (settings.albert_config_file is not None
            and path_identity(settings.albert_config_file)
            == path_identity(run_config_path(settings.output_dir)))


def init_checkpoint_source(settings: RunSettings) -> CheckpointSource | None:
    """--init_checkpoint resolved once (None when not given): FileNotFoundError naming it when it
    names no checkpoint, before any work (never a silent random initialisation)."""
    if not settings.init_checkpoint:
        return None
    try:
        return resolve_checkpoint_source(settings.init_checkpoint)
    except FileNotFoundError as error:
        raise RunSettingsError(f"--init_checkpoint: {error}") from None


@functools.cache
def strategy_of(settings: StrategySettings) -> tf.distribute.Strategy:
    """The strategy, created once per process (multi-worker collectives are configured before the
    first op)."""
    return create_strategy(settings.name, num_gpus=settings.num_gpus, tpu_name=settings.tpu_name,
                           tpu_zone=settings.tpu_zone, gcp_project=settings.gcp_project)


@contextlib.contextmanager
def output_dir_locks(settings: RunSettings) -> Iterator[None]:
    """Holds the locks of --output_dir (albert_tf/files/run_lock.py) for the roles this run plays
    within the block, released when it ends (normally, on an error or Ctrl-C).

    Training with --do_train; evaluation with --do_eval, --do_predict, --export_dir or
    --tflite_file. So a separate evaluation job runs beside a training job, and a second job of
    either kind is refused (DirectoryInUseError naming the holder). A multi-worker job is one run:
    its chief takes the locks; the other workers, which write only under <output_dir>/.worker_tmp/,
    take none and stop when another run holds them.
    """
    roles = [run_lock.TRAINING] if settings.do_train else []
    if settings.evaluates_checkpoints:
        roles.append(run_lock.EVALUATION)
    cluster = None
    if settings.strategy.name == "multi_worker_mirrored":
        strategy = strategy_of(settings.strategy)
        cluster = strategy.cluster_resolver.cluster_spec().as_dict()
        if not is_chief(strategy):
            for role in roles:
                run_lock.check_lock_of_cluster(settings.output_dir, role, cluster)
            yield
            return
    with contextlib.ExitStack() as locks:
        for role in roles:
            locks.callback(run_lock.acquire(settings.output_dir, role, cluster).release)
        yield


def config_for_length(config_file: str, max_seq_length: int) -> AlbertConfig:
    """The config of ``config_file``, checked to fit ``max_seq_length`` (RunSettingsError naming
    --max_seq_length and the file otherwise: no run of that length can use the config)."""
    config = AlbertConfig.from_json_file(config_file)
    if max_seq_length > config.max_position_embeddings:
        raise RunSettingsError(f"--max_seq_length={max_seq_length} exceeds "
                               f"max_position_embeddings={config.max_position_embeddings} of "
                               f"{config_file}.")
    return config


def load_config(settings: RunSettings, manifest: RunManifest) -> AlbertConfig:
    """The config of --albert_config_file, checked to fit --max_seq_length and to be the one the run
    in --output_dir recorded (its ``manifest``), if it recorded one."""
    config = config_for_length(settings.albert_config_file, settings.max_seq_length)
    require_fact(manifest, CONFIG, config.to_dict(), settings.albert_config_file)
    return config


def finished_line(output_dir: str, manifest: RunManifest, num_train_steps: int,
                  selection_metric: str) -> str | None:
    """The line saying that the training of ``output_dir`` (its ``manifest``) is finished (its last
    trained step is at or past ``num_train_steps``), with its best checkpoint; None while there is
    training to do. A rerun of a finished run trains nothing: it evaluates nothing new and redoes
    only what it is asked to predict or export."""
    trained = trained_checkpoint(manifest)
    if trained is None or trained[0] < num_train_steps:
        return None
    line = f"The run in {output_dir} is finished at step {trained[0]} (of {num_train_steps})"
    best = manifest.best
    if best is not None:
        key = selection_metric if selection_metric in best["metrics"] else best["selection_metric"]
        line += (f"; its best checkpoint: step {best['step']}, {key} "
                 f"{best['metrics'][key]:.4f} ({BEST_CHECKPOINT_NAME})")
    return line + ". Nothing to train."


def record_run(settings: RunSettings, manifest: RunManifest, config: AlbertConfig,
               facts: dict[Fact, tuple[object, str]]) -> None:
    """Records in the run manifest of --output_dir (``manifest``, as the run read it at its start)
    what its checkpoints are (``facts``: {fact: (value, where it comes from)}, checked against what
    it records), with the config when the run trains (also written as albert_config.json beside
    the checkpoints); an earlier version's directory also gets its last trained step, read from
    its checkpoints, in the same write."""
    if settings.do_train:
        facts = {**facts, CONFIG: (config.to_dict(), settings.albert_config_file)}
        write_config_file(settings.output_dir, config)
    trained = None if manifest.trained is not None else trained_checkpoint(manifest)
    add_facts(settings.output_dir, facts,
              trained=None if trained is None else (trained[0], os.path.basename(trained[1])))


def check_init_checkpoint_config(settings: RunSettings, init_checkpoint: CheckpointSource | None,
                                 config: AlbertConfig) -> None:
    """Before any work: the config beside --init_checkpoint, if there is one, agrees with the run's
    on what the weights do not show (albert_tf/checkpoints/config_beside.py; the warm start checks
    again)."""
    if init_checkpoint is not None and not init_checkpoint.hugging_face:
        check_config_beside(init_checkpoint.path, config, settings.albert_config_file,
                            settings.init_from_group0)


def load_tokenizer(settings: RunSettings, config: AlbertConfig) -> FullTokenizer:
    """The tokenizer of --spm_model_file (or --vocab_file) and --do_lower_case, checked against the
    config's vocab_size (config, SentencePiece model and checkpoint come from one model)."""
    tokenizer = FullTokenizer(vocab_file=settings.vocab_file, do_lower_case=settings.do_lower_case,
                              spm_model_file=settings.spm_model_file)
    if config.vocab_size != tokenizer.vocab_size:
        raise RunSettingsError(
            f"vocab_size={config.vocab_size} in {settings.albert_config_file} does not match the "
            f"{tokenizer.vocab_size} pieces of {tokenizer.source_file}; the config, the "
            "SentencePiece model and the checkpoint must come from the same pretrained model.")
    return tokenizer


def build_trainer(settings: RunSettings, task: Task, num_train_steps: int, num_warmup_steps: int,
                  length_split: LengthSplit | None = None) -> Trainer:
    """The Trainer of a run: the strategy, loop and checkpoint settings, the optimizer and its
    schedule, the split of training batches by length (None: every batch runs whole). (A sweep
    under a multi-worker strategy is refused before TensorFlow loads:
    flag_checks.sweep_in_one_process.)"""
    strategy = strategy_of(settings.strategy)
    tf.io.gfile.makedirs(settings.output_dir)
    run_config = RunConfig(
        output_dir=absolute_path(settings.output_dir),
        train_batch_size=settings.train_batch_size, num_train_steps=num_train_steps,
        save_checkpoints_steps=settings.save_checkpoints_steps,
        keep_checkpoint_max=settings.keep_checkpoint_max,
        iterations_per_loop=settings.iterations_per_loop,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        use_xla=settings.use_xla, dtype=settings.dtype, seed=settings.seed,
        replay_input_on_resume=settings.replay_input_on_resume)

    def optimizer():
        return create_optimizer(settings.optimizer, learning_rate=settings.learning_rate,
                                num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps,
                                poly_power=settings.poly_power,
                                start_warmup_step=settings.start_warmup_step)

    return Trainer(strategy, task, optimizer, run_config, length_split=length_split)
