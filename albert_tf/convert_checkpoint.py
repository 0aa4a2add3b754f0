"""Command line: converts checkpoints between the reference TF1 format, albert_tf's own and the
Hugging Face format.

    # reference TF1 checkpoint -> albert_tf checkpoint (output_dir/model.ckpt-0)
    python -m albert_tf.convert_checkpoint --albert_config_file=albert_config.json \\
        --tf1_checkpoint=model.ckpt-best --output_dir=converted/ [--init_from_group0]
    # albert_tf checkpoint (prefix or directory) -> reference TF1 checkpoint (output_dir/model.ckpt)
    python -m albert_tf.convert_checkpoint --albert_config_file=albert_config.json \\
        --checkpoint=runs/pretrain/ --output_dir=exported/
    # albert_tf or reference checkpoint -> Hugging Face directory (transformers, keras-hub)
    python -m albert_tf.convert_checkpoint --albert_config_file=albert_config.json \\
        --checkpoint=runs/pretrain/ --to=huggingface --spm_model_file=30k-clean.model \\
        --output_dir=hf/
    # Hugging Face directory -> albert_tf checkpoint (+ albert_config.json, spiece.model)
    python -m albert_tf.convert_checkpoint --hf_checkpoint=hf/ --output_dir=converted/

Both directions go through the task model whose head the source holds (``--head`` names it,
else the source's variables choose among ``TASK_HEADS``: the pretraining model, a GLUE classifier,
an early-exit classifier of run_classifier --early_exit, SQuAD v1 or v2, RACE), so a fine-tuned
head is carried under the reference's names (the early-exit internal classifiers under theirs,
``early_exit/layer_<j>/*``); they print
the load report and require the whole encoder (a Hugging Face directory carries the encoder and the
pretraining heads only; ``--hf_checkpoint`` takes its config from its config.json unless
``--albert_config_file`` is given); a head the source lacks is left out of the output,
a source variable the model lacks is named as dropped. An output directory holding any other
checkpoint, or the source, is refused (for ``--to=huggingface``: any other file); an earlier
conversion is replaced only with ``--overwrite``. Flags, source format and output directory are
checked before anything is loaded.

This module holds the flags and the wiring only; the conversion is
albert_tf/checkpoints/conversion.py.
"""

from __future__ import annotations

import os

from absl import flags

from albert_tf.cli import command_line, flag_definitions

flag_definitions.define("albert_config_file", "init_from_group0", "spm_model_file",
                        "do_lower_case")
flags.DEFINE_string("tf1_checkpoint", None, "Reference TF1 checkpoint to convert to albert_tf.")
flags.DEFINE_string("checkpoint", None,
                    "albert_tf checkpoint to convert to the reference format.")
flags.DEFINE_string("hf_checkpoint", None,
                    "Hugging Face directory (config.json, model.safetensors) to convert to "
                    "albert_tf; --albert_config_file may be left out (taken from config.json).")
# The format each source converts to by default (--to names another).
DEFAULT_TARGETS = {"tf1_checkpoint": "albert_tf", "checkpoint": "reference",
                   "hf_checkpoint": "albert_tf"}
flags.DEFINE_enum("to", None, ["albert_tf", "reference", "huggingface"],
                  "The format to write (default: albert_tf for --tf1_checkpoint and "
                  "--hf_checkpoint, reference for --checkpoint); huggingface writes a directory "
                  "that transformers and keras-hub load, with --spm_model_file's tokenizer.")
flags.DEFINE_string("output_dir", None,
                    "Directory for the converted checkpoint: new, empty, or holding only an "
                    "earlier conversion (replaced with --overwrite). A directory holding other "
                    "checkpoints (a training run) is refused.")
flags.DEFINE_bool("overwrite", False,
                  "Replace an earlier conversion in --output_dir (never other checkpoints).")
flags.mark_flags_as_required(["output_dir"])

# The task heads a conversion can carry, in the order TASK_HEADS (below) tries them.
HEAD_NAMES = ("pretraining", "classifier", "early_exit", "squad_v1", "squad_v2", "race")
flags.DEFINE_enum("head", None, list(HEAD_NAMES),
                  "The task model whose head to carry (default: the one the source's head "
                  "variables fit; needed where root output_weights [1, H] may be a one-output "
                  "classifier's or RACE's).")


