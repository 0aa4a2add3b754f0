"""Every absl flag that more than one script uses, defined once (name, type, default, help).

A script defines the flags it needs by name; where its reference script has another default (e.g.
``max_seq_length`` 384 for SQuAD, ``learning_rate`` 0.00176 for pretraining) it passes that default::

    from albert_tf.cli import flag_definitions
    flag_definitions.define("albert_config_file", "output_dir", "max_seq_length", max_seq_length=384)
    flag_definitions.define(*flag_definitions.TPU_FLAGS, *flag_definitions.LOOP_FLAGS)

Flag names and defaults are the reference's; the flags albert_tf adds are marked as such in the help.
Only this module and the scripts touch ``absl.flags`` definitions; library modules never read flags.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from absl import flags

# Kept here (not imported) so that defining flags imports no TensorFlow; tests check they match
# training/optimization.OPTIMIZER_NAMES, training/distribute.STRATEGY_NAMES and
# training/trainer.DTYPE_POLICIES.
OPTIMIZERS = ("adamw", "lamb")
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
DTYPES = ("bfloat16", "float16", "float32")
# The data splits of GLUE and RACE (data_prep's processors.SPLITS and reader.SPLITS; tested equal).
DATA_SPLITS = ("train", "dev", "test")
# The weight storages of a TFLite export (serving/tflite.QUANTIZATIONS; tested equal).
TFLITE_QUANTIZATIONS = ("none", "dynamic_range", "float16")
ONNX_QUANTIZATIONS = ("none", "dynamic_range")


@dataclasses.dataclass(frozen=True)
class FlagSpec:
    """How to define one flag: the absl ``DEFINE_*`` function, the usual default, the help text."""

    define: Callable[..., Any]
    default: Any
    help: str
    enum_values: tuple[str, ...] | None = None


def _enum(default: str, values: tuple[str, ...], help_text: str) -> FlagSpec:
    return FlagSpec(flags.DEFINE_enum, default, help_text, values)


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a numeric flag accepts: finite, from ``low`` to ``high`` (each end included unless
    ``low_open`` / ``high_open``). Checked when the command line is parsed, so a value out of range
    is a one-line flag error before any work. (A float flag without a range is checked finite all
    the same: command_line.check_finite_floats.)"""

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def accepts(self, value: float | None) -> bool:
        """True for None (an unset flag) and for a finite value within the range."""
        if value is None:
            return True
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return math.isfinite(value) and above and below

    def describe(self) -> str:
        """E.g. "expected a finite value >= 1" or "expected a finite value in [0, 1)"."""
        low = f"> {self.low:g}" if self.low_open else f">= {self.low:g}"
        if math.isinf(self.high):
            return f"expected a finite value {low}"
        return (f"expected a finite value in {'(' if self.low_open else '['}{self.low:g}, "
                f"{self.high:g}{')' if self.high_open else ']'}")


AT_LEAST_ONE = Range(1)
NOT_NEGATIVE = Range(0)
POSITIVE = Range(0, low_open=True)
PROBABILITY = Range(0, 1, high_open=True)  # a dropout rate: 1 would drop everything
FRACTION = Range(0, 1)


def check_ranges(flag_values: flags.FlagValues = flags.FLAGS, **ranges: Range) -> None:
    """Registers, for each ``name=range``, the check that flag ``name`` lies in the range (absl
    runs it when the command line is parsed)::

        flag_definitions.check_ranges(n_best_size=flag_definitions.AT_LEAST_ONE)
    """
    for name, valid in ranges.items():
        flags.register_validator(name, valid.accepts, message=valid.describe(),
                                 flag_values=flag_values)


def check_tflite_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Registers the checks of the ``TFLITE_FLAGS`` of a script that defines them and --dtype (absl
    runs them when the command line is parsed, before any work): --tflite_quantization other than
    none needs --tflite_file (it would be ignored), and --tflite_file needs --dtype=float32 (the
    TFLite export converts a float32 model; a model trained in mixed precision is exported by a
    second run, --dtype=float32 --tflite_file=..., which only reads its best checkpoint)."""
    _weights_need_file("tflite_quantization", "tflite_file", flag_values)
    _needs_float32("tflite_file", "TFLite", flag_values)


def check_onnx_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Registers the checks of ``ONNX_FLAGS`` in a script that defines them and --dtype (when the
    command line is parsed), as ``check_tflite_flags`` does for TFLite: --onnx_quantization other
    than none needs --onnx_file, and --onnx_file needs --dtype=float32."""
    _weights_need_file("onnx_quantization", "onnx_file", flag_values)
    _needs_float32("onnx_file", "ONNX", flag_values)


