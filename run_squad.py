"""Fine-tunes ALBERT on SQuAD v1.1 or v2.0 (--version_2_with_negative) with the reference's flags.

One script for both versions (the reference has run_squad_v1.py and run_squad_v2.py), with their
flags and defaults plus the shared loop flags:

- --do_train trains from --init_checkpoint on --train_file for
  int(questions / train_batch_size * num_train_epochs) steps, warmup int(steps * warmup_proportion);
  the training questions are shuffled with random.Random(12345) before conversion, as the reference;
- --do_predict evaluates every checkpoint in --output_dir on --predict_file (or, when there is none,
  --init_checkpoint), keeps the best F1 as model.ckpt-best, writes eval_results.txt, and leaves
  predictions.json, nbest_predictions.json (and v2 null_odds.json) of the best checkpoint. It never
  waits for checkpoints that will not come and needs no --train_file;
- --export_dir writes SavedModels of model.ckpt-best: ``ids_only`` (signature on ids) and
  ``with_text`` (also on a raw question and context: the first window's scores with each token's
  character span in the context), see albert_tf/tasks/question_answering/serving.py;
- --tflite_file writes a TFLite model of model.ckpt-best (v1.1 only, as the reference's v1 export;
  --tflite_quantization: float32, int8 or float16 weights).

v2 reports two scores: the official ones of the predictions at --null_score_diff_threshold (what a
deployed model does) and the reference's, tuned on the evaluated file itself (reference_tuned_*, the
paper's numbers; checkpoints are selected by it, as the reference does). See the README.
"""

from __future__ import annotations

import functools
import os

from absl import app, flags

from albert_tf.cli import command_line, flag_definitions

FLAGS = flags.FLAGS
# The reference shuffles its training questions with random.Random(12345) before conversion.
TRAINING_SHUFFLE_SEED = 12345

flags.DEFINE_string("train_file", None, "SQuAD JSON for training.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON to evaluate and predict (the dev set).")
for _name in ("train_feature_file", "predict_feature_file", "predict_feature_left_file"):
    flags.DEFINE_string(_name, None, "[Reference flag, unused] Features are cached in --cached_dir "
                        "(default --output_dir), keyed by their input file and settings.")
flags.DEFINE_float("num_train_epochs", 3.0, "Epochs over the training questions.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of the training steps used for warmup.")
flags.DEFINE_integer("n_best_size", 20, "Candidates per question (start/end positions and the "
                     "n-best list).")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in pieces.")
flags.DEFINE_integer("start_n_top", 5, "v2: beam width over start positions.")
flags.DEFINE_integer("end_n_top", 5, "v2: beam width over end positions per start.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "v2: predict no answer where the null score "
                   "is >= this. Given explicitly, predictions.json uses it; else it holds the "
                   "reference's dev-tuned predictions.")
flags.DEFINE_bool("use_einsum", True, "[Reference flag, unused] einsum or matmul in the encoder.")
flag_definitions.define(
    *[name for name in flag_definitions.FINE_TUNING_FLAGS
      if name not in ("data_dir", "do_eval", "eval_batch_size")],
    "doc_stride", "max_query_length", "version_2_with_negative", "dropout_prob", "num_workers",
    *flag_definitions.TFLITE_FLAGS, max_seq_length=384, save_checkpoints_steps=1000,
    keep_checkpoint_max=0)
flag_definitions.check_ranges(
    num_train_epochs=flag_definitions.POSITIVE, warmup_proportion=flag_definitions.FRACTION,
    n_best_size=flag_definitions.AT_LEAST_ONE, max_answer_length=flag_definitions.AT_LEAST_ONE,
    start_n_top=flag_definitions.AT_LEAST_ONE, end_n_top=flag_definitions.AT_LEAST_ONE,
    null_score_diff_threshold=flag_definitions.FINITE)
