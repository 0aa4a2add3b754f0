"""Hugging Face format directories: loading one into a model, writing a model as one.

A directory holds ``config.json`` (model_type albert), ``model.safetensors`` (or shards listed by
``model.safetensors.index.json``) and, when written with a SentencePiece model, ``spiece.model``,
``tokenizer.json`` (albert_tf's tokenization as a ``tokenizers`` pipeline,
albert_tf/checkpoints/hf_tokenizer.py) and ``tokenizer_config.json``: what ``transformers``'
``AlbertForPreTraining.from_pretrained(dir)`` / ``AlbertModel`` / ``AutoTokenizer`` and keras-hub's
``AlbertBackbone.from_preset(dir)`` load. Names and layouts are
albert_tf/checkpoints/hf_names.py's.

- ``is_hf_directory(path)``: whether ``path`` is such a directory.
- ``load_hf_checkpoint(model, directory)``: the warm start from one, with the same ``LoadReport``
  (reference names) and shape errors as the other formats. Its ``config.json`` must agree with the
  model's config where weight shapes cannot tell (layers, groups, heads, activation). Keys without
  the ``albert.`` prefix (an ``AlbertModel``'s own save) are the encoder's.
- ``write_hf_directory(model, directory, only=...)``: writes the encoder and the pretraining heads
  (SOP classifier, MLM transform and bias; the MLM decoder is the tied word-embedding table and is
  not stored, as transformers saves it), all files under a temporary directory renamed when
  complete.
"""

from __future__ import annotations

import json
import os
from typing import Iterable

import keras
import numpy as np
import safetensors.numpy
import tensorflow as tf

from albert_tf.checkpoints.files import SAVED_MODEL_FILE
from albert_tf.checkpoints.hf_names import (BUFFER_KEYS, ENCODER_PREFIX, PROJECTION_KEYS,
                                            TIED_KEYS, HuggingFaceFormatError,
                                            albert_config_from_hf, compute_differences,
                                            hf_config_dict, hf_key)
from albert_tf.checkpoints.hf_tokenizer import tokenizer_json
from albert_tf.checkpoints.report import (CheckpointMismatchError, LoadReport, model_description,
                                          shape_mismatch_error)
from albert_tf.checkpoints.tf1_names import group_zero_name, tf1_variable_map
from albert_tf.files.atomic import temporary_path
from albert_tf.files.json_objects import read_json_object
from albert_tf.models.config import AlbertConfig
from albert_tf.tokenization.full_tokenizer import FullTokenizer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
SPM_FILE = "spiece.model"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# Every file ``write_hf_directory`` writes: the only ones it ever replaces.
WRITTEN_FILES = (CONFIG_FILE, WEIGHTS_FILE, SPM_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE)
_METADATA = {"format": "pt"}  # what transformers requires of a safetensors file's header
_PAD_PIECE = "<pad>"


def is_hf_directory(path: str) -> bool:
    """Whether ``path`` is a Hugging Face format directory (config.json + safetensors weights)."""
    return (tf.io.gfile.isdir(path) and tf.io.gfile.exists(os.path.join(path, CONFIG_FILE))
            and not tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE))
            and any(tf.io.gfile.exists(os.path.join(path, name))
                    for name in (WEIGHTS_FILE, WEIGHTS_INDEX_FILE)))


def _read_json(path: str) -> dict:
    return read_json_object(path, HuggingFaceFormatError, path)


def read_hf_config(directory: str) -> AlbertConfig:
    """The AlbertConfig of the directory's ``config.json``; HuggingFaceFormatError for one albert_tf
    does not compute (hf_names.albert_config_from_hf)."""
    path = os.path.join(directory, CONFIG_FILE)
    return albert_config_from_hf(_read_json(path), path)


def _read_tensors(directory: str) -> dict[str, np.ndarray]:
    """{key: array} of the directory's weights (one file, or the shards its index lists), with the
    ``albert.`` prefix added to an ``AlbertModel``'s own keys."""
    index = os.path.join(directory, WEIGHTS_INDEX_FILE)
    files = ([WEIGHTS_FILE] if not tf.io.gfile.exists(index)
             else sorted(set(_read_json(index).get("weight_map", {}).values())))
    tensors: dict[str, np.ndarray] = {}
    for name in files:
        path = os.path.join(directory, name)
        try:
            with tf.io.gfile.GFile(path, "rb") as reader:
                tensors.update(safetensors.numpy.load(reader.read()))
        except KeyError as err:  # a dtype NumPy lacks
            raise HuggingFaceFormatError(
                f"Cannot read the weights {path}: dtype {err} has no NumPy type; save the model "
                "in float32 (model.float().save_pretrained(...)).") from None
        except (tf.errors.NotFoundError, safetensors.SafetensorError) as err:
            raise HuggingFaceFormatError(f"Cannot read the weights {path}: {err}") from None
    if not any(key.startswith(ENCODER_PREFIX) for key in tensors):
        tensors = {ENCODER_PREFIX + key: value for key, value in tensors.items()}
    return tensors