def _weights_need_file(quantization: str, file: str, flag_values: flags.FlagValues) -> None:
    """Registers the check that --``quantization`` other than none comes with the one-file
    export --``file`` whose weights it chooses (alone it would be ignored)."""
    flags.register_multi_flags_validator(
        [file, quantization], lambda values: values[file] or values[quantization] == "none",
        message=f"--{quantization} chooses the weights of the --{file} model: give --{file} too",
        flag_values=flag_values)


def _needs_float32(flag: str, export: str, flag_values: flags.FlagValues) -> None:
    """Registers the check that the one-file export --``flag`` comes with --dtype=float32: the
    converter takes a float32 model; a model trained in mixed precision is exported by a second
    run, --dtype=float32 --``flag``=..., which only reads its best checkpoint."""
    flags.register_multi_flags_validator(
        [flag, "dtype"], lambda values: not values[flag] or values["dtype"] == "float32",
        message=f"--{flag} needs --dtype=float32: the {export} export converts a float32 model. "
                f"Train with another --dtype first, then export in a second run with "
                f"--dtype=float32 --{flag}=... (it reads model.ckpt-best only)",
        flag_values=flag_values)

_S, _I, _F, _B = flags.DEFINE_string, flags.DEFINE_integer, flags.DEFINE_float, flags.DEFINE_bool

