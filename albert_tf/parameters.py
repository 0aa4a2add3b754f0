"""Parameter counts of a model, split the way the paper reports them."""

from __future__ import annotations

import math

import keras

from albert_tf.checkpoints import tf1_variable_map

# (group label, reference-name prefix); first match wins, anything else is a task head.
_GROUPS = (
    ("embeddings", "bert/embeddings/"),
    ("embedding projection (E->H)", "bert/encoder/embedding_hidden_mapping_in/"),
    ("transformer", "bert/encoder/transformer/"),
    ("pooler", "bert/pooler/"),
    ("MLM head (excluding tied embeddings)", "cls/predictions/"),
    ("SOP head", "cls/seq_relationship/"),
)
_ENCODER_GROUPS = ("embeddings", "embedding projection (E->H)", "transformer", "pooler")


def parameter_report(model: keras.Model) -> dict[str, int]:
    """{group: parameter count} plus "encoder total" and "total"; tied weights counted once."""
    counts = {label: 0 for label, _ in _GROUPS}
    counts["task heads"] = 0
    for name, variable in tf1_variable_map(model).items():
        label = next((label for label, prefix in _GROUPS if name.startswith(prefix)), "task heads")
        counts[label] += math.prod(variable.shape)
    counts["encoder total"] = sum(counts[label] for label in _ENCODER_GROUPS)
    counts["total"] = sum(v for k, v in counts.items() if k != "encoder total")
    return counts


def format_parameter_report(counts: dict[str, int]) -> str:
    """One line per group: exact count and millions."""
    width = max(len(label) for label in counts)
    return "\n".join(f"{label:<{width}}  {count:>12,d}  ({count / 1e6:.2f}M)"
                     for label, count in counts.items())