def _check_config(model: keras.Model, directory: str, init_from_group0: bool,
                  config_file: str | None) -> None:
    """CheckpointMismatchError when the directory's config.json differs from the model's config in
    what weight shapes cannot show (but num_hidden_groups when growing groups from group 0)."""
    differences = compute_differences(model.config, read_hf_config(directory))
    if init_from_group0:
        differences = [text for text in differences if not text.startswith("num_hidden_groups")]
    if differences:
        raise CheckpointMismatchError(
            f"Checkpoint {directory} does not fit {model_description(config_file)}: its "
            f"{CONFIG_FILE} has {'; '.join(differences)}. Use the config the checkpoint was "
            "written with.")


def _check_consistent(tensors: dict[str, np.ndarray], model: keras.Model, directory: str,
                      loaded_keys: set[str]) -> set[str]:
    """The keys that carry nothing of their own and are consistent: an identity projection for a
    model without one (E == H), the tied MLM decoder, buffers. CheckpointMismatchError for a
    projection that is not the identity or a decoder that is not tied."""
    accepted = {key for key in BUFFER_KEYS if key in tensors}
    albert = getattr(model, "albert", model)
    if albert.embedding_projection is None and PROJECTION_KEYS[0] in tensors:
        kernel, bias = tensors[PROJECTION_KEYS[0]], tensors.get(PROJECTION_KEYS[1], 0.0)
        if (kernel.shape[0] != kernel.shape[1] or not np.array_equal(kernel, np.eye(len(kernel)))
                or np.any(bias != 0)):
            raise CheckpointMismatchError(
                f"Checkpoint {directory}: {PROJECTION_KEYS[0]} is not the identity, but the model "
                "has embedding_size == hidden_size and no embedding projection; albert_tf cannot "
                "represent it (use embedding_size != hidden_size).")
        accepted.update(key for key in PROJECTION_KEYS if key in tensors)
    for key, tied_to in TIED_KEYS.items():
        if key in tensors and tied_to in loaded_keys:
            if not np.array_equal(tensors[key], tensors[tied_to]):
                raise CheckpointMismatchError(
                    f"Checkpoint {directory}: {key} differs from {tied_to}; albert_tf's MLM "
                    "decoder is tied to it (tie_word_embeddings).")
            accepted.add(key)
    return accepted


def load_hf_checkpoint(model: keras.Model, directory: str, init_from_group0: bool = False,
                       config_file: str | None = None) -> LoadReport:
    """Assigns the weights of the Hugging Face directory ``directory`` to ``model`` (an
    ``AlbertModel`` or a task model; a head the format lacks is reported missing).

    With ``init_from_group0`` a variable of group g that the directory lacks is read from group 0.
    CheckpointMismatchError on a shape mismatch or a config.json that computes another model,
    raised before any variable changes.
    """
    _check_config(model, directory, init_from_group0, config_file)
    tensors = _read_tensors(directory)
    loaded: dict[str, str] = {}
    missing: list[str] = []
    assignments = []
    for name, variable in tf1_variable_map(model).items():
        source = name
        found = hf_key(name)
        if (found is None or found[0] not in tensors) and init_from_group0:
            source = group_zero_name(name)
            found = hf_key(source)
        if found is None or found[0] not in tensors:
            missing.append(name)
            continue
        key, transposed = found
        value = tensors[key].T if transposed else tensors[key]
        if tuple(value.shape) != tuple(variable.shape):
            raise shape_mismatch_error(name, directory, value.shape, variable.shape, config_file)
        assignments.append((variable, value))
        loaded[name] = source
    loaded_keys = {hf_key(source)[0] for source in loaded.values()}
    accepted = _check_consistent(tensors, model, directory, loaded_keys)
    for variable, value in assignments:
        variable.assign(value.astype(np.float32))
    unused = sorted(tensors.keys() - loaded_keys - accepted)
    return LoadReport(checkpoint=directory, loaded=loaded, missing=missing, unused=unused,
                      ignored=len(accepted & set(BUFFER_KEYS)), kind="Hugging Face")


def _special_ids(spm_model_file: str | None, do_lower_case: bool) -> tuple[int, int, int]:
    """(pad, [CLS], [SEP]) ids of the SentencePiece model; the reference's layout (0, 2, 3)
    without one."""
    if not spm_model_file:
        return 0, 2, 3
    tokenizer = FullTokenizer(spm_model_file=spm_model_file, do_lower_case=do_lower_case)
    return tokenizer.vocab.get(_PAD_PIECE, 0), tokenizer.cls_id, tokenizer.sep_id


