"""The GLUE classifier: the encoder with the reference's classifier head (``ClassifierHead``,
albert_tf/models/heads.py): dropout 0.1 (fixed, training only) on the pooled output, then
``output_weights`` [num_labels, H] and ``output_bias`` [num_labels] under the reference's
root-scoped names; one output for a regression (STS-B).

With ``early_exit`` (run_classifier's ``--early_exit``, PABEE) the model also has an internal
classifier after each of its L layers: the encoder's pooler on that layer's [CLS] vector, then a
classifier head. Layer L's is the ordinary head on the ordinary pooled output (the same
computation, the same variables). The others are, with ``early_exit="separate"`` (the paper's
choice), heads of their own, under the TF1 names ``early_exit/layer_<j>/output_weights`` and
``early_exit/layer_<j>/output_bias`` (j = 1..L-1; object-based checkpoints:
``exit_classifier_<j>``), and with ``early_exit="shared"`` the ordinary head itself (ALBERT-style:
no new variables). The ordinary head's names do not change either way.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import keras
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.models.heads import ClassifierHead
from albert_tf.models.task_model import AlbertTaskModel

# The kinds of internal classifiers (``early_exit``): a head per layer, or the one head shared.
EARLY_EXIT_HEADS = ("separate", "shared")
# The TF1 scope of the separate internal classifiers (new names; the reference has none).
EARLY_EXIT_SCOPE = "early_exit"
# The attribute (and object-checkpoint name) of layer j's separate internal classifier:
# ``<EXIT_CLASSIFIER>_<j>``.
EXIT_CLASSIFIER = "exit_classifier"


class AlbertClassifierModel(AlbertTaskModel):
    """Encoder + ``ClassifierHead`` (run_classifier's model).

    Inputs: AlbertModel's dict (``input_ids``, ``input_mask``, ``segment_ids`` int [B, S]).
    Outputs: AlbertModel's dict with ``first_token_only`` (the head reads [CLS] alone, so the last
    block computes [CLS] alone: ``sequence_output`` is [B, 1, H]) plus ``logits`` float32 [B, num_labels]; with ``early_exit`` also
    ``layer_logits`` float32 [B, L, num_labels], every internal classifier's logits (layer L's
    equal to ``logits``). ``is_regression``: one output trained as a real-valued score (STS-B); it
    requires num_labels 1. ``early_exit``: None, or one of ``EARLY_EXIT_HEADS`` (module doc).
    """

    def __init__(self, config: AlbertConfig, num_labels: int, is_regression: bool = False,
                 early_exit: str | None = None, name: str = "albert_classifier", **kwargs):
        super().__init__(config, name=name, **kwargs)
        if is_regression and num_labels != 1:
            raise ValueError(f"a regression has one output, got num_labels={num_labels}.")
        if early_exit is not None and early_exit not in EARLY_EXIT_HEADS:
            raise ValueError(f"early_exit must be None or one of {EARLY_EXIT_HEADS}, got "
                             f"{early_exit!r}")
        self.num_labels = num_labels
        self.is_regression = is_regression
        self.early_exit = early_exit
        self.classifier = ClassifierHead(config, num_labels)
        if early_exit == "separate":
            # Attributes, not a list: tf.train.Checkpoint tracks attributes (Keras 3 lists of
            # layers are not checkpoint dependencies).
            for layer in range(1, config.num_hidden_layers):
                setattr(self, f"{EXIT_CLASSIFIER}_{layer}",
                        ClassifierHead(config, num_labels, name=f"{EXIT_CLASSIFIER}_{layer}"))
        self.built = True

    def layer_heads(self) -> list[ClassifierHead]:
        """The classifier head after each of the L layers (the last: ``classifier``); empty
        without early exit."""
        if self.early_exit is None:
            return []
        layers = self.config.num_hidden_layers
        if self.early_exit == "shared":
            return [self.classifier] * layers
        return [getattr(self, f"{EXIT_CLASSIFIER}_{layer}") for layer in range(1, layers)] + [
            self.classifier]

    def tf1_head_variables(self) -> dict[str, keras.Variable]:
        """The head's reference names: root-scoped ``output_weights`` and ``output_bias``; the
        separate internal classifiers under ``early_exit/layer_<j>/``."""
        names = {"output_weights": self.classifier.output_weights,
                 "output_bias": self.classifier.output_bias}
        if self.early_exit == "separate":
            for layer, head in enumerate(self.layer_heads()[:-1], start=1):
                names[f"{EARLY_EXIT_SCOPE}/layer_{layer}/output_weights"] = head.output_weights
                names[f"{EARLY_EXIT_SCOPE}/layer_{layer}/output_bias"] = head.output_bias
        return names

    def describe_head_names(self, names: Sequence[str]) -> str:
        """``names`` as a message lists them, the separate internal classifiers as one group
        ("the early-exit internal classifiers of layers 1-11 (...)") and, with shared heads, the
        ordinary head said to be every layer's classifier."""
        scope = f"{EARLY_EXIT_SCOPE}/layer_"
        layers = sorted({int(name[len(scope):].split("/")[0]) for name in names
                         if name.startswith(scope)})
        parts = [name for name in names if not name.startswith(scope)]
        if self.early_exit == "shared" and parts:
            parts[-1] += (" (the classifier of every layer: early-exit shared heads, "
                          "--early_exit_heads=shared)")
        if layers:
            span = f"{layers[0]}-{layers[-1]}" if len(layers) > 1 else str(layers[0])
            parts.append(f"the early-exit internal classifiers of layers {span} "
                         f"({scope}<j>/output_weights and output_bias)")
        return ", ".join(parts)

    def layer_outputs(self, encoder_outputs: list[tf.Tensor]) -> list[tf.Tensor]:
        """The output of each of the L layers (the last of its K inner blocks): [B, S, H], the
        last layer's [B, 1, H] (the model runs ``first_token_only``)."""
        inner = self.config.inner_group_num
        return encoder_outputs[inner - 1::inner]

    def call(self, inputs: Mapping[str, tf.Tensor],
             training: bool | None = None) -> dict[str, tf.Tensor | list[tf.Tensor]]:
        outputs = dict(self.albert(inputs, training=training, first_token_only=True))
        outputs["logits"] = self.classifier(outputs["pooled_output"], training=training)
        if self.early_exit is not None:
            hidden = self.layer_outputs(outputs["encoder_outputs"])[:-1]
            heads = self.layer_heads()[:-1]
            internal = [head(self.albert.pooler(layer[:, 0]), training=training)
                        for head, layer in zip(heads, hidden)]
            outputs["layer_logits"] = tf.stack(internal + [outputs["logits"]], axis=1)
        return outputs
