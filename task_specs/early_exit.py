"""Early exit (PABEE; docs/early_exit.md): the classification spec with an internal classifier after
every layer. Its own members: the heads (recorded; an early-exit regression's threshold too), the
sweep's per-layer / per-rule table and chosen rule, a patience or a confidence
(early_exit_results.json), predictions that stop by it (exit_layers.tsv), and exports that stop
the same way (TFLite: a fixed depth). Two-stage training (the default with separate heads;
albert_tf/tasks/classification/two_stage.py): ``stage_one`` trains the ordinary classifier
first where --init_checkpoint holds none (from ``read_data``, once the run's checks passed),
then the run trains the internal classifiers alone; its sweep keeps the last checkpoint (the
full depth is the same at every one)."""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Callable

from albert_tf.checkpoints.run_directory import trained_checkpoint
from albert_tf.checkpoints.warm_start import CheckpointSource, resolve_checkpoint_source
from albert_tf.cli.driver import run_task
from albert_tf.cli.settings import RunSettings
from albert_tf.cli.task_spec import RunStart, TaskData, TaskRun, TaskSpec
from albert_tf.errors.user_error import UserError
from albert_tf.files.run_manifest import read_manifest, require_facts
from albert_tf.tasks.classification.early_exit import (REGRESSION_THRESHOLD, RESULTS_FILE,
                                                       EarlyExitSettings, ExitPolicy, chosen_rule,
                                                       layer_key, price_line, results_of,
                                                       stopped_layers, write_results)
from albert_tf.tasks.classification.task import early_exit_predictions, write_exit_layers
from albert_tf.tasks.classification.trainings import TWO_STAGE, stage_two_learning_rate
from albert_tf.tasks.classification.two_stage import (ORDINARY_DIR, TRAINING, check_training,
                                                      ordinary_classifier)
from task_specs import classification
from task_specs.classification import ClassifierSettings


def early_exit_spec(settings: RunSettings, own: ClassifierSettings) -> TaskSpec:
    """``classification_spec`` of ``own`` with its early-exit members (``own.early_exit`` set)."""
    ordinary = classification.classification_spec(settings, own)
    early = own.early_exit
    two_stage = early.training == TWO_STAGE
    return dataclasses.replace(
        ordinary,
        read_data=functools.partial(read_early_exit_data, own, early),
        training=dataclasses.replace(ordinary.training, task=functools.partial(
            classification.classifier_task, early_exit=early.heads, internal_only=two_stage,
            distillation=early.distillation if two_stage else 0.0)),
        # Two-stage: every checkpoint has the ordinary full depth, so the sweep keeps the last
        # one, whose internal classifiers trained longest (the first of equal metrics would win).
        sweep=dataclasses.replace(ordinary.sweep, report=report,
                                  selection_metric=("global_step" if two_stage
                                                    else ordinary.sweep.selection_metric)),
        outputs=dataclasses.replace(
            ordinary.outputs,
            predict=functools.partial(classification.predict, exit_layers=exit_layers),
            export=functools.partial(classification.export, threshold=own.threshold_to_export,
                                     policy=served_policy),
            export_tflite=functools.partial(fixed_depth_export, classification.export_tflite,
                                            "TFLite", layers=early.inference_layers),
            export_onnx=functools.partial(fixed_depth_export, classification.export_onnx, "ONNX",
                                          layers=early.inference_layers)))


