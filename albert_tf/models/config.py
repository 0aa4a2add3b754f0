"""AlbertConfig: the reference's model configuration, its JSON format and its semantics.

Semantics kept from the reference's AlbertConfig:
- keys missing from a JSON file take the constructor defaults, which are those of albert_xxlarge;
- unknown keys (``net_structure_type``, ``gap_size``, ``layers_to_keep``, ...) are kept as attributes,
  written back by ``to_dict``, and otherwise ignored;
- ``down_scale_factor`` is stored and never used;
- JSON is written with sorted keys and an indent of 2.

Unlike the reference, invalid values are rejected at construction with an error naming the key.
Added to the reference: the key ``cross_layer_sharing`` says what the layers of a group share:
``all`` (the reference: whole blocks; the default when the key is absent, and then ``to_dict`` does
not add it), ``attention``, ``ffn`` or ``none``.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping

import tensorflow as tf

from albert_tf.errors.user_error import UserError
from albert_tf.files.atomic import atomic_write_text
from albert_tf.files.json_objects import read_json_object

ACTIVATIONS = ("gelu", "relu", "tanh", "linear", "")

_POSITIVE_INT_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                      "num_hidden_groups", "num_attention_heads", "intermediate_size",
                      "inner_group_num", "max_position_embeddings", "type_vocab_size")


# What the layers of a group share under each ``cross_layer_sharing`` strategy: the attention
# sub-block (Q, K, V, output projection, LayerNorm) and/or the feed-forward one (two dense layers,
# LayerNorm_1).
CROSS_LAYER_SHARING = {"all": ("attention", "ffn"), "attention": ("attention",), "ffn": ("ffn",),
                       "none": ()}


class ConfigError(UserError, ValueError):
    """An AlbertConfig value is missing or invalid; the message names the key."""


class AlbertConfig:
    """Hyper-parameters of an ALBERT model (the reference's ``AlbertConfig``).

    Attributes are plain public fields, as in the reference; extra keys given to ``from_dict`` become
    attributes too. Call ``validate()`` after mutating fields by hand.
    """

    # A class-level default: a config built without the key reads "all" and does not write it.
    cross_layer_sharing = "all"

    def __init__(self,
                 vocab_size: int,
                 embedding_size: int = 128,
                 hidden_size: int = 4096,
                 num_hidden_layers: int = 12,
                 num_hidden_groups: int = 1,
                 num_attention_heads: int = 64,
                 intermediate_size: int = 16384,
                 inner_group_num: int = 1,
                 down_scale_factor: int = 1,
                 hidden_act: str = "gelu",
                 hidden_dropout_prob: float = 0.0,
                 attention_probs_dropout_prob: float = 0.0,
                 max_position_embeddings: int = 512,
                 type_vocab_size: int = 2,
                 initializer_range: float = 0.02,
                 **extra: Any):
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_hidden_groups = num_hidden_groups
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.inner_group_num = inner_group_num
        self.down_scale_factor = down_scale_factor
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        for key, value in extra.items():
            setattr(self, key, value)
        self.validate()

    def validate(self) -> None:
        """Raises ConfigError naming the first invalid key."""
        if self.vocab_size is None:
            raise ConfigError("AlbertConfig: 'vocab_size' is missing; it is required "
                              "(the number of pieces of the SentencePiece model).")
        for key in _POSITIVE_INT_KEYS:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"AlbertConfig: '{key}' must be a positive integer, got {value!r}.")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ConfigError(
                f"AlbertConfig: 'hidden_size' ({self.hidden_size}) must be divisible by "
                f"'num_attention_heads' ({self.num_attention_heads}).")
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ConfigError(
                f"AlbertConfig: 'num_hidden_groups' ({self.num_hidden_groups}) must not exceed "
                f"'num_hidden_layers' ({self.num_hidden_layers}).")
        self._validate_sharing()
        act = self.hidden_act
        if not isinstance(act, str) or act.lower() not in ACTIVATIONS:
            raise ConfigError(f"AlbertConfig: 'hidden_act' {act!r} is not one of {list(ACTIVATIONS)}.")
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"AlbertConfig: '{key}' must be a number in [0, 1), got {value!r}.")
        if not isinstance(self.initializer_range, (int, float)) or self.initializer_range <= 0:
            raise ConfigError("AlbertConfig: 'initializer_range' must be a positive number, "
                              f"got {self.initializer_range!r}.")

    def _validate_sharing(self) -> None:
        """The strategy is known, and num_hidden_groups leaves it something to mean."""
        sharing, groups, layers = (self.cross_layer_sharing, self.num_hidden_groups,
                                   self.num_hidden_layers)
        if not isinstance(sharing, str) or sharing not in CROSS_LAYER_SHARING:
            raise ConfigError(f"AlbertConfig: 'cross_layer_sharing' {sharing!r} is not one of "
                              f"{list(CROSS_LAYER_SHARING)}.")
        if sharing in ("attention", "ffn") and groups == layers:
            raise ConfigError(
                f"AlbertConfig: 'cross_layer_sharing' {sharing!r} shares within groups of layers, "
                f"but 'num_hidden_groups' ({groups}) equals 'num_hidden_layers' ({layers}), "
                "which leaves every layer alone in its group; use fewer groups, or 'none'.")
        if sharing == "none" and 1 < groups < layers:
            raise ConfigError(
                f"AlbertConfig: 'cross_layer_sharing' 'none' gives every layer its own parameters, "
                f"but 'num_hidden_groups' ({groups}) asks for groups that share; set it to 1 or to "
                f"'num_hidden_layers' ({layers}).")

    def shares(self, part: str) -> bool:
        """Whether the layers of a group share their ``part`` ("attention" or "ffn") sub-blocks."""
        return part in CROSS_LAYER_SHARING[self.cross_layer_sharing]

    @property
    def head_size(self) -> int:
        """D = hidden_size / num_attention_heads."""
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, json_object: Mapping[str, Any]) -> "AlbertConfig":
        """Builds a config from a dict; missing keys take the (xxlarge) defaults, unknown keys are kept."""
        return cls(**{"vocab_size": None, **json_object})

    @classmethod
    def from_json_file(cls, json_file: str) -> "AlbertConfig":
        """Reads a reference-format JSON config (through tf.io.gfile: gs:// works); errors name the file."""
        if not tf.io.gfile.exists(json_file) or tf.io.gfile.isdir(json_file):
            raise ConfigError(f"ALBERT config file not found: {json_file}")
        data = read_json_object(json_file, ConfigError, f"ALBERT config file {json_file}")
        try:
            return cls.from_dict(data)
        except ConfigError as err:
            raise ConfigError(f"{json_file}: {err}") from None

    def to_dict(self) -> dict[str, Any]:
        """All fields, extra keys included."""
        return copy.deepcopy(self.__dict__)

    def to_json_string(self) -> str:
        """JSON with sorted keys, indent 2 and a final newline, as the reference writes it."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, json_file: str) -> None:
        """Writes ``to_json_string()`` atomically (temporary name, then rename)."""
        atomic_write_text(json_file, self.to_json_string())

    def __repr__(self) -> str:
        return f"AlbertConfig({self.to_json_string().strip()})"
