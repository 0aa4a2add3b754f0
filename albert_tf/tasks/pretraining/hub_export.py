"""Hub-style export of a pretrained ALBERT (the reference's TF-Hub module, as a TF2 SavedModel): the
library of ``python -m albert_tf.export_hub``. The checkpoint must hold the MLM and SOP heads (a
pretraining checkpoint); outputs go to new directories only.

The SavedModel at ``--export_path`` has the reference module's signatures, inputs int32 [B, S]
``input_ids``, ``input_mask``, ``segment_ids``:

- ``tokens`` -> ``sequence_output`` float32 [B, S, H], ``pooled_output`` [B, H];
- ``sop`` -> the same plus ``sop_log_probs`` [B, 2] (log-softmax of the sentence-order head);
- ``mlm`` (plus ``mlm_positions`` int32 [B, P]) -> the same plus ``mlm_logits`` [B*P, V];
- ``tokenization_info`` (no inputs) -> ``vocab_file`` (path of the SentencePiece model asset inside
  the export) and ``do_lower_case``;
- ``serving_default`` = ``tokens`` (the reference module had no default signature).

The same functions are saved as attributes taking one dict (``loaded.tokens({"input_ids": ...})``,
``keras.layers.TFSMLayer(export_path, call_endpoint="tokens")``; ``loaded.mlm`` answers this
dict too, see below). Each checks its inputs in the
graph, as the fine-tuned exports do (albert_tf/serving/input_checks.py): every input has the shape
of ``input_ids``, of 1 to max_position_embeddings positions, ids and segment ids in the config's
vocabularies; ``mlm_positions`` has a row per example and positions inside the sequence. A wrong
input is an InvalidArgumentError naming it; an empty batch gives empty outputs.

The same SavedModel follows the TF2 encoder convention of TF-Hub's BERT/ALBERT encoders
(albert_tf/serving/tf2_encoder.py), so ``hub.KerasLayer(export_path, trainable=True)`` fine-tunes
it: the root call ``loaded(inputs, training=False)`` on int32 [B, S] ``input_word_ids``,
``input_mask``, ``input_type_ids`` -> ``sequence_output``, ``pooled_output``, ``default``,
``encoder_outputs`` (dropout with ``training=True``); ``loaded.mlm`` (``HubMaskedLM``), the same plus
``masked_lm_positions`` -> ``mlm_logits`` [B, P, V]; ``loaded.serve`` (the root call without
dropout, Keras 3 TFSMLayer's default endpoint); ``variables``, ``trainable_variables`` (the
encoder's) and an empty ``regularization_losses``. One SavedModel for both: hub.KerasLayer reads
only the root call and these attributes, the signatures stay as they were, the variables are saved
once.

Assets: ``albert_config.json`` and the SentencePiece model; the directory can be moved. The encoder
holds no SentencePiece op, so TensorFlow alone loads it. ``<export_path>/preprocessing`` is the
preprocessing SavedModel (albert_tf/serving/preprocessing.py, text -> inputs at
``--max_seq_length``, needs tensorflow_text).

The module keeps the pretraining model in its attribute ``model``, so the export's
``variables/variables`` is an albert_tf checkpoint (object path ``model/albert/...``) and every
script's ``--init_checkpoint`` accepts the export directory.
"""

from __future__ import annotations

import os
import tempfile
import types

import tensorflow as tf

from albert_tf.checkpoints.config_beside import check_config_of_conversion
from albert_tf.checkpoints.warm_start import (CheckpointSource, load_checkpoint,
                                              resolve_checkpoint_source)
from albert_tf.errors.user_error import UserError
from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.serving.input_checks import (IDS_LAYOUT, Conformer, gated, positions_checks,
                                            token_ids_checks, with_ranks)