def read_early_exit_data(own: ClassifierSettings, early: EarlyExitSettings,
                         start: RunStart) -> TaskData:
    """The classification's data, then before any long work: the directory's training is this
    run's, --inference_layers is a depth the config has, and a prediction or export without a
    sweep in this run has its stopping rule (the rule chosen on dev recorded); an early-exit
    regression's --regression_threshold (not given: the recorded one, which its table and chosen
    rule were made with) is recorded. Then a two-stage --do_train gets its stage 1
    (``stage_one``)."""
    data = classification.read_classifier_data(own, start, heads=early.heads)
    settings = start.settings
    num_layers = start.config.num_hidden_layers
    check_training(start.manifest, early.training)
    if early.training == TWO_STAGE and num_layers < 2:
        raise UserError("--early_exit_training=two_stage trains the internal classifiers of "
                        "layers 1..L-1: the model has 1 layer (num_hidden_layers of "
                        "--albert_config_file).")
    if (settings.do_predict or settings.export_dir) and not settings.do_eval:
        early.policy(num_layers, _results_path(settings))
    else:
        early.check_depth(num_layers)
    facts = {**data.facts, TRAINING: (early.training, "--early_exit_training")}
    if data.content.task.is_regression:
        if early.regression_threshold is None:
            early = dataclasses.replace(
                early, regression_threshold=start.manifest.fact(REGRESSION_THRESHOLD.key))
        facts[REGRESSION_THRESHOLD] = (early.threshold, "--regression_threshold")
    init = None
    if early.training == TWO_STAGE and settings.do_train:
        # The driver checks these after read_data; stage 1's long work needs them checked first.
        require_facts(start.manifest, dataclasses.replace(data, facts=facts).all_facts())
        init = stage_one(start, own)
    return dataclasses.replace(data, facts=facts, init_checkpoint=init,
                               content=dataclasses.replace(data.content, early_exit=early))


def _results_path(settings: RunSettings) -> str:
    return os.path.join(settings.output_dir, RESULTS_FILE)


def exit_policy(run: TaskRun) -> ExitPolicy:
    """How the run's predictions and exports stop (``EarlyExitSettings.policy``)."""
    return run.data.content.early_exit.policy(run.config.num_hidden_layers,
                                              run.output_path(RESULTS_FILE))


def report(run: TaskRun, best: dict[str, float]) -> None:
    """The ordinary report, then early_exit_results.json: the best checkpoint's early-exit table
    and the rule chosen on dev by the selection metric (the task's first metric where the
    table has not that one, e.g. macro-F1), with the step and fingerprint of the checkpoint it
    describes."""
    classification.class_report(run, best)
    if not run.trainer.chief:
        return
    task = run.trainer.task
    key = run.data.content.task.selection_metric
    if layer_key(run.config.num_hidden_layers, key) not in best:
        key = task.metric_keys[0]
    early = run.data.content.early_exit
    results = results_of(best, key, early.sweep_tolerance,
                         ordinary_is_full_depth=early.training == TWO_STAGE)
    path = run.output_path(RESULTS_FILE)
    if results is None:
        print(f"Early exit: the best checkpoint was evaluated by an earlier sweep whose table "
              f"eval_results.txt no longer holds; {path} keeps its results.")
        return
    best_checkpoint = read_manifest(run.settings.output_dir).best
    write_results(path, dict(results, best_step=best_checkpoint["step"],
                             fingerprint=best_checkpoint["fingerprint"]))
    print(f"Early exit: {chosen_rule(results)} chosen on dev (the best {key} less "
          f"{results['tolerance_points']} points times the share of layers 2..L run): "
          f"{price_line(results)} -> {path}")


def exit_layers(run: TaskRun, outputs: dict, suffix: str, key: str, guids: list) -> dict:
    """Each test example's exit layer by the run's policy, written to exit_layers<suffix>.tsv;
    returns the outputs of those layers."""
    is_regression = run.data.content.task.is_regression
    layers = stopped_layers(outputs["layer_logits"], is_regression, exit_policy(run))
    outputs = early_exit_predictions(outputs, layers, is_regression)
    path = write_exit_layers(run.output_path(f"exit_layers{suffix}.tsv"), guids, outputs)
    print(f"Early exit: {layers.mean():.2f} layers per {key} test example on average -> {path}")
    return outputs


def served_policy(run: TaskRun) -> ExitPolicy:
    """The export's stopping rule, said."""
    policy = exit_policy(run)
    print(f"Early exit: the export stops {policy.describe()} (serve_patience stops by the "
          "patience of the request instead).")
    return policy


