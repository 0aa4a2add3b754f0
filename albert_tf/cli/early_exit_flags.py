"""run_classifier's early-exit flags (PABEE; docs/early_exit.md): defined, checked before
TensorFlow loads, and read, here, so that the script's own code has no early-exit branch.

``define()`` registers them (run_classifier calls it beside its other flags); ``check`` refuses
the combinations that mean nothing; ``read`` gives the values a run's early-exit settings take.
TensorFlow-free, as every check before the command's imports.
"""

from __future__ import annotations

from typing import Any, Callable

from absl import app, flags

from albert_tf.cli import flag_definitions

FLAGS = flags.FLAGS

# The trainings of the internal classifiers, kept here (the flag layer imports no task; tested
# equal to albert_tf/tasks/classification/trainings.TRAININGS).
TWO_STAGE, JOINT = "two_stage", "joint"
TRAININGS = (TWO_STAGE, JOINT)
# Stage 2's default weight of self-distillation (tested equal to trainings.DEFAULT_DISTILLATION,
# where the measurement that chose it is said).
DEFAULT_DISTILLATION = 0.5
# Two-stage training's stage-2 flags, by what each sets of stage 2.
STAGE_TWO_ONLY = {"early_exit_learning_rate": "the learning rate",
                  "early_exit_train_step": "the number of training steps",
                  "early_exit_distillation": "the weight of self-distillation"}

# The flags that only an --early_exit run takes.
EARLY_EXIT_ONLY = ("early_exit_heads", "early_exit_training", *STAGE_TWO_ONLY, "patience",
                   "exit_confidence", "inference_layers", "regression_threshold",
                   "patience_tolerance")
# The flags that say how --do_predict and --export_dir stop: give at most one.
STOPPING_FLAGS = ("patience", "exit_confidence", "inference_layers")


def define() -> None:
    """Registers --early_exit and the flags of ``EARLY_EXIT_ONLY``."""
    flags.DEFINE_bool("early_exit", False, "[albert_tf] An internal classifier after every layer; "
                      "inference stops when the prediction stays unchanged --patience times or "
                      "is --exit_confidence sure. See docs/early_exit.md.")
    flags.DEFINE_enum("early_exit_heads", "separate", ["separate", "shared"], "[albert_tf] "
                      "--early_exit: a classifier of its own per layer (separate, the paper's), or "
                      "the ordinary classifier after every layer (shared, no new weights).")
    flags.DEFINE_enum("early_exit_training", None, list(TRAININGS), "[albert_tf] --early_exit: "
                      "two_stage (default with separate heads): the ordinary classifier is trained "
                      "first (or taken from --init_checkpoint), then the internal classifiers "
                      "alone, so the full depth is the ordinary model; joint (PABEE's; the only "
                      "one with shared heads): every layer's classifier and the encoder trained "
                      "together.")
    flags.DEFINE_float("early_exit_learning_rate", None, "[albert_tf] --early_exit_training="
                       "two_stage: stage 2's peak learning rate, of the internal classifiers "
                       "(default: 10 x --learning_rate, which is stage 1's: linear heads on frozen "
                       "features).", lower_bound=0.0)
    flags.DEFINE_integer("early_exit_train_step", None, "[albert_tf] --early_exit_training="
                         "two_stage: stage 2's training steps (default: --train_step, which is "
                         "stage 1's; --warmup_step is stage 2's warmup too).", lower_bound=1)
    flags.DEFINE_float("early_exit_distillation", DEFAULT_DISTILLATION, "[albert_tf] "
                       "--early_exit_training=two_stage: in stage 2, each internal classifier's "
                       "loss is (1 - this) x its cross-entropy on the labels + this x its "
                       "distance to the frozen full depth's answers (self-distillation: the "
                       "patience rule exits where they agree).")
    # A range, not absl's bounds: absl would refuse inf as out of bounds, before the check that
    # names it not finite, as every other float flag's refusal does.
    flag_definitions.check_ranges(early_exit_distillation=flag_definitions.FRACTION)
    flags.DEFINE_integer("patience", None, "[albert_tf] --early_exit: --do_predict and "
                         "--export_dir stop after a layer whose prediction stayed unchanged this "
                         "many times (default: the rule chosen on dev, a patience or a "
                         "confidence, in early_exit_results.json).", lower_bound=1)
    flags.DEFINE_float("exit_confidence", None, "[albert_tf] --early_exit on a classification: "
                       "--do_predict and --export_dir stop after the first layer whose classifier "
                       "gives its class at least this probability, between 0 and 1 (default: the "
                       "rule chosen on dev).")
    flags.DEFINE_integer("inference_layers", None, "[albert_tf] --early_exit: --do_predict, "
                         "--export_dir and --tflite_file run this many layers (fixed depth) "
                         "instead of stopping early.", lower_bound=1)
    flags.DEFINE_float("regression_threshold", 0.1, "[albert_tf] --early_exit on a regression: a "
                       "score that moves by less than this between layers counts as unchanged; "
                       "recorded in --output_dir by its first run, whose value later runs there "
                       "use (another is refused).", lower_bound=0.0)
    flags.DEFINE_float("patience_tolerance", 2.0, "[albert_tf] --early_exit: the stopping rule "
                       "(a patience or a confidence) chosen on dev maximises the selection "
                       "metric (x 100) minus this many points times the fraction of the layers "
                       "after the first that it runs: it loses at most this much to the full "
                       "depth, less the fewer layers it saves (0: the best metric).",
                       lower_bound=0.0)


