"""The settings of a run, read from the flags once, frozen: what the driver, the trainer, the checks
and the exports of every script use (nothing below the commands reads a flag).

``RunSettings.from_flags`` reads the shared flags (albert_tf/cli/flag_definitions.py) a script
defines; a flag the script does not define takes its usual default (``--export_dir``: none). A
script keeps its own flags in its own frozen settings (e.g. the SQuAD post-processing's).
``max_seq_length`` is read once here and handed to every consumer (the feature builder and its cache
key, the parser, the exports), so they cannot disagree.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from absl import flags

from albert_tf.cli import flag_definitions


@dataclasses.dataclass(frozen=True)
class StrategySettings:
    """The tf.distribute strategy of a run (--strategy, or tpu with --use_tpu)."""

    name: str = "one_device"
    num_gpus: int = 0
    tpu_name: str | None = None
    tpu_zone: str | None = None
    gcp_project: str | None = None


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """Every shared setting of a run (the flags of flag_definitions.py by the same names;
    ``num_train_steps`` / ``num_warmup_steps`` are --train_step / --warmup_step in the fine-tuning
    scripts, and the fine-tuning scripts that count steps from their data replace them)."""

    output_dir: str
    cached_dir: str  # --cached_dir, else --output_dir
    albert_config_file: str | None = None
    spm_model_file: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool = True
    max_seq_length: int = 512
    init_checkpoint: str | None = None
    init_from_group0: bool = False
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    export_dir: str | None = None
    tflite_file: str | None = None
    tflite_quantization: str = "none"
    onnx_file: str | None = None
    onnx_quantization: str = "none"
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    optimizer: str = "adamw"
    learning_rate: float = 5e-5
    poly_power: float = 1.0
    num_train_steps: int = 1000
    num_warmup_steps: int = 0
    start_warmup_step: int = 0
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    iterations_per_loop: int = 1000
    max_eval_wait_secs: int = 3600
    strategy: StrategySettings = StrategySettings()
    use_xla: bool = False
    dtype: str = "float32"
    gradient_accumulation_steps: int = 1
    input_seed: int = 12345
    length_buckets: bool = True
    group_by_length: bool = False
    seed: int | None = None
    replay_input_on_resume: bool = True

    @classmethod
    def from_flags(cls, values: flags.FlagValues = flags.FLAGS, steps_flag: str = "train_step",
                   warmup_flag: str = "warmup_step") -> "RunSettings":
        """The settings of the parsed command line ``values``; ``steps_flag`` and ``warmup_flag``
        name the script's flags of the training length and its warmup."""
        read = functools.partial(_flag_value, values)
        fields = {field.name for field in dataclasses.fields(cls)} - {
            "cached_dir", "strategy", "num_train_steps", "num_warmup_steps"}
        settings = {name: read(name) for name in fields}
        settings = {name: value for name, value in settings.items() if value is not _UNSET}
        output_dir = settings.get("output_dir")
        strategy = StrategySettings(
            "tpu" if read("use_tpu") is True else read("strategy", "one_device"),
            read("num_gpus", 0), read("tpu_name", None), read("tpu_zone", None),
            read("gcp_project", None))
        return cls(**{**settings, "output_dir": output_dir,
                      "cached_dir": read("cached_dir", None) or output_dir,
                      "strategy": strategy,
                      "num_train_steps": read(steps_flag, cls.num_train_steps),
                      "num_warmup_steps": read(warmup_flag, cls.num_warmup_steps)})

    @property
    def evaluates_checkpoints(self) -> bool:
        """Whether the run reads or writes the checkpoints of --output_dir after training (the
        sweep, predictions, exports): it plays the evaluation role there."""
        return bool(self.do_eval or self.do_predict or self.export_dir or self.tflite_file
                    or self.onnx_file)


_UNSET = object()


def _flag_value(values: flags.FlagValues, name: str, default: Any = _UNSET) -> Any:
    """The value of flag ``name``, or ``default`` where the running command does not define it
    (``_UNSET``: the settings' own default)."""
    if name in values:
        return values[name].value
    return default


# The shared flags RunSettings reads, all defined in flag_definitions.py (tested).
READ_FLAGS = tuple(name for name in flag_definitions.SPECS if name not in (
    "albert_hub_module_handle", "data_dir", "task_name", "num_workers", "max_predictions_per_seq",
    "max_qa_length", "middle_only", "high_only", "skip_invalid", "doc_stride",
    "version_2_with_negative", "max_query_length", "dropout_prob", "master", "num_tpu_cores",
    "train_step", "warmup_step"))
