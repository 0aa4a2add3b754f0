#!/usr/bin/env bash
# Fine-tunes a pretrained ALBERT on GLUE with the paper's per-task hyper-parameters, like the
# reference's run_glue.sh: for each task, train (--nodo_eval --nodo_predict), then evaluate every
# checkpoint on dev, keep the best and predict the test set (--nodo_train --do_eval --do_predict).
#
# The per-task flags (warmup_step, learning_rate, train_step, save_checkpoints_steps,
# train_batch_size, max_seq_length, --optimizer=adamw --do_lower_case): GLUE_RECIPES of
# albert_tf/tasks/classification/recipes.py, printed by data_prep.glue --task_name=X --print_recipe.
#
# Usage (arguments or environment variables; tasks default to all nine):
#   scripts/run_glue.sh INIT_CHECKPOINT ALBERT_CONFIG SPM_MODEL GLUE_DIR OUTPUT_ROOT [TASK ...]
#   INIT_CHECKPOINT=... ALBERT_CONFIG=... SPM_MODEL=... GLUE_DIR=... OUTPUT_ROOT=... \
#     scripts/run_glue.sh rte mrpc
# Results: OUTPUT_ROOT/<task>/{eval_results.txt,best_trial.txt,test_results.tsv,submit_results.tsv}.
# Extra run_classifier flags for both phases (e.g. "--strategy=mirrored --dtype=bfloat16"):
#   EXTRA_FLAGS="..." scripts/run_glue.sh ...
# The paper also uses encoder dropout 0.1 for QQP, RTE and WNLI; it is set in the config JSON
# (hidden_dropout_prob), not by a flag.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  if [[ -x "${REPO_ROOT}/.venv/bin/python" ]]; then PYTHON="${REPO_ROOT}/.venv/bin/python"; fi
fi

VARIABLES=(INIT_CHECKPOINT ALBERT_CONFIG SPM_MODEL GLUE_DIR OUTPUT_ROOT)
missing=0
for name in "${VARIABLES[@]}"; do [[ -n "${!name:-}" ]] || missing=1; done
if [[ ${missing} -eq 1 ]]; then  # not all in the environment: the first five arguments
  if [[ $# -lt 5 ]]; then
    echo "run_glue.sh: give INIT_CHECKPOINT ALBERT_CONFIG SPM_MODEL GLUE_DIR OUTPUT_ROOT as" \
         "arguments or environment variables." >&2
    sed -n '10,14p' "${BASH_SOURCE[0]}" >&2
    exit 2
  fi
  INIT_CHECKPOINT="$1" ALBERT_CONFIG="$2" SPM_MODEL="$3" GLUE_DIR="$4" OUTPUT_ROOT="$5"
  shift 5
fi
TASKS=("$@")
if [[ ${#TASKS[@]} -eq 0 ]]; then
  TASKS=(cola sst-2 mrpc sts-b qqp mnli qnli rte wnli)
fi

cd "${REPO_ROOT}"
for task in "${TASKS[@]}"; do
  # On its own line so that a failed lookup stops the script (set -e) instead of running defaults.
  recipe_line="$("${PYTHON}" -m data_prep.glue --task_name="${task}" --print_recipe)"
  read -r -a recipe <<< "${recipe_line}"
  common=("${recipe[@]}"
          --data_dir="${GLUE_DIR}"
          --output_dir="${OUTPUT_ROOT}/${task}"
          --init_checkpoint="${INIT_CHECKPOINT}"
          --albert_config_file="${ALBERT_CONFIG}"
          --spm_model_file="${SPM_MODEL}")
  echo "== ${task}: ${recipe[*]}"
  # shellcheck disable=SC2086  # EXTRA_FLAGS is a list of flags
  "${PYTHON}" run_classifier.py "${common[@]}" --do_train --nodo_eval --nodo_predict \
    ${EXTRA_FLAGS:-}
  # shellcheck disable=SC2086
  "${PYTHON}" run_classifier.py "${common[@]}" --nodo_train --do_eval --do_predict ${EXTRA_FLAGS:-}
done
