"""The published numbers the results tables compare with: the paper's Tables 2-10 and the released
checkpoints' scores, carried as data in ``published_numbers.json`` beside this module.

Scores are dev-set percentages keyed as the downstream columns (``mnli`` ... ``sts-b``,
``squad1.1_f1``, ``squad1.1_em``, ``squad2.0_f1``, ``squad2.0_em``, ``race``, ``avg``);
``params_m`` counts embeddings + transformer in millions, as the paper does.

    published_model("v2_base")["squad2.0_f1"]   # 82.1
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

_DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "published_numbers.json")


@functools.cache
def published_numbers() -> dict[str, Any]:
    """Every published table: ``released`` (model name -> scores) and ``table2`` ... ``table10``,
    ``appendix_depth``, ``appendix_width`` (lists of rows)."""
    with open(_DATA_FILE, encoding="utf-8") as handle:
        return json.load(handle)


def released_models() -> list[str]:
    """The released checkpoints' names: v1_base ... v2_xxlarge."""
    return list(published_numbers()["released"])


def published_model(name: str) -> dict[str, float]:
    """The published scores of a released model (``v2_base``, ...); ValueError listing the names
    otherwise. Only v1_xxlarge has every GLUE task (the paper's state-of-the-art row)."""
    released = published_numbers()["released"]
    if name not in released:
        raise ValueError(f"No published numbers for model {name!r}; expected one of "
                         f"{', '.join(released)}.")
    return dict(released[name])


# The paper's Table 1: the architecture of each ALBERT size (layers, hidden size, embedding size).
_ARCHITECTURES = {
    "base": {"num_hidden_layers": 12, "hidden_size": 768, "embedding_size": 128},
    "large": {"num_hidden_layers": 24, "hidden_size": 1024, "embedding_size": 128},
    "xlarge": {"num_hidden_layers": 24, "hidden_size": 2048, "embedding_size": 128},
    "xxlarge": {"num_hidden_layers": 12, "hidden_size": 4096, "embedding_size": 128},
}


def published_architecture(name: str) -> dict[str, int]:
    """The architecture of the released model ``name`` (``v2_base``, ...) by the paper's Table 1:
    ``num_hidden_layers``, ``hidden_size``, ``embedding_size`` as a config names them."""
    published_model(name)  # ValueError listing the names for another one
    return dict(_ARCHITECTURES[name.split("_", 1)[1]])


def published_rows(table: str) -> list[dict[str, Any]]:
    """The rows of one of the paper's tables (``table3``, ``table4``, ``table5``, ...)."""
    return [dict(row) for row in published_numbers()[table]]
