#!/usr/bin/env bash
# Fine-tunes a pretrained ALBERT on SQuAD with the paper's hyper-parameters, then evaluates every
# checkpoint on the dev file, keeps the best F1 and writes its predictions (run_squad.py). The
# recipes (a copy of SQUAD_RECIPES and SQUAD_COMMON_FLAGS of
# albert_tf/tasks/question_answering/recipes.py, which the reproduction plan uses):
#
#   v1.1: --learning_rate=5e-5 --train_batch_size=48 --num_train_epochs=2 --max_seq_length=384
#         (87,599 questions: 3,649 steps, 364 warmup)
#   v2.0: --learning_rate=3e-5 --train_batch_size=48 --num_train_epochs=3 --max_seq_length=512
#         --version_2_with_negative (130,319 questions: 8,144 steps, 814 warmup)
#   both: --doc_stride=128 --max_query_length=64 --warmup_proportion=0.1 --do_lower_case
#         --save_checkpoints_steps=1000
#
# Usage:
#   scripts/run_squad.sh VERSION INIT_CHECKPOINT ALBERT_CONFIG SPM_MODEL TRAIN_FILE PREDICT_FILE \
#     OUTPUT_DIR
# with VERSION v1.1 or v2.0. Extra run_squad flags (e.g. "--strategy=mirrored --dtype=bfloat16"):
#   EXTRA_FLAGS="..." scripts/run_squad.sh ...
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  if [[ -x "${REPO_ROOT}/.venv/bin/python" ]]; then PYTHON="${REPO_ROOT}/.venv/bin/python"; fi
fi
if [[ $# -ne 7 ]]; then
  echo "run_squad.sh: give VERSION INIT_CHECKPOINT ALBERT_CONFIG SPM_MODEL TRAIN_FILE" \
       "PREDICT_FILE OUTPUT_DIR (VERSION: v1.1 or v2.0)." >&2
  exit 2
fi
version="$1"
case "${version}" in
  v1.1) recipe=(--learning_rate=5e-5 --train_batch_size=48 --num_train_epochs=2
                --max_seq_length=384) ;;
  v2.0) recipe=(--learning_rate=3e-5 --train_batch_size=48 --num_train_epochs=3 --max_seq_length=512
                --version_2_with_negative) ;;
  *) echo "run_squad.sh: VERSION must be v1.1 or v2.0, got '${version}'." >&2; exit 2 ;;
esac

cd "${REPO_ROOT}"
# shellcheck disable=SC2086  # EXTRA_FLAGS is a list of flags
"${PYTHON}" run_squad.py "${recipe[@]}" --doc_stride=128 --max_query_length=64 \
  --warmup_proportion=0.1 --do_lower_case --save_checkpoints_steps=1000 \
  --init_checkpoint="$2" --albert_config_file="$3" --spm_model_file="$4" \
  --train_file="$5" --predict_file="$6" --output_dir="$7" --do_train --do_predict ${EXTRA_FLAGS:-}
