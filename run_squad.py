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

import dataclasses
import functools
import os

from absl import app, flags

from albert_tf.cli import command_line, flag_checks, flag_definitions
from albert_tf.tasks.question_answering.recipes import squad_recipe

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
    start_n_top=flag_definitions.AT_LEAST_ONE, end_n_top=flag_definitions.AT_LEAST_ONE)
flag_definitions.check_tflite_flags()
flags.register_multi_flags_validator(
    ["tflite_file", "version_2_with_negative"],
    lambda values: not (values["tflite_file"] and values["version_2_with_negative"]),
    message="the SQuAD 2.0 model has no TFLite export (the reference had none either): leave "
            "out --version_2_with_negative or --tflite_file")


def check_flags() -> None:
    """Before TensorFlow loads: what to do, the model's files, the file each action reads and
    room for the question in the window."""
    flag_checks.fine_tuning_checks("do_train", "do_predict", "export_dir", "tflite_file",
                                   sweep_flag="do_predict")
    if FLAGS.do_train:
        flag_checks.require_flags("train_file")
    if FLAGS.do_predict:
        flag_checks.require_flags("predict_file")
    flag_checks.require_room_for_the_question()
    if FLAGS.group_by_length and not FLAGS.version_2_with_negative:
        raise app.UsageError("--group_by_length needs --version_2_with_negative: SQuAD v1.1's "
                             "batches keep --max_seq_length (its loss and n-best lists rank the "
                             "padding positions too, as the reference's).")


command_line.parse_before_imports(__name__, checks=[
    flag_checks.print_recipe(lambda: squad_recipe(FLAGS.version_2_with_negative)), check_flags])

from albert_tf.checkpoints.files import BEST_CHECKPOINT_NAME, list_checkpoints  # noqa: E402
from albert_tf.checkpoints.label_set import LabelSet  # noqa: E402
from albert_tf.checkpoints.warm_start import CheckpointSource  # noqa: E402
from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.cli.fine_tuning import (  # noqa: E402
    FineTuningHooks, FineTuningRun, TrainingData, feature_cache_files, run_fine_tuning)
from albert_tf.cli.settings import RunSettings  # noqa: E402
from albert_tf.files.run_files import RunFiles  # noqa: E402
from albert_tf.files.run_files import inputs as declared_inputs  # noqa: E402
from albert_tf.tasks.question_answering.postprocessing import (  # noqa: E402
    NBEST_FILE, NULL_ODDS_FILE, PREDICTIONS_FILE)
from albert_tf.tasks.question_answering.records import (  # noqa: E402
    SEQUENCE_FEATURES, parse_squad_record)
from albert_tf.tasks.question_answering.serving import (  # noqa: E402
    export_squad, export_squad_tflite)
from albert_tf.tasks.question_answering.task import (  # noqa: E402
    SquadEvalContext, SquadSettings, SquadTask)
from albert_tf.training.task import EvalSet  # noqa: E402
from data_prep.common.feature_cache import (  # noqa: E402
    FeatureFile, cache_file_pattern, feature_file_source)
from data_prep.question_answering.feature_file import squad_feature_file  # noqa: E402
from data_prep.question_answering.features import SquadFeatureSettings  # noqa: E402

CACHE_NAME = "squad"


@dataclasses.dataclass(frozen=True)
class SquadRunSettings:
    """run_squad's own flags: its files, the window geometry, the post-processing's settings."""

    train_file: str | None
    predict_file: str | None
    doc_stride: int
    max_query_length: int
    num_workers: int
    num_train_epochs: float
    warmup_proportion: float
    postprocessing: SquadSettings

    @classmethod
    def from_flags(cls) -> "SquadRunSettings":
        postprocessing = SquadSettings(
            version_2=FLAGS.version_2_with_negative, n_best_size=FLAGS.n_best_size,
            max_answer_length=FLAGS.max_answer_length, start_n_top=FLAGS.start_n_top,
            end_n_top=FLAGS.end_n_top, dropout_prob=FLAGS.dropout_prob,
            null_score_diff_threshold=FLAGS.null_score_diff_threshold,
            tuned_predictions=not FLAGS["null_score_diff_threshold"].present)
        return cls(FLAGS.train_file if FLAGS.do_train else None,
                   FLAGS.predict_file if FLAGS.do_predict else None, FLAGS.doc_stride,
                   FLAGS.max_query_length, FLAGS.num_workers, FLAGS.num_train_epochs,
                   FLAGS.warmup_proportion, postprocessing)


