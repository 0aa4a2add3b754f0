"""Pretrains ALBERT (MLM + SOP) with the reference's flags, under any tf.distribute strategy.

--sentence_objective chooses the sentence-level objective beside the masked LM: sop (the
reference's), nsp (on records of create_pretraining_data --random_next_sentence) or none (the MLM
alone); output_dir records it and refuses a resume with another.

Reads TFRecords written by data_prep/create_pretraining_data.py or by the reference's script.
--do_train trains (resuming from the latest checkpoint in --output_dir); --do_eval evaluates every
checkpoint in --output_dir, writes eval_results.txt and keeps the best (masked_lm_accuracy) as
model.ckpt-best; with --nodo_train it runs beside a training job, polling for new checkpoints until
the one at --num_train_steps is evaluated. See the README for examples.
"""

from __future__ import annotations

import dataclasses

from absl import app, flags

from albert_tf.cli import command_line, flag_checks, flag_definitions

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Comma-separated globs of pretraining TFRecords.")
flags.DEFINE_string("eval_input_file", None,
                    "Globs of held-out TFRecords for --do_eval (default: --input_file, as the "
                    "reference, which evaluates on its training files).")
flags.DEFINE_integer("max_eval_steps", 100, "Eval batches per checkpoint.")
flags.DEFINE_enum("sentence_objective", "sop", ["sop", "nsp", "none"],
                  "Sentence-level objective beside the masked LM: sop (sentence order, the "
                  "reference's), nsp (next sentence; train on records of create_pretraining_data "
                  "--random_next_sentence) or none (MLM only; the sentence head is not trained). "
                  "Recorded in --output_dir: a resume with another objective is refused.")
flags.DEFINE_enum("eval_sentence_task", None, ["sop", "nsp"],
                  "The sentence task of the --do_eval records, which names the sentence metrics: "
                  "sop -> sentence_order_accuracy/_loss, nsp -> next_sentence_accuracy/_loss "
                  "(default: the --sentence_objective's; required with --sentence_objective=none).")
flags.DEFINE_float("masked_lm_budget", 0,
                   "[Reference flag] online masking; unfinished in the reference and refused here.")
flag_definitions.define(
    "albert_config_file", "output_dir", "init_checkpoint", "init_from_group0", "max_seq_length",
    "max_predictions_per_seq", "do_train", "do_eval", "train_batch_size", "eval_batch_size",
    "optimizer", "learning_rate", "poly_power", "num_train_steps", "num_warmup_steps",
    "start_warmup_step", *flag_definitions.CHECKPOINT_FLAGS, "max_eval_wait_secs",
    *flag_definitions.TPU_FLAGS, *flag_definitions.LOOP_FLAGS,
    do_train=True, train_batch_size=4096, eval_batch_size=64, optimizer="lamb",
    learning_rate=0.00176, save_checkpoints_steps=5000)
flag_definitions.check_ranges(max_eval_steps=flag_definitions.AT_LEAST_ONE)
flags.mark_flags_as_required(["albert_config_file", "input_file", "output_dir"])
flags.register_multi_flags_validator(
    ["sentence_objective", "eval_sentence_task", "do_eval"],
    lambda values: not (values["do_eval"] and values["sentence_objective"] == "none"
                        and not values["eval_sentence_task"]),
    message="--sentence_objective=none trains no sentence head, so --do_eval needs "
            "--eval_sentence_task=sop or nsp naming the kind of records in --eval_input_file")


def check_flags() -> None:
    """Before TensorFlow loads: something to do, online masking refused, the sweep (--do_eval)
    in one process."""
    if FLAGS.masked_lm_budget:
        raise app.UsageError("--masked_lm_budget (online masking) is unfinished in the reference "
                             "and not supported; create masked data with create_pretraining_data.")
    flag_checks.require_action("do_train", "do_eval")
    flag_checks.sweep_in_one_process("do_eval")


command_line.parse_before_imports(__name__, checks=[check_flags])

from albert_tf.cli import error_boundary, training_run  # noqa: E402
from albert_tf.cli.settings import RunSettings  # noqa: E402
from albert_tf.evaluation.best_checkpoint import run_checkpoint_sweep  # noqa: E402
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy  # noqa: E402
from albert_tf.files.paths import expand_input_patterns  # noqa: E402
from albert_tf.files.records import require_records  # noqa: E402
from albert_tf.files.run_files import RunFiles, check_run_files  # noqa: E402
from albert_tf.files.run_files import inputs as declared_inputs  # noqa: E402
from albert_tf.files.run_manifest import read_manifest, require_record  # noqa: E402
from albert_tf.tasks.pretraining.objective import OBJECTIVE, evaluation_name  # noqa: E402
from albert_tf.tasks.pretraining.records import check_pretraining_files  # noqa: E402
from albert_tf.tasks.pretraining.task import PretrainingTask, pretraining_dataset_fn  # noqa: E402
from albert_tf.training.task import EvalSet  # noqa: E402
from albert_tf.training.trainer import Trainer  # noqa: E402


SELECTION_METRIC = "masked_lm_accuracy"