# The shared flags by group (the groups of --help).
SECTIONS: dict[str, dict[str, FlagSpec]] = {
    "Model, tokenizer and files": {
        "albert_config_file": FlagSpec(_S, None, "ALBERT config JSON of the (pretrained) model."),
        "init_checkpoint": FlagSpec(_S, None, "Warm start: a reference TF1 checkpoint, an albert_tf "
                                    "one (prefix or directory) or a Hugging Face directory."),
        "init_from_group0": FlagSpec(_B, False, "Initialise every group of the model from group_0 of a "
                                     "1-group checkpoint."),
        "albert_hub_module_handle": FlagSpec(_S, None, "[Reference flag] TF-Hub module; not supported "
                                             "(use the released checkpoint with --init_checkpoint)."),
        "spm_model_file": FlagSpec(_S, None, "SentencePiece model of the pretrained model."),
        "vocab_file": FlagSpec(_S, None, "WordPiece vocab (one token per line), used only without "
                               "--spm_model_file."),
        "do_lower_case": FlagSpec(_B, True, "Lowercase the text (must match the pretrained model)."),
        "data_dir": FlagSpec(_S, None, "Root folder of the task's data."),
        "task_name": FlagSpec(_S, None, "The task: a GLUE task (cola, mnli, mismnli, mrpc, rte, sst-2, "
                              "sts-b, qqp, qnli, wnli; ax: predict only), or race for run_race."),
        "output_dir": FlagSpec(_S, None, "Checkpoints, eval/predict results and TensorBoard logs."),
        "cached_dir": FlagSpec(_S, None, "Where feature TFRecords are cached (default --output_dir); a "
                               "cache is reused only if built from the same inputs and settings."),
        "export_dir": FlagSpec(_S, None, "Write a SavedModel of model.ckpt-best here."),
        "tflite_file": FlagSpec(_S, None, "[albert_tf] Write a TFLite model of model.ckpt-best to "
                                "this file (one example of up to --max_seq_length tokens per "
                                "call; an existing file is replaced). Needs --dtype=float32."),
        "tflite_quantization": _enum("none", TFLITE_QUANTIZATIONS, "[albert_tf] Weights of the "
                                     "--tflite_file model: none (float32), dynamic_range (int8, "
                                     "about a quarter of the size) or float16 (half the size)."),
        "onnx_file": FlagSpec(_S, None, "[albert_tf] Write an ONNX model of model.ckpt-best to "
                              "this file (one example of up to --max_seq_length tokens per "
                              "call; an existing file is replaced). Needs --dtype=float32 and "
                              "tf2onnx (requirements-onnx.txt)."),
        "onnx_quantization": _enum("none", ONNX_QUANTIZATIONS, "[albert_tf] Weights of the "
                                   "--onnx_file model: none (float32) or dynamic_range (int8, "
                                   "quantized by ONNX Runtime, which it then needs)."),
        "num_workers": FlagSpec(_I, 1, "[albert_tf] Worker processes converting the data in parallel; "
                                "the output does not depend on it."),
    },
    "Sequence geometry and task data": {
        "max_seq_length": FlagSpec(_I, 512, "Tokens per sequence, [CLS] and [SEP] included (S)."),
        "max_predictions_per_seq": FlagSpec(_I, 20, "Masked positions per sequence (M)."),
        "max_qa_length": FlagSpec(_I, 128, "RACE: question+option pieces kept per choice (the last "
                                  "ones)."),
        "middle_only": FlagSpec(_B, False, "RACE: only the middle-school questions."),
        "high_only": FlagSpec(_B, False, "RACE: only the high-school questions."),
        "skip_invalid": FlagSpec(_B, False, "[albert_tf] Skip (and count) invalid examples instead of "
                                 "stopping at the first with an error naming it."),
        "doc_stride": FlagSpec(_I, 128, "SQuAD, NER: stride between the windows of a long "
                               "paragraph or sentence (pieces)."),
        "version_2_with_negative": FlagSpec(_B, False, "SQuAD 2.0: questions without an answer "
                                            "(is_impossible) are allowed and the model gets the "
                                            "answer-verifier head; without it such a question is "
                                            "an error."),
        "max_query_length": FlagSpec(_I, 64, "SQuAD: question pieces kept (the first ones)."),
        "dropout_prob": FlagSpec(_F, 0.1, "Dropout of the task head in training (RACE: on the pooled "
                                 "output; SQuAD v2: inside the answer classifier)."),
    },
    "What to run": {
        "do_train": FlagSpec(_B, False, "Train."),
        "do_eval": FlagSpec(_B, False, "Evaluate every checkpoint in --output_dir, keep the best as "
                            "model.ckpt-best."),
        "do_predict": FlagSpec(_B, False, "Predict the test set with model.ckpt-best."),
        "print_recipe": FlagSpec(_B, False, "[albert_tf] Only print the flags of the script's "
                                 "recipe on one line and exit, before any other check: "
                                 "run_classifier and data_prep.glue --task_name's (the paper's), "
                                 "run_squad v1.1's or with --version_2_with_negative v2.0's, "
                                 "run_race --recipe_model_version's, run_ner albert_tf's starting "
                                 "point (the paper has no NER recipe)."),
    },
    "Optimisation": {
        "train_batch_size": FlagSpec(_I, 32, "Global train batch."),
        "eval_batch_size": FlagSpec(_I, 8, "Global eval batch."),
        "predict_batch_size": FlagSpec(_I, 8, "Global predict batch."),
        "optimizer": _enum("adamw", OPTIMIZERS, "Optimizer."),
        "learning_rate": FlagSpec(_F, 5e-5, "Peak learning rate."),
        "poly_power": FlagSpec(_F, 1.0, "Power of the polynomial decay."),
        "train_step": FlagSpec(_I, 1000, "Training steps (also the decay horizon and the step the eval "
                               "sweep waits for)."),
        "warmup_step": FlagSpec(_I, 0, "Linear warmup steps."),
        "num_train_steps": FlagSpec(_I, 125000, "Training steps (also the decay horizon)."),
        "num_warmup_steps": FlagSpec(_I, 3125, "Linear warmup steps."),
        "start_warmup_step": FlagSpec(_I, 0, "Step at which warmup starts (learning rate 0 before)."),
    },
    "Checkpoints and the loop": {
        "save_checkpoints_steps": FlagSpec(_I, 1000, "Checkpoint every this many steps (the "
                                           "granularity of the best-checkpoint selection)."),
        "keep_checkpoint_max": FlagSpec(_I, 5, "Checkpoints kept while training (0: all)."),
        "iterations_per_loop": FlagSpec(_I, 1000, "Steps per tf.function call and progress line "
                                        "(capped at save_checkpoints_steps)."),
        "max_eval_wait_secs": FlagSpec(_I, 3600, "[albert_tf] --do_eval without --do_train (an "
                                       "eval job beside training): how long the sweep waits for a "
                                       "new checkpoint (polling at most every 60 s) before "
                                       "finishing with the checkpoints it has."),
    },
    "TPU (the reference's; --use_tpu selects the tpu strategy)": {
        "use_tpu": FlagSpec(_B, False, "Run on TPU (same as --strategy=tpu)."),
        "tpu_name": FlagSpec(_S, None, "Cloud TPU name or grpc:// address."),
        "tpu_zone": FlagSpec(_S, None, "GCE zone of the Cloud TPU."),
        "gcp_project": FlagSpec(_S, None, "GCP project of the Cloud TPU."),
        "master": FlagSpec(_S, None, "[Reference flag, unused] TensorFlow master URL; use --tpu_name."),
        "num_tpu_cores": FlagSpec(_I, 8, "[Reference flag, informational] TPU cores; the TPU strategy "
                                  "uses every core of the slice."),
    },
    "Distribution, precision and seeds (albert_tf)": {
        "strategy": _enum("one_device", STRATEGIES, "[albert_tf] tf.distribute strategy. "
                          "multi_worker_mirrored reads TF_CONFIG."),
        "num_gpus": FlagSpec(_I, 0, "[albert_tf] GPUs for mirrored (0: all visible); one_device takes "
                             "the first GPU when there is one, else the CPU."),
        "use_xla": FlagSpec(_B, False, "[albert_tf] XLA-compile the forward and backward pass."),
        "dtype": _enum("float32", DTYPES, "[albert_tf] Compute precision: float32, or mixed bfloat16 / "
                       "float16 (float32 variables; float16 adds dynamic loss scaling)."),
        "gradient_accumulation_steps": FlagSpec(_I, 1, "[albert_tf] Split each train batch into this "
                                                "many micro-batches and sum their gradients before one "
                                                "update (train_batch_size stays the global batch)."),
        "input_seed": FlagSpec(_I, 12345, "[albert_tf] Seed of the training input shuffles."),
        "length_buckets": FlagSpec(_B, True, "[albert_tf] Pad each batch only to its longest example "
                                   "(with --use_xla: to the shortest of a fixed set of lengths "
                                   "that holds it), and run a training batch of mixed lengths as "
                                   "parts sorted by length (printed at start; same results, less "
                                   "work on padding). --nolength_buckets pads every batch to "
                                   "--max_seq_length, as the reference. Off by itself on a TPU "
                                   "and for SQuAD v1.1."),
        "group_by_length": FlagSpec(_B, False, "[albert_tf] Train on batches of examples of nearly "
                                    "one length: each chunk of 50 batches sorted by length, its "
                                    "batches in a seeded random order (fewer padded positions; "
                                    "changes which examples share a batch). Needs "
                                    "--length_buckets."),
        "seed": FlagSpec(_I, None, "[albert_tf] Seed of the model initialisation and dropout "
                         "(Python, NumPy, TF); unset = random, as the reference. The dropout seed "
                         "is saved in the checkpoints: a resumed run keeps its own."),
        "replay_input_on_resume": FlagSpec(_B, True, "[albert_tf] On restart, skip the batches the run "
                                           "already consumed so the data order equals an "
                                           "uninterrupted run (costs one read of the consumed "
                                           "records)."),
    },
}
SPECS: dict[str, FlagSpec] = {name: spec for section in SECTIONS.values()
                               for name, spec in section.items()}