def _source_and_target(values: dict) -> tuple[str, str]:
    """(source flag, target format) of the flag values ``values`` ({name: value})."""
    flag = next(name for name in DEFAULT_TARGETS if values[name])
    return flag, values["to"] or DEFAULT_TARGETS[flag]


_CHECKED_FLAGS = [*DEFAULT_TARGETS, "to", "albert_config_file", "head"]


def _parsed_source_and_target() -> tuple[str, str]:
    """(source flag, target format) of the parsed flags."""
    return _source_and_target({name: flags.FLAGS[name].value for name in _CHECKED_FLAGS})


def _check_conversion(values: dict) -> bool:
    """One source flag, a --to that converts it, --albert_config_file where needed (a flag
    validator: mistakes answer before TensorFlow loads)."""
    given = [name for name in DEFAULT_TARGETS if values[name]]
    if len(given) != 1:
        raise flags.ValidationError(
            "Give exactly one of --tf1_checkpoint (reference), --checkpoint (albert_tf) or "
            "--hf_checkpoint (Hugging Face directory).")
    flag, target = _source_and_target(values)
    if flag == "hf_checkpoint":
        if target != "albert_tf":
            raise flags.ValidationError(
                f"--hf_checkpoint converts to albert_tf only, not --to={target}.")
        if values["head"] not in (None, "pretraining"):
            raise flags.ValidationError(
                "A Hugging Face directory carries the pretraining heads only; "
                f"--head={values['head']} does not apply.")
        return True
    if target == {"tf1_checkpoint": "reference", "checkpoint": "albert_tf"}[flag]:
        raise flags.ValidationError(f"--{flag} is already in the {target} format; "
                                    f"--to={target} converts nothing.")
    if not values["albert_config_file"]:
        raise flags.ValidationError(f"--albert_config_file is required with --{flag}.")
    return True


flags.register_multi_flags_validator(_CHECKED_FLAGS, _check_conversion)

command_line.parse_before_imports(__name__)  # --help, flag mistakes: before TensorFlow loads

import tensorflow as tf  # noqa: E402

from albert_tf.checkpoints.conversion import (  # noqa: E402
    ALBERT_CONFIG_OUTPUT, ALBERT_TF_OUTPUT, HF_IMPORT_FILES, HF_SOURCE_FLAG, TF1_OUTPUT, TaskHead,
    albert_tf_to_tf1, check_hf_output_dir, check_output_dir, check_source, choose_task_model,
    huggingface_to_albert_tf, tf1_to_albert_tf, to_huggingface)
from albert_tf.checkpoints.files import CHECKPOINT_STATE_FILE, TF2_CHECKPOINT_NAME  # noqa: E402
from albert_tf.checkpoints.hf_format import SPM_FILE, WRITTEN_FILES, read_hf_config  # noqa: E402
from albert_tf.checkpoints.run_directory import resolve_checkpoint_path  # noqa: E402
from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.files.run_files import (  # noqa: E402
    NewDirectory, RunFiles, WorkDirectory, check_run_files, fixed_outputs, inputs,
    record_owned_names)
from albert_tf.models.config import AlbertConfig  # noqa: E402
from albert_tf.models.task_model import AlbertTaskModel  # noqa: E402
from albert_tf.files.run_manifest import MANIFEST_NAME, manifest_path, read_manifest  # noqa: E402
from albert_tf.tasks.classification.classifier_heads import (  # noqa: E402
    HEADS, is_recorded, recorded_heads)
from albert_tf.tasks.classification.model import (  # noqa: E402
    EARLY_EXIT_SCOPE, AlbertClassifierModel)
from albert_tf.tasks.multiple_choice.model import AlbertMultipleChoiceModel  # noqa: E402
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel  # noqa: E402
from albert_tf.tasks.question_answering.model import AlbertSquadModel  # noqa: E402

