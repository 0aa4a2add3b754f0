"""Converting checkpoints between the reference TF1 format, albert_tf's own and the Hugging Face
format (the library of ``python -m albert_tf.convert_checkpoint``).

- ``tf1_to_albert_tf``: a reference checkpoint -> ``output_dir/model.ckpt-0`` (albert_tf's format);
- ``albert_tf_to_tf1``: an albert_tf checkpoint (prefix or directory) -> ``output_dir/model.ckpt``;
- ``huggingface_to_albert_tf``: a Hugging Face directory -> ``output_dir/model.ckpt-0`` and
  ``output_dir/albert_config.json`` (and its ``spiece.model``);
- ``to_huggingface``: any of the three (``--tf1_checkpoint``, ``--checkpoint``) -> a Hugging Face
  directory (albert_tf/checkpoints/hf_format.py), with the SentencePiece model when given.

All load the source into the model they are given, print the load report and require the whole
encoder. The config of a TF1 or albert_tf source is checked against the one beside it where the
weights cannot show it, its depth included, or said to be taken unchecked when there is none
(albert_tf/checkpoints/config_beside.py). Only what the source holds is written: a head the
source lacks is left out of the output, never written with its random initial values; a source
variable the model lacks is named as dropped. ``choose_task_model`` picks the model from the
source's head variables among the task models the command lists (``TaskHead``: pretraining,
classifier, SQuAD v1 and v2, RACE), so a fine-tuned checkpoint's head is carried under the
reference's names (``output_weights`` / ``output_bias``, ``cls/squad/*``, ``start_logits/*`` ...).

The Hugging Face format holds the encoder and the pretraining heads only: another head is named
as left out. It cannot hold a ``cross_layer_sharing`` other than ``all`` (a
``HuggingFaceFormatError`` before anything is read).

The output directory belongs to the converter (``check_output_dir``; for a Hugging Face directory
``check_hf_output_dir``: new, empty, or an earlier export). One that holds any other
checkpoint (a training run's, a released model's) is refused, ``overwrite`` or not: writing there
would change the ``checkpoint`` state file that run resumes from. An earlier conversion of the same
direction is replaced only with ``overwrite``. Source format and output directory are checked
before anything is loaded; a refusal is a ``ConversionError``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Mapping, Sequence

import keras
import tensorflow as tf

from albert_tf.checkpoints.config_beside import check_config_of_conversion
from albert_tf.checkpoints.files import (CHECKPOINT_STATE_FILE, TF2_CHECKPOINT_NAME,
                                         is_object_based_checkpoint, write_checkpoint_state)
from albert_tf.checkpoints.hf_format import (CONFIG_FILE, SPM_FILE, foreign_files, is_hf_directory,
                                             load_hf_checkpoint, unrepresented_names,
                                             write_hf_directory)
from albert_tf.checkpoints.hf_names import check_representable, keras_hub_differences
from albert_tf.checkpoints.hf_tokenizer import check_supported
from albert_tf.checkpoints.object_format import (checkpoint_root, load_object_checkpoint,
                                                 object_variable_paths, stored_model_variables)
from albert_tf.checkpoints.run_directory import resolve_checkpoint_path
from albert_tf.checkpoints.report import LoadReport
from albert_tf.checkpoints.tf1_format import export_tf1_checkpoint, load_tf1_checkpoint
from albert_tf.checkpoints.tf1_names import canonical_name, is_ignored_name, tf1_variable_map
from albert_tf.errors.user_error import UserError
from albert_tf.files.paths import absolute_path
from albert_tf.models.config import AlbertConfig
from albert_tf.models.task_model import AlbertTaskModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer

ALBERT_TF_OUTPUT = f"{TF2_CHECKPOINT_NAME}-0"  # the prefix a reference checkpoint converts to
TF1_OUTPUT = TF2_CHECKPOINT_NAME  # the prefix an albert_tf checkpoint converts to
_TEMPORARY_SUFFIX = ".tmp-export"  # export_tf1_checkpoint's temporary prefix
ALBERT_CONFIG_OUTPUT = "albert_config.json"  # the config a Hugging Face directory converts to
HF_SOURCE_FLAG = "hf_checkpoint"  # the command's flag for a Hugging Face directory
# What a Hugging Face directory's conversion writes beside its checkpoint and state file.
HF_IMPORT_FILES = (ALBERT_CONFIG_OUTPUT, SPM_FILE)


# A source's head variables: {reference name: shape}.
HeadShapes = Mapping[str, tuple[int, ...]]


class ConversionError(UserError, ValueError):
    """A conversion refused before any work: a source of the wrong format, an unusable output."""


@dataclasses.dataclass(frozen=True)
class TaskHead:
    """A task model whose head the converter carries under the reference's names.

    name: how ``--head`` names it. build(config, shapes): the model for ``config``; ``shapes`` are
    the source's head variables (empty when only the names are wanted), e.g. a classifier takes its
    number of labels from ``output_bias``. fits(shapes): whether a source with these head variables
    can be this model's (RACE's choice scorer has one output, a classifier any number).
    """

    name: str
    build: Callable[[AlbertConfig, HeadShapes], AlbertTaskModel]
    fits: Callable[[HeadShapes], bool] = lambda shapes: True


def _head_names(head: TaskHead, num_hidden_layers: int) -> dict[str, str]:
    """{object path below the model, '/'-joined: reference name} of the head variables of
    ``head``'s model with ``num_hidden_layers`` layers (an early-exit classifier has a head per
    layer), read off a model of an otherwise minimal config (names do not depend on sizes)."""
    config = AlbertConfig.from_dict(dict(vocab_size=4, embedding_size=2, hidden_size=2,
                                         num_hidden_layers=num_hidden_layers,
                                         num_attention_heads=1, intermediate_size=2,
                                         max_position_embeddings=4))
    model = head.build(config, {})
    reference = {id(variable): name for name, variable in model.tf1_head_variables().items()}
    return {"/".join(path[1:]): reference[id(variable)]
            for path, variable in object_variable_paths(checkpoint_root(model)).items()
            if path[1] != "albert"}


def _source_heads(prefix: str, object_based: bool) -> dict[str, tuple[int, ...]]:
    """The checkpoint's variables outside the encoder, with their shapes: by object path below the
    model ('/'-joined) for an albert_tf checkpoint, by reference name for a TF1 one."""
    if object_based:
        return {"/".join(path): shape for path, shape in stored_model_variables(prefix).items()
                if path[0] != "albert"}
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    return {canonical_name(name): tuple(shape) for name, shape in shapes.items()
            if not is_ignored_name(name) and not canonical_name(name).startswith("bert/")}


def choose_task_model(checkpoint: str, flag: str, config: AlbertConfig,
                      heads: Sequence[TaskHead], head: str | None = None) -> AlbertTaskModel:
    """The model of ``heads`` to convert ``--<flag>=checkpoint`` with (flag "checkpoint": an
    albert_tf checkpoint, "tf1_checkpoint": a reference one), built for ``config`` with the sizes
    of the source's head.

    ``head`` names it; by default the source's head variables choose: the model whose head holds
    most of them and fits their shapes, the first of ``heads`` for a source without any (an
    encoder). ConversionError for an unknown ``head``, or when two models fit equally (root-scoped
    ``output_weights`` [1, H] are a one-output classifier's, e.g. STS-B, or RACE's), naming the
    ``--head`` values to choose from.
    """
    object_based = flag == "checkpoint"
    source = _source_heads(_source(checkpoint, flag, object_based), object_based)
    by_name = {candidate.name: candidate for candidate in heads}
    if head is not None and head not in by_name:
        raise ConversionError(f"--head={head}: expected one of {', '.join(by_name)}")
    scored = []
    for candidate in [by_name[head]] if head else heads:
        names = _head_names(candidate, config.num_hidden_layers)
        shapes = {name: source[key if object_based else name]
                  for key, name in names.items() if (key if object_based else name) in source}
        if head or candidate.fits(shapes):
            scored.append((len(shapes), candidate, shapes))
    best = max(count for count, _, _ in scored)
    if best == 0 and not head:
        return heads[0].build(config, {})
    chosen = [(candidate, shapes) for count, candidate, shapes in scored if count == best]
    if len(chosen) > 1:
        choices = " or ".join(f"--head={candidate.name}" for candidate, _ in chosen)
        raise ConversionError(f"--{flag}={checkpoint}: its head ({', '.join(sorted(source))}) "
                              f"fits more than one model; give {choices}")
    candidate, shapes = chosen[0]
    return candidate.build(config, shapes)


def _checkpoints_in(directory: str) -> set[str]:
    """Names of the checkpoint prefixes in ``directory``: its ``.index`` files and the entries of
    its ``checkpoint`` state file (the temporary prefix of an interrupted export excluded)."""
    names = {name[:-len(".index")] for name in tf.io.gfile.listdir(directory)
             if name.endswith(".index") and not name.endswith(_TEMPORARY_SUFFIX + ".index")}
    state = tf.train.get_checkpoint_state(directory)
    if state is not None:
        listed = [state.model_checkpoint_path, *state.all_model_checkpoint_paths]
        names.update(os.path.basename(path) for path in listed if path)
    return names


def check_output_dir(output_dir: str, output_name: str, overwrite: bool,
                     beside: Sequence[str] = ()) -> str:
    """The prefix ``output_dir/output_name`` to write. ConversionError when ``output_dir`` is a
    file, holds any other checkpoint (never touched, even with ``overwrite``), already holds
    ``output_name`` and ``overwrite`` is False, or holds a file the conversion writes beside its
    checkpoint (the ``checkpoint`` state file, and the names ``beside``, e.g. albert_config.json)
    without an earlier conversion there: such a file is the user's, which the conversion would
    replace."""
    prefix = os.path.join(absolute_path(output_dir), output_name)
    if not tf.io.gfile.exists(output_dir):
        return prefix
    if not tf.io.gfile.isdir(output_dir):
        raise ConversionError(f"--output_dir={output_dir} is a file; expected a directory.")
    present = _checkpoints_in(output_dir)
    others = sorted(present - {output_name})
    if others:
        raise ConversionError(
            f"--output_dir={output_dir} holds other checkpoints ({', '.join(others[:5])}): it is a "
            "training run's or a model's directory, and converting into it would change the "
            "'checkpoint' file that it resumes from. Choose a new or empty directory "
            "(--overwrite never applies to other checkpoints).")
    if output_name not in present:
        taken = [name for name in (CHECKPOINT_STATE_FILE, *beside)
                 if tf.io.gfile.exists(os.path.join(output_dir, name))]
        if taken:
            raise ConversionError(
                f"--output_dir={output_dir} holds {', '.join(taken)} but no earlier conversion: "
                f"the conversion writes {'these names' if len(taken) > 1 else 'that name'} beside "
                f"{output_name} and would replace the user's file. Choose a new or empty "
                "directory (--overwrite replaces only an earlier conversion).")
    elif not overwrite:
        raise ConversionError(f"{prefix} already exists (an earlier conversion); pass --overwrite "
                              "to replace it, or choose another --output_dir.")
    return prefix


def check_source(path: str, flag: str) -> str:
    """The source ``--<flag>=path`` checked to be of that flag's format (the command calls it
    before any work): a Hugging Face directory for ``hf_checkpoint``, a checkpoint of the flag's
    format otherwise; its prefix (the directory for a Hugging Face one). ConversionError naming
    the flag to give instead (a Hugging Face directory given as a checkpoint, or the reverse)."""
    if flag == HF_SOURCE_FLAG:
        if is_hf_directory(path):
            return path
        if not tf.io.gfile.exists(path):
            raise ConversionError(f"--{flag}={path} does not exist (expected a Hugging Face "
                                  f"directory: {CONFIG_FILE} and model.safetensors).")
        hint = ""
        try:
            prefix = resolve_checkpoint_path(path)
            hint = (" It is an albert_tf checkpoint: pass it as --checkpoint."
                    if is_object_based_checkpoint(prefix) else
                    " It is a reference TF1 checkpoint: pass it as --tf1_checkpoint.")
        except FileNotFoundError:
            pass
        raise ConversionError(f"--{flag}={path} is not a Hugging Face directory (expected "
                              f"{CONFIG_FILE} and model.safetensors in it).{hint}")
    return _source(path, flag, object_based=flag == "checkpoint")


def _source(path: str, flag: str, object_based: bool) -> str:
    """The checkpoint prefix that ``--<flag>=path`` names, checked to have that flag's format."""
    if is_hf_directory(path):
        raise ConversionError(f"--{flag}={path} is a Hugging Face directory: pass it as "
                              f"--{HF_SOURCE_FLAG} (it converts to albert_tf; convert that "
                              "output further for another format).")
    try:
        prefix = resolve_checkpoint_path(path)
    except FileNotFoundError as err:
        raise ConversionError(f"--{flag}: {err}") from None
    if is_object_based_checkpoint(prefix) != object_based:
        hint = ("an albert_tf checkpoint; pass it as --checkpoint to convert it to the reference "
                "format." if not object_based else
                "a reference TF1 checkpoint; pass it as --tf1_checkpoint to convert it to "
                "albert_tf.")
        raise ConversionError(f"--{flag}={path} is {hint}")
    return prefix


