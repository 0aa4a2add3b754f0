"""The paper's GLUE fine-tuning recipes (the reference's run_glue.sh), as run_classifier flags.

``GLUE_RECIPES`` is keyed by --task_name; data_prep.glue --print_recipe prints one, the reproduction
plan (python -m albert_tf.paper_tables --plan) uses them all. Encoder dropout is a config key
(``hidden_dropout_prob``), not a flag: a recipe names it in ``encoder_dropout``.

    GLUE_RECIPES["rte"].flags()[:2]   # ['--warmup_step=200', '--learning_rate=3e-05']
"""

from __future__ import annotations

import dataclasses

COMMON_FINE_TUNING_FLAGS = ("--optimizer=adamw", "--do_lower_case")


@dataclasses.dataclass(frozen=True)
class FineTuningRecipe:
    """The paper's run_classifier hyper-parameters for one GLUE task (the reference's run_glue.sh).

    Every task also uses --optimizer=adamw and --do_lower_case. ``encoder_dropout`` is the paper's
    hidden dropout, which only the config JSON sets (``hidden_dropout_prob``; the released v2
    configs use 0).
    """

    warmup_step: int
    learning_rate: float
    train_step: int
    save_checkpoints_steps: int
    train_batch_size: int
    max_seq_length: int = 512
    encoder_dropout: float = 0.0
    source: str = "reference run_glue.sh"

    def flags(self) -> list[str]:
        """The run_classifier command-line flags of this recipe."""
        return [f"--warmup_step={self.warmup_step}", f"--learning_rate={self.learning_rate:g}",
                f"--train_step={self.train_step}",
                f"--save_checkpoints_steps={self.save_checkpoints_steps}",
                f"--train_batch_size={self.train_batch_size}",
                f"--max_seq_length={self.max_seq_length}", *COMMON_FINE_TUNING_FLAGS]


_MNLI = FineTuningRecipe(1000, 3e-5, 10000, 100, 128)

# Keyed by run_classifier's --task_name; mismnli is MNLI's recipe, ax (predicted with an MNLI model)
# has none.
GLUE_RECIPES: dict[str, FineTuningRecipe] = {
    "cola": FineTuningRecipe(320, 1e-5, 5336, 100, 16),
    "sst-2": FineTuningRecipe(1256, 1e-5, 20935, 100, 32),
    "mrpc": FineTuningRecipe(200, 2e-5, 800, 100, 32),
    "sts-b": FineTuningRecipe(214, 2e-5, 3598, 100, 16),
    "qqp": FineTuningRecipe(1000, 5e-5, 14000, 100, 128, encoder_dropout=0.1),
    "mnli": _MNLI,
    "mismnli": _MNLI,
    "qnli": FineTuningRecipe(1986, 1e-5, 33112, 200, 32),
    "rte": FineTuningRecipe(200, 3e-5, 800, 100, 32, encoder_dropout=0.1),
    # Not in run_glue.sh: the paper's table (S=128); the checkpoint cadence is our choice.
    "wnli": FineTuningRecipe(250, 2e-5, 2000, 100, 16, max_seq_length=128, encoder_dropout=0.1,
                             source="ALBERT paper (not in run_glue.sh)"),
}
