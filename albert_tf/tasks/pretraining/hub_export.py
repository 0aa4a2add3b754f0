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
``keras.layers.TFSMLayer(export_path, call_endpoint="tokens")``). Each checks its inputs in the
graph, as the fine-tuned exports do (albert_tf/serving/input_checks.py): every input has the shape
of ``input_ids``, of 1 to max_position_embeddings positions, ids and segment ids in the config's
vocabularies; ``mlm_positions`` has a row per example and positions inside the sequence. A wrong
input is an InvalidArgumentError naming it; an empty batch gives empty outputs.

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

import tensorflow as tf

from albert_tf.checkpoints.files import resolve_checkpoint_path
from albert_tf.checkpoints.warm_start import load_checkpoint
from albert_tf.evaluation.checkpoint_sweep import BEST_PREFIX
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.serving.input_checks import gated, same_rows, token_ids_checks, values_in_range
from albert_tf.serving.preprocessing import PreprocessingModule, save_preprocessing
from albert_tf.serving.saved_model import check_new_directory, save_new_directory
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer

CONFIG_ASSET = "albert_config.json"
PREPROCESSING_SUBDIR = "preprocessing"
SIGNATURES = ("tokens", "sop", "mlm", "tokenization_info", "serving_default")


def _int_inputs(*names: str) -> dict[str, tf.TensorSpec]:
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in names}


_ID_INPUTS = _int_inputs(*INPUT_NAMES)


_MLM_INPUTS = _int_inputs(*INPUT_NAMES, "mlm_positions")


class HubExportError(ValueError):
    """The export cannot be written as asked (the message names the file or flag and why)."""


class HubEncoderModule(tf.Module):
    """The pretraining model's encoder and heads behind the reference hub module's signatures
    (inference mode, no dropout), plus the tokenizer's assets."""

    def __init__(self, model: AlbertPretrainingModel, spm_model_file: str, config_file: str,
                 do_lower_case: bool):
        super().__init__(name="albert_hub_module")
        self.model = model
        self.vocab_file = tf.saved_model.Asset(spm_model_file)
        self.config_file = tf.saved_model.Asset(config_file)
        self.do_lower_case = do_lower_case

    # Each function takes one dict, so that the saved function (``loaded.tokens(inputs)``, Keras'
    # TFSMLayer) and the signature (``loaded.signatures["tokens"](**inputs)``) share their inputs.

    def _checked(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """``inputs`` after the checks of every ids signature (each has the shape of input_ids, of
        1 to max_position_embeddings positions, ids in the vocabulary) and, with mlm_positions, a
        row of positions inside the sequence per example."""
        input_ids = inputs["input_ids"]
        checks = token_ids_checks({name: inputs[name] for name in _ID_INPUTS}, self.model.config)
        if "mlm_positions" in inputs:
            positions = inputs["mlm_positions"]
            checks += [*same_rows({"input_ids": input_ids, "mlm_positions": positions},
                                  "input_ids"),
                       values_in_range(positions, "mlm_positions", 0, tf.shape(input_ids)[1],
                                       "the positions of input_ids")]
        return gated(inputs, checks)

    def _encode(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        outputs = self.model.albert(self._checked(inputs), training=False)
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
    def mlm(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """tokens' outputs plus mlm_logits [B*P, V] (row b*P + p: position mlm_positions[b, p])."""
        inputs = self._checked(inputs)
        model_inputs = {name: inputs[name] for name in _ID_INPUTS}
        outputs = self.model({**model_inputs, "masked_lm_positions": inputs["mlm_positions"]},
                             training=False)
        logits = outputs["mlm_logits"]
        return {"sequence_output": outputs["sequence_output"],
                "pooled_output": outputs["pooled_output"],
                "mlm_logits": tf.reshape(logits, [-1, tf.shape(logits)[-1]])}

    @tf.function(input_signature=[])
    def tokenization_info(self) -> dict[str, tf.Tensor]:
        """vocab_file: path of the SentencePiece model asset (string); do_lower_case (bool)."""
        return {"vocab_file": self.vocab_file.asset_path,
                "do_lower_case": tf.constant(self.do_lower_case)}

    def signatures(self) -> dict[str, tf.types.experimental.GenericFunction]:
        """The SavedModel signatures (traced by the save itself)."""
        return {"tokens": self.tokens, "sop": self.sop, "mlm": self.mlm,
                "tokenization_info": self.tokenization_info, "serving_default": self.tokens}


def checkpoint_to_export(path: str) -> str:
    """The prefix ``--checkpoint`` names: a directory's ``model.ckpt-best`` when it has one, else
    what ``resolve_checkpoint_path`` finds (its latest checkpoint, or the variables of
    an export)."""
    if tf.io.gfile.isdir(path):
        best = os.path.join(path, BEST_PREFIX)
        if tf.io.gfile.exists(best + ".index"):
            return best
    try:
        return resolve_checkpoint_path(path)
    except FileNotFoundError as err:
        raise HubExportError(f"--checkpoint: {err}") from None


def load_pretraining_weights(model: AlbertPretrainingModel, path: str) -> str:
    """Loads encoder, MLM and SOP heads from a checkpoint prefix of either format (printing the
    load report); returns a description. Raises HubExportError when the heads are missing (e.g. a
    fine-tuned checkpoint): the ``sop`` and ``mlm`` signatures would be random."""
    report = load_checkpoint(model, path)
    print(report.format())
    report.require_complete_encoder()
    if report.missing:
        raise HubExportError(
            f"{report.checkpoint} lacks the MLM and SOP heads (cls/predictions, "
            "cls/seq_relationship) of the model: the hub export needs a pretraining checkpoint, "
            "not a fine-tuned one.")
    return f"{report.kind} checkpoint {report.checkpoint}"


def export_encoder(model: AlbertPretrainingModel, tokenizer: FullTokenizer, export_path: str,
                   seq_length: int, preprocessing_export_path: str | None = None) -> None:
    """Writes the hub-style SavedModel of ``model`` to a new ``export_path``, with the
    preprocessing model at ``seq_length`` in its ``preprocessing/`` and, if given, in
    ``preprocessing_export_path``.

    tokenizer: the model's SentencePiece tokenizer (its model file becomes the vocab_file asset).
    """
    config = model.config
    if tokenizer.sp_model is None:
        raise HubExportError("the hub export needs a SentencePiece model (--spm_model_file); "
                             f"{tokenizer.source_file} is a WordPiece vocabulary.")
    if tokenizer.vocab_size != config.vocab_size:
        raise HubExportError(f"vocab_size={config.vocab_size} of the config does not match the "
                             f"{tokenizer.vocab_size} pieces of {tokenizer.source_file}.")
    if seq_length > config.max_position_embeddings:
        raise HubExportError(f"--max_seq_length={seq_length} exceeds the config's "
                             f"max_position_embeddings={config.max_position_embeddings}.")
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
            tf.saved_model.save(module, directory, signatures=module.signatures())
        save_preprocessing(preprocessing, os.path.join(directory, PREPROCESSING_SUBDIR))

    save_new_directory(export_path, save)
    if preprocessing_export_path:  # the same traced module: saving it again costs little
        save_new_directory(preprocessing_export_path,
                           lambda directory: save_preprocessing(preprocessing, directory))
