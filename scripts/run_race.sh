#!/usr/bin/env bash
# Fine-tunes a pretrained ALBERT on RACE with the paper's recipe for the v2 models, evaluates every
# checkpoint on dev (accuracy for all, middle and high questions), keeps the best and evaluates it
# on test (run_race.py). The recipe, a copy of race_recipe("v2") of
# albert_tf/tasks/multiple_choice/recipes.py (which the reproduction plan uses; the paper's v1
# models use --learning_rate=2e-5: EXTRA_FLAGS="--learning_rate=2e-5", the last value wins):
#   --learning_rate=1e-5 --train_batch_size=32 --train_step=12000 --warmup_step=1000
#   --max_seq_length=512 --max_qa_length=128 --save_checkpoints_steps=100 --dropout_prob=0.1
#   --optimizer=adamw --do_lower_case (the encoder's dropout comes from the config)
#
# Usage:
#   scripts/run_race.sh INIT_CHECKPOINT ALBERT_CONFIG SPM_MODEL DATA_DIR OUTPUT_DIR
# DATA_DIR holds RACE/{train,dev,test}/{middle,high}/ (the official release or all.txt files).
# Extra run_race flags (e.g. "--strategy=mirrored --dtype=bfloat16"):
#   EXTRA_FLAGS="..." scripts/run_race.sh ...
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  if [[ -x "${REPO_ROOT}/.venv/bin/python" ]]; then PYTHON="${REPO_ROOT}/.venv/bin/python"; fi
fi
if [[ $# -ne 5 ]]; then
  echo "run_race.sh: give INIT_CHECKPOINT ALBERT_CONFIG SPM_MODEL DATA_DIR OUTPUT_DIR." >&2
  exit 2
fi

cd "${REPO_ROOT}"
# shellcheck disable=SC2086  # EXTRA_FLAGS is a list of flags
"${PYTHON}" run_race.py --learning_rate=1e-5 --train_batch_size=32 --train_step=12000 \
  --warmup_step=1000 --max_seq_length=512 --max_qa_length=128 --save_checkpoints_steps=100 \
  --dropout_prob=0.1 --optimizer=adamw --do_lower_case \
  --init_checkpoint="$1" --albert_config_file="$2" --spm_model_file="$3" --data_dir="$4" \
  --output_dir="$5" --do_train --do_eval --do_predict ${EXTRA_FLAGS:-}