# The values of the numeric flags (every one but --seed and --input_seed, which take any integer).
RANGES: dict[str, Range] = {
    **dict.fromkeys(("num_workers", "max_seq_length", "max_predictions_per_seq", "max_qa_length",
                     "doc_stride", "max_query_length", "train_batch_size", "eval_batch_size",
                     "predict_batch_size", "train_step", "num_train_steps",
                     "save_checkpoints_steps", "iterations_per_loop", "num_tpu_cores",
                     "gradient_accumulation_steps"), AT_LEAST_ONE),
    **dict.fromkeys(("warmup_step", "num_warmup_steps", "start_warmup_step", "keep_checkpoint_max",
                     "max_eval_wait_secs", "num_gpus"), NOT_NEGATIVE),
    "learning_rate": POSITIVE,
    "poly_power": POSITIVE,
    "dropout_prob": PROBABILITY,
}

TPU_FLAGS = ("use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master", "num_tpu_cores")
LOOP_FLAGS = ("strategy", "num_gpus", "use_xla", "dtype", "gradient_accumulation_steps",
              "input_seed", "seed", "replay_input_on_resume")
# The batch-length flags of the fine-tuning scripts (run_pretraining's records are full).
LENGTH_FLAGS = ("length_buckets", "group_by_length")
CHECKPOINT_FLAGS = ("save_checkpoints_steps", "keep_checkpoint_max", "iterations_per_loop")
TOKENIZER_FLAGS = ("spm_model_file", "vocab_file", "do_lower_case")
# The flags of the scripts whose task has a TFLite export: run_classifier and run_squad (RACE and
# NER have none).
TFLITE_FLAGS = ("tflite_file", "tflite_quantization")
# The flags of the scripts whose task has an ONNX export (the same two; check_onnx_flags).
ONNX_FLAGS = ("onnx_file", "onnx_quantization")
# What the fine-tuning scripts share: run_classifier and run_race define them all, run_squad all but
# data_dir, do_eval and eval_batch_size, run_ner all but data_dir. A script defining print_recipe
# runs flag_checks.print_recipe first among its checks.
FINE_TUNING_FLAGS = ("albert_config_file", "init_checkpoint", "albert_hub_module_handle",
                     *TOKENIZER_FLAGS, "data_dir", "output_dir", "cached_dir", "export_dir",
                     "max_seq_length", "do_train", "do_eval", "do_predict", "print_recipe",
                     "train_batch_size", "eval_batch_size", "predict_batch_size", "optimizer",
                     "learning_rate", *CHECKPOINT_FLAGS, "max_eval_wait_secs", *TPU_FLAGS,
                     *LOOP_FLAGS, *LENGTH_FLAGS)


