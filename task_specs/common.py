"""What several specs share: a feature file of data_prep's cache as the driver's
``SplitFeatures``; the GLUE-style sweep policy."""

from __future__ import annotations

from typing import Any

from albert_tf.cli.settings import RunSettings
from albert_tf.cli.task_spec import SplitFeatures
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy
from albert_tf.training.input_pipeline import ParseFn
from data_prep.common.feature_cache import FeatureFile, feature_file_source


def split_features(feature_file: FeatureFile, parse: ParseFn, description: str,
                   context: Any = None) -> SplitFeatures:
    """``feature_file`` parsed by ``parse``, named by what it was built from (its inputs and cache
    key: the sweep's record of its evaluation data)."""
    return SplitFeatures(feature_file.path, parse, description, feature_file.metadata,
                         feature_file_source(feature_file), context)


def glue_sweep_policy(settings: RunSettings) -> SweepPolicy:
    """GLUE's sweep (also NER's): a separate evaluation job waits for the checkpoint at
    --train_step; beside training, every checkpoint is there when it starts."""
    return SweepPolicy.glue(settings.num_train_steps, max_wait_seconds=0 if settings.do_train
                            else settings.max_eval_wait_secs)
