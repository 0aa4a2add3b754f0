"""Fine-tuning on the user's own files: what run_classifier.py needs from them, as it needs it
from a ``GlueTask`` (name, labels, metrics, selection metric, eval sets) plus the feature files.

``load_own_data`` reads and checks every given file before any work: the columns are resolved
from the first file (train, else dev, else test); the label set is ``--labels``, else the
training file's labels (sorted), else the one the output directory's run manifest records (a run
without --train_file); it must equal the one recorded there, if any (the driver checks it:
albert_tf/checkpoints/label_set.py); then the dev and test labels must belong to it.
Metrics: classification: ``eval_accuracy`` and ``class_report`` (macro-F1, per-class precision,
recall, F1, support, predicted count), the best checkpoint chosen by accuracy (the reference's
GLUE choice) or macro-F1; regression: Pearson (the selection metric, as STS-B), Spearman, MSE.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Sequence

from albert_tf.files.text_lines import tab_or_line_break
from albert_tf.tasks.classification.metrics import GLUE_METRIC_KEYS, MACRO_F1_KEY
from data_prep.classification.features import (FEATURES_VERSION, GlueTokenizer,
                                               check_max_seq_length, write_example_records)
from data_prep.classification.own_data import (Columns, OwnDataError, OwnDataReader, file_format,
                                               integer_class, label_set)
from data_prep.classification.processors import InputExample
from data_prep.common.feature_cache import FeatureFile, RecordSink, cached_feature_file
from data_prep.common.user_errors import SettingsError

TASK_NAME = "own_data"
SELECTION_METRICS = {"accuracy": GLUE_METRIC_KEYS["accuracy"], "macro_f1": MACRO_F1_KEY}


@dataclasses.dataclass(frozen=True)
class OwnDataFeatureSettings:
    """What determines the records of one of the user's files besides its bytes and the tokenizer:
    what ``OwnDataTask.features`` converts with and, as ``dataclasses.asdict``, its cache key's
    settings.

    max_seq_length: S. format: the file's format (csv, tsv, jsonl). columns: the columns read.
    labels: the label set (label id = index), None for a regression. task_type: classification or
    regression. use_spm, do_lower_case: how the texts were normalized. features_version: GLUE's
    ``FEATURES_VERSION`` (the same records).
    """

    max_seq_length: int
    format: str
    columns: Columns
    labels: tuple[str, ...] | None
    task_type: str
    use_spm: bool
    do_lower_case: bool
    features_version: int = dataclasses.field(default=FEATURES_VERSION, init=False)

    def __post_init__(self):
        check_max_seq_length(self.max_seq_length)


@dataclasses.dataclass(frozen=True)
class OwnDataTask:
    """The user's task: files[split] = path, examples[split] (read and checked), the label set
    (None for a regression) and the result key the checkpoint sweep maximizes."""

    files: dict[str, str]
    examples: dict[str, list[InputExample]]
    reader: OwnDataReader
    labels: list[str] | None
    selection_metric: str
    label_source: str
    name: str = TASK_NAME
    eval_sets: tuple[tuple[str, str], ...] = (("", TASK_NAME),)

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def metric_kinds(self) -> tuple[str, ...]:
        return ("pearson", "spearman", "mse") if self.is_regression else ("accuracy",)

    def split_path(self, split: str) -> str:
        return self.files[split]

    def feature_settings(self, split: str, max_seq_length: int) -> OwnDataFeatureSettings:
        """The settings of ``split``'s records: ``max_seq_length`` and how the file was read."""
        reader = self.reader
        return OwnDataFeatureSettings(
            max_seq_length=max_seq_length,
            format=file_format(self.files[split], reader.file_format), columns=reader.columns,
            labels=None if self.labels is None else tuple(self.labels),
            task_type=reader.task_type, use_spm=reader.use_spm, do_lower_case=reader.do_lower_case)

    def features(self, split: str, tokenizer: GlueTokenizer, max_seq_length: int,
                 cache_dir: str) -> FeatureFile:
        """The feature file of ``split``, reused from ``cache_dir`` when its file and its
        ``feature_settings`` (columns, labels, ...) are unchanged (the feature cache's key)."""
        settings = self.feature_settings(split, max_seq_length)

        def build(sink: RecordSink) -> dict:
            return write_example_records(sink, self.examples[split], settings.labels,
                                         settings.max_seq_length, tokenizer)

        return cached_feature_file(cache_dir, self.name, split, settings, tokenizer.fingerprint,
                                   [self.files[split]], build)

    def label_counts(self, split: str) -> str:
        """"<label> <count> (<percent>%), ..." of a split's labels (classification)."""
        counts = collections.Counter(example.label for example in self.examples[split])
        total = sum(counts.values())
        return ", ".join(f"{label} {counts[label]} ({100 * counts[label] / total:.0f}%)"
                         for label in self.labels)


