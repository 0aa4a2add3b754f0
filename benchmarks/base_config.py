"""The ``--albert_config_file`` flag of the benchmarks, defined once: albert base v2 unless told
otherwise, the model users fine-tune and serve."""

from __future__ import annotations

import os

from absl import flags

BASE_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "configs", "albert_base_v2.json")


def define_config_flag(help_text: str = "ALBERT config JSON.") -> None:
    """Defines ``--albert_config_file``, defaulting to ``BASE_CONFIG``."""
    flags.DEFINE_string("albert_config_file", BASE_CONFIG, help_text)