@dataclasses.dataclass(frozen=True)
class PretrainingSettings:
    """run_pretraining's own flags: the records (expanded), their geometry, the objective."""

    train_files: tuple[str, ...]
    eval_files: tuple[str, ...]
    max_predictions_per_seq: int
    max_eval_steps: int
    sentence_objective: str
    eval_sentence_task: str | None

    @classmethod
    def from_flags(cls) -> "PretrainingSettings":
        """--input_file and --eval_input_file expanded (FileNotFoundError naming a pattern that
        matches nothing)."""
        train = expand_input_patterns(FLAGS.input_file) if FLAGS.do_train else []
        evaluation = (expand_input_patterns(FLAGS.eval_input_file or FLAGS.input_file)
                      if FLAGS.do_eval else [])
        return cls(tuple(train), tuple(evaluation), FLAGS.max_predictions_per_seq,
                   FLAGS.max_eval_steps, FLAGS.sentence_objective, FLAGS.eval_sentence_task)


def run_files(settings: RunSettings, own: PretrainingSettings, init) -> RunFiles:
    """What a pretraining run reads (its records) and writes (the shared files of a training run,
    the recorded objective)."""
    files = training_run.run_files(settings, init, settings.do_eval)
    flag = "--eval_input_file" if FLAGS.eval_input_file else "--input_file"
    return files + RunFiles(declared_inputs(
        *(("--input_file", path) for path in own.train_files),
        *((flag, path) for path in own.eval_files)))


def check_inputs(settings: RunSettings, own: PretrainingSettings) -> None:
    """run_pretraining's checks before work: --output_dir holds no run of another objective or
    architecture; the config fits --max_seq_length; the first records of every training and
    evaluation file have the lengths --max_seq_length and --max_predictions_per_seq say and token
    ids below the config's vocab_size; the evaluation files hold one --eval_batch_size batch at
    least."""
    config = training_run.load_config(settings)
    require_record(read_manifest(settings.output_dir), OBJECTIVE, own.sentence_objective,
                   "--sentence_objective")
    for files in dict.fromkeys(files for files in (own.train_files, own.eval_files) if files):
        check_pretraining_files(list(files), settings.max_seq_length, own.max_predictions_per_seq,
                                config.vocab_size, settings.albert_config_file)
    if own.eval_files:
        require_records(list(own.eval_files), settings.eval_batch_size)


def evaluate(trainer: Trainer, settings: RunSettings, own: PretrainingSettings) -> None:
    """The sweep over the checkpoints, keeping the best masked_lm_accuracy as model.ckpt-best; an
    evaluation on records of another sentence task than the run's own writes its results under
    that task's name (eval_results_nsp.txt, best_results_nsp.json)."""
    eval_data = pretraining_dataset_fn(list(own.eval_files), settings.max_seq_length,
                                       own.max_predictions_per_seq, is_training=False)
    eval_set = EvalSet("", lambda: eval_data(settings.eval_batch_size, 0),
                       context=own.eval_sentence_task, max_steps=own.max_eval_steps,
                       source=f"{', '.join(own.eval_files)} ({own.max_eval_steps} batches of "
                              f"{settings.eval_batch_size})")
    # Beside a training job (--nodo_train), poll for new checkpoints like the reference's eval loop.
    policy = (SweepPolicy() if settings.do_train else
              SweepPolicy(until_step=settings.num_train_steps,
                          max_wait_seconds=settings.max_eval_wait_secs))
    run_checkpoint_sweep(trainer, [eval_set], SELECTION_METRIC, policy,
                         evaluation_name(own.sentence_objective, own.eval_sentence_task))


def main(argv):
    del argv
    settings = RunSettings.from_flags(steps_flag="num_train_steps",
                                      warmup_flag="num_warmup_steps")
    training_run.strategy_of(settings.strategy)  # multi-worker: configured before any other op
    own = PretrainingSettings.from_flags()
    init = training_run.init_checkpoint_source(settings)
    check_run_files(run_files(settings, own, init))
    with training_run.output_dir_locks(settings):
        check_inputs(settings, own)
        config = training_run.load_config(settings)
        trainer = training_run.build_trainer(
            settings, PretrainingTask(config, own.sentence_objective), settings.num_train_steps,
            settings.num_warmup_steps, evaluates=settings.do_eval)
        finished = settings.do_train and training_run.finished_line(
            settings.output_dir, settings.num_train_steps, SELECTION_METRIC)
        if trainer.chief:
            training_run.record_run(settings, config, {
                OBJECTIVE: (own.sentence_objective, "--sentence_objective")} if settings.do_train
                else {})
        if finished:
            print(finished)
        elif settings.do_train:
            trainer.initialize(init, settings.init_from_group0,
                               config_file=settings.albert_config_file)
            with error_boundary.sigterm_ends_at_once():
                trainer.train(pretraining_dataset_fn(
                    list(own.train_files), settings.max_seq_length, own.max_predictions_per_seq,
                    is_training=True, seed=settings.input_seed))
        if settings.do_eval:
            evaluate(trainer, settings, own)
    print(f"Checkpoints and TensorBoard logs (train/, eval/) are in {trainer.config.output_dir}")


if __name__ == "__main__":
    error_boundary.run(main, when_stopped=error_boundary.TRAINING_STOPPED)