flag_definitions.check_tflite_flags()
flags.register_multi_flags_validator(
    ["tflite_file", "version_2_with_negative"],
    lambda values: not (values["tflite_file"] and values["version_2_with_negative"]),
    message="the SQuAD 2.0 model has no TFLite export (the reference had none either): leave "
            "out --version_2_with_negative or --tflite_file")

command_line.parse_before_imports(__name__)  # --help, flag mistakes: before TensorFlow loads

from albert_tf.checkpoints.files import list_checkpoints  # noqa: E402
from albert_tf.cli import error_boundary, run_flags  # noqa: E402
from albert_tf.evaluation.best_checkpoint import (  # noqa: E402
    best_checkpoint_prefix, restore_best_checkpoint, run_checkpoint_sweep)
from albert_tf.evaluation.checkpoint_sweep import BEST_PREFIX, SweepPolicy  # noqa: E402
from albert_tf.tasks.question_answering.records import parse_squad_record  # noqa: E402
from albert_tf.tasks.question_answering.serving import (  # noqa: E402
    export_squad, export_squad_tflite)
from albert_tf.tasks.question_answering.task import (  # noqa: E402
    SquadEvalContext, SquadSettings, SquadTask)
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from albert_tf.training.input_pipeline import (  # noqa: E402
    needs_static_batches, record_eval_dataset)
from albert_tf.training.task import EvalSet  # noqa: E402
from albert_tf.training.trainer import Trainer  # noqa: E402
from data_prep.common.feature_cache import FeatureFile  # noqa: E402
from data_prep.question_answering.feature_file import squad_feature_file  # noqa: E402
from data_prep.question_answering.features import SquadFeatureSettings  # noqa: E402


def feature_file(tokenizer: FullTokenizer, input_file: str, is_training: bool) -> FeatureFile:
    """The cached features of a SQuAD JSON file (training questions shuffled as the reference)."""
    return squad_feature_file(
        input_file, tokenizer,
        SquadFeatureSettings(FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.max_query_length,
                             is_training, version_2_with_negative=FLAGS.version_2_with_negative,
                             shuffle_seed=TRAINING_SHUFFLE_SEED if is_training else None),
        FLAGS.cached_dir or FLAGS.output_dir, FLAGS.num_workers)


def parse_fn(is_training: bool):
    return functools.partial(parse_squad_record, max_seq_length=FLAGS.max_seq_length,
                             is_training=is_training)


def validate_flags() -> None:
    run_flags.reject_hub_module_handle()
    run_flags.require_action("do_train", "do_predict", "export_dir", "tflite_file")
    run_flags.require_flags("output_dir", "albert_config_file")
    if FLAGS.do_train:
        run_flags.require_flags("train_file")
    if FLAGS.do_predict:
        run_flags.require_flags("predict_file")
    if (FLAGS.export_dir or FLAGS.tflite_file) and not FLAGS.do_predict:
        # Fails before training when there is none.
        best_checkpoint_prefix(FLAGS.output_dir, "--do_predict")
    if (FLAGS.do_predict and not FLAGS.do_train and not FLAGS.init_checkpoint
            and not list_checkpoints(FLAGS.output_dir)):
        raise app.UsageError(f"--do_predict: no checkpoint in {FLAGS.output_dir} and no "
                             "--init_checkpoint to evaluate.")
    if FLAGS.max_seq_length <= FLAGS.max_query_length + 3:
        raise app.UsageError(f"--max_seq_length={FLAGS.max_seq_length} must exceed "
                             f"--max_query_length + 3 = {FLAGS.max_query_length + 3}.")


def settings_from_flags() -> SquadSettings:
    threshold_given = FLAGS["null_score_diff_threshold"].present
    return SquadSettings(
        version_2=FLAGS.version_2_with_negative, n_best_size=FLAGS.n_best_size,
        max_answer_length=FLAGS.max_answer_length, start_n_top=FLAGS.start_n_top,
        end_n_top=FLAGS.end_n_top, dropout_prob=FLAGS.dropout_prob,
        null_score_diff_threshold=FLAGS.null_score_diff_threshold,
        tuned_predictions=not threshold_given)


