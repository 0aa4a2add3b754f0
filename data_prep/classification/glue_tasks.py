"""Everything albert_tf knows about each GLUE task, in one table: ``GLUE_TASKS``.

Per task (lower-cased key): the processor that reads its files, the metrics it reports, the metric
the checkpoint sweep keeps the best checkpoint by, the dev/test sets it evaluates and predicts, and
the paper's fine-tuning recipe (in albert_tf/tasks/classification/recipes.py).

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
from albert_tf.tasks.classification.recipes import GLUE_RECIPES, unknown_task_message
from albert_tf.training.recipe import Recipe
from data_prep.classification.processors import (AxProcessor, ColaProcessor, GlueDataError,
                                                 GlueProcessor, MisMnliProcessor, MnliProcessor,
                                                 MrpcProcessor, QnliProcessor, QqpProcessor,
                                                 RteProcessor, Sst2Processor, StsbProcessor,
                                                 WnliProcessor)


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
    """

    name: str
    processor: type[GlueProcessor]
    metric_kinds: tuple[str, ...] = ("accuracy",)
    selection_metric: str = GLUE_METRIC_KEYS["accuracy"]
    eval_sets: tuple[tuple[str, str], ...] = ()

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
    def recipe(self) -> Recipe | None:
        """The paper's hyper-parameters (albert_tf/tasks/classification/recipes.py); None for a
        predict-only task (ax)."""
        return GLUE_RECIPES.get(self.name)

    @property
    def model_task(self) -> str:
        """The task whose training data the checkpoints this task evaluates or predicts with are
        trained on: MNLI's for mnli, mismnli (the same train file) and ax (predicted with an MNLI
        model), the task itself otherwise. Recorded in the label set of an output directory's run
        manifest, so that a run of another task there is refused even when the labels are the same
        (SST-2 and WNLI: 0 and 1)."""
        return SHARED_MODELS.get(self.name, self.name)

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


# Tasks that use another task's model (see GlueTask.model_task).
SHARED_MODELS = {"mismnli": "mnli", "ax": "mnli"}

GLUE_TASKS: dict[str, GlueTask] = {task.name: task for task in (
    GlueTask("cola", ColaProcessor, metric_kinds=("accuracy", "mcc"),
             selection_metric=GLUE_METRIC_KEYS["mcc"]),
    GlueTask("sst-2", Sst2Processor),
    GlueTask("mrpc", MrpcProcessor, metric_kinds=("accuracy", "f1")),
    GlueTask("sts-b", StsbProcessor, metric_kinds=("pearson", "spearman", "mse"),
             selection_metric=GLUE_METRIC_KEYS["pearson"]),
    GlueTask("qqp", QqpProcessor, metric_kinds=("accuracy", "f1")),
    GlueTask("mnli", MnliProcessor, eval_sets=(("", "mnli"), ("mismatched", "mismnli"))),
    GlueTask("mismnli", MisMnliProcessor),
    GlueTask("qnli", QnliProcessor),
    GlueTask("rte", RteProcessor),
    GlueTask("wnli", WnliProcessor),
    GlueTask("ax", AxProcessor),
)}


def glue_task(name: str) -> GlueTask:
    """The task called ``name`` (case-insensitive); GlueDataError listing the known tasks otherwise."""
    key = (name or "").lower()
    if key not in GLUE_TASKS:
        raise GlueDataError(unknown_task_message(name))
    return GLUE_TASKS[key]


def get_processor(task_name: str, use_spm: bool = True, do_lower_case: bool = True) -> GlueProcessor:
    """A processor for ``task_name`` normalizing text as the tokenizer expects (SentencePiece mode and
    lowercasing); GlueDataError for an unknown task."""
    return glue_task(task_name).processor(use_spm=use_spm, do_lower_case=do_lower_case)
