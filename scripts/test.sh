#!/usr/bin/env bash
# Installs the requirements (the optional Apache Beam ones, which the tests cover, and the test-only
# ones of requirements-test.txt) into .venv and runs the test suite (fast tests; add `-m slow` for
# the long ones).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo_root/scripts/setup_venv.sh" "$repo_root/requirements-beam.txt" "$repo_root/requirements-test.txt"
cd "$repo_root"
exec .venv/bin/python -m pytest -q "$@"
