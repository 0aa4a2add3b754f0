#!/usr/bin/env bash
# Installs the requirements into .venv, then runs the end-to-end example (scripts/quickstart.py):
# SentencePiece model -> pretraining data -> tiny ALBERT pretraining + evaluation -> fine-tuning on
# labelled CSV files, predictions, SavedModel export -> one sentence served by plain TensorFlow; CPU.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo_root/scripts/setup_venv.sh"
cd "$repo_root"
exec .venv/bin/python scripts/quickstart.py "$@"
