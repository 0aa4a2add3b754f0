"""SQuAD v1.1 / v2.0, as run_squad.py runs it: --do_predict sweeps the checkpoints on
--predict_file and leaves the best one's prediction files."""

from __future__ import annotations

import dataclasses
import functools
import os

from albert_tf.checkpoints.files import BEST_CHECKPOINT_NAME
from albert_tf.checkpoints.label_set import LabelSet
from albert_tf.cli.settings import RunSettings
from albert_tf.cli.task_spec import (EVALUATE, TRAIN, Outputs, Split, SplitFeatures,
                                     Sweep, TaskData, TaskRun, TaskSpec, Training)
from albert_tf.errors.user_error import UserError
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy
from albert_tf.files.paths import absolute_path
from albert_tf.files.run_files import inputs as declared_inputs
from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.question_answering.postprocessing import (NBEST_FILE, NULL_ODDS_FILE,
                                                               PREDICTIONS_FILE)
from albert_tf.tasks.question_answering.records import SEQUENCE_FEATURES, parse_squad_record
from albert_tf.tasks.question_answering.serving import (export_squad, export_squad_onnx,
                                                        export_squad_tflite)
from albert_tf.tasks.question_answering.task import SquadEvalContext, SquadSettings, SquadTask
from albert_tf.tasks.question_answering.versions import full_length_reason, version_name
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.common.feature_cache import cache_file_pattern
from data_prep.question_answering.feature_file import squad_feature_file
from data_prep.question_answering.features import SquadFeatureSettings
from task_specs.common import split_features

CACHE_NAME = "squad"
# The reference shuffles its training questions with random.Random(12345) before conversion.
TRAINING_SHUFFLE_SEED = 12345


@dataclasses.dataclass(frozen=True)
class SquadRunSettings:
    """run_squad's own flags: its files (None where the run's actions do not read them), the
    window geometry, the epochs, the post-processing's settings."""

    train_file: str | None
    predict_file: str | None
    doc_stride: int
    max_query_length: int
    num_workers: int
    num_train_epochs: float
    warmup_proportion: float
    postprocessing: SquadSettings


def squad_spec(settings: RunSettings, own: SquadRunSettings) -> TaskSpec:
    """The evaluated --predict_file and the training --train_file (v1.1's batches keep length S:
    ``full_length_reason``)."""
    splits = (Split("dev", EVALUATE, declared_inputs(("--predict_file", own.predict_file)),
                    cache_file_pattern(CACHE_NAME),
                    functools.partial(_features, settings, own, False)),
              Split("train", TRAIN, declared_inputs(("--train_file", own.train_file)),
                    cache_file_pattern(CACHE_NAME),
                    functools.partial(_features, settings, own, True)))
    version = version_name(own.postprocessing.version_2)
    return TaskSpec(
        name=CACHE_NAME, settings=own, splits=splits,
        read_data=lambda start: TaskData(LabelSet(f"question_answering_{version}"),
                                         "--version_2_with_negative"),
        training=Training(functools.partial(_task, own.postprocessing), SEQUENCE_FEATURES,
                          full_length_reason=full_length_reason(own.postprocessing.version_2),
                          schedule=functools.partial(_schedule, settings, own)),
        sweep=Sweep("do_predict", own.postprocessing.selection_metric, SweepPolicy(prune=True),
                    settings.predict_batch_size, evaluates_init_checkpoint=True),
        outputs=Outputs((PREDICTIONS_FILE, NBEST_FILE, NULL_ODDS_FILE), predict=predict,
                        export=functools.partial(export, own.max_query_length),
                        export_tflite=export_tflite, export_onnx=export_onnx))


def _features(settings: RunSettings, own: SquadRunSettings, is_training: bool, data: TaskData,
              tokenizer: FullTokenizer) -> SplitFeatures:
    """The windows of a SQuAD JSON file (training questions shuffled as the reference); the
    evaluated file's with what post-processing needs of its examples."""
    feature_settings = SquadFeatureSettings(
        settings.max_seq_length, own.doc_stride, own.max_query_length, is_training,
        version_2_with_negative=own.postprocessing.version_2,
        shuffle_seed=TRAINING_SHUFFLE_SEED if is_training else None)
    features = squad_feature_file(own.train_file if is_training else own.predict_file,
                                  tokenizer, feature_settings, settings.cached_dir,
                                  own.num_workers)
    parse = functools.partial(parse_squad_record, max_seq_length=settings.max_seq_length,
                              is_training=is_training)
    description = (f"SQuAD {'train' if is_training else 'dev'}: "
                   f"{features.metadata['num_questions']} questions, "
                   f"{features.num_records} windows")
    context = (None if is_training else SquadEvalContext.from_metadata(
        features.metadata, absolute_path(settings.output_dir)))
    return split_features(features, parse, description, context)


def _schedule(settings: RunSettings, own: SquadRunSettings,
              train: SplitFeatures) -> tuple[int, int]:
    """(training steps, warmup steps) as the reference counts them: questions, not windows."""
    questions = train.metadata["num_questions"]
    steps = int(questions / settings.train_batch_size * own.num_train_epochs)
    if steps < 1:
        raise UserError(f"{questions} training questions give no step at batch "
                        f"{settings.train_batch_size} and {own.num_train_epochs} epochs.")
    return steps, int(steps * own.warmup_proportion)


def _task(postprocessing: SquadSettings, config: AlbertConfig, data: TaskData) -> SquadTask:
    return SquadTask(config, postprocessing)


def predict(run: TaskRun, dev_best: dict[str, float] | None) -> None:
    """The sweep leaves the files of the last evaluated checkpoint; write the best one's."""
    output_dir = run.trainer.config.output_dir
    run.trainer.evaluate_checkpoint(os.path.join(output_dir, BEST_CHECKPOINT_NAME),
                                    [run.eval_set("dev", run.settings.predict_batch_size)])
    print(f"Predictions of {BEST_CHECKPOINT_NAME} in {output_dir}")


def export(max_query_length: int, run: TaskRun) -> None:
    export_squad(run.trainer.model, run.settings.export_dir, run.tokenizer,
                 run.settings.max_seq_length, max_query_length)


def export_tflite(run: TaskRun) -> str:
    settings = run.settings
    return export_squad_tflite(run.trainer.model, settings.tflite_file, settings.max_seq_length,
                               settings.tflite_quantization)


def export_onnx(run: TaskRun) -> str:
    return export_squad_onnx(run.trainer.model, run.settings.onnx_file,
                             run.settings.max_seq_length, run.settings.onnx_quantization)