from albert_tf.serving.preprocessing import PreprocessingModule, save_preprocessing
from albert_tf.serving.saved_model import check_new_directory, save_new_directory
from albert_tf.serving.tf2_encoder import (ENCODER_LAYOUTS, MASKED_POSITIONS, MLM_LAYOUTS,
                                           POSITIONS_LAYOUT, RENAMED, WORD_IDS, ByTraining,
                                           checked_albert_inputs, encoder_outputs,
                                           set_reusable_attributes, tf2_input_specs,
                                           trace_call_variants, trace_loosely)
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer

CONFIG_ASSET = "albert_config.json"
PREPROCESSING_SUBDIR = "preprocessing"
SIGNATURES = ("tokens", "sop", "mlm", "tokenization_info", "serving_default")
MLM_POSITIONS = "mlm_positions"  # the reference module's name of the MLM positions


def _int_inputs(*names: str) -> dict[str, tf.TensorSpec]:
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in names}


_ID_INPUTS = _int_inputs(*INPUT_NAMES)


_MLM_INPUTS = _int_inputs(*INPUT_NAMES, MLM_POSITIONS)
_LAYOUTS = {**{name: IDS_LAYOUT for name in INPUT_NAMES}, MLM_POSITIONS: POSITIONS_LAYOUT}
# How messages name the TF2 calls (no apostrophe: an Assert's message shows it escaped).
ENCODER_CALL = "the encoder call"
MLM_CALL = "encoder.mlm"
REFERENCE_MLM_CALL = "encoder.mlm on the reference names"
# The names a caller of the root call may mean for encoder.mlm, or the reference's mlm signature.
ENCODER_RENAMED = {**RENAMED, MASKED_POSITIONS: "an input of encoder.mlm, not of the encoder"}
REFERENCE_RENAMED = {"input_word_ids": "the reference name is input_ids",
                     "input_type_ids": "the reference name is segment_ids",
                     MASKED_POSITIONS: "the reference name is mlm_positions"}


class HubExportError(UserError, ValueError):
    """The export cannot be written as asked (the message names the file or flag and why)."""


def _checked(inputs: dict[str, tf.Tensor], config: AlbertConfig) -> dict[str, tf.Tensor]:
    """Reference-named ``inputs`` after the checks of their ranks and of every ids signature (each
    has the shape of input_ids, of 1 to max_position_embeddings positions, ids in the vocabulary,
    the mask 0 or 1) and, with mlm_positions, a row of positions inside the sequence per
    example."""
    inputs = with_ranks(inputs, {name: _LAYOUTS[name] for name in inputs})
    checks = token_ids_checks({name: inputs[name] for name in _ID_INPUTS}, config)
    if MLM_POSITIONS in inputs:
        checks += positions_checks(inputs["input_ids"], inputs[MLM_POSITIONS], "input_ids",
                                   MLM_POSITIONS)
    return gated(inputs, checks)