def _complete_parts(model: keras.Model,
                    report: LoadReport) -> tuple[dict[str, keras.layers.Layer], list[str]]:
    """({attribute: part}, [attribute]) of the model's parts (encoder, each head) whose variables
    the report loaded all of, and of those it did not."""
    loaded = {id(tf1_variable_map(model)[name]) for name in report.loaded}
    complete: dict[str, bool] = {}
    for object_path, variable in object_variable_paths(checkpoint_root(model)).items():
        part = object_path[1]  # (model, part, ...)
        complete[part] = complete.get(part, True) and id(variable) in loaded
    children = tf.train.TrackableView(model).children(model)
    return ({name: children[name] for name, ok in complete.items() if ok},
            [name for name, ok in complete.items() if not ok])


def _report_load(report: LoadReport, model: AlbertTaskModel, output_prefix: str,
                 config_file: str | None) -> None:
    """Prints the load report, raises if encoder variables are missing or left unused (the
    config of ``config_file`` is not the checkpoint's), and names the source's head variables that
    the output will not hold (the model has no such)."""
    print(report.format())
    report.require_same_encoder(config_file)
    if report.unused:
        print(f"Dropped, not carried to {output_prefix} ({model.name} has no such variable): "
              f"{', '.join(report.unused)}.")


def tf1_to_albert_tf(model: AlbertTaskModel, tf1_checkpoint: str, output_dir: str,
                     init_from_group0: bool = False, overwrite: bool = False,
                     config_file: str | None = None) -> str:
    """Converts a reference checkpoint to ``output_dir/model.ckpt-0``; returns that prefix.

    model: a fresh task model of the checkpoint's config (the command uses the pretraining model,
    whose heads a released checkpoint holds); the source is loaded into it.

    Prints the load report; raises if encoder variables are missing. The encoder and each head
    the source holds completely are written; the ``checkpoint`` state file then names the output.
    """
    output_prefix = check_output_dir(output_dir, ALBERT_TF_OUTPUT, overwrite)
    report = _load_source(model, tf1_checkpoint, "tf1_checkpoint", init_from_group0, config_file)
    _report_load(report, model, output_prefix, config_file)
    parts, left_out = _complete_parts(model, report)
    if left_out:
        print(f"Left out of {output_prefix} (not in the source): {', '.join(left_out)}.")
    prefix = tf.train.Checkpoint(model=tf.train.Checkpoint(**parts)).write(output_prefix)
    write_checkpoint_state(os.path.dirname(prefix), ALBERT_TF_OUTPUT)
    return prefix


