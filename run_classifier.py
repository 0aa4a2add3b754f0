"""Fine-tunes ALBERT on a GLUE task with the reference's flags and defaults, or on your own
classification or regression files.

--do_train trains from --init_checkpoint (resuming from the latest checkpoint in --output_dir);
--do_eval evaluates every checkpoint on the full dev set (the reference's sweep: eval_results.txt,
best_trial.txt, non-best checkpoints deleted, the best renamed to model.ckpt-best; MNLI evaluates
dev_matched and dev_mismatched); --do_predict writes test_results.tsv and submit_results.tsv from
model.ckpt-best; --export_dir writes a SavedModel of model.ckpt-best, --tflite_file a TFLite model
of it (--tflite_quantization: float32, int8 or float16 weights). See the README.

Your own files (docs/own_data.md): --train_file, --dev_file, --test_file (CSV, TSV or JSON Lines)
instead of --task_name and --data_dir, with the columns named by --text_column, --text_b_column,
--label_column and --id_column; the same steps, the label set kept in <output_dir>/run_manifest.json
and the predictions and exports giving your label names.

Early exit (docs/early_exit.md): --early_exit trains an internal classifier after every layer
with PABEE's weighted loss; --do_eval adds each layer's and each patience's metrics (the best
checkpoint's in early_exit_results.json, with the patience chosen on dev); --do_predict and
--export_dir stop at --patience (default: the chosen one) or at --inference_layers. An output
directory holds one kind of classifier (ordinary, or early exit with separate or shared heads,
recorded in its run manifest): a later run there with other early-exit flags is refused.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os

from absl import app, flags

from albert_tf.cli import command_line, flag_checks, flag_definitions
from albert_tf.tasks.classification.recipes import (GLUE_TASK_NAMES, REGRESSION_TASKS,
                                                    glue_recipe, unknown_task_message)

FLAGS = flags.FLAGS

flags.DEFINE_float("threshold_to_export", float("nan"), "If set, a constant 'threshold' output is "
                   "added to the SavedModel's signature.")
flag_definitions.define(*flag_definitions.FINE_TUNING_FLAGS, *flag_definitions.TFLITE_FLAGS,
                        "task_name", "train_step", "warmup_step", keep_checkpoint_max=0)
flag_definitions.check_tflite_flags()
# Your own files instead of a GLUE task (data_prep/classification/own_data.py).
flags.DEFINE_string("train_file", None, "[albert_tf] Your training file (.csv, .tsv or .jsonl) "
                    "instead of --task_name and --data_dir; see docs/own_data.md.")
flags.DEFINE_string("dev_file", None, "[albert_tf] Your dev file, evaluated by --do_eval.")
flags.DEFINE_string("test_file", None, "[albert_tf] Your test file, predicted by --do_predict "
                    "(labels optional).")
flags.DEFINE_enum("file_format", None, ["csv", "tsv", "jsonl"], "[albert_tf] Format of your "
                  "files (default: by extension: .csv, .tsv, .jsonl or .ndjson).")
flags.DEFINE_string("text_column", None, "[albert_tf] Column of the text (default: 'text', or "
                    "'text_a' and 'text_b' for a pair).")
flags.DEFINE_string("text_b_column", None, "[albert_tf] Column of the second text of a pair.")
flags.DEFINE_string("label_column", "label", "[albert_tf] Column of the label.")
flags.DEFINE_string("id_column", None, "[albert_tf] Column naming each example in the predictions "
                    "(default: its line number).")
flags.DEFINE_list("labels", None, "[albert_tf] The class names in class id order (default: the "
                  "training file's labels, sorted).")
flags.DEFINE_enum("task_type", "classification", ["classification", "regression"],
                  "[albert_tf] classification (class names) or regression (a number per example).")
flags.DEFINE_enum("selection_metric", "accuracy", ["accuracy", "macro_f1"], "[albert_tf] "
                  "Classification on your files: the dev metric that chooses model.ckpt-best "
                  "(regression: Pearson's r).")
# Early exit (PABEE; albert_tf/tasks/classification/early_exit.py, docs/early_exit.md).
flags.DEFINE_bool("early_exit", False, "[albert_tf] An internal classifier after every layer, "
                  "trained with PABEE's loss (layer j weighted by j); inference stops when the "
                  "prediction stays unchanged --patience times. See docs/early_exit.md.")
flags.DEFINE_enum("early_exit_heads", "separate", ["separate", "shared"], "[albert_tf] "
                  "--early_exit: a classifier of its own per layer (separate, the paper's), or the "
                  "ordinary classifier after every layer (shared, no new weights).")
flags.DEFINE_integer("patience", None, "[albert_tf] --early_exit: --do_predict and --export_dir "
                     "stop after a layer whose prediction stayed unchanged this many times "
                     "(default: the patience chosen on dev, in early_exit_results.json).",
                     lower_bound=1)
flags.DEFINE_integer("inference_layers", None, "[albert_tf] --early_exit: --do_predict, "
                     "--export_dir and --tflite_file run this many layers (fixed depth) instead "
                     "of stopping by patience.", lower_bound=1)
flags.DEFINE_float("regression_threshold", 0.1, "[albert_tf] --early_exit on a regression: a "
                   "score that moves by less than this between layers counts as unchanged; "
                   "recorded in --output_dir by its first run, whose value later runs there use "
                   "(another is refused).", lower_bound=0.0)
flags.DEFINE_float("patience_tolerance", 2.0, "[albert_tf] --early_exit: the patience chosen on "
                   "dev maximises the selection metric (x 100) minus this many points times the "
                   "fraction of the layers after the first that it runs: it loses at most this "
                   "much to the full depth, less the fewer layers it saves (0: the best metric).",
                   lower_bound=0.0)
_EARLY_EXIT_FLAGS = ("early_exit_heads", "patience", "inference_layers", "regression_threshold",
                     "patience_tolerance")
_OWN_FILE_FLAGS = ("train_file", "dev_file", "test_file")
_OWN_DATA_FLAGS = (*_OWN_FILE_FLAGS, "file_format", "text_column", "text_b_column", "label_column",
                   "id_column", "labels", "task_type", "selection_metric")
_ACTIONS = ("do_train", "do_eval", "do_predict", "export_dir", "tflite_file")


def uses_own_files() -> bool:
    return any(FLAGS[name].value for name in _OWN_FILE_FLAGS)


def check_own_labels() -> None:
    """Your own files: --labels (distinct, non-empty class names) and --selection_metric fit
    --task_type (a regression has no classes and is selected by Pearson's r)."""
    if FLAGS.task_type == "regression":
        if FLAGS.labels:
            raise app.UsageError("--labels names the classes of a classification; a regression "
                                 "(--task_type=regression) has none")
        if FLAGS.selection_metric != "accuracy":
            raise app.UsageError(f"--selection_metric={FLAGS.selection_metric}: a regression's "
                                 "best checkpoint is chosen by Pearson's r")
    elif FLAGS.labels:
        labels = [label.strip() for label in FLAGS.labels]
        if "" in labels or len(set(labels)) < len(labels):
            raise app.UsageError(f"--labels={','.join(FLAGS.labels)}: expected distinct "
                                 "non-empty class names")


def check_flags() -> None:
    """Before TensorFlow loads: either a GLUE task (--task_name, --data_dir) or your own files,
    each action with its file (the own-file flags are refused with a GLUE task), --labels that fit
    --task_type; what to do; the model's files; a known GLUE task; room for the special tokens."""
    if uses_own_files():
        for name in ("task_name", "data_dir"):
            if FLAGS[name].value:
                raise app.UsageError(f"--{name} names a GLUE task, --train_file, --dev_file and "
                                     "--test_file your own files: give one or the other.")
        for action, name in (("do_train", "train_file"), ("do_eval", "dev_file"),
                             ("do_predict", "test_file")):
            if FLAGS[action].value and not FLAGS[name].value:
                raise app.UsageError(f"--{action} on your own files needs --{name}.")
        check_own_labels()
    else:
        for name in _OWN_DATA_FLAGS:
            if FLAGS[name].present:
                raise app.UsageError(f"--{name} applies to your own files (--train_file, "
                                     "--dev_file, --test_file), not to a GLUE --task_name.")
    flag_checks.fine_tuning_checks(*_ACTIONS)
    if not uses_own_files():
        flag_checks.require_flags("data_dir", "task_name")
        if FLAGS.task_name.lower() not in GLUE_TASK_NAMES:
            raise app.UsageError(unknown_task_message(FLAGS.task_name))
    flag_checks.require_sequence_room(3, "the 3 special tokens of [CLS] a [SEP] b [SEP]")
    check_early_exit()


def check_early_exit() -> None:
    """The early-exit flags need --early_exit, and --regression_threshold a regression (it would
    be ignored on a classification, whose prediction is unchanged when its class is); --patience
    and --inference_layers are two ways of stopping (give one)."""
    if not FLAGS.early_exit:
        for name in _EARLY_EXIT_FLAGS:
            if FLAGS[name].present:
                raise app.UsageError(f"--{name} applies to --early_exit models only.")
    if FLAGS["regression_threshold"].present and not is_regression():
        task = ("your files are a classification (--task_type=classification)" if uses_own_files()
                else f"--task_name={FLAGS.task_name} is a classification")
        raise app.UsageError("--regression_threshold applies to a regression (--task_type="
                             f"regression on your files, or --task_name=sts-b); {task}.")
    if FLAGS.patience is not None and FLAGS.inference_layers is not None:
        raise app.UsageError("--patience stops each example when its prediction settles, "
                             "--inference_layers at a fixed depth: give one or the other.")


def is_regression() -> bool:
    """Whether the run is a regression: your files with --task_type=regression, or the GLUE task
    STS-B."""
    if uses_own_files():
        return FLAGS.task_type == "regression"
    return FLAGS.task_name.lower() in REGRESSION_TASKS


# --help, flag mistakes: before TensorFlow loads
command_line.parse_before_imports(__name__, checks=[
    flag_checks.print_recipe(lambda: glue_recipe(FLAGS.task_name)), check_flags])

from albert_tf.checkpoints.label_set import LabelSet  # noqa: E402
from albert_tf.checkpoints.warm_start import CheckpointSource  # noqa: E402
from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.cli.fine_tuning import (  # noqa: E402
    FineTuningHooks, FineTuningRun, TrainingData, feature_cache_files, run_fine_tuning)
from albert_tf.cli.settings import RunSettings  # noqa: E402
from albert_tf.cli.training_run import load_config  # noqa: E402
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy  # noqa: E402
from albert_tf.files.run_files import RunFiles  # noqa: E402
from albert_tf.files.run_files import inputs as declared_inputs  # noqa: E402
from albert_tf.files.run_manifest import MANIFEST_NAME, Record, read_manifest  # noqa: E402
from albert_tf.tasks.classification.early_exit import (  # noqa: E402
    DEFAULT_REGRESSION_THRESHOLD, REGRESSION_THRESHOLD, RESULTS_FILE, EarlyExitSettings,
    ExitPolicy, layer_key, results_of, stopped_layers, write_results)
from albert_tf.tasks.classification.heads_record import HEADS, check_heads  # noqa: E402
from albert_tf.tasks.classification.metrics import class_key, format_class_report  # noqa: E402
from albert_tf.tasks.classification.records import (  # noqa: E402
    SEQUENCE_FEATURES, parse_glue_example)
from albert_tf.tasks.classification.serving import (  # noqa: E402
    export_classifier, export_classifier_tflite)
from albert_tf.tasks.classification.task import (  # noqa: E402
    ClassifierTask, early_exit_predictions, write_exit_layers, write_predictions)
from albert_tf.training.task import EvalSet  # noqa: E402
from data_prep.classification.features import (  # noqa: E402
    GlueFeatureSettings, cached_glue_features)
from data_prep.classification.glue_tasks import GlueTask, glue_task  # noqa: E402
from data_prep.classification.own_data import Columns, OwnDataReader  # noqa: E402
from data_prep.classification.own_data_task import TASK_NAME, OwnDataTask, load_own_data  # noqa: E402
from data_prep.classification.processors import GlueDataError  # noqa: E402
from data_prep.common.feature_cache import (  # noqa: E402
    FeatureFile, cache_file_pattern, feature_file_source)


@dataclasses.dataclass(frozen=True)
class ClassifierSettings:
    """run_classifier's own flags: a GLUE task, or your own files and their columns."""

    task_name: str | None
    data_dir: str | None
    files: dict  # {"train" | "dev" | "test": path} of your own files (empty for a GLUE task)
    file_format: str | None
    columns: Columns
    labels: tuple[str, ...] | None
    task_type: str
    selection_metric: str
    threshold_to_export: float | None
    early_exit: EarlyExitSettings | None

    @classmethod
    def from_flags(cls) -> "ClassifierSettings":
        files = {split: FLAGS[f"{split}_file"].value for split in ("train", "dev", "test")
                 if FLAGS[f"{split}_file"].value}
        threshold = FLAGS.threshold_to_export
        return cls(FLAGS.task_name, FLAGS.data_dir, files, FLAGS.file_format,
                   Columns(FLAGS.text_column, FLAGS.text_b_column, FLAGS.label_column,
                           FLAGS.id_column),
                   tuple(FLAGS.labels) if FLAGS.labels else None, FLAGS.task_type,
                   FLAGS.selection_metric, None if math.isnan(threshold) else threshold,
                   EarlyExitSettings(FLAGS.early_exit_heads, FLAGS.patience,
                                     FLAGS.inference_layers,
                                     FLAGS.regression_threshold
                                     if FLAGS["regression_threshold"].present else None,
                                     FLAGS.patience_tolerance
                                     if FLAGS["patience_tolerance"].present else None)
                   if FLAGS.early_exit else None)


class ClassifierHooks(FineTuningHooks):
    """GLUE (a task of data_prep/classification/glue_tasks.py) or your own files."""

    run_outputs = ("test_results*.tsv", "submit_results*.tsv", "exit_layers*.tsv", RESULTS_FILE)
    sequence_features = SEQUENCE_FEATURES

    def __init__(self, own: ClassifierSettings):
        self.own = own
        self.task: GlueTask | OwnDataTask | None = None
        if not own.files:
            try:
                self.task = glue_task(own.task_name)
            except GlueDataError as error:
                raise app.UsageError(str(error)) from None

    @property
    def heads(self) -> str | None:
        """The run's kind of classifier: None (ordinary) or its early-exit heads."""
        return self.own.early_exit.heads if self.own.early_exit else None

    def check(self, settings: RunSettings, init_checkpoint: CheckpointSource | None) -> None:
        """Before any work: the kind of classifier --output_dir was trained as, if recorded, is
        this run's (early exit on or off, its heads); --inference_layers is a depth the config
        has, and a prediction or export without a sweep in this run has its stopping rule (the
        patience chosen on dev recorded): found after training and the sweep, they refused the
        prediction or failed the TFLite export."""
        check_heads(settings.output_dir, self.heads)
        early = self.own.early_exit
        if early:
            num_layers = load_config(settings).num_hidden_layers
            if (settings.do_predict or settings.export_dir) and not settings.do_eval:
                early.policy(num_layers, os.path.join(settings.output_dir, RESULTS_FILE))
            else:
                early.check_depth(num_layers)  # (the policy checks it first)

    def records(self, run: FineTuningRun) -> dict[Record, tuple[object, str]]:
        """Its kind of classifier; an early-exit regression's --regression_threshold (not given:
        the recorded one, which its table and chosen patience were made with)."""
        records = {HEADS: (self.heads, "its early-exit flags")}
        early = self.own.early_exit
        if early and self.task.is_regression:
            if early.regression_threshold is None:
                recorded = read_manifest(run.settings.output_dir).record(REGRESSION_THRESHOLD.key)
                early = dataclasses.replace(early, regression_threshold=recorded)
                self.own = dataclasses.replace(self.own, early_exit=early)
            records[REGRESSION_THRESHOLD] = (early.threshold, "--regression_threshold")
        return records

    @property
    def own_files(self) -> bool:
        return bool(self.own.files)

    @property
    def selection_metric(self) -> str:
        return self.task.selection_metric

    def splits(self, settings: RunSettings) -> list[tuple[str, str]]:
        """(task key, split) of every split the run reads: the dev sets with --do_eval, the test
        sets with --do_predict (MNLI: matched and mismatched), train with --do_train; the smaller
        ones first, so that their mistakes stop the run before the long build of train."""
        eval_keys = ([key for _, key in self.task.eval_sets] if self.task is not None
                     else [TASK_NAME])
        name = self.task.name if self.task is not None else TASK_NAME
        return ([(key, "dev") for key in eval_keys if settings.do_eval]
                + [(key, "test") for key in eval_keys if settings.do_predict]
                + ([(name, "train")] if settings.do_train else []))

    def files(self, settings: RunSettings) -> RunFiles:
        """Every TSV split (GLUE: each must exist now) or own file the run reads; the feature
        cache's files."""
        if self.own_files:
            read = declared_inputs(*((f"--{split}_file", path)
                                     for split, path in self.own.files.items()))
            names = [TASK_NAME]
        else:
            read = declared_inputs(("--data_dir", self.own.data_dir), *(
                ("a file of --data_dir",
                 glue_task(key).processor().split_path(self.own.data_dir, split))
                for key, split in self.splits(settings)))
            names = sorted({key for key, _ in self.splits(settings)} | {self.task.name})
        return feature_cache_files(settings, read, [cache_file_pattern(name) for name in names])

    def load_data(self, run: FineTuningRun, stored: LabelSet | None) -> tuple[LabelSet, str]:
        if self.own_files:
            own = self.own
            reader = OwnDataReader(own.columns, own.task_type, own.file_format,
                                   use_spm=run.tokenizer.uses_sentencepiece,
                                   do_lower_case=run.tokenizer.do_lower_case)
            stored_labels = stored.labels if stored is not None else None
            self.task = load_own_data(own.files, reader, own.labels, stored_labels,
                                      own.selection_metric,
                                      os.path.join(run.settings.output_dir, MANIFEST_NAME))
            source = self.task.label_source
        else:
            source = f"--task_name={self.task.name}"
        task_type = "regression" if self.task.is_regression else "classification"
        labels = None if self.task.is_regression else tuple(self.task.labels)
        trained_on = TASK_NAME if self.own_files else self.task.model_task
        return LabelSet(task_type, labels, trained_on), source

    def training_task(self, run: FineTuningRun, label_set: LabelSet) -> ClassifierTask:
        task = self.task
        early = self.own.early_exit
        return ClassifierTask(run.config, task.metric_kinds, task.num_labels, task.is_regression,
                              class_names=task.labels if self.own_files else None,
                              early_exit=self.heads,
                              regression_threshold=(early.threshold if early
                                                    else DEFAULT_REGRESSION_THRESHOLD))

    def parse(self, run: FineTuningRun):
        return functools.partial(parse_glue_example, max_seq_length=run.settings.max_seq_length,
                                 is_regression=self.task.is_regression)

    def features(self, run: FineTuningRun, task_key: str, split: str) -> FeatureFile:
        """The cached feature file of one split (on TPU too: the pipeline pads the last batch)."""
        settings = run.settings
        if self.own_files:
            return self.task.features(split, run.tokenizer, settings.max_seq_length,
                                      settings.cached_dir)
        return cached_glue_features(task_key, self.own.data_dir, split, run.tokenizer,
                                    GlueFeatureSettings(settings.max_seq_length),
                                    settings.cached_dir)

    def prepare_features(self, run: FineTuningRun) -> None:
        for key, split in self.splits(run.settings):
            self.features(run, key, split)

    def training_data(self, run: FineTuningRun) -> TrainingData:
        train_file = self.features(run, self.task.name, "train")
        description = f"{self.task.name} train: {train_file.num_records} examples"
        if self.own_files and not self.task.is_regression:
            description += f" ({self.task.label_counts('train')})"
        return TrainingData(train_file.path, self.parse(run), description)

    def eval_sets(self, run: FineTuningRun) -> list[EvalSet]:
        batch_size = run.settings.eval_batch_size
        dev_files = [(suffix, self.features(run, key, "dev")) for suffix, key in self.task.eval_sets]
        return [EvalSet(suffix, functools.partial(run.eval_dataset, dev.path, self.parse(run),
                                                  batch_size), source=feature_file_source(dev))
                for suffix, dev in dev_files]

    def sweep_policy(self, settings: RunSettings) -> SweepPolicy:
        return SweepPolicy.glue(settings.num_train_steps, max_wait_seconds=0 if settings.do_train
                                else settings.max_eval_wait_secs)

    def after_sweep(self, run: FineTuningRun, best: dict[str, float]) -> None:
        labels = self.task.labels
        if self.own_files and labels and class_key(labels[0], "f1") in best:
            print(f"Dev set, best checkpoint:\n{format_class_report(best, labels)}")
        if self.own.early_exit and run.trainer.chief:
            self.write_early_exit_results(run, best)

    def write_early_exit_results(self, run: FineTuningRun, best: dict[str, float]) -> None:
        """early_exit_results.json: the best checkpoint's early-exit table and the patience
        chosen on dev by the selection metric (the task's first metric where the table has not
        that one, e.g. macro-F1), with the step and fingerprint of the checkpoint it describes."""
        task = run.trainer.task
        key = self.selection_metric
        if layer_key(run.config.num_hidden_layers, key) not in best:
            key = task.metric_keys[0]
        results = results_of(best, key, self.own.early_exit.sweep_tolerance)
        path = run.output_path(RESULTS_FILE)
        if results is None:
            print(f"Early exit: the best checkpoint was evaluated by an earlier sweep whose "
                  f"table eval_results.txt no longer holds; {path} keeps its results.")
            return
        best_checkpoint = read_manifest(run.settings.output_dir).best
        write_results(path, dict(results, best_step=best_checkpoint["step"],
                                 fingerprint=best_checkpoint["fingerprint"]))
        print(f"Early exit: patience {results['patience']} chosen on dev (the best {key} less "
              f"{results['tolerance_points']} points times the share of layers 2..L run) -> "
              f"{path}")

    def exit_policy(self, run: FineTuningRun) -> ExitPolicy:
        """How an early-exit run's predictions and exports stop (``EarlyExitSettings.policy``)."""
        return self.own.early_exit.policy(run.config.num_hidden_layers,
                                          run.output_path(RESULTS_FILE))

    def predict(self, run: FineTuningRun, dev_best: dict[str, float] | None) -> None:
        """test_results.tsv and submit_results.tsv of the best checkpoint, per test set."""
        labels = self.task.labels
        for suffix, key in self.task.eval_sets:
            test_file = self.features(run, key, "test")
            outputs = run.trainer.predict(run.eval_dataset(
                test_file.path, self.parse(run), run.settings.predict_batch_size))
            guids = test_file.metadata["guids"]
            suffix = f"_{suffix}" if suffix else ""
            if self.own.early_exit:
                layers = stopped_layers(outputs["layer_logits"], self.task.is_regression,
                                        self.exit_policy(run))
                outputs = early_exit_predictions(outputs, layers, self.task.is_regression)
                path = write_exit_layers(run.output_path(f"exit_layers{suffix}.tsv"), guids,
                                         outputs)
                print(f"Early exit: {layers.mean():.2f} layers per {key} test example "
                      f"on average -> {path}")
            paths = write_predictions(run.output_path(f"test_results{suffix}.tsv"),
                                      run.output_path(f"submit_results{suffix}.tsv"),
                                      guids, outputs, labels,
                                      header=(labels or ["score"]) if self.own_files else None)
            print(f"Predicted {len(guids)} {key} test examples -> {', '.join(paths)}")

    def export(self, run: FineTuningRun) -> None:
        labels = self.task.labels
        export_classifier(run.trainer.model, run.settings.export_dir,
                          self.own.threshold_to_export,
                          assets={"labels.txt": "\n".join(labels) + "\n"} if labels else None,
                          tokenizer=run.tokenizer, max_seq_length=run.settings.max_seq_length,
                          label_names=labels if self.own_files else None,
                          policy=self.served_policy(run))

    def served_policy(self, run: FineTuningRun) -> ExitPolicy | None:
        """An early-exit run's ``exit_policy``, said; None for an ordinary run."""
        if not self.own.early_exit:
            return None
        policy = self.exit_policy(run)
        print(f"Early exit: the export stops at patience {policy.patience}, at the latest after "
              f"layer {policy.max_layers} (serve_patience takes another patience).")
        return policy

    def export_tflite(self, run: FineTuningRun) -> str:
        settings, early = run.settings, self.own.early_exit
        layers = early.inference_layers if early else None
        if early:
            print(f"Early exit: the TFLite model runs a fixed depth of "
                  f"{layers or run.config.num_hidden_layers} layers (--inference_layers).")
        return export_classifier_tflite(run.trainer.model, settings.tflite_file,
                                        settings.max_seq_length, settings.tflite_quantization,
                                        layers=layers)


def main(argv):
    del argv
    run_fine_tuning(RunSettings.from_flags(), ClassifierHooks(ClassifierSettings.from_flags()))


if __name__ == "__main__":
    error_boundary.run(main, when_stopped=error_boundary.TRAINING_STOPPED)
