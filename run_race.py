"""Fine-tunes ALBERT on RACE (4-way multiple choice) with the reference's flags and defaults.

The defaults are the paper's recipe for the v2 models (--print_recipe prints it on one line, with
--do_train --do_eval; --print_recipe --recipe_model_version=v1 the v1 models', which differs in the
learning rate); the encoder's dropout comes from the config. --do_train, --do_eval and --do_predict
are off by default, as in the other scripts: give the steps to run (the reference's run_race turns
--do_train and --do_eval on, so that its --do_predict alone would first train on toward
--train_step).

- --do_train trains from --init_checkpoint (resuming from the latest checkpoint in --output_dir);
- --do_eval evaluates every checkpoint on the dev split, reporting accuracy for all questions and
  for middle and high separately in one run (the reference needs a run per level), writes
  eval_results.txt and keeps the best eval_accuracy as model.ckpt-best;
- --do_predict evaluates model.ckpt-best on the test split (labels required, as the reference) and
  writes predict_results.txt and test_predictions.json (question id -> answer letter and the four
  probabilities);
- --middle_only / --high_only restrict every split to one level;
- --export_dir writes SavedModels of model.ckpt-best: ``ids_only`` (signature on ids) and
  ``with_text`` (also on raw article, question and options), see albert_tf/tasks/multiple_choice/serving.py.

Data: <data_dir>/RACE/{train,dev,test}/{middle,high}/, either the official release (one JSON
article per *.txt file) or the reference's all.txt (one JSON article per line). See the README.
"""

from __future__ import annotations

from absl import app, flags

from albert_tf.cli import command_line, flag_checks, flag_definitions
from albert_tf.tasks.multiple_choice.recipes import MODEL_VERSIONS, race_recipe

FLAGS = flags.FLAGS

for _name in ("train_file", "eval_file", "predict_file"):
    flags.DEFINE_string(_name, None, "[Reference flag, unused] Feature files are cached in "
                        "--cached_dir (default --output_dir), keyed by their inputs and settings.")
flags.DEFINE_integer("num_keep_checkpoint", 5, "[Reference flag, unused] Every checkpoint is kept "
                     "until the sweep has evaluated it (use --keep_checkpoint_max).")
flag_definitions.define(
    *flag_definitions.FINE_TUNING_FLAGS, "task_name", "train_step", "warmup_step", "dropout_prob",
    "max_qa_length", "middle_only", "high_only", "skip_invalid",
    task_name="race", learning_rate=1e-5, train_step=12000,
    warmup_step=1000, save_checkpoints_steps=100, keep_checkpoint_max=0)
flags.DEFINE_enum("recipe_model_version", "v2", list(MODEL_VERSIONS), "[albert_tf] The recipe "
                  "--print_recipe prints: the paper's for the v1 models (learning rate 2e-5) or "
                  "the v2 models (1e-5, this script's defaults). Read by --print_recipe only.")


def check_flags() -> None:
    """Before TensorFlow loads: what to do, the model's files, RACE's data and at most one level."""
    if FLAGS.task_name.lower() != "race":
        raise app.UsageError(f"--task_name={FLAGS.task_name}: run_race only runs race.")
    flag_checks.fine_tuning_checks("do_train", "do_eval", "do_predict", "export_dir",
                                   required=("data_dir",))
    if FLAGS.middle_only and FLAGS.high_only:
        raise app.UsageError("--middle_only and --high_only exclude each other; give at most one.")
    flag_checks.require_sequence_room(
        FLAGS.max_qa_length + 3,
        f"[CLS], two [SEP] and --max_qa_length={FLAGS.max_qa_length} question+option pieces")


command_line.parse_before_imports(__name__, checks=[
    flag_checks.print_recipe(lambda: race_recipe(FLAGS.recipe_model_version)), check_flags])

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.cli.driver import run_task  # noqa: E402
from albert_tf.cli.settings import RunSettings  # noqa: E402
from task_specs.multiple_choice import RaceSettings, race_spec  # noqa: E402


def main(argv):
    del argv
    settings = RunSettings.from_flags()
    run_task(settings, race_spec(settings, RaceSettings(
        FLAGS.data_dir, FLAGS.max_qa_length, FLAGS.middle_only, FLAGS.high_only,
        FLAGS.skip_invalid, FLAGS.dropout_prob)))


if __name__ == "__main__":
    error_boundary.run(main, when_stopped=error_boundary.TRAINING_STOPPED)