def load_own_data(files: dict[str, str], reader: OwnDataReader,
                  given_labels: Sequence[str] | None = None,
                  stored_labels: Sequence[str] | None = None, selection: str = "accuracy",
                  label_file: str = "run_manifest.json") -> OwnDataTask:
    """Reads and checks every file of ``files`` ({"train"|"dev"|"test": path}); see the module doc.

    ``stored_labels``: the labels recorded by an earlier run in the output directory, in
    ``label_file`` (its run manifest; None when it records none). Raises OwnDataError (a file's mistake; a single
    class) or SettingsError, a ValueError (no label set can be found, a selection metric that does
    not fit the task type, --labels that are not distinct).
    """
    if selection not in SELECTION_METRICS:
        raise SettingsError(f"unknown selection metric {selection!r}; expected one of "
                            f"{sorted(SELECTION_METRICS)}")
    if reader.is_regression and selection != "accuracy":
        raise SettingsError(f"--selection_metric={selection}: a regression's best checkpoint is "
                            "chosen by Pearson's r")
    if reader.is_regression and given_labels:
        raise SettingsError("--labels names the classes of a classification; a regression has "
                            "none")
    files = {split: files[split] for split in ("train", "dev", "test") if files.get(split)}
    for path in files.values():
        file_format(path, reader.file_format)
    reader = reader.resolve_columns(next(iter(files.values())))
    examples: dict[str, list[InputExample]] = {}
    labels, source = None, "regression"
    if not reader.is_regression:
        if given_labels:
            labels, source = _given_label_set(given_labels), "--labels"
            reader = reader.with_labels(labels, source)
        if "train" in files:
            examples["train"] = reader.read(files["train"], "train")
            if labels is None:
                labels = label_set(examples["train"])
                source = f"the labels of {files['train']}"
        if labels is None:
            if stored_labels is None:
                raise SettingsError(f"no label set: {label_file} records none (a run with "
                                    "--do_train and --train_file records it); give --train_file "
                                    "or --labels")
            labels, source = list(stored_labels), label_file
        if len(labels) < 2:
            raise OwnDataError(f"{source}: one class only ({labels}); a classifier needs at least "
                               "two labels")
        reader = reader.with_labels(labels, source)
    for split, path in files.items():
        if split not in examples:
            examples[split] = reader.read(path, split)
    selection_metric = (GLUE_METRIC_KEYS["pearson"] if reader.is_regression
                        else SELECTION_METRICS[selection])
    return OwnDataTask(files, examples, reader, labels, selection_metric, source)


def _given_label_set(given: Sequence[str]) -> list[str]:
    labels = [label.strip() for label in given]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates or "" in labels:
        raise SettingsError(f"--labels={','.join(given)}: expected distinct non-empty class names")
    integers = [integer_class(label) for label in labels]
    for label in labels:
        breaking = tab_or_line_break(label)
        if breaking:
            raise SettingsError(f"--labels: {label!r} holds {breaking}; a label is a cell of "
                                "submit_results.tsv and a line of labels.txt")
        if integer_class(label) is not None and integers.count(integer_class(label)) > 1:
            raise SettingsError(f"--labels={','.join(given)}: {label!r} and another label are one "
                                "integer written two ways; write each class one way")
    return labels
