"""The paper's RACE fine-tuning recipe (the reference's run_race.py defaults and README), as
run_race.py flags."""

from __future__ import annotations

_RACE_COMMON_FLAGS = ("--train_batch_size=32", "--train_step=12000", "--warmup_step=1000",
                      "--max_seq_length=512", "--max_qa_length=128", "--save_checkpoints_steps=100",
                      "--dropout_prob=0.1", "--optimizer=adamw", "--do_lower_case")
MODEL_VERSIONS = ("v1", "v2")


def race_recipe(model_version: str) -> tuple[str, ...]:
    """The run_race.py flags of the paper's RACE recipe for a ``v1`` or ``v2`` model: learning rate
    2e-5 (v1) or 1e-5 (v2; the v1 recipe diverges on v2, which the released v2 configs also run with
    encoder dropout 0)."""
    if model_version not in MODEL_VERSIONS:
        raise ValueError(f"Unknown model version {model_version!r}; expected one of "
                         f"{', '.join(MODEL_VERSIONS)}.")
    learning_rate = "2e-5" if model_version == "v1" else "1e-5"
    return (f"--learning_rate={learning_rate}", *_RACE_COMMON_FLAGS)