def _define_one(name: str, default: Any, flag_values: flags.FlagValues) -> None:
    spec = SPECS[name]
    if spec.enum_values is None:
        spec.define(name, default, spec.help, flag_values=flag_values)
    else:
        spec.define(name, default, list(spec.enum_values), spec.help, flag_values=flag_values)


def _distinct_integers(values: list[str] | None) -> bool:
    """A non-empty list of integers, no two equal (``1`` and ``01`` are one seed)."""
    if not values or not all(value.lstrip("-").isdigit() for value in values):
        return False
    return len({int(value) for value in values}) == len(values)


def check_seed_list(name: str = "seeds", flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Registers the check of a list flag of seeds, one run each (run_seeds, the plan of
    paper_tables): integers, each once. A seed given twice would run once and be counted once, so
    the median would silently be over fewer seeds than the command line asks for."""
    flags.register_validator(name, _distinct_integers, flag_values=flag_values,
                             message="expected a comma-separated list of distinct integers")


def _parsed_default(name: str, default: Any) -> Any:
    """The value absl makes of ``default`` for flag ``name`` (e.g. a list from "a,b")."""
    scratch = flags.FlagValues()
    _define_one(name, default, scratch)
    return scratch[name].default


def define(*names: str, flag_values: flags.FlagValues = flags.FLAGS, **defaults: Any) -> None:
    """Defines the named flags (in ``flag_values``, absl's global registry by default);
    ``defaults`` override the usual default of some of them.

    A flag this module already defined there with the same default is left as it is, so two
    commands imported into one process (tests, a notebook) share their common flags; another
    default is absl's DuplicateFlagError."""
    unknown = sorted(set(defaults) - set(names))
    if unknown:
        raise KeyError(f"default given for flags not being defined: {unknown}")
    defined_here = {flag.name for flag in
                    flag_values.flags_by_module_dict().get(__name__, [])}
    newly_defined = set()
    for name in names:
        spec = SPECS[name]
        default = defaults.get(name, spec.default)
        if name in defined_here and _parsed_default(name, default) == flag_values[name].default:
            continue
        _define_one(name, default, flag_values)
        newly_defined.add(name)
        if name in RANGES:
            check_ranges(flag_values, **{name: RANGES[name]})
    accumulation = {"train_batch_size", "gradient_accumulation_steps"}
    if accumulation <= set(names) and accumulation & newly_defined:
        flags.register_multi_flags_validator(
            sorted(accumulation), _whole_micro_batches, flag_values=flag_values,
            message="--train_batch_size must be divisible by --gradient_accumulation_steps: each "
                    "batch is split into that many micro-batches of equal size")


def _whole_micro_batches(values: dict[str, Any]) -> bool:
    """--gradient_accumulation_steps splits --train_batch_size into micro-batches of equal size
    (training/trainer.RunConfig refuses it too, once TensorFlow is loaded)."""
    batch, steps = values["train_batch_size"], values["gradient_accumulation_steps"]
    return batch is None or not steps or steps < 1 or batch % steps == 0
