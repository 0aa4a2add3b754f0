"""The TF2 SavedModel convention of text encoders (TF-Hub's BERT and ALBERT encoders and their
preprocessing models): input and output names, input checks, and the attributes that make a saved
object fine-tunable through ``hub.KerasLayer(..., trainable=True)``.

- Inputs: a dict of int32 [B, S] ``input_word_ids``, ``input_mask``, ``input_type_ids`` (albert_tf's
  ``input_ids``, ``input_mask``, ``segment_ids``); the MLM call adds int32 [B, P]
  ``masked_lm_positions``.
- Outputs (``encoder_outputs``): ``sequence_output`` [B, S, H], ``pooled_output`` [B, H], ``default``
  (= ``pooled_output``, the alias every TF-Hub text embedding has) and ``encoder_outputs``, the list
  of every transformer block's output [B, S, H] (the last one is ``sequence_output``).
- A reusable object has ``variables``, ``trainable_variables`` and ``regularization_losses`` (a list
  of callables) saved as attributes (``set_reusable_attributes``); its ``__call__`` takes
  ``training`` and is traced for both values (``trace_training_modes``), so that dropout runs when
  a Keras model fine-tunes it.

The hub export of a pretrained model (albert_tf/tasks/pretraining/hub_export.py) builds its root
and ``mlm`` object from these; the preprocessing model (albert_tf/serving/preprocessing.py) returns
these input names from ``bert_pack_inputs`` and its root call.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import keras
import tensorflow as tf

from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.serving.input_checks import (gated, positions_checks, token_ids_checks,
                                            with_dynamic_shapes)

WORD_IDS, INPUT_MASK, TYPE_IDS = "input_word_ids", "input_mask", "input_type_ids"
TF2_INPUT_NAMES = (WORD_IDS, INPUT_MASK, TYPE_IDS)
MASKED_POSITIONS = "masked_lm_positions"
# TF2 input name -> albert_tf's (and the reference's) name of the same tensor.
TO_ALBERT_NAMES = dict(zip(TF2_INPUT_NAMES, INPUT_NAMES))


def tf2_input_specs(*extra: str) -> dict[str, tf.TensorSpec]:
    """int32 [None, None] specs of the three encoder inputs and the ``extra`` names."""
    return {name: tf.TensorSpec([None, None], tf.int32, name=name)
            for name in (*TF2_INPUT_NAMES, *extra)}


def to_tf2_names(packed: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """albert_tf-named model inputs (``input_ids``, ...) -> the same tensors under TF2 names."""
    by_albert_name = {albert: tf2 for tf2, albert in TO_ALBERT_NAMES.items()}
    return {by_albert_name[name]: tensor for name, tensor in packed.items()}


def checked_albert_inputs(inputs: Mapping[str, tf.Tensor],
                          config: AlbertConfig) -> dict[str, tf.Tensor]:
    """TF2-named inputs (and ``masked_lm_positions`` if given) after the checks of every ids
    signature, named by their TF2 names in the messages (albert_tf/serving/input_checks.py); returned
    under albert_tf's names (``masked_lm_positions`` keeps its name)."""
    inputs = with_dynamic_shapes(inputs)
    ids = {name: inputs[name] for name in TF2_INPUT_NAMES}
    checks = token_ids_checks(ids, config, ids_name=WORD_IDS, types_name=TYPE_IDS)
    if MASKED_POSITIONS in inputs:
        checks += positions_checks(inputs[WORD_IDS], inputs[MASKED_POSITIONS], WORD_IDS,
                                   MASKED_POSITIONS)
    checked = gated(inputs, checks)
    return {TO_ALBERT_NAMES.get(name, name): tensor for name, tensor in checked.items()}


def encoder_outputs(albert_outputs: Mapping[str, tf.Tensor | list[tf.Tensor]]) -> dict:
    """AlbertModel's outputs -> the convention's: ``sequence_output``, ``pooled_output``,
    ``default`` and ``encoder_outputs`` (a list)."""
    return {"sequence_output": albert_outputs["sequence_output"],
            "pooled_output": albert_outputs["pooled_output"],
            "default": albert_outputs["pooled_output"],
            "encoder_outputs": list(albert_outputs["encoder_outputs"])}


def trace_training_modes(function: Callable, inputs: dict[str, tf.TensorSpec]) -> None:
    """Traces ``function(inputs, training=...)`` for both values of ``training``, so that the saved
    function runs with dropout (True) and without (False, the default)."""
    for training in (False, True):
        function.get_concrete_function(inputs, training=training)


def set_reusable_attributes(obj: tf.__internal__.tracking.AutoTrackable,
                            layers: Sequence[keras.layers.Layer]) -> None:
    """Saves ``variables`` and ``trainable_variables`` (those of ``layers``, each once) and an empty
    ``regularization_losses`` as attributes of ``obj``: what ``hub.KerasLayer`` reads to train a
    loaded object. Empty: ALBERT has no weight regularizer (the reference's weight decay is the
    optimizer's, outside the model)."""
    variables = list({id(variable): variable for layer in layers
                      for variable in layer.weights}.values())
    obj.variables = variables
    obj.trainable_variables = [variable for variable in variables if variable.trainable]
    obj.regularization_losses = []