def training_steps(train_file: FeatureFile | None) -> tuple[int, int]:
    """(num_train_steps, num_warmup_steps) as the reference counts them: questions, not windows."""
    if train_file is None:
        return 1, 0  # predict-only: the schedule is never used
    steps = int(train_file.metadata["num_questions"] / FLAGS.train_batch_size
                * FLAGS.num_train_epochs)
    if steps < 1:
        raise app.UsageError(f"{train_file.metadata['num_questions']} training questions give no "
                             f"step at batch {FLAGS.train_batch_size} and "
                             f"{FLAGS.num_train_epochs} epochs.")
    return steps, int(steps * FLAGS.warmup_proportion)


def train(trainer: Trainer, train_file: FeatureFile) -> None:
    run_flags.train_from_flags(trainer, train_file.path, parse_fn(True),
                               f"SQuAD train: {train_file.metadata['num_questions']} questions, "
                               f"{train_file.num_records} windows")


def predict(trainer: Trainer, eval_file: FeatureFile, selection_metric: str) -> None:
    """The sweep over the checkpoints (or --init_checkpoint), then the best one's files."""
    output_dir = trainer.config.output_dir
    eval_set = EvalSet("", functools.partial(record_eval_dataset, eval_file.path, parse_fn(False),
                                             FLAGS.predict_batch_size,
                                             needs_static_batches(trainer.strategy)),
                       SquadEvalContext.from_metadata(eval_file.metadata, output_dir))
    if not list_checkpoints(output_dir):  # predict-only from --init_checkpoint
        print(trainer.warm_start(FLAGS.init_checkpoint, config_file=FLAGS.albert_config_file))
        trainer.manager.save(checkpoint_number=0)
    run_checkpoint_sweep(trainer, [eval_set], selection_metric, SweepPolicy(prune=True))
    # The sweep leaves the files of the last evaluated checkpoint; write the best one's.
    trainer.evaluate_checkpoint(os.path.join(output_dir, BEST_PREFIX), [eval_set])
    print(f"Predictions of {BEST_PREFIX} in {output_dir}")


def export_saved_model(trainer: Trainer, tokenizer: FullTokenizer) -> None:
    export_squad(trainer.model, FLAGS.export_dir, tokenizer, FLAGS.max_seq_length,
                 FLAGS.max_query_length)
    print(f"Exported the SavedModels of {BEST_PREFIX} to {FLAGS.export_dir}")


def main(argv):
    del argv
    validate_flags()
    config = run_flags.load_config(FLAGS.albert_config_file, FLAGS.max_seq_length)
    tokenizer = run_flags.tokenizer_from_flags(config)
    run_flags.check_init_checkpoint(FLAGS.init_checkpoint)
    settings = settings_from_flags()
    # Every file the run reads is read, checked and converted before the first training step.
    eval_file = feature_file(tokenizer, FLAGS.predict_file, False) if FLAGS.do_predict else None
    train_file = feature_file(tokenizer, FLAGS.train_file, True) if FLAGS.do_train else None
    steps, warmup = training_steps(train_file)
    trainer = run_flags.trainer_from_flags(SquadTask(config, settings), steps, warmup,
                                           evaluates=FLAGS.do_predict)
    if FLAGS.do_train:
        train(trainer, train_file)
    if FLAGS.do_predict:
        predict(trainer, eval_file, settings.selection_metric)
    if FLAGS.export_dir or FLAGS.tflite_file:
        restore_best_checkpoint(trainer)
    if FLAGS.export_dir:
        export_saved_model(trainer, tokenizer)
    if FLAGS.tflite_file:
        run_flags.write_tflite_from_flags(trainer.model, export_squad_tflite)


if __name__ == "__main__":
    error_boundary.run(main, checks=[run_flags.check_outputs_spare_inputs,
                                     run_flags.check_output_directories,
                                     run_flags.lock_output_dir],
                       when_stopped=error_boundary.TRAINING_STOPPED, catch_sigterm=False)
