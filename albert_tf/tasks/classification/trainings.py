"""The two trainings of an early-exit classifier's internal classifiers (``--early_exit_training``;
its default: albert_tf/cli/early_exit_flags.py) and stage 2's learning rate and
self-distillation, TensorFlow-free. What each does: albert_tf/tasks/classification/two_stage.py."""

from __future__ import annotations

TWO_STAGE, JOINT = "two_stage", "joint"
TRAININGS = (TWO_STAGE, JOINT)
# Stage 2's default peak learning rate, in multiples of --learning_rate: its internal classifiers
# are linear heads on frozen features, which fine-tuning's rate leaves far from trained (SST-2,
# 12 layers from random weights, 1e-4: layer 1's classifier 0.549 on dev; 1e-3: 0.760).
HEAD_LEARNING_RATE_FACTOR = 10.0
# Stage 2's default weight of the full depth's answers in each internal classifier's loss
# (--early_exit_distillation; albert_tf/tasks/classification/distillation.py): half the labels',
# half the full depth's. Measured (docs/early_exit.md) on the benchmark's SST-2 and five sources,
# weights 0, 0.5 and 1: 1 makes the internal classifiers agree with the full depth most often,
# but only 0.5 met the target on a set (five sources: -0.37 points at 3.30 layers, 1.56x; 3 seeds
# on frozen features: within 0.5 points at 3.7-5.0 layers, where 1 ran 5.8-7.4 and 0 ran 7.5-7.6
# in two seeds of three); on SST-2 no weight met it.
DEFAULT_DISTILLATION = 0.5


def stage_two_learning_rate(learning_rate: float, given: float | None) -> float:
    """Stage 2's peak learning rate: ``given`` (--early_exit_learning_rate), else
    ``HEAD_LEARNING_RATE_FACTOR`` times ``learning_rate`` (--learning_rate, stage 1's)."""
    return given if given is not None else HEAD_LEARNING_RATE_FACTOR * learning_rate
