"""The shared flag table: consistent with the library, and every script keeps the reference's defaults."""

from __future__ import annotations

import pytest
from absl import flags

from albert_tf.cli import early_exit_flags, flag_definitions
from albert_tf.serving import onnx_export, tflite
from albert_tf.tasks.classification import trainings
from albert_tf.training import distribute, optimization, trainer
from tests.command_runner import command_flags

# The reference scripts' defaults (their flag definitions), for the flags the scripts share; by
# command (tests/command_runner.py's names).
REFERENCE_DEFAULTS = {
    "run_pretraining.py": {
        "max_seq_length": 512, "max_predictions_per_seq": 20, "do_train": True, "do_eval": False,
        "train_batch_size": 4096, "eval_batch_size": 64, "optimizer": "lamb",
        "learning_rate": 0.00176, "poly_power": 1.0, "num_train_steps": 125000,
        "num_warmup_steps": 3125, "start_warmup_step": 0, "save_checkpoints_steps": 5000,
        "keep_checkpoint_max": 5, "iterations_per_loop": 1000, "init_from_group0": False,
        "use_tpu": False, "num_tpu_cores": 8,
    },
    "run_classifier.py": {
        "do_lower_case": True, "max_seq_length": 512, "do_train": False, "do_eval": False,
        "do_predict": False, "train_batch_size": 32, "eval_batch_size": 8,
        "predict_batch_size": 8, "learning_rate": 5e-5, "train_step": 1000, "warmup_step": 0,
        "save_checkpoints_steps": 1000, "iterations_per_loop": 1000, "optimizer": "adamw",
        "use_tpu": False, "num_tpu_cores": 8,
        # The reference ignores keep_checkpoint_max and keeps every checkpoint: 0 here.
        "keep_checkpoint_max": 0,
    },
    "-m data_prep.create_pretraining_data": {
        "do_lower_case": True, "max_seq_length": 512, "max_predictions_per_seq": 20,
    },
}

@pytest.mark.parametrize("command", sorted(REFERENCE_DEFAULTS))
def test_scripts_keep_the_reference_defaults(command):
    expected = REFERENCE_DEFAULTS[command]
    defined = command_flags(command)  # its flags as its module defines them, in this process
    for name, value in expected.items():
        assert defined[name].default == pytest.approx(value), (command, name)


def test_the_table_agrees_with_the_library():
    assert set(flag_definitions.OPTIMIZERS) == set(optimization.OPTIMIZER_NAMES)
    assert set(flag_definitions.STRATEGIES) == set(distribute.STRATEGY_NAMES)
    assert set(flag_definitions.DTYPES) == set(trainer.DTYPE_POLICIES)
    assert flag_definitions.TFLITE_QUANTIZATIONS == tflite.QUANTIZATIONS
    assert flag_definitions.ONNX_QUANTIZATIONS == onnx_export.QUANTIZATIONS
    assert early_exit_flags.TRAININGS == trainings.TRAININGS
    assert early_exit_flags.DEFAULT_DISTILLATION == trainings.DEFAULT_DISTILLATION
    every_group = (flag_definitions.TPU_FLAGS + flag_definitions.LOOP_FLAGS
                   + flag_definitions.CHECKPOINT_FLAGS + flag_definitions.FINE_TUNING_FLAGS
                   + flag_definitions.TFLITE_FLAGS + flag_definitions.ONNX_FLAGS)
    assert set(every_group) <= set(flag_definitions.SPECS)
    assert len(set(flag_definitions.FINE_TUNING_FLAGS)) == len(flag_definitions.FINE_TUNING_FLAGS)


def test_define_overrides_a_default_and_rejects_one_for_an_undefined_flag():
    values = flags.FlagValues()
    flag_definitions.define("max_seq_length", "optimizer", "seed", flag_values=values,
                            max_seq_length=384)
    assert values["max_seq_length"].default == 384
    assert values["optimizer"].default == "adamw"
    assert values["seed"].default is None
    with pytest.raises(KeyError, match="doc_stride"):
        flag_definitions.define("max_seq_length", flag_values=flags.FlagValues(), doc_stride=128)


def test_a_shared_flag_defined_again_with_its_default_is_kept_and_another_default_refused():
    """Two commands imported into one process (as the tests do) share their common flags."""
    values = flags.FlagValues()
    flag_definitions.define("spm_model_file", "do_lower_case", "keep_checkpoint_max",
                            flag_values=values, keep_checkpoint_max=0)
    flag_definitions.define("spm_model_file", "do_lower_case", flag_values=values)
    flag_definitions.define("keep_checkpoint_max", flag_values=values, keep_checkpoint_max=0)
    assert values["keep_checkpoint_max"].default == 0 and values["do_lower_case"].default is True
    with pytest.raises(flags.DuplicateFlagError, match="keep_checkpoint_max"):
        flag_definitions.define("keep_checkpoint_max", flag_values=values)  # default 5


def test_an_onnx_file_needs_float32_when_the_command_line_is_parsed():
    values = flags.FlagValues()
    flag_definitions.define(*flag_definitions.ONNX_FLAGS, "dtype", flag_values=values)
    flag_definitions.check_onnx_flags(values)
    values(["prog", "--onnx_file=m.onnx", "--dtype=float32"])
    assert values.onnx_file == "m.onnx"
    values.unparse_flags()
    with pytest.raises(flags.IllegalFlagValueError, match="--onnx_file needs --dtype=float32"):
        values(["prog", "--onnx_file=m.onnx", "--dtype=bfloat16"])
    values.unparse_flags()
    with pytest.raises(flags.IllegalFlagValueError,
                       match="--onnx_quantization chooses the weights of the --onnx_file model"):
        values(["prog", "--onnx_quantization=dynamic_range"])
    values.unparse_flags()
    with pytest.raises(flags.IllegalFlagValueError, match="onnx_quantization"):
        values(["prog", "--onnx_file=m.onnx", "--onnx_quantization=int4"])
    values.unparse_flags()
    values(["prog", "--onnx_file=m.onnx", "--onnx_quantization=dynamic_range"])
    assert values.onnx_quantization == "dynamic_range"