# The task model of each of HEAD_NAMES, in that order; the first converts a checkpoint without head.
TASK_HEADS = (
    TaskHead("pretraining", lambda config, shapes: AlbertPretrainingModel(config)),
    TaskHead("classifier", lambda config, shapes: AlbertClassifierModel(
        config, shapes.get("output_bias", (2,))[0])),
    # run_classifier --early_exit (separate heads): the classifier and early_exit/layer_<j>/*.
    TaskHead("early_exit", lambda config, shapes: AlbertClassifierModel(
        config, shapes.get("output_bias", (2,))[0], early_exit="separate"),
             fits=lambda shapes: any(name.startswith(f"{EARLY_EXIT_SCOPE}/") for name in shapes)),
    TaskHead("squad_v1", lambda config, shapes: AlbertSquadModel(config)),
    TaskHead("squad_v2", lambda config, shapes: AlbertSquadModel(config, version_2=True)),
    TaskHead("race", lambda config, shapes: AlbertMultipleChoiceModel(config),
             fits=lambda shapes: shapes.get("output_bias", (1,)) == (1,)),
)


def main(argv: list[str]) -> None:
    del argv
    values = flags.FLAGS
    flag, target = _parsed_source_and_target()
    source = values[flag].value
    options = dict(init_from_group0=values.init_from_group0, overwrite=values.overwrite,
                   config_file=values.albert_config_file)
    if flag == HF_SOURCE_FLAG:
        config = (AlbertConfig.from_json_file(values.albert_config_file)
                  if values.albert_config_file else read_hf_config(source))
        prefix = huggingface_to_albert_tf(TASK_HEADS[0].build(config, {}), source,
                                          values.output_dir, **options)
        print(f"Wrote albert_tf checkpoint {prefix} and its albert_config.json")
        return
    model = shared_heads_as_recorded(choose_task_model(
        source, flag, AlbertConfig.from_json_file(values.albert_config_file), TASK_HEADS,
        values.head), source, flag, target)
    if target == "huggingface":
        read, count = to_huggingface(model, source, flag, values.output_dir,
                                     spm_model_file=values.spm_model_file,
                                     do_lower_case=values.do_lower_case, **options)
        tokenizer = (f"with the tokenizer of {values.spm_model_file}" if values.spm_model_file
                     else "without a tokenizer (no --spm_model_file)")
        print(f"Read {read}; wrote Hugging Face directory {values.output_dir} ({count} tensors) "
              f"{tokenizer}.")
    elif flag == "tf1_checkpoint":
        prefix = tf1_to_albert_tf(model, source, values.output_dir, **options)
        print(f"Wrote albert_tf checkpoint {prefix}")
    else:
        read, prefix, count = albert_tf_to_tf1(model, source, values.output_dir, **options)
        print(f"Read {read}; wrote reference TF1 checkpoint {prefix} ({count} variables).")


def heads_run_directory(source: str, flag: str) -> str | None:
    """The run directory of ``--<flag>=source`` when the source is an albert_tf checkpoint whose
    run manifest records what kind of classifier its checkpoints are (run_classifier's), or
    None."""
    if flag != "checkpoint":
        return None
    try:
        directory = os.path.dirname(resolve_checkpoint_path(source))
    except FileNotFoundError:
        return None  # reported by the conversion
    return directory if is_recorded(directory) else None


def _manifest_beside(source: str, flag: str) -> str | None:
    """The run manifest beside an albert_tf --checkpoint that records its kind of classifier (an
    input of the conversion), or None."""
    directory = heads_run_directory(source, flag)
    path = directory and manifest_path(directory)
    return path if path and tf.io.gfile.exists(path) else None