def _tokenizer_config(config: AlbertConfig, do_lower_case: bool) -> dict:
    """``tokenizer_config.json``: the class that loads ``tokenizer.json`` as it is (transformers'
    ``AlbertTokenizer`` would rebuild its own normalizer and pre-tokenizer around the vocabulary),
    ALBERT's special tokens and the inputs its models take. ``do_lower_case`` only records how
    tokenizer.json normalizes."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "do_lower_case": do_lower_case,
            "bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>",
            "sep_token": "[SEP]", "pad_token": _PAD_PIECE, "cls_token": "[CLS]",
            "mask_token": "[MASK]", "model_max_length": config.max_position_embeddings,
            "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
            "clean_up_tokenization_spaces": False}


def hf_tensors(model: keras.Model, only: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """{safetensors key: float32 array in the format's layout} of the model's variables (or of the
    reference names ``only``) that the format holds, with the identity projection of a model
    without one (E == H)."""
    variables = tf1_variable_map(model)
    names = list(variables) if only is None else list(only)
    tensors = {}
    for name in names:
        found = hf_key(name)
        if found is not None:
            value = variables[name].numpy().astype(np.float32)
            tensors[found[0]] = np.ascontiguousarray(value.T if found[1] else value)
    albert = getattr(model, "albert", model)
    if albert.embedding_projection is None:
        hidden = albert.config.hidden_size
        tensors[PROJECTION_KEYS[0]] = np.eye(hidden, dtype=np.float32)
        tensors[PROJECTION_KEYS[1]] = np.zeros(hidden, dtype=np.float32)
    return tensors


def unrepresented_names(model: keras.Model, only: Iterable[str] | None = None) -> list[str]:
    """The reference names (of ``only``, default all) that the format has no place for."""
    names = tf1_variable_map(model) if only is None else only
    return [name for name in names if hf_key(name) is None]


def foreign_files(directory: str) -> list[str]:
    """The names in ``directory`` (if it exists) that ``write_hf_directory`` does not write."""
    if not tf.io.gfile.isdir(directory):
        return []
    return sorted(name.rstrip("/") for name in tf.io.gfile.listdir(directory)
                  if name.rstrip("/") not in WRITTEN_FILES)


def write_hf_directory(model: keras.Model, directory: str, only: Iterable[str] | None = None,
                       spm_model_file: str | None = None, do_lower_case: bool = True) -> int:
    """Writes ``model`` (only the reference names ``only``, default all) as the Hugging Face
    directory ``directory`` (replacing an earlier one written here; a directory holding any other
    file is refused, naming it); returns the number of tensors written.

    ``spm_model_file``: copied as ``spiece.model``, with ``tokenizer.json`` (encodes as
    ``FullTokenizer(spm_model_file, do_lower_case).encode_text``) and ``tokenizer_config.json``;
    its [CLS], [SEP] and <pad> ids go into config.json. HuggingFaceFormatError for a config the
    format cannot represent (hf_names.check_representable) or a SentencePiece model tokenizer.json
    cannot express (hf_tokenizer), before anything is written.
    """
    foreign = foreign_files(directory)
    if foreign:
        raise HuggingFaceFormatError(f"{directory} holds other files than a Hugging Face "
                                     f"directory written here ({', '.join(foreign)}); it is not "
                                     "replaced.")
    config = getattr(model, "albert", model).config
    tensors = hf_tensors(model, only)
    with_heads = any(not key.startswith(ENCODER_PREFIX) for key in tensors)
    values = hf_config_dict(config, with_heads, *_special_ids(spm_model_file, do_lower_case))
    texts = {}
    if spm_model_file:
        with tf.io.gfile.GFile(spm_model_file, "rb") as reader:
            texts[TOKENIZER_FILE] = tokenizer_json(reader.read(), do_lower_case, spm_model_file)
    with temporary_path(directory.rstrip("/")) as temporary:
        tf.io.gfile.makedirs(temporary)
        with tf.io.gfile.GFile(os.path.join(temporary, WEIGHTS_FILE), "wb") as writer:
            writer.write(safetensors.numpy.save(tensors, metadata=_METADATA))
        files = {CONFIG_FILE: values}
        if spm_model_file:
            tf.io.gfile.copy(spm_model_file, os.path.join(temporary, SPM_FILE))
            files[TOKENIZER_CONFIG_FILE] = _tokenizer_config(config, do_lower_case)
        texts.update({name: json.dumps(content, indent=2, sort_keys=True) + "\n"
                      for name, content in files.items()})
        for name, text in texts.items():
            with tf.io.gfile.GFile(os.path.join(temporary, name), "w") as writer:
                writer.write(text)
        if tf.io.gfile.isdir(directory):
            tf.io.gfile.rmtree(directory)
    return len(tensors)
