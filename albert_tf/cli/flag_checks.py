"""Checks of the flags alone, shared by the scripts and run before TensorFlow loads (they are the
``checks`` of ``command_line.parse_before_imports``): a mistake is one line ``<command>: error:
...`` in a fraction of a second. Each raises ``app.UsageError``.

``print_recipe`` is the one that answers --print_recipe: first in a script's list, it prints the
recipe and exits 0 before the others ask for data or outputs.
"""

from __future__ import annotations

from typing import Callable

from absl import app, flags

from albert_tf.cli import command_line
from albert_tf.errors.user_error import UserError
from albert_tf.training.recipe import Recipe


def print_recipe(recipe: Callable[[], Recipe]) -> Callable[[], None]:
    """The check answering --print_recipe, for a script whose recipe is ``recipe()`` (a function
    of the flags; its UserError, e.g. a task without a recipe, is the one-line usage error): with
    --print_recipe it prints the recipe's flags on one line and exits 0; without, it does nothing.
    Put it first in the checks, so that nothing else is asked for::

        command_line.parse_before_imports(__name__, checks=[
            flag_checks.print_recipe(lambda: glue_recipe(FLAGS.task_name)), check_flags])
    """
    def check() -> None:
        if not flags.FLAGS["print_recipe"].value:
            return
        try:
            chosen = recipe()
        except UserError as error:
            raise app.UsageError(str(error)) from None
        command_line.print_and_exit(" ".join(chosen.flags()))
    return check


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


def require_sequence_room(minimum: int, holds: str) -> None:
    """UsageError unless --max_seq_length is at least ``minimum``, what one record must hold
    (``holds`` says what, e.g. "[CLS] a [SEP] b [SEP]"): the feature builders of data_prep refuse a
    shorter one too, but only once the data is read, after TensorFlow loaded and the model was
    built."""
    length = flags.FLAGS.max_seq_length
    if length < minimum:
        raise app.UsageError(f"--max_seq_length={length} is too short: {holds} need at least "
                             f"{minimum}.")


def require_room_for_the_question() -> None:
    """SQuAD (run_squad, data_prep.squad): a window holds [CLS], the question (up to
    --max_query_length pieces), two [SEP] and at least one paragraph piece."""
    length, query = flags.FLAGS.max_seq_length, flags.FLAGS.max_query_length
    if length <= query + 3:
        raise app.UsageError(f"--max_seq_length={length} must exceed --max_query_length + 3 = "
                             f"{query + 3}.")


def sweep_in_one_process(sweep_flag: str = "do_eval") -> None:
    """The checkpoint sweep (``sweep_flag``: the script's, --do_eval or run_squad's --do_predict)
    writes, renames and deletes files in one process: refused with
    --strategy=multi_worker_mirrored (UsageError)."""
    values = flags.FLAGS
    if values[sweep_flag].value and values.strategy == "multi_worker_mirrored":
        raise app.UsageError(f"--{sweep_flag} with --strategy=multi_worker_mirrored: the "
                             "checkpoint sweep runs in one process; start it as a separate job "
                             "with --nodo_train and --strategy=one_device or mirrored.")


def padded_batches_reason(length_buckets: bool, task_reason: str | None,
                          on_tpu: bool) -> str | None:
    """Why a run's batches all keep length --max_seq_length (None: each is cut to its length
    bucket): --nolength_buckets; the task's ``task_reason`` (its results depend on the padding);
    a TPU, whose loop is compiled for one shape."""
    if not length_buckets:
        return "--nolength_buckets"
    if task_reason is not None:
        return task_reason
    if on_tpu:
        return "a TPU compiles its loop for one shape"
    return None


def group_by_length_with_buckets(task_reason: str | None = None) -> None:
    """--group_by_length needs batches of several lengths (``padded_batches_reason``; the task's
    ``task_reason`` to keep them at full length) (UsageError)."""
    values = flags.FLAGS
    if not values.group_by_length:
        return
    reason = padded_batches_reason(values.length_buckets, task_reason,
                                   values.use_tpu or values.strategy == "tpu")
    if reason is not None:
        raise app.UsageError("--group_by_length needs batches of several lengths, which this run "
                             f"does not have ({reason}).")


def fine_tuning_checks(*actions: str, required: tuple[str, ...] = (),
                       sweep_flag: str = "do_eval", full_length_reason: str | None = None) -> None:
    """The checks every fine-tuning script runs: no TF1 hub module, one of ``actions`` set,
    --output_dir, --albert_config_file and ``required`` given, a tokenizer, the sweep
    (``sweep_flag``) in one process, --group_by_length where batches vary in length."""
    reject_hub_module_handle()
    require_action(*actions)
    require_flags("output_dir", "albert_config_file", *required)
    require_tokenizer()
    sweep_in_one_process(sweep_flag)
    group_by_length_with_buckets(full_length_reason)
