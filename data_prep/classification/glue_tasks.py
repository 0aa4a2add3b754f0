"""Everything albert_tf knows about each GLUE task, in one table: ``GLUE_TASKS``.

Per task (lower-cased key): the processor that reads its files, the metrics it reports, the metric
the checkpoint sweep keeps the best checkpoint by, the dev/test sets it evaluates and predicts, and
the paper's fine-tuning recipe.

Keys: cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, rte, wnli (the reference's) and ax, GLUE's
diagnostic set, predicted with an MNLI model (the reference defines its processor but never
registers it). Metrics and selection follow the reference (CoLA: matthew_corr; STS-B: pearson;
others: eval_accuracy) plus the leaderboard's F1 for MRPC and QQP and Spearman for STS-B. ``mnli``
evaluates and predicts both the matched and the mismatched sets (result keys and files of the latter
get the suffix "mismatched"); ``mismnli`` only the mismatched ones.
"""

from __future__ import annotations

import dataclasses

from albert_tf.tasks.classification.metrics import GLUE_METRIC_KEYS
from data_prep.classification.processors import (AxProcessor, ColaProcessor, GlueDataError,
                                                 GlueProcessor, MisMnliProcessor, MnliProcessor,
                                                 MrpcProcessor, QnliProcessor, QqpProcessor,
                                                 RteProcessor, Sst2Processor, StsbProcessor,
                                                 WnliProcessor)


@dataclasses.dataclass(frozen=True)
class FineTuningRecipe:
    """The paper's fine-tuning hyper-parameters for one task (the reference's run_glue.sh).

    Values are run_classifier flags; all tasks also use --max_seq_length=512 (WNLI: 128),
    --optimizer=adamw and --do_lower_case. ``encoder_dropout`` is the paper's hidden dropout, which can
    only be set in the config JSON (``hidden_dropout_prob``; the released v2 configs use 0).
    """

    warmup_step: int
    learning_rate: float
    train_step: int
    save_checkpoints_steps: int
    train_batch_size: int
    max_seq_length: int = 512
    encoder_dropout: float = 0.0
    source: str = "reference run_glue.sh"

    def flags(self) -> list[str]:
        """The run_classifier command-line flags of this recipe."""
        return [f"--warmup_step={self.warmup_step}", f"--learning_rate={self.learning_rate:g}",
                f"--train_step={self.train_step}",
                f"--save_checkpoints_steps={self.save_checkpoints_steps}",
                f"--train_batch_size={self.train_batch_size}", f"--max_seq_length={self.max_seq_length}",
                "--optimizer=adamw", "--do_lower_case"]


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task.

    name: the lower-case task key ("mrpc").
    processor: the class reading its TSV files (labels and column layout).
    metric_kinds: what ``glue_metrics`` (albert_tf/tasks/classification/metrics.py) computes (kinds
      of ``GLUE_METRIC_KEYS``).
    selection_metric: the result key the checkpoint sweep maximizes (one of the kinds' keys).
    eval_sets: (result-key / file-name suffix, task key) per evaluated and predicted set; empty in
      the constructor means the task itself with no suffix, (("", name),).
    recipe: the paper's hyper-parameters; None for a predict-only task (ax).
    """

    name: str
    processor: type[GlueProcessor]
    metric_kinds: tuple[str, ...] = ("accuracy",)
    selection_metric: str = GLUE_METRIC_KEYS["accuracy"]
    eval_sets: tuple[tuple[str, str], ...] = ()
    recipe: FineTuningRecipe | None = None

    def __post_init__(self):
        if not self.eval_sets:
            object.__setattr__(self, "eval_sets", (("", self.name),))
        unknown = [kind for kind in self.metric_kinds if kind not in GLUE_METRIC_KEYS]
        if unknown:
            raise ValueError(f"GLUE task {self.name!r}: unknown metric kinds {unknown}; expected some "
                             f"of {list(GLUE_METRIC_KEYS)}")
        keys = [GLUE_METRIC_KEYS[kind] for kind in self.metric_kinds]
        if self.selection_metric not in keys:
            raise ValueError(f"GLUE task {self.name!r}: selection_metric {self.selection_metric!r} is "
                             f"not one of its metrics {keys}")

    @property
    def labels(self) -> list[str] | None:
        """Label names in id order, or None for regression (STS-B)."""
        return self.processor.get_labels()

    @property
    def num_labels(self) -> int:
        """Size of the classifier output: the number of labels, 1 for regression."""
        return self.processor.num_labels()

    @property
    def is_regression(self) -> bool:
        """One real-valued output and float label ids (STS-B)."""
        return self.processor.labels is None


_MNLI_RECIPE = FineTuningRecipe(1000, 3e-5, 10000, 100, 128)

GLUE_TASKS: dict[str, GlueTask] = {task.name: task for task in (
    GlueTask("cola", ColaProcessor, metric_kinds=("accuracy", "mcc"),
             selection_metric=GLUE_METRIC_KEYS["mcc"],
             recipe=FineTuningRecipe(320, 1e-5, 5336, 100, 16)),
    GlueTask("sst-2", Sst2Processor, recipe=FineTuningRecipe(1256, 1e-5, 20935, 100, 32)),
    GlueTask("mrpc", MrpcProcessor, metric_kinds=("accuracy", "f1"),
             recipe=FineTuningRecipe(200, 2e-5, 800, 100, 32)),
    GlueTask("sts-b", StsbProcessor, metric_kinds=("pearson", "spearman", "mse"),
             selection_metric=GLUE_METRIC_KEYS["pearson"],
             recipe=FineTuningRecipe(214, 2e-5, 3598, 100, 16)),
    GlueTask("qqp", QqpProcessor, metric_kinds=("accuracy", "f1"),
             recipe=FineTuningRecipe(1000, 5e-5, 14000, 100, 128, encoder_dropout=0.1)),
    GlueTask("mnli", MnliProcessor, eval_sets=(("", "mnli"), ("mismatched", "mismnli")),
             recipe=_MNLI_RECIPE),
    GlueTask("mismnli", MisMnliProcessor, recipe=_MNLI_RECIPE),
    GlueTask("qnli", QnliProcessor, recipe=FineTuningRecipe(1986, 1e-5, 33112, 200, 32)),
    GlueTask("rte", RteProcessor,
             recipe=FineTuningRecipe(200, 3e-5, 800, 100, 32, encoder_dropout=0.1)),
    # Not in run_glue.sh: the paper's table (S=128); the checkpoint cadence is our choice.
    GlueTask("wnli", WnliProcessor,
             recipe=FineTuningRecipe(250, 2e-5, 2000, 100, 16, max_seq_length=128,
                                     encoder_dropout=0.1, source="ALBERT paper (not in run_glue.sh)")),
    GlueTask("ax", AxProcessor),
)}


def glue_task(name: str) -> GlueTask:
    """The task called ``name`` (case-insensitive); GlueDataError listing the known tasks otherwise."""
    key = (name or "").lower()
    if key not in GLUE_TASKS:
        raise GlueDataError(f"unknown GLUE task_name {name!r}; expected one of {sorted(GLUE_TASKS)}")
    return GLUE_TASKS[key]


def get_processor(task_name: str, use_spm: bool = True, do_lower_case: bool = True) -> GlueProcessor:
    """A processor for ``task_name`` normalizing text as the tokenizer expects (SentencePiece mode and
    lowercasing); GlueDataError for an unknown task."""
    return glue_task(task_name).processor(use_spm=use_spm, do_lower_case=do_lower_case)
