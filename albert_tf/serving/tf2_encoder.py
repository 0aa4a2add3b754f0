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
  ``training`` and is traced for both values, so that dropout runs when a Keras model fine-tunes
  it.
- Wrong inputs. The call takes a dict and ``training``, a Python bool, so it cannot have an input
  signature: a loaded object runs the saved trace whose inputs match the call's, and without one
  TensorFlow answers "Could not find matching concrete function" naming nothing. So the call is
  traced for the mistakes a caller makes (``trace_call_variants``): int64 inputs (cast, after a
  check that the values fit int32), any rank, float inputs (tf.keras.Input's and tf.ones' float32,
  NumPy's float64), a missing input, the other convention's names; each trace's graph names the
  mistake (``Conformer``, albert_tf/serving/input_checks.py) and costs a few small ops, the model
  being traced once per ``training`` value in a function they call (``ByTraining``). Any other
  dict (an unknown key, two mistakes at once) still gets TensorFlow's error.

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
from albert_tf.serving.input_checks import (IDS_LAYOUT, Layout, gated, positions_checks,
                                            token_ids_checks)

WORD_IDS, INPUT_MASK, TYPE_IDS = "input_word_ids", "input_mask", "input_type_ids"
TF2_INPUT_NAMES = (WORD_IDS, INPUT_MASK, TYPE_IDS)
MASKED_POSITIONS = "masked_lm_positions"
# TF2 input name -> albert_tf's (and the reference's) name of the same tensor.
TO_ALBERT_NAMES = dict(zip(TF2_INPUT_NAMES, INPUT_NAMES))
POSITIONS_LAYOUT: Layout = ("batch", "positions")
ENCODER_LAYOUTS: dict[str, Layout] = {name: IDS_LAYOUT for name in TF2_INPUT_NAMES}
MLM_LAYOUTS: dict[str, Layout] = {**ENCODER_LAYOUTS, MASKED_POSITIONS: POSITIONS_LAYOUT}
# What a caller who gives a TF2 call the other convention's name meant (a Conformer's ``renamed``).
RENAMED = {"input_ids": "its TF2 name is input_word_ids",
           "segment_ids": "its TF2 name is input_type_ids",
           "mlm_positions": "its TF2 name is masked_lm_positions, an input of encoder.mlm"}


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
    """TF2-named int32 inputs of the right ranks (and ``masked_lm_positions`` if given), after
    a ``Conformer``, then after the checks of every ids signature, named by their TF2 names in the
    messages (albert_tf/serving/input_checks.py); returned under albert_tf's names
    (``masked_lm_positions`` keeps its name)."""
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


def trace_loosely(function: Callable, dtypes: Mapping[str, tf.DType]) -> None:
    """Traces ``function(inputs, training=...)`` for a dict of tensors of ``dtypes`` ({name:
    dtype}) of any rank and a bool tensor ``training``."""
    function.get_concrete_function(
        {name: tf.TensorSpec(None, dtype, name=name) for name, dtype in dtypes.items()},
        training=tf.TensorSpec([], tf.bool, name="training"))


class ByTraining:
    """``body(inputs, training)`` as two functions of int32 ``specs`` (one per value of
    ``training``, each traced once), which every trace of a TF2 call calls: ``self(inputs,
    training)`` with a Python bool calls one, with a bool tensor (the traces for mistakes) a third
    function that calls both under a ``tf.cond``. Not a trackable: the functions are saved as the
    traces' callees only."""

    def __init__(self, body: Callable[[dict, bool], dict], specs: Mapping[str, tf.TensorSpec]):
        def bound(training: bool) -> tf.types.experimental.GenericFunction:
            def call(inputs: dict[str, tf.Tensor]) -> dict:
                return body(inputs, training)

            call.__name__ = f"{body.__name__}_{'training' if training else 'inference'}"
            return tf.function(call, input_signature=[dict(specs)], autograph=False)

        self.functions = {training: bound(training) for training in (False, True)}

        def either(inputs: dict[str, tf.Tensor], training: tf.Tensor) -> dict:
            return tf.cond(training, lambda: self.functions[True](inputs),
                           lambda: self.functions[False](inputs))

        either.__name__ = f"{body.__name__}_either"
        self.either = tf.function(either, autograph=False, input_signature=[
            dict(specs), tf.TensorSpec([], tf.bool, name="training")])

    def __call__(self, inputs: Mapping[str, tf.Tensor], training: bool | tf.Tensor) -> dict:
        inputs = dict(inputs)
        if isinstance(training, bool):
            return self.functions[training](inputs)
        return self.either(inputs, training)


def trace_call_variants(function: Callable, layouts: Mapping[str, Layout],
                        others: Sequence[Mapping[str, tf.DType]] = ()) -> None:
    """Traces ``function(inputs, training=...)``, a TF2 call on a dict of the inputs of
    ``layouts``, for what a caller gives it: int32 tensors of their layouts' ranks with
    ``training`` False and True (the traces used when nothing is wrong); then, with ``training`` a
    bool tensor (a Python bool matches it too, converted) and tensors of any rank: int32; int64
    for every input and for each alone; float32 for every input and for each alone; float64 for
    every input (NumPy's default); each input missing; and the dicts of ``others`` ({name: dtype},
    e.g. the other convention's names). The function's body answers each with a ``Conformer``:
    3n + 6 + len(others) traces for n inputs, each a few ops and a call of the functions that hold
    the model. Every trace costs the loaded object's load time (its callees are copied into it),
    so the rarer combinations (two int64 inputs of four) are left to TensorFlow's error."""
    names = tuple(layouts)
    for training in (False, True):
        function.get_concrete_function(
            {name: tf.TensorSpec([None] * len(layouts[name]), tf.int32, name=name)
             for name in names}, training=training)

    def trace(dtypes: Mapping[str, tf.DType]) -> None:
        trace_loosely(function, dtypes)

    int32 = {name: tf.int32 for name in names}
    trace(int32)
    for dtype in (tf.int64, tf.float32):
        trace({name: dtype for name in names})
        for name in names:
            trace({**int32, name: dtype})
    trace({name: tf.float64 for name in names})
    for missing in names:
        trace({name: tf.int32 for name in names if name != missing})
    for dtypes in others:
        trace(dtypes)


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