def shared_heads_as_recorded(model: AlbertTaskModel, source: str, flag: str,
                             target: str = "reference") -> AlbertTaskModel:
    """The classifier of an albert_tf checkpoint whose run directory records shared early-exit
    heads (in its run manifest) as such: the same variables, which the outputs then name as
    every layer's classifier (a checkpoint alone cannot tell). Any other model as it is.
    ``target``: the format written, which the printed note describes."""
    if type(model) is not AlbertClassifierModel or model.early_exit is not None:
        return model
    directory = heads_run_directory(source, flag)
    if directory is None or recorded_heads(directory) != "shared":
        return model
    where = ("a TF1 checkpoint keeps them under these names, which run_classifier.py --early_exit "
             "--early_exit_heads=shared reads so" if target == "reference" else
             "the Hugging Face format has no place for them")
    print(f"{directory} records shared early-exit heads "
          f"({os.path.basename(read_manifest(directory).where(HEADS.key))}): "
          f"output_weights and output_bias are the classifier of every layer; {where}.")
    return AlbertClassifierModel(model.config, model.num_labels, early_exit="shared")


def check_source_format() -> None:
    """The source is of its flag's format (ConversionError naming the flag to give), before
    anything is loaded: a Hugging Face directory given as --checkpoint, or the reverse, would
    otherwise end in a message about a missing checkpoint or config.json."""
    values = flags.FLAGS
    flag, _ = _parsed_source_and_target()
    check_source(values[flag].value, flag)


def check_recorded_heads() -> None:
    """Reads the kind of classifier the run manifest beside an albert_tf --checkpoint records
    before any work, so a malformed fact stops the command at once (HeadsMismatch naming it)."""
    values = flags.FLAGS
    flag, _ = _parsed_source_and_target()
    directory = heads_run_directory(values[flag].value, flag)
    if directory is not None:
        recorded_heads(directory)


def run_files() -> RunFiles:
    """What the conversion reads (the source checkpoint, the config, the tokenizer) and writes:
    a checkpoint, the directory's 'checkpoint' file, the config and tokenizer in --output_dir, or
    (--to=huggingface) the Hugging Face directory, replaced with --overwrite only when it holds
    nothing but what a conversion writes there."""
    values = flags.FLAGS
    flag, target = _parsed_source_and_target()
    source = values[flag].value
    if flag != HF_SOURCE_FLAG:
        try:
            source = resolve_checkpoint_path(source)
        except FileNotFoundError:
            pass  # reported by the conversion
    read = inputs((f"--{flag}", source), ("--albert_config_file", values.albert_config_file),
                  ("--spm_model_file", values.spm_model_file),
                  (f"{MANIFEST_NAME} beside --{flag}", _manifest_beside(values[flag].value, flag)))
    if target == "huggingface":
        return RunFiles(read, new_directories=(NewDirectory(
            "--output_dir", values.output_dir, WRITTEN_FILES, values.overwrite),))
    output_dir = WorkDirectory("--output_dir", values.output_dir)
    return RunFiles(read, fixed_outputs(
        output_dir, [TF2_CHECKPOINT_NAME + "*"],
        consequence="the conversion writes its checkpoint and the directory's 'checkpoint' file "
                    "there; choose another --output_dir")
        + fixed_outputs(output_dir, [CHECKPOINT_STATE_FILE, ALBERT_CONFIG_OUTPUT, SPM_FILE]),
        (output_dir,))


def check_output() -> None:
    """The conversion's own check of --output_dir (ConversionError), before anything is read: no
    other checkpoint, no file of the user's under a name the conversion writes, an earlier
    conversion only with --overwrite (the conversion functions check again)."""
    values = flags.FLAGS
    flag, target = _parsed_source_and_target()
    if target == "huggingface":
        check_hf_output_dir(values.output_dir, values.overwrite)
    elif flag == HF_SOURCE_FLAG:
        check_output_dir(values.output_dir, ALBERT_TF_OUTPUT, values.overwrite,
                         beside=HF_IMPORT_FILES)
    else:
        check_output_dir(values.output_dir,
                         ALBERT_TF_OUTPUT if flag == "tf1_checkpoint" else TF1_OUTPUT,
                         values.overwrite)


if __name__ == "__main__":
    # check_output first: its refusal of the user's files says what --overwrite replaces. The
    # names the conversion writes are recorded in --output_dir's manifest once every check
    # passed, so that a refused conversion writes nothing there.
    error_boundary.run(main, checks=[check_output,
                                     lambda: check_run_files(run_files(), record=False),
                                     check_source_format, check_recorded_heads,
                                     lambda: record_owned_names(run_files())])