class SquadHooks(FineTuningHooks):
    """SQuAD v1.1 / v2.0: --do_predict sweeps the checkpoints on --predict_file and leaves the
    best one's prediction files."""

    run_outputs = (PREDICTIONS_FILE, NBEST_FILE, NULL_ODDS_FILE)
    sequence_features = SEQUENCE_FEATURES
    evaluation_flag = "--do_predict"

    def __init__(self, own: SquadRunSettings):
        self.own = own
        self.selection_metric = own.postprocessing.selection_metric

    def evaluates(self, settings: RunSettings) -> bool:
        return settings.do_predict

    def length_invariant(self, settings: RunSettings) -> bool:
        """v2.0 masks the padding out of its softmax (p_mask); v1.1's loss and n-best lists rank
        all S positions, padding included, as the reference's, so its batches keep length S."""
        return self.own.postprocessing.version_2

    def reads_init_checkpoint(self, settings: RunSettings) -> bool:
        """Training starts from it; a --do_predict run without checkpoints evaluates it."""
        return settings.do_train or settings.do_predict

    def files(self, settings: RunSettings) -> RunFiles:
        return feature_cache_files(settings, declared_inputs(
            ("--train_file", self.own.train_file), ("--predict_file", self.own.predict_file)),
            [cache_file_pattern(CACHE_NAME)])

    def check(self, settings: RunSettings, init_checkpoint: CheckpointSource | None) -> None:
        """A --do_predict run without training needs something to evaluate."""
        if (settings.do_predict and not settings.do_train and init_checkpoint is None
                and not list_checkpoints(settings.output_dir)):
            raise app.UsageError(f"--do_predict: no checkpoint in {settings.output_dir} and no "
                                 "--init_checkpoint to evaluate.")

    def load_data(self, run: FineTuningRun, stored: LabelSet | None) -> tuple[LabelSet, str]:
        """The version's label set; every SQuAD file is read and checked when its features are
        built (``prepare_features``)."""
        version = "v2.0" if self.own.postprocessing.version_2 else "v1.1"
        return LabelSet(f"question_answering_{version}"), "--version_2_with_negative"

    def training_task(self, run: FineTuningRun, label_set: LabelSet) -> SquadTask:
        return SquadTask(run.config, self.own.postprocessing)

    def parse(self, run: FineTuningRun, is_training: bool):
        return functools.partial(parse_squad_record, max_seq_length=run.settings.max_seq_length,
                                 is_training=is_training)

    def features(self, run: FineTuningRun, is_training: bool) -> FeatureFile:
        """The cached features of a SQuAD JSON file (training questions shuffled as the
        reference)."""
        own = self.own
        settings = SquadFeatureSettings(
            run.settings.max_seq_length, own.doc_stride, own.max_query_length, is_training,
            version_2_with_negative=own.postprocessing.version_2,
            shuffle_seed=TRAINING_SHUFFLE_SEED if is_training else None)
        return squad_feature_file(own.train_file if is_training else own.predict_file,
                                  run.tokenizer, settings, run.settings.cached_dir,
                                  own.num_workers)

    def schedule(self, run: FineTuningRun) -> tuple[int, int]:
        """(num_train_steps, num_warmup_steps) as the reference counts them: questions, not
        windows."""
        if not run.settings.do_train:
            return 1, 0  # predict-only: the schedule is never used
        train_file = self.features(run, True)
        questions = train_file.metadata["num_questions"]
        steps = int(questions / run.settings.train_batch_size * self.own.num_train_epochs)
        if steps < 1:
            raise app.UsageError(f"{questions} training questions give no step at batch "
                                 f"{run.settings.train_batch_size} and "
                                 f"{self.own.num_train_epochs} epochs.")
        return steps, int(steps * self.own.warmup_proportion)

    def prepare_features(self, run: FineTuningRun) -> None:
        """Every file the run reads is read, checked and converted before the first step."""
        if run.settings.do_predict:
            self.features(run, False)
        if run.settings.do_train:
            self.features(run, True)

    def training_data(self, run: FineTuningRun) -> TrainingData:
        train_file = self.features(run, True)
        return TrainingData(train_file.path, self.parse(run, True),
                            f"SQuAD train: {train_file.metadata['num_questions']} questions, "
                            f"{train_file.num_records} windows")

    def eval_sets(self, run: FineTuningRun) -> list[EvalSet]:
        eval_file = self.features(run, False)
        return [EvalSet("", functools.partial(run.eval_dataset, eval_file.path,
                                              self.parse(run, False),
                                              run.settings.predict_batch_size),
                        SquadEvalContext.from_metadata(eval_file.metadata,
                                                       run.trainer.config.output_dir),
                        source=feature_file_source(eval_file))]

    def before_sweep(self, run: FineTuningRun) -> None:
        """Predict-only from --init_checkpoint: it becomes checkpoint 0 of --output_dir."""
        trainer = run.trainer
        if not list_checkpoints(trainer.config.output_dir):
            print(trainer.warm_start(run.init_checkpoint,
                                     config_file=run.settings.albert_config_file))
            trainer.manager.save(checkpoint_number=0)

    def predict(self, run: FineTuningRun, dev_best: dict[str, float] | None) -> None:
        """The sweep leaves the files of the last evaluated checkpoint; write the best one's."""
        output_dir = run.trainer.config.output_dir
        run.trainer.evaluate_checkpoint(os.path.join(output_dir, BEST_CHECKPOINT_NAME),
                                        self.eval_sets(run))
        print(f"Predictions of {BEST_CHECKPOINT_NAME} in {output_dir}")

    def export(self, run: FineTuningRun) -> None:
        export_squad(run.trainer.model, run.settings.export_dir, run.tokenizer,
                     run.settings.max_seq_length, self.own.max_query_length)

    def export_tflite(self, run: FineTuningRun) -> str:
        settings = run.settings
        return export_squad_tflite(run.trainer.model, settings.tflite_file,
                                   settings.max_seq_length, settings.tflite_quantization)


def main(argv):
    del argv
    run_fine_tuning(RunSettings.from_flags(), SquadHooks(SquadRunSettings.from_flags()))


if __name__ == "__main__":
    error_boundary.run(main, when_stopped=error_boundary.TRAINING_STOPPED)
