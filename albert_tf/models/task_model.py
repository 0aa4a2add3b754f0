"""The contract of every "encoder + head" model (pretraining, GLUE, SQuAD, RACE, NER).

A task model

- owns its encoder in the attribute ``albert`` (an ``AlbertModel``): object-based checkpoints store
  it under the edge ``model/albert``, so a checkpoint of one task warm-starts the encoder of
  another;
- declares its head's variables under the reference's TF1 names (``tf1_head_variables``), which is
  how reference checkpoints load into it and how it exports back;
- says what its output is: ``is_regression`` is True only for a real-valued score trained with a
  squared error (STS-B). Having one output does not make a model a regression (RACE scores each
  choice with one output and trains with a softmax over the choices).
"""

from __future__ import annotations

from typing import Sequence

import keras

from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import AlbertModel


class AlbertTaskModel(keras.Model):
    """Base class: builds ``self.albert``; subclasses add their head in ``__init__`` and ``call``.

    Like ``AlbertModel``, every weight exists after construction, so checkpoints load before any
    forward pass.
    """

    is_regression: bool = False

    def __init__(self, config: AlbertConfig, name: str, **kwargs):
        super().__init__(name=name, **kwargs)
        self.config = config
        self.albert = AlbertModel(config)

    def tf1_head_variables(self) -> dict[str, keras.Variable]:
        """{reference TF1 name: variable} of the head (the encoder's names are shared)."""
        raise NotImplementedError(f"{type(self).__name__} must declare its head's TF1 names.")

    def describe_head_names(self, names: Sequence[str]) -> str:
        """The reference names ``names`` (of head variables) as a message lists them, e.g. what a
        conversion leaves out; a subclass may group its own and say what they are."""
        return ", ".join(names)

    def head_parameter_groups(self) -> dict[str, list[keras.layers.Layer]]:
        """{label: layers} of the head, as the parameter report groups it; one group "task head"
        (every layer but the encoder) unless a subclass splits it."""
        return {"task head": [layer for layer in self.layers if layer is not self.albert]}
