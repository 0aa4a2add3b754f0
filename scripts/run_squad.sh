#!/usr/bin/env bash
# Fine-tunes a pretrained ALBERT on SQuAD with the paper's hyper-parameters, then evaluates every
# checkpoint on the dev file, keeps the best F1 and writes its predictions (run_squad.py).
#
# The recipe's flags (learning rate, batch, epochs, window geometry, warmup, checkpoint cadence):
# SQUAD_RECIPES of albert_tf/tasks/question_answering/recipes.py, printed by
# run_squad.py --print_recipe (v1.1) or run_squad.py --print_recipe --version_2_with_negative (v2.0).
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
  v1.1) version_flag=--noversion_2_with_negative ;;
  v2.0) version_flag=--version_2_with_negative ;;
  *) echo "run_squad.sh: VERSION must be v1.1 or v2.0, got '${version}'." >&2; exit 2 ;;
esac

cd "${REPO_ROOT}"
# On its own line so that a failed lookup stops the script (set -e) instead of running defaults.
recipe_line="$("${PYTHON}" run_squad.py --print_recipe "${version_flag}")"
read -r -a recipe <<< "${recipe_line}"
echo "== SQuAD ${version}: ${recipe[*]}"
# shellcheck disable=SC2086  # EXTRA_FLAGS is a list of flags
"${PYTHON}" run_squad.py "${recipe[@]}" \
  --init_checkpoint="$2" --albert_config_file="$3" --spm_model_file="$4" \
  --train_file="$5" --predict_file="$6" --output_dir="$7" --do_train --do_predict ${EXTRA_FLAGS:-}