def albert_tf_to_tf1(model: AlbertTaskModel, checkpoint: str, output_dir: str,
                     init_from_group0: bool = False, overwrite: bool = False,
                     config_file: str | None = None) -> tuple[str, str, int]:
    """Converts an albert_tf checkpoint to ``output_dir/model.ckpt`` under the reference names;
    returns (the checkpoint read, the prefix written, the number of variables written).

    model: a fresh task model of the checkpoint's config, loaded from the source.

    Prints the load report; raises if encoder variables are missing; writes only the variables
    the source holds.
    """
    output_prefix = check_output_dir(output_dir, TF1_OUTPUT, overwrite)
    report = _load_source(model, checkpoint, "checkpoint", init_from_group0, config_file)
    _report_load(report, model, output_prefix, config_file)
    if report.missing:
        print(f"Left out of {output_prefix} (not in the source): {', '.join(report.missing)}.")
    export_tf1_checkpoint(model, output_prefix, only=report.loaded)
    return report.checkpoint, output_prefix, len(report.loaded)


def check_hf_output_dir(output_dir: str, overwrite: bool) -> None:
    """ConversionError unless ``output_dir`` is new, empty, or (with ``overwrite``) holds only the
    files an earlier conversion writes (``WRITTEN_FILES``): anything else is never replaced and is
    named."""
    if not tf.io.gfile.exists(output_dir):
        return
    if not tf.io.gfile.isdir(output_dir):
        raise ConversionError(f"--output_dir={output_dir} is a file; expected a directory.")
    if not tf.io.gfile.listdir(output_dir):
        return
    foreign = foreign_files(output_dir)
    if foreign:
        raise ConversionError(
            f"--output_dir={output_dir} holds other files ({', '.join(foreign[:5])}), which the "
            "conversion did not write; the Hugging Face directory is written as a whole and never "
            "replaces them. Choose a new or empty directory.")
    if not overwrite:
        raise ConversionError(f"--output_dir={output_dir} already holds a Hugging Face directory "
                              "(an earlier conversion); pass --overwrite to replace it, or choose "
                              "another --output_dir.")


