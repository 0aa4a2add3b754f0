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

from absl import app, flags

from albert_tf.cli import command_line, flag_definitions

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

command_line.parse_before_imports(__name__)  # --help, flag mistakes: before TensorFlow loads

from albert_tf.checkpoints.run_config import check_run_config, record_run_config  # noqa: E402
from albert_tf.cli import error_boundary, run_flags  # noqa: E402
from albert_tf.evaluation.best_checkpoint import run_checkpoint_sweep  # noqa: E402
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy  # noqa: E402
from albert_tf.files.paths import expand_input_patterns  # noqa: E402
from albert_tf.files.records import require_records  # noqa: E402
from albert_tf.tasks.pretraining.objective import (  # noqa: E402
    check_objective, evaluation_name, record_objective)
from albert_tf.tasks.pretraining.records import check_pretraining_files  # noqa: E402
from albert_tf.tasks.pretraining.task import PretrainingTask, pretraining_dataset_fn  # noqa: E402
from albert_tf.training.task import EvalSet  # noqa: E402
from albert_tf.training.trainer import Trainer  # noqa: E402


def validate_flags() -> None:
    if FLAGS.masked_lm_budget:
        raise app.UsageError("--masked_lm_budget (online masking) is unfinished in the reference "
                             "and not supported; create masked data with create_pretraining_data.")
    run_flags.require_action("do_train", "do_eval")


def check_run_record() -> None:
    """run_pretraining's check before work: --output_dir holds no run of another
    --sentence_objective or another architecture (ValueError naming both and the directory)."""
    check_objective(FLAGS.output_dir, FLAGS.sentence_objective)
    check_run_config(FLAGS.output_dir, run_flags.load_config(FLAGS.albert_config_file,
                                                             FLAGS.max_seq_length),
                     FLAGS.albert_config_file)


def check_pretraining_inputs() -> None:
    """run_pretraining's checks before work (its --input_file and --eval_input_file).

    The config loads and fits --max_seq_length; the first records of every training file (with
    --do_train) and evaluation file (with --do_eval) have the lengths --max_seq_length and
    --max_predictions_per_seq say and token ids below the config's vocab_size; the evaluation files
    hold one --eval_batch_size batch at least.
    """
    values = flags.FLAGS
    config = run_flags.load_config(values.albert_config_file, values.max_seq_length)
    train_patterns = values.input_file if values.do_train else None
    eval_patterns = (values.eval_input_file or values.input_file) if values.do_eval else None
    for patterns in dict.fromkeys(p for p in (train_patterns, eval_patterns) if p):
        check_pretraining_files(expand_input_patterns(patterns), values.max_seq_length,
                                values.max_predictions_per_seq, config.vocab_size,
                                values.albert_config_file)
    if eval_patterns:
        require_records(expand_input_patterns(eval_patterns), values.eval_batch_size)


def evaluate(trainer: Trainer) -> None:
    """The sweep over the checkpoints, keeping the best masked_lm_accuracy as model.ckpt-best; an
    evaluation on records of another sentence task than the run's own writes its results under
    that task's name (eval_results_nsp.txt, best_results_nsp.json)."""
    eval_files = expand_input_patterns(FLAGS.eval_input_file or FLAGS.input_file)
    eval_data = pretraining_dataset_fn(eval_files, FLAGS.max_seq_length,
                                       FLAGS.max_predictions_per_seq, is_training=False)
    eval_set = EvalSet("", lambda: eval_data(FLAGS.eval_batch_size, 0),
                       context=FLAGS.eval_sentence_task, max_steps=FLAGS.max_eval_steps)
    # Beside a training job (--nodo_train), poll for new checkpoints like the reference's eval loop.
    policy = (SweepPolicy() if FLAGS.do_train else
              SweepPolicy(until_step=FLAGS.num_train_steps,
                          max_wait_seconds=FLAGS.max_eval_wait_secs))
    run_checkpoint_sweep(trainer, [eval_set], "masked_lm_accuracy", policy,
                         evaluation_name(FLAGS.sentence_objective, FLAGS.eval_sentence_task))


def main(argv):
    del argv
    validate_flags()
    config = run_flags.load_config(FLAGS.albert_config_file, FLAGS.max_seq_length)
    train_files = expand_input_patterns(FLAGS.input_file)
    run_flags.check_init_checkpoint(FLAGS.init_checkpoint)
    trainer = run_flags.trainer_from_flags(
        PretrainingTask(config, FLAGS.sentence_objective), FLAGS.num_train_steps,
        FLAGS.num_warmup_steps, FLAGS.poly_power, FLAGS.start_warmup_step)
    if FLAGS.do_train:
        if trainer.chief:
            record_objective(FLAGS.output_dir, FLAGS.sentence_objective)
            record_run_config(FLAGS.output_dir, config, FLAGS.albert_config_file)
        trainer.initialize(FLAGS.init_checkpoint, FLAGS.init_from_group0,
                           config_file=FLAGS.albert_config_file)
        trainer.train(pretraining_dataset_fn(train_files, FLAGS.max_seq_length,
                                             FLAGS.max_predictions_per_seq, is_training=True,
                                             seed=FLAGS.input_seed))
    if FLAGS.do_eval:
        evaluate(trainer)
    print(f"Checkpoints and TensorBoard logs (train/, eval/) are in {trainer.config.output_dir}")


if __name__ == "__main__":
    error_boundary.run(main, checks=[run_flags.strategy_from_flags,
                                     run_flags.check_outputs_spare_inputs,
                                     run_flags.check_output_directories, run_flags.lock_output_dir,
                                     check_run_record, check_pretraining_inputs],
                       when_stopped=error_boundary.TRAINING_STOPPED, catch_sigterm=False)
