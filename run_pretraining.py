"""Pretrains ALBERT (MLM + SOP) with the reference's flags, under any tf.distribute strategy.

Reads TFRecords written by data_prep/create_pretraining_data.py or by the reference's script.
--do_train trains (resuming from the latest checkpoint in --output_dir); --do_eval evaluates every
checkpoint in --output_dir, writes eval_results.txt and keeps the best (masked_lm_accuracy) as
model.ckpt-best; with --nodo_train it runs beside a training job, polling for new checkpoints until
the one at --num_train_steps is evaluated. See the README for examples.
"""

from __future__ import annotations

from absl import app, flags

from albert_tf import run_flags
from albert_tf.checkpoint_sweep import SweepPolicy, sweep_checkpoints
from albert_tf.optimization import OPTIMIZER_NAMES
from albert_tf.io_utils import expand_input_patterns
from albert_tf.pretraining import PretrainingTask, pretraining_dataset_fn
from albert_tf.training import Trainer

FLAGS = flags.FLAGS

flags.DEFINE_string("albert_config_file", None, "ALBERT config JSON.")
flags.DEFINE_string("input_file", None, "Comma-separated globs of pretraining TFRecords.")
flags.DEFINE_string("eval_input_file", None,
                    "Globs of held-out TFRecords for --do_eval (default: --input_file, as the "
                    "reference, which evaluates on its training files).")
flags.DEFINE_string("output_dir", None, "Checkpoints, summaries and eval_results.txt.")
flags.DEFINE_string("init_checkpoint", None,
                    "Warm start: a reference TF1 checkpoint or an albert_tf one (prefix or dir).")
flags.DEFINE_integer("max_seq_length", 512, "Sequence length of the data (S).")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence of the data (M).")
flags.DEFINE_bool("do_train", True, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate every checkpoint in --output_dir.")
flags.DEFINE_integer("train_batch_size", 4096, "Global train batch.")
flags.DEFINE_integer("eval_batch_size", 64, "Global eval batch.")
flags.DEFINE_enum("optimizer", "lamb", list(OPTIMIZER_NAMES), "Optimizer.")
flags.DEFINE_float("learning_rate", 0.00176, "Peak learning rate.")
flags.DEFINE_float("poly_power", 1.0, "Power of the polynomial decay.")
flags.DEFINE_integer("num_train_steps", 125000, "Training steps (also the decay horizon).")
flags.DEFINE_integer("num_warmup_steps", 3125, "Linear warmup steps.")
flags.DEFINE_integer("start_warmup_step", 0, "Step at which warmup starts (learning rate 0 before).")
flags.DEFINE_integer("save_checkpoints_steps", 5000, "Checkpoint every this many steps.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept (0: all).")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps per tf.function call (and progress line).")
flags.DEFINE_integer("max_eval_steps", 100, "Eval batches per checkpoint.")
flags.DEFINE_bool("init_from_group0", False,
                  "Initialise every group of the model from group_0 of a 1-group checkpoint.")
flags.DEFINE_float("masked_lm_budget", 0,
                   "[Reference flag] online masking; unfinished in the reference and refused here.")
run_flags.define_tpu_flags()
run_flags.define_loop_flags()
run_flags.define_eval_flags()


def main(argv):
    del argv
    if FLAGS.masked_lm_budget:
        raise app.UsageError("--masked_lm_budget (online masking) is unfinished in the reference "
                             "and not supported; create masked data with create_pretraining_data.")
    if not FLAGS.do_train and not FLAGS.do_eval:
        raise app.UsageError("Nothing to do: set --do_train and/or --do_eval.")
    config = run_flags.load_config(FLAGS.albert_config_file, FLAGS.max_seq_length)
    train_files = expand_input_patterns(FLAGS.input_file)
    run_flags.check_init_checkpoint(FLAGS.init_checkpoint)
    strategy = run_flags.strategy_from_flags()
    if FLAGS.do_eval:
        run_flags.check_eval_strategy(strategy)
    run_config = run_flags.run_config_from_flags(
        FLAGS.output_dir, FLAGS.train_batch_size, FLAGS.num_train_steps,
        FLAGS.save_checkpoints_steps, FLAGS.keep_checkpoint_max, FLAGS.iterations_per_loop)
    optimizer_fn = run_flags.optimizer_factory(
        FLAGS.optimizer, FLAGS.learning_rate, FLAGS.num_train_steps, FLAGS.num_warmup_steps,
        FLAGS.poly_power, FLAGS.start_warmup_step)
    trainer = Trainer(strategy, PretrainingTask(config), optimizer_fn, run_config)

    if FLAGS.do_train:
        trainer.initialize(FLAGS.init_checkpoint, FLAGS.init_from_group0)
        trainer.train(pretraining_dataset_fn(train_files, FLAGS.max_seq_length,
                                             FLAGS.max_predictions_per_seq, is_training=True,
                                             seed=FLAGS.input_seed))
    if FLAGS.do_eval:
        eval_files = expand_input_patterns(FLAGS.eval_input_file or FLAGS.input_file)
        eval_data = pretraining_dataset_fn(eval_files, FLAGS.max_seq_length,
                                           FLAGS.max_predictions_per_seq, is_training=False)

        def evaluate(prefix: str) -> dict[str, float]:
            trainer.restore_weights(prefix)
            return trainer.evaluate(eval_data(FLAGS.eval_batch_size, 0), FLAGS.max_eval_steps)

        # Beside a training job (--nodo_train), poll for new checkpoints like the reference's eval loop.
        policy = (SweepPolicy() if FLAGS.do_train else
                  SweepPolicy(until_step=FLAGS.num_train_steps,
                              max_wait_seconds=FLAGS.max_eval_wait_secs))
        best_step, best = sweep_checkpoints(run_config.output_dir, evaluate, "masked_lm_accuracy",
                                            policy=policy)
        trainer.write_eval_summaries(best, best_step)
        print(f"Best checkpoint: step {best_step}, masked_lm_accuracy "
              f"{best['masked_lm_accuracy']:.4f} -> {run_config.output_dir}/model.ckpt-best")
    print(f"Checkpoints and TensorBoard logs (train/, eval/) are in {run_config.output_dir}")


if __name__ == "__main__":
    flags.mark_flags_as_required(["albert_config_file", "input_file", "output_dir"])
    app.run(main)
