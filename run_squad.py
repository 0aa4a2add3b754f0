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

from absl import flags

from albert_tf.cli import command_line, flag_checks, flag_definitions
from albert_tf.tasks.question_answering.recipes import squad_recipe
from albert_tf.tasks.question_answering.versions import full_length_reason

FLAGS = flags.FLAGS

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
    *flag_definitions.TFLITE_FLAGS, *flag_definitions.ONNX_FLAGS, max_seq_length=384, save_checkpoints_steps=1000,
    keep_checkpoint_max=0)
flag_definitions.check_ranges(
    num_train_epochs=flag_definitions.POSITIVE, warmup_proportion=flag_definitions.FRACTION,
    n_best_size=flag_definitions.AT_LEAST_ONE, max_answer_length=flag_definitions.AT_LEAST_ONE,
    start_n_top=flag_definitions.AT_LEAST_ONE, end_n_top=flag_definitions.AT_LEAST_ONE)
flag_definitions.check_tflite_flags()
flag_definitions.check_onnx_flags()
# The SQuAD 2.0 model has no one-file export (the reference had no TFLite one either).
for _flag, _format in (("tflite_file", "TFLite"), ("onnx_file", "ONNX")):
    flags.register_multi_flags_validator(
        [_flag, "version_2_with_negative"],
        lambda values, flag=_flag: not (values[flag] and values["version_2_with_negative"]),
        message=f"the SQuAD 2.0 model has no {_format} export (the reference had none either): "
                f"leave out --version_2_with_negative or --{_flag}")


def check_flags() -> None:
    """Before TensorFlow loads: what to do, the model's files, the file each action reads and
    room for the question in the window."""
    flag_checks.fine_tuning_checks(
        "do_train", "do_predict", "export_dir", "tflite_file", "onnx_file",
        sweep_flag="do_predict",
        full_length_reason=full_length_reason(FLAGS.version_2_with_negative))
    if FLAGS.do_train:
        flag_checks.require_flags("train_file")
    if FLAGS.do_predict:
        flag_checks.require_flags("predict_file")
    flag_checks.require_room_for_the_question()


command_line.parse_before_imports(__name__, checks=[
    flag_checks.print_recipe(lambda: squad_recipe(FLAGS.version_2_with_negative)), check_flags])

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.cli.driver import run_task  # noqa: E402
from albert_tf.cli.settings import RunSettings  # noqa: E402
from albert_tf.tasks.question_answering.task import SquadSettings  # noqa: E402
from task_specs.question_answering import SquadRunSettings, squad_spec  # noqa: E402


def settings_from_flags() -> SquadRunSettings:
    """run_squad's own flags, read once (a file the run's actions do not read: None)."""
    postprocessing = SquadSettings(
        version_2=FLAGS.version_2_with_negative, n_best_size=FLAGS.n_best_size,
        max_answer_length=FLAGS.max_answer_length, start_n_top=FLAGS.start_n_top,
        end_n_top=FLAGS.end_n_top, dropout_prob=FLAGS.dropout_prob,
        null_score_diff_threshold=FLAGS.null_score_diff_threshold,
        tuned_predictions=not FLAGS["null_score_diff_threshold"].present)
    return SquadRunSettings(FLAGS.train_file if FLAGS.do_train else None,
                            FLAGS.predict_file if FLAGS.do_predict else None, FLAGS.doc_stride,
                            FLAGS.max_query_length, FLAGS.num_workers, FLAGS.num_train_epochs,
                            FLAGS.warmup_proportion, postprocessing)


def main(argv):
    del argv
    settings = RunSettings.from_flags()
    run_task(settings, squad_spec(settings, settings_from_flags()))


if __name__ == "__main__":
    error_boundary.run(main, when_stopped=error_boundary.TRAINING_STOPPED)
