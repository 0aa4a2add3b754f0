"""The paper's SQuAD fine-tuning recipes (the reference README's), as run_squad.py flags: 2 epochs
at 5e-5 for v1.1, 3 epochs at 3e-5 for v2.0, 10% warmup, windows of 384 / 512 tokens with stride
128. Keyed by the version's name, as the results tables name their columns."""

from __future__ import annotations

SQUAD_RECIPES: dict[str, tuple[str, ...]] = {
    "squad1.1": ("--learning_rate=5e-5", "--train_batch_size=48", "--num_train_epochs=2",
                 "--max_seq_length=384"),
    "squad2.0": ("--learning_rate=3e-5", "--train_batch_size=48", "--num_train_epochs=3",
                 "--max_seq_length=512", "--version_2_with_negative"),
}
SQUAD_COMMON_FLAGS = ("--doc_stride=128", "--max_query_length=64", "--warmup_proportion=0.1",
                      "--save_checkpoints_steps=1000", "--do_lower_case")