def _load_source(model: AlbertTaskModel, path: str, flag: str, init_from_group0: bool,
                 config_file: str | None) -> LoadReport:
    """Loads ``--<flag>=path`` (tf1_checkpoint, checkpoint or hf_checkpoint) into ``model``,
    refusing a source of another format than the flag's, and a config that is not the one beside
    a TF1 or albert_tf checkpoint where the weights cannot show it (``check_config_of_conversion``;
    a Hugging Face directory's config.json is compared by its loader)."""
    if flag == HF_SOURCE_FLAG:
        return load_hf_checkpoint(model, check_source(path, flag), init_from_group0, config_file)
    object_based = flag == "checkpoint"
    source = _source(path, flag, object_based)
    check_config_of_conversion(source, model.config, config_file, init_from_group0)
    loader = load_object_checkpoint if object_based else load_tf1_checkpoint
    return loader(model, source, init_from_group0, config_file)


def huggingface_to_albert_tf(model: AlbertTaskModel, hf_checkpoint: str, output_dir: str,
                             init_from_group0: bool = False, overwrite: bool = False,
                             config_file: str | None = None) -> str:
    """Converts a Hugging Face directory to ``output_dir/model.ckpt-0``; returns that prefix.

    model: a fresh task model (the pretraining model: the heads the format holds) of the
    directory's config, or of ``config_file``, which must agree with its config.json. Writes the
    model's config as ``output_dir/albert_config.json`` and copies ``spiece.model`` when the
    directory has one. Prints the load report; raises if encoder variables are missing.
    """
    output_prefix = check_output_dir(output_dir, ALBERT_TF_OUTPUT, overwrite,
                                     beside=HF_IMPORT_FILES)
    report = _load_source(model, hf_checkpoint, HF_SOURCE_FLAG, init_from_group0, config_file)
    _report_load(report, model, output_prefix, config_file)
    parts, left_out = _complete_parts(model, report)
    if left_out:
        print(f"Left out of {output_prefix} (not in the source): {', '.join(left_out)}.")
    prefix = tf.train.Checkpoint(model=tf.train.Checkpoint(**parts)).write(output_prefix)
    model.config.to_json_file(os.path.join(os.path.dirname(prefix), ALBERT_CONFIG_OUTPUT))
    spm_model = os.path.join(hf_checkpoint, SPM_FILE)
    if tf.io.gfile.exists(spm_model):
        tf.io.gfile.copy(spm_model, os.path.join(os.path.dirname(prefix), SPM_FILE),
                         overwrite=True)
    write_checkpoint_state(os.path.dirname(prefix), ALBERT_TF_OUTPUT)
    return prefix


