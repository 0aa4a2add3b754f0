"""The two trainings of an early-exit classifier's internal classifiers (``--early_exit_training``;
its default: albert_tf/cli/early_exit_flags.py) and stage 2's learning rate, TensorFlow-free. What
each does: albert_tf/tasks/classification/two_stage.py."""

from __future__ import annotations

TWO_STAGE, JOINT = "two_stage", "joint"
TRAININGS = (TWO_STAGE, JOINT)
# Stage 2's default peak learning rate, in multiples of --learning_rate: its internal classifiers
# are linear heads on frozen features, which fine-tuning's rate leaves far from trained (SST-2,
# 12 layers from random weights, 1e-4: layer 1's classifier 0.549 on dev; 1e-3: 0.760).
HEAD_LEARNING_RATE_FACTOR = 10.0


def stage_two_learning_rate(learning_rate: float, given: float | None) -> float:
    """Stage 2's peak learning rate: ``given`` (--early_exit_learning_rate), else
    ``HEAD_LEARNING_RATE_FACTOR`` times ``learning_rate`` (--learning_rate, stage 1's)."""
    return given if given is not None else HEAD_LEARNING_RATE_FACTOR * learning_rate
