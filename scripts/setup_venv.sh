#!/usr/bin/env bash
# Creates .venv (if missing) and installs requirements.txt into it. Sourced by the other scripts.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -x "$repo_root/.venv/bin/python" ]; then
  python3 -m venv "$repo_root/.venv"
fi
"$repo_root/.venv/bin/pip" install --quiet --disable-pip-version-check -r "$repo_root/requirements.txt"
# Editable install: albert_tf and data_prep import from anywhere (python data_prep/<script>.py too).
"$repo_root/.venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -e "$repo_root"