def _check_vocabulary(spm_model_file: str, config: AlbertConfig, config_file: str | None) -> None:
    """ConversionError when the SentencePiece model has another number of pieces than the config's
    vocab_size: the directory's tokenizer would give ids the embedding table lacks, or its ids
    would mean other pieces than the model was trained on."""
    pieces = FullTokenizer(spm_model_file=spm_model_file).vocab_size
    if pieces != config.vocab_size:
        raise ConversionError(
            f"--spm_model_file={spm_model_file} has {pieces} pieces, but vocab_size="
            f"{config.vocab_size} in {config_file or 'the config'}: the Hugging Face directory's "
            "tokenizer must be the one the checkpoint was trained with; give that SentencePiece "
            "model (or the config of this one's model).")


def to_huggingface(model: AlbertTaskModel, source: str, flag: str, output_dir: str,
                   spm_model_file: str | None = None, do_lower_case: bool = True,
                   init_from_group0: bool = False, overwrite: bool = False,
                   config_file: str | None = None) -> tuple[str, int]:
    """Converts ``--<flag>=source`` (an albert_tf or a reference checkpoint) to the Hugging Face
    directory ``output_dir``; returns (the checkpoint read, the number of tensors written).

    model: a fresh task model of the checkpoint's config. HuggingFaceFormatError first when its
    config cannot be represented, or ``spm_model_file`` in a tokenizer.json (hf_tokenizer). Prints
    the load report; raises if encoder variables are missing;
    writes only what the source holds and the format has a place for (the encoder, the
    pretraining heads), naming the rest as left out; notes where keras-hub computes another model.
    """
    check_representable(model.config)
    check_hf_output_dir(output_dir, overwrite)
    if spm_model_file:
        if not tf.io.gfile.exists(spm_model_file):
            raise ConversionError(f"--spm_model_file={spm_model_file} does not exist.")
        with tf.io.gfile.GFile(spm_model_file, "rb") as reader:
            check_supported(reader.read(), f"--spm_model_file={spm_model_file}")
        _check_vocabulary(spm_model_file, model.config, config_file)
    report = _load_source(model, source, flag, init_from_group0, config_file)
    _report_load(report, model, output_dir, config_file)
    if report.missing:
        print(f"Left out of {output_dir} (not in the source): {', '.join(report.missing)}.")
    unrepresented = unrepresented_names(model, report.loaded)
    if unrepresented:
        print(f"Left out of {output_dir} (the Hugging Face format holds the encoder and the "
              f"pretraining heads only): {model.describe_head_names(unrepresented)}.")
    count = write_hf_directory(model, output_dir, only=report.loaded,
                               spm_model_file=spm_model_file, do_lower_case=do_lower_case)
    differences = keras_hub_differences(model.config)
    if differences:
        print(f"Note: keras-hub's AlbertBackbone loads {output_dir} but computes another model: "
              f"{'; '.join(differences)} (transformers computes this one).")
    return report.checkpoint, count
