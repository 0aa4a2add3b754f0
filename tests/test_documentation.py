"""The repository explains itself: every repository path named in code, comments and docs exists
(CHANGELOG.md names old paths on purpose, e.g. where the flat layout's modules went)."""

from __future__ import annotations

import os
import re
import subprocess

from tests.shared_setup import REPO_ROOT

PATH_PATTERN = re.compile(r"\b(?:albert_tf|data_prep|tests|benchmarks|scripts|docs|configs)/"
                          r"[A-Za-z0-9_/.-]+\.(?:py|md|sh|jsonl|json|txt|csv|tsv)\b")
# The history: its entries name paths as they were on their date.
HISTORY_FILES = ("CHANGELOG.md",)


def tracked_text_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "*.py", "*.md", "*.sh"], cwd=REPO_ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [path for path in listed if os.path.exists(os.path.join(REPO_ROOT, path))]


def test_every_repository_path_named_in_code_and_docs_exists():
    missing = []
    for path in tracked_text_files():
        if path in HISTORY_FILES:
            continue
        with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as handle:
            text = handle.read()
        for line_number, line in enumerate(text.splitlines(), start=1):
            for named in PATH_PATTERN.findall(line):
                if not os.path.exists(os.path.join(REPO_ROOT, named)):
                    missing.append(f"{path}:{line_number}: {named}")
    assert not missing, "\n".join(missing)