def _reference_mlm(model: AlbertPretrainingModel,
                   inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The reference module's ``mlm``: tokens' outputs plus mlm_logits [B*P, V] (row b*P + p:
    position mlm_positions[b, p])."""
    inputs = _checked(inputs, model.config)
    model_inputs = {name: inputs[name] for name in _ID_INPUTS}
    outputs = model({**model_inputs, "masked_lm_positions": inputs[MLM_POSITIONS]}, training=False)
    logits = outputs["mlm_logits"]
    return {"sequence_output": outputs["sequence_output"],
            "pooled_output": outputs["pooled_output"],
            "mlm_logits": tf.reshape(logits, [-1, tf.shape(logits)[-1]])}


class HubMaskedLM(tf.__internal__.tracking.AutoTrackable):
    """The export's ``mlm`` object: the encoder and the MLM head (no SOP head), as TF-Hub's
    BERT/ALBERT encoders have it.

    ``mlm(inputs, training=False)`` on the TF2 encoder's dict plus ``masked_lm_positions`` int32
    [B, P] -> the encoder's outputs (``sequence_output``, ``pooled_output``, ``default``,
    ``encoder_outputs``) plus ``mlm_logits`` float32 [B, P, V]; on the reference's dict (with
    ``mlm_positions``) -> the ``mlm`` signature's outputs (as before the TF2 convention). Reusable:
    its ``variables`` are the encoder's and the MLM head's. Wrong inputs are named as in the root
    call (albert_tf/serving/tf2_encoder.py); on the reference's dict, int64 inputs (all of them)
    are cast and ``mlm_positions`` named when missing.
    """

    def __init__(self, model: AlbertPretrainingModel):
        super().__init__()
        self.model = model
        set_reusable_attributes(self, [model.albert, model.mlm_head])
        # Called by every trace of __call__; not saved as attributes of their own.
        self._tf2_mlm = ByTraining(self._tf2_outputs, tf2_input_specs(MASKED_POSITIONS))
        self._reference = types.SimpleNamespace(mlm=tf.function(
            self._reference_outputs, input_signature=[_MLM_INPUTS], autograph=False))
        self._conform_tf2 = Conformer(MLM_LAYOUTS, MLM_CALL, RENAMED)
        self._conform_reference = Conformer(_LAYOUTS, REFERENCE_MLM_CALL, REFERENCE_RENAMED)

    def _reference_outputs(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return _reference_mlm(self.model, inputs)

    def _tf2_outputs(self, inputs: dict[str, tf.Tensor],
                     training: bool) -> dict[str, tf.Tensor | list[tf.Tensor]]:
        outputs = self.model(checked_albert_inputs(inputs, self.model.config), training=training)
        return {**encoder_outputs(outputs), "mlm_logits": outputs["mlm_logits"]}

    @tf.function(autograph=False)
    def __call__(self, inputs: dict[str, tf.Tensor],
                 training: bool | tf.Tensor = False) -> dict[str, tf.Tensor | list[tf.Tensor]]:
        if MLM_POSITIONS in inputs or ("input_ids" in inputs and WORD_IDS not in inputs):
            return self._reference.mlm(self._conform_reference(inputs))
        return self._tf2_mlm(self._conform_tf2(inputs), training)

    def trace(self) -> None:
        """Traces both conventions (the TF2 one with and without dropout, and for its callers'
        mistakes; the reference's for int32, int64 and a missing mlm_positions) before saving."""
        trace_call_variants(self.__call__, MLM_LAYOUTS,
                            others=[{name: tf.int32 for name in _LAYOUTS if name != MLM_POSITIONS}])
        self.__call__.get_concrete_function(_MLM_INPUTS)
        for dtype in (tf.int32, tf.int64):
            trace_loosely(self.__call__, {name: dtype for name in _LAYOUTS})


class HubEncoderModule(tf.__internal__.tracking.AutoTrackable):
    """The pretraining model's encoder and heads behind the reference hub module's signatures
    (inference mode, no dropout) and the TF2 encoder convention (the root call and ``mlm``), plus
    the tokenizer's assets. Reusable (``hub.KerasLayer(..., trainable=True)``): its ``variables``
    are the encoder's."""

    def __init__(self, model: AlbertPretrainingModel, spm_model_file: str, config_file: str,
                 do_lower_case: bool):
        super().__init__()
        self.model = model  # first: the checkpoint's object path model/albert/...
        self.vocab_file = tf.saved_model.Asset(spm_model_file)
        self.config_file = tf.saved_model.Asset(config_file)
        self.do_lower_case = do_lower_case
        self.mlm = HubMaskedLM(model)
        set_reusable_attributes(self, [model.albert])
        # Called by every trace of __call__; not saved as attributes of their own.
        self._tf2_encoder = ByTraining(self._tf2_outputs, tf2_input_specs())
        self._conform = Conformer(ENCODER_LAYOUTS, ENCODER_CALL, ENCODER_RENAMED)

    def _tf2_outputs(self, inputs: dict[str, tf.Tensor],
                     training: bool) -> dict[str, tf.Tensor | list[tf.Tensor]]:
        inputs = checked_albert_inputs(inputs, self.model.config)
        return encoder_outputs(self.model.albert(inputs, training=training))

    # The TF2 encoder convention: ``encoder(inputs, training=False)``, and ``serve``, the same
    # without dropout for keras.layers.TFSMLayer (whose default endpoint is ``serve``).

    @tf.function(autograph=False)
    def __call__(self, inputs: dict[str, tf.Tensor],
                 training: bool | tf.Tensor = False) -> dict[str, tf.Tensor | list[tf.Tensor]]:
        """TF2-named int32 [B, S] inputs -> sequence_output [B, S, H], pooled_output and default
        [B, H], encoder_outputs (a list of every block's [B, S, H]). int64 inputs are cast; other
        mistakes are named (``Conformer``)."""
        return self._tf2_encoder(self._conform(inputs), training)

    @tf.function(input_signature=[tf2_input_specs()], autograph=False)
    def serve(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor | list[tf.Tensor]]:
        """``__call__(inputs, training=False)``."""
        return self.__call__(inputs, training=False)

    # The reference module's functions. Each takes one dict, so that the saved function
    # (``loaded.tokens(inputs)``, Keras' TFSMLayer) and the signature
    # (``loaded.signatures["tokens"](**inputs)``) share their inputs.

    def _encode(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        outputs = self.model.albert(_checked(inputs, self.model.config), training=False)
        return {"sequence_output": outputs["sequence_output"],
                "pooled_output": outputs["pooled_output"]}

    @tf.function(input_signature=[_ID_INPUTS])
    def tokens(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """sequence_output [B, S, H], pooled_output [B, H]."""
        return self._encode(inputs)

    @tf.function(input_signature=[_ID_INPUTS])
    def sop(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """tokens' outputs plus sop_log_probs [B, 2]."""
        outputs = self._encode(inputs)
        logits = self.model.sop_head(outputs["pooled_output"], training=False)
        outputs["sop_log_probs"] = tf.nn.log_softmax(logits, axis=-1)
        return outputs

    @tf.function(input_signature=[_MLM_INPUTS])
    def _mlm_signature(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The ``mlm`` signature (``_reference_mlm``); the attribute ``mlm`` is ``HubMaskedLM``."""
        return _reference_mlm(self.model, inputs)

    @tf.function(input_signature=[])
    def tokenization_info(self) -> dict[str, tf.Tensor]:
        """vocab_file: path of the SentencePiece model asset (string); do_lower_case (bool)."""
        return {"vocab_file": self.vocab_file.asset_path,
                "do_lower_case": tf.constant(self.do_lower_case)}

    def trace(self) -> None:
        """Traces the functions without an input signature (the TF2 convention, for its inputs and
        for its callers' mistakes: tf2_encoder.trace_call_variants) before saving."""
        trace_call_variants(self.__call__, ENCODER_LAYOUTS,
                            others=[{name: tf.int32 for name in INPUT_NAMES},
                                    {name: tf.int32 for name in MLM_LAYOUTS}])
        self.mlm.trace()

    def signatures(self) -> dict[str, tf.types.experimental.GenericFunction]:
        """The SavedModel signatures (the reference module's, and ``serving_default``)."""
        return {"tokens": self.tokens, "sop": self.sop, "mlm": self._mlm_signature,
                "tokenization_info": self.tokenization_info, "serving_default": self.tokens}


def checkpoint_to_export(path: str) -> CheckpointSource:
    """The checkpoint ``--checkpoint`` names, resolved once (``resolve_checkpoint_source``: a
    run directory's best checkpoint, else its last trained one; or the variables of an
    export)."""
    try:
        return resolve_checkpoint_source(path)
    except FileNotFoundError as err:
        raise HubExportError(f"--checkpoint: {err}") from None


def load_pretraining_weights(model: AlbertPretrainingModel, source: CheckpointSource,
                             config_file: str | None = None) -> str:
    """Loads encoder, MLM and SOP heads from a checkpoint of either format (printing the
    load report); returns a description. Raises HubExportError when the heads are missing (e.g. a
    fine-tuned checkpoint): the ``sop`` and ``mlm`` signatures would be random;
    CheckpointMismatchError (naming ``config_file``) when the checkpoint's encoder is not the
    model's, in a shape, a missing variable or one the model has no place for, or when the config
    beside a TF1 or albert_tf checkpoint sets another depth, number of heads or activation (the
    export runs the config's; ``check_config_of_conversion``, which says so when none is there)."""
    if not source.hugging_face:
        check_config_of_conversion(source.path, model.config, config_file)
    report = load_checkpoint(model, source, config_file=config_file)
    print(report.format())
    report.require_same_encoder(config_file)
    if report.missing:
        raise HubExportError(
            f"{report.checkpoint} lacks the MLM and SOP heads (cls/predictions, "
            "cls/seq_relationship) of the model: the hub export needs a pretraining checkpoint, "
            "not a fine-tuned one.")
    return f"{report.kind} checkpoint {report.checkpoint}"


def check_export_settings(config: AlbertConfig, tokenizer: FullTokenizer, seq_length: int,
                          config_file: str | None = None) -> None:
    """HubExportError unless the tokenizer is a SentencePiece model of the config's vocab_size
    and ``seq_length`` fits its position table. The command calls it before reading the
    checkpoint (``export_encoder`` again), naming ``config_file``."""
    where = f"in {config_file}" if config_file else "of the config"
    if tokenizer.sp_model is None:
        raise HubExportError("the hub export needs a SentencePiece model (--spm_model_file); "
                             f"{tokenizer.source_file} is a WordPiece vocabulary.")
    if tokenizer.vocab_size != config.vocab_size:
        raise HubExportError(f"vocab_size={config.vocab_size} {where} does not match the "
                             f"{tokenizer.vocab_size} pieces of {tokenizer.source_file}: give "
                             "the config and SentencePiece model of the checkpoint's model.")
    if seq_length > config.max_position_embeddings:
        raise HubExportError(f"--max_seq_length={seq_length} exceeds max_position_embeddings="
                             f"{config.max_position_embeddings} {where}.")


def export_encoder(model: AlbertPretrainingModel, tokenizer: FullTokenizer, export_path: str,
                   seq_length: int, preprocessing_export_path: str | None = None) -> None:
    """Writes the hub-style SavedModel of ``model`` to a new ``export_path``, with the
    preprocessing model at ``seq_length`` in its ``preprocessing/`` and, if given, in
    ``preprocessing_export_path``.

    tokenizer: the model's SentencePiece tokenizer (its model file becomes the vocab_file asset).
    """
    config = model.config
    check_export_settings(config, tokenizer, seq_length)
    for path in (export_path, preprocessing_export_path):
        if path:
            check_new_directory(path)
    preprocessing = PreprocessingModule(tokenizer, seq_length)

    def save(directory: str) -> None:
        with tempfile.TemporaryDirectory() as scratch:  # the config asset's source file
            config_file = os.path.join(scratch, CONFIG_ASSET)
            config.to_json_file(config_file)
            module = HubEncoderModule(model, tokenizer.source_file, config_file,
                                      tokenizer.do_lower_case)
            module.trace()
            tf.saved_model.save(module, directory, signatures=module.signatures())
        save_preprocessing(preprocessing, os.path.join(directory, PREPROCESSING_SUBDIR))

    save_new_directory(export_path, save)
    if preprocessing_export_path:  # the same traced module: saving it again costs little
        save_new_directory(preprocessing_export_path,
                           lambda directory: save_preprocessing(preprocessing, directory))
