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
from albert_tf.cli.driver import run_task  # noqa: E402
from albert_tf.cli.settings import RunSettings  # noqa: E402
from albert_tf.files.paths import absolute_path, expand_input_patterns  # noqa: E402
from task_specs.pretraining import PretrainingSettings, pretraining_spec  # noqa: E402


def settings_from_flags() -> PretrainingSettings:
    """run_pretraining's own flags, read once: --input_file and --eval_input_file expanded
    (FileNotFoundError naming a pattern that matches nothing)."""
    train = expand_input_patterns(FLAGS.input_file) if FLAGS.do_train else []
    evaluation = (expand_input_patterns(FLAGS.eval_input_file or FLAGS.input_file)
                  if FLAGS.do_eval else [])
    return PretrainingSettings(
        tuple(train), tuple(evaluation),
        "--eval_input_file" if FLAGS.eval_input_file else "--input_file",
        FLAGS.max_predictions_per_seq, FLAGS.max_eval_steps, FLAGS.sentence_objective,
        FLAGS.eval_sentence_task)


def main(argv):
    del argv
    settings = RunSettings.from_flags(steps_flag="num_train_steps",
                                      warmup_flag="num_warmup_steps")
    training_run.strategy_of(settings.strategy)  # multi-worker: before the patterns' file ops
    run_task(settings, pretraining_spec(settings, settings_from_flags()))
    print("Checkpoints and TensorBoard logs (train/, eval/) are in "
          f"{absolute_path(settings.output_dir)}")


if __name__ == "__main__":
    error_boundary.run(main, when_stopped=error_boundary.TRAINING_STOPPED)
