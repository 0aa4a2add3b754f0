#!/usr/bin/env bash
# Fine-tunes a pretrained ALBERT on RACE with the paper's recipe, evaluates every checkpoint on dev
# (accuracy for all, middle and high questions), keeps the best and evaluates it on test
# (run_race.py).
#
# The recipe's flags: RACE_RECIPES of albert_tf/tasks/multiple_choice/recipes.py, printed by
# run_race.py --print_recipe --recipe_model_version=MODEL_VERSION: v2 (the default, for the v2
# models: learning rate 1e-5) or v1 (the v1 models: 2e-5), with --do_train --do_eval; the script
# adds --do_predict. The encoder's dropout comes from the config.
#
# Usage:
#   scripts/run_race.sh INIT_CHECKPOINT ALBERT_CONFIG SPM_MODEL DATA_DIR OUTPUT_DIR
#   MODEL_VERSION=v1 scripts/run_race.sh ...
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
# On its own line so that a failed lookup stops the script (set -e) instead of running defaults.
recipe_line="$("${PYTHON}" run_race.py --print_recipe \
  --recipe_model_version="${MODEL_VERSION:-v2}")"
read -r -a recipe <<< "${recipe_line}"
echo "== RACE (${MODEL_VERSION:-v2} recipe): ${recipe[*]}"
# shellcheck disable=SC2086  # EXTRA_FLAGS is a list of flags
"${PYTHON}" run_race.py "${recipe[@]}" \
  --init_checkpoint="$1" --albert_config_file="$2" --spm_model_file="$3" --data_dir="$4" \
  --output_dir="$5" --do_predict ${EXTRA_FLAGS:-}