def fixed_depth_export(export: Callable[..., str], kind: str, run: TaskRun,
                       layers: int | None) -> str:
    """A one-file export of the best checkpoint (``kind``: TFLite, ONNX) at the fixed depth
    ``layers`` (None: every layer); it does not stop early."""
    print(f"Early exit: the {kind} model runs a fixed depth of "
          f"{layers or run.config.num_hidden_layers} layers (--inference_layers).")
    return export(run, layers=layers)


def stage_one(start: RunStart, own: ClassifierSettings) -> CheckpointSource | None:
    """Stage 1 of a two-stage --do_train; returns where stage 2 starts (None: --init_checkpoint).
    Nothing when stage 2 has a checkpoint (it resumes) or --init_checkpoint holds an ordinary
    classifier (``ordinary_classifier``: an ordinary run's directory or checkpoint, read and never
    written); else the ordinary run of the same flags (without --early_exit, predictions or
    exports; --learning_rate and --train_step, where the run's own are stage 2's) in
    ``<output_dir>/ordinary``,
    whose weights are those of the same command run
    without --early_exit, bit for bit; stage 2 starts from its best checkpoint (else its last).
    A rerun finds it finished, or resumes it."""
    settings = start.settings
    if trained_checkpoint(start.manifest) is not None:
        return None
    if ordinary_classifier(settings.init_checkpoint):
        print(f"Two-stage training: the ordinary classifier of --init_checkpoint="
              f"{settings.init_checkpoint} is stage 1; stage 2 trains the internal classifiers.")
        return None
    stage = dataclasses.replace(
        settings, output_dir=os.path.join(settings.output_dir, ORDINARY_DIR), do_predict=False,
        export_dir=None, tflite_file=None, onnx_file=None,
        learning_rate=own.early_exit.ordinary_learning_rate,
        num_train_steps=own.early_exit.ordinary_train_steps)
    print(f"Two-stage training, stage 1: the ordinary classifier in {stage.output_dir} "
          f"(--learning_rate={stage.learning_rate}, --train_step={stage.num_train_steps})")
    run_task(stage, classification.classification_spec(
        stage, dataclasses.replace(own, early_exit=None)))
    print(f"Two-stage training, stage 2: the internal classifiers in {settings.output_dir} "
          f"(learning rate {settings.learning_rate}, {settings.num_train_steps} steps, "
          f"self-distillation weight {own.early_exit.distillation}), the encoder and the "
          f"ordinary classifier of {stage.output_dir} frozen")
    return resolve_checkpoint_source(stage.output_dir)


def classifier_run(settings: RunSettings, own: ClassifierSettings, stage_two_rate: float | None,
                   stage_two_steps: int | None) -> tuple[RunSettings, TaskSpec]:
    """run_classifier's run, its settings and spec: the classification spec, or its early-exit
    variant where ``own.early_exit`` is set. A two-stage one trains its stage 2 at
    ``stage_two_rate`` (--early_exit_learning_rate; None: ``stage_two_learning_rate``'s default)
    for ``stage_two_steps`` (--early_exit_train_step; None: --train_step), and its stage 1 at
    --learning_rate for --train_step (which ``own.early_exit`` keeps)."""
    if own.early_exit is None:
        return settings, classification.classification_spec(settings, own)
    if own.early_exit.training == TWO_STAGE:
        own = dataclasses.replace(own, early_exit=dataclasses.replace(
            own.early_exit, ordinary_learning_rate=settings.learning_rate,
            ordinary_train_steps=settings.num_train_steps))
        settings = dataclasses.replace(
            settings, learning_rate=stage_two_learning_rate(settings.learning_rate,
                                                            stage_two_rate),
            num_train_steps=(settings.num_train_steps if stage_two_steps is None
                             else stage_two_steps))
    return settings, early_exit_spec(settings, own)
