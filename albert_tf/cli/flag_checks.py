"""Checks of the flags alone, shared by the scripts and run before TensorFlow loads (they are the
``checks`` of ``command_line.parse_before_imports``): a mistake is one line ``<command>: error:
...`` in a fraction of a second. Each raises ``app.UsageError``.
"""

from __future__ import annotations

from absl import app, flags


def require_flags(*names: str) -> None:
    """UsageError naming the first of ``names`` that has no value."""
    for name in names:
        if flags.FLAGS[name].value in (None, ""):
            raise app.UsageError(f"--{name} is required.")


def require_action(*names: str) -> None:
    """UsageError "Nothing to do: set --a, --b or --c." unless one of the flags ``names`` is set."""
    if not any(flags.FLAGS[name].value for name in names):
        options = [f"--{name}" for name in names]
        raise app.UsageError(f"Nothing to do: set {', '.join(options[:-1])} or {options[-1]}.")


def require_tokenizer() -> None:
    """A tokenizer is given: --spm_model_file (or --vocab_file for a WordPiece model)."""
    if not (flags.FLAGS.spm_model_file or flags.FLAGS.vocab_file):
        raise app.UsageError("--spm_model_file is required (or --vocab_file for a WordPiece "
                             "model).")


def reject_hub_module_handle() -> None:
    """The reference's --albert_hub_module_handle (TF1 hub format) is not supported: say what to do."""
    if flags.FLAGS.albert_hub_module_handle:
        raise app.UsageError(
            "--albert_hub_module_handle: TF-Hub modules (the TF1 hub format) are not supported. "
            "Use the released checkpoint tarball instead (model.ckpt-best, albert_config.json, "
            "30k-clean.model): --init_checkpoint=<dir>/model.ckpt-best "
            "--albert_config_file=<dir>/albert_config.json --spm_model_file=<dir>/30k-clean.model. "
            "Reference checkpoints are read directly.")


def fine_tuning_checks(*actions: str, required: tuple[str, ...] = ()) -> None:
    """The checks every fine-tuning script runs: no TF1 hub module, one of ``actions`` set,
    --output_dir, --albert_config_file and ``required`` given, a tokenizer."""
    reject_hub_module_handle()
    require_action(*actions)
    require_flags("output_dir", "albert_config_file", *required)
    require_tokenizer()
