#!/usr/bin/env bash
# Creates .venv (if missing) and installs requirements.txt into it, plus the requirement files given
# as arguments (e.g. requirements-beam.txt), all resolved together. Called by the other scripts.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -x "$repo_root/.venv/bin/python" ]; then
  python3 -m venv "$repo_root/.venv"
fi
requirement_args=(-r "$repo_root/requirements.txt")
for extra in "$@"; do
  requirement_args+=(-r "$extra")
done
"$repo_root/.venv/bin/pip" install --quiet --disable-pip-version-check "${requirement_args[@]}"
# Editable install: albert_tf and data_prep import from anywhere (python data_prep/<script>.py too).
"$repo_root/.venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -e "$repo_root"
