"""Command line: the hub-style export of a pretrained ALBERT (the reference's TF-Hub module, as a TF2
SavedModel), and of its preprocessing model.

    python -m albert_tf.export_hub --albert_config_file=albert_base/albert_config.json \\
        --checkpoint=albert_base/ --spm_model_file=albert_base/30k-clean.model --do_lower_case \\
        --export_path=exports/albert_base [--max_seq_length=128] \\
        [--preprocessing_export_path=exports/albert_base_preprocessing]

``--checkpoint``: a directory (its ``model.ckpt-best``, the reference's default, else its latest
checkpoint; or an export directory), an albert_tf checkpoint prefix or a reference TF1 checkpoint.
It must hold the MLM and SOP heads (a pretraining checkpoint). Outputs go to new directories only;
bad input ends in one line ``export_hub: error: ...`` and exit status 1
(albert_tf/cli/error_boundary.py).

Writes to ``--export_path`` the encoder SavedModel with the reference module's signatures
(``tokens``, ``sop``, ``mlm``, ``tokenization_info``, and ``serving_default`` = ``tokens``; inputs
int32 [B, S] ``input_ids``, ``input_mask``, ``segment_ids``), its config and SentencePiece model as
assets, the TF2 encoder convention (``hub.KerasLayer(export_path, trainable=True)`` fine-tunes it;
inputs ``input_word_ids``, ``input_mask``, ``input_type_ids``; an ``mlm`` object) in the same
SavedModel, and the preprocessing SavedModel (text -> inputs at ``--max_seq_length``, needs
tensorflow_text) in ``<export_path>/preprocessing``. ``--preprocessing_export_path`` writes the
preprocessing model on its own too; without ``--export_path`` it is all that is written (only the
SentencePiece flags are needed then).

This module holds the flags and the wiring only. The encoder export and its signatures are
albert_tf/tasks/pretraining/hub_export.py; the preprocessing model is
albert_tf/serving/preprocessing.py.
"""

from __future__ import annotations

import os

from absl import app, flags

from albert_tf.cli import command_line, flag_definitions

# ------------------------------------------------------------------------------------ command line

flag_definitions.define("albert_config_file", "spm_model_file", "do_lower_case",
                        "max_seq_length", max_seq_length=128)
flags.DEFINE_string("checkpoint", None,
                    "Pretraining checkpoint: a directory (its model.ckpt-best, else its latest "
                    "checkpoint, or an export directory), an albert_tf checkpoint prefix or a "
                    "reference TF1 checkpoint.")
flags.DEFINE_string("export_path", None, "New directory for the hub-style encoder SavedModel "
                    "(with its preprocessing model in <export_path>/preprocessing).")
flags.DEFINE_string("preprocessing_export_path", None,
                    "New directory for the preprocessing SavedModel on its own.")
flags.mark_flag_as_required("spm_model_file")



def check_flags() -> None:
    """Before TensorFlow loads: something to write, and what --export_path needs
    (app.UsageError)."""
    values = flags.FLAGS
    if not (values.export_path or values.preprocessing_export_path):
        raise app.UsageError("Give --export_path, --preprocessing_export_path or both.")
    if values.export_path and not (values.albert_config_file and values.checkpoint):
        raise app.UsageError("--export_path needs --albert_config_file and --checkpoint.")


# --help, flag mistakes and the checks of the flags: before TensorFlow loads
command_line.parse_before_imports(__name__, checks=[check_flags])

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.files.run_files import NewDirectory, RunFiles, check_run_files, inputs  # noqa: E402
from albert_tf.models.config import AlbertConfig  # noqa: E402
from albert_tf.serving.preprocessing import export_preprocessing  # noqa: E402
from albert_tf.tasks.pretraining.hub_export import (  # noqa: E402
    PREPROCESSING_SUBDIR, SIGNATURES, check_export_settings, checkpoint_to_export, export_encoder,
    load_pretraining_weights)
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel  # noqa: E402
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402


def run_files() -> RunFiles:
    """What the command reads (--checkpoint, --albert_config_file, --spm_model_file) and writes:
    new directories only, apart from each other and from the inputs (OutputPathError)."""
    values = flags.FLAGS
    exports = tuple(NewDirectory(f"--{flag}", values[flag].value)
                    for flag in ("export_path", "preprocessing_export_path") if values[flag].value)
    return RunFiles(inputs(("--checkpoint", values.checkpoint),
                           ("--albert_config_file", values.albert_config_file),
                           ("--spm_model_file", values.spm_model_file)),
                    new_directories=exports)


def main(argv: list[str]) -> None:
    del argv
    values = flags.FLAGS
    tokenizer = FullTokenizer(spm_model_file=values.spm_model_file,
                              do_lower_case=values.do_lower_case)
    if values.export_path:
        config = AlbertConfig.from_json_file(values.albert_config_file)
        check_export_settings(config, tokenizer, values.max_seq_length, values.albert_config_file)
        model = AlbertPretrainingModel(config)
        source = load_pretraining_weights(model, checkpoint_to_export(values.checkpoint),
                                          values.albert_config_file)
        export_encoder(model, tokenizer, values.export_path, values.max_seq_length,
                       values.preprocessing_export_path)
        print(f"Exported {source} to {values.export_path} (signatures {', '.join(SIGNATURES)}; "
              f"preprocessing at S={values.max_seq_length} in "
              f"{os.path.join(values.export_path, PREPROCESSING_SUBDIR)})")
    elif values.preprocessing_export_path:
        export_preprocessing(tokenizer, values.max_seq_length, values.preprocessing_export_path)
    if values.preprocessing_export_path:
        print(f"Exported the preprocessing model (S={values.max_seq_length}) to "
              f"{values.preprocessing_export_path}")


if __name__ == "__main__":
    error_boundary.run(main, checks=[lambda: check_run_files(run_files())])