def training() -> str:
    """--early_exit_training, or its default: two-stage for separate heads, joint for shared ones
    (which have nothing of their own to train in a second stage)."""
    if FLAGS.early_exit_training is not None:
        return FLAGS.early_exit_training
    return JOINT if FLAGS.early_exit_heads == "shared" else TWO_STAGE


def check(is_regression: bool, classification: str) -> None:
    """The early-exit flags need --early_exit, and --regression_threshold a regression (it would
    be ignored on a classification, whose prediction is unchanged when its class is;
    ``classification`` says why the run is one); two-stage training needs classifiers of their
    own (not shared heads), and only it has a stage 2 (``STAGE_TWO_ONLY``); --patience,
    --exit_confidence (a classification's, a probability strictly between 0 and 1) and
    --inference_layers are ways of stopping (give one)."""
    if not FLAGS.early_exit:
        for name in EARLY_EXIT_ONLY:
            if FLAGS[name].present:
                raise app.UsageError(f"--{name} applies to --early_exit models only.")
    if FLAGS["regression_threshold"].present and not is_regression:
        raise app.UsageError("--regression_threshold applies to a regression (--task_type="
                             f"regression on your files, or --task_name=sts-b); {classification}.")
    if FLAGS.early_exit_training == TWO_STAGE and FLAGS.early_exit_heads == "shared":
        raise app.UsageError("--early_exit_training=two_stage trains internal classifiers of their "
                             "own; --early_exit_heads=shared has none (the ordinary classifier "
                             "after every layer): give --early_exit_training=joint.")
    if training() != TWO_STAGE:
        for name, what in STAGE_TWO_ONLY.items():
            if FLAGS[name].present:
                raise app.UsageError(f"--{name} is {what} of two-stage training's stage 2; "
                                     "this run trains jointly (--early_exit_training=joint).")
    given = [f"--{name}" for name in STOPPING_FLAGS if FLAGS[name].value is not None]
    if len(given) > 1:
        raise app.UsageError(f"{' and '.join(given)}: each is a way of stopping (--patience when "
                             "the prediction settles, --exit_confidence when it is sure enough, "
                             "--inference_layers at a fixed depth): give one.")
    if FLAGS.exit_confidence is not None:
        if is_regression:
            raise app.UsageError("--exit_confidence is a class's probability, and this run is "
                                 "a regression (a score, no classes): give --patience.")
        if not 0 < FLAGS.exit_confidence < 1:
            raise app.UsageError(f"--exit_confidence={FLAGS.exit_confidence}: expected a "
                                 "probability strictly between 0 and 1.")


def read(settings_type: Callable[..., Any]) -> Any:
    """``settings_type`` (the early-exit settings, EarlyExitSettings, which loads TensorFlow) of the
    flags, or None without --early_exit. A threshold or tolerance not given is None (the recorded
    one, or the default, applies). Stage 2's learning rate and steps are the run's own
    (task_specs/early_exit.classifier_run)."""
    if not FLAGS.early_exit:
        return None
    return settings_type(
        FLAGS.early_exit_heads, training(), patience=FLAGS.patience,
        confidence=FLAGS.exit_confidence,
        inference_layers=FLAGS.inference_layers,
        regression_threshold=(FLAGS.regression_threshold if FLAGS["regression_threshold"].present
                              else None),
        tolerance_points=(FLAGS.patience_tolerance if FLAGS["patience_tolerance"].present
                          else None),
        distillation=FLAGS.early_exit_distillation)
