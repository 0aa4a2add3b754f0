#!/usr/bin/env bash
# Installs the requirements (the optional Apache Beam and ONNX ones, which the tests cover, and the
# test-only ones of requirements-test.txt) into .venv and runs the test suite (fast tests; add
# `-m slow` for the long ones) in ALBERT_TF_TEST_WORKERS processes (default 2; each test file runs
# whole in one of them, so its module fixtures are made once; 0 runs everything in this process).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo_root/scripts/setup_venv.sh" "$repo_root/requirements-beam.txt" "$repo_root/requirements-onnx.txt" "$repo_root/requirements-test.txt"
cd "$repo_root"
exec .venv/bin/python -m pytest -q -n "${ALBERT_TF_TEST_WORKERS:-2}" --dist loadfile "$@"
