"""Set-up shared by the test files and by the scripts they start in child processes.

Plain constants and functions (importable outside pytest, e.g. by tests/mirrored_equivalence.py);
the pytest fixtures built on them live in tests/conftest.py.

The real test data lies beside the repository in ../shared/data, or wherever the environment variable
ALBERT_TF_SHARED_DATA points; the product never reads it. Tests that need it carry the
``requires_shared_data`` marker (or use a fixture that needs it); tests/conftest.py skips them when the
directory is missing, or fails them when the environment variable CI is set.
"""

from __future__ import annotations

import copy
import glob
import json
import os
import signal
import socket
import time
from typing import Callable, TypeVar

import numpy as np

from albert_tf.models.config import AlbertConfig

T = TypeVar("T")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA_ENV = "ALBERT_TF_SHARED_DATA"
SHARED_DATA_DIR = os.path.abspath(os.path.expanduser(
    os.environ.get(SHARED_DATA_ENV) or os.path.join(REPO_ROOT, "..", "shared", "data")))
GLUE_DIR = os.path.join(SHARED_DATA_DIR, "glue")
PRETRAINING_DIR = os.path.join(SHARED_DATA_DIR, "pretraining")

# SentencePiece models trained with the reference recipe ([CLS], [SEP], [MASK] at ids 2-4): en8k
# (8,000 pieces, English; holds the digit-comma piece "▁30,") and a German one of 30,000 pieces
# (holds "▁2014," and "/12,").
EN8K_MODEL = os.path.join(PRETRAINING_DIR, "en8k.model")
GERMAN_30K_MODEL = os.path.join(SHARED_DATA_DIR, "spm", "albert-recipe-de-30k.model")

# Records written by the reference's own create_pretraining_data (en8k, S 128, M 20).
REFERENCE_RECORDS = os.path.join(PRETRAINING_DIR, "reference_output.tfrecord")
REFERENCE_SEQ_LENGTH = 128
REFERENCE_MAX_PREDICTIONS = 20


# tiny_config overrides that turn dropout on, at the rate of the reference's v1 configs.
DROPOUT = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}


def tiny_config(**overrides) -> AlbertConfig:
    """A 2-layer ALBERT (E 16, H 32, 2 heads, FFN 64) over en8k's vocabulary, without dropout.

    Small enough to train for tens of steps in a test; reads the reference records (positions up to
    ``REFERENCE_SEQ_LENGTH``). ``overrides`` replace or add config values.
    """
    values = dict(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=2, intermediate_size=64,
                  max_position_embeddings=REFERENCE_SEQ_LENGTH, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    values.update(overrides)
    return AlbertConfig.from_dict(values)



def randomized(model: T, seed: int = 0, stddev: float = 0.3, keep: str | None = None) -> T:
    """``model`` (a Keras layer or model) with every weight drawn from N(0, stddev²), LayerNorm
    and biases included, so that none stays at its initial value and a transposed or swapped weight
    cannot hide; ``keep``: a part of the paths of the weights left as they are."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if keep is None or keep not in variable.path:
            variable.assign(rng.normal(0.0, stddev, variable.shape).astype(np.float32))
    return model

def shared_data_missing() -> str | None:
    """Why tests that need the shared data cannot run: a message naming the directory, or None.

    The message says what to do; it is the one reason every such test is skipped (or failed in CI).
    """
    if os.path.isdir(SHARED_DATA_DIR):
        return None
    outcome = ("CI is set, so tests that need it fail" if os.environ.get("CI")
               else "tests that need it are skipped")
    return (f"shared test data not found at {SHARED_DATA_DIR}; set {SHARED_DATA_ENV} to its location "
            f"({outcome})")


def require_shared_data() -> None:
    """In a test: skips it when the shared data is missing, or fails it when CI is set.

    tests/conftest.py calls this for tests marked ``requires_shared_data`` and in fixtures that load
    the shared data (``en8k``); a module-scoped fixture of a test file may call it too.
    """
    import pytest  # only tests call this; the child scripts importing this module need no pytest

    reason = shared_data_missing()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def subprocess_env(**overrides: str) -> dict[str, str]:
    """Environment of a child Python process started by a test.

    The repository is importable (PYTHONPATH), the shared data is where the tests look for it
    (ALBERT_TF_SHARED_DATA, absolute), only CPUs are visible, TensorFlow's C++ log shows errors only,
    and a TF_CONFIG of the calling shell is not inherited. ``overrides`` come last.
    """
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env[SHARED_DATA_ENV] = SHARED_DATA_DIR
    env.pop("TF_CONFIG", None)
    env.update(overrides)
    return env


def ctrl_c_enabled() -> None:
    """A ``preexec_fn`` for a child process that a test stops with Ctrl-C's SIGINT: restores its
    default action. A child of a shell's background job (``cmd &``, as CI may run the tests)
    inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_ports(count: int) -> list[int]:
    """Distinct free local ports (all sockets bound at once, so no two are the same)."""
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("localhost", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


# -- processes (Linux: read from /proc) ---------------------------------------------------------------

def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name: state, parent pid, ...; None if no such process."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (zombies included)."""
    children = []
    for path in glob.glob("/proc/[0-9]*/stat"):
        child = int(path.split("/")[2])
        fields = _stat_fields(child)
        if fields and int(fields[1]) == pid:
            children.append(child)
    return children


def is_alive(pid: int) -> bool:
    """A process that exists and is not a zombie (dead, waiting to be reaped)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def wait_for(condition: Callable[[], T], timeout: float, what: str) -> T:
    """The first true value of ``condition()``, polled every 0.1 s; AssertionError naming ``what``
    after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"waited {timeout:.0f} s for {what}")


def write_repeated_squad(sample_paths: list[str], path: str, copies: int) -> int:
    """The articles of the SQuAD files ``sample_paths`` repeated ``copies`` times (question ids made
    unique) as one JSON file at ``path``, a SQuAD file big enough to time or to keep workers busy;
    returns its number of questions."""
    articles = []  # (sample number, article): samples may share question ids
    for sample_number, sample in enumerate(sample_paths):
        with open(sample, encoding="utf-8") as handle:
            articles.extend((sample_number, article) for article in json.load(handle)["data"])
    data = []
    for index in range(copies):
        for sample_number, article in copy.deepcopy(articles):
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    qa["id"] = f"{qa['id']}-{sample_number}-{index}"
            data.append(article)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"version": "repeated", "data": data}, handle)
    return sum(len(paragraph["qas"]) for article in data for paragraph in article["paragraphs"])
