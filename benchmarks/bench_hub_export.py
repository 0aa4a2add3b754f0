"""Size and time of the hub-style export (``python -m albert_tf.export_hub``) with both of its
conventions: the reference's signatures and the TF2 encoder convention.

Builds an ``AlbertPretrainingModel`` (``--albert_config_file``, albert base v2 by default) with its
random initial weights and writes it with ``export_encoder`` (the command's library call, with the
preprocessing model at ``--max_seq_length``) to a temporary directory, deleted afterwards. The
SentencePiece model must have the config's vocab_size pieces (default: the shared data's German
30k recipe model, the size of albert base's).

Printed: the export's wall time; the sizes of its saved_model.pb, variables/ and preprocessing/;
the wall time of loading it back with ``tf.saved_model.load``; then the median latency of
``--timed_calls`` calls (after ``--warmup_calls``) of the ``tokens`` signature, the TF2 root call
and the root call with ``training=True``, on batch 1 x ``--max_seq_length`` random ids, taking
turns call by call; and the load average. Figures only, never pass/fail.

    .venv/bin/python benchmarks/bench_hub_export.py
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from albert_tf.models.config import AlbertConfig  # noqa: E402
from albert_tf.tasks.pretraining.hub_export import export_encoder  # noqa: E402
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel  # noqa: E402
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from benchmarks.base_config import define_config_flag  # noqa: E402
from tests.shared_setup import SHARED_DATA_DIR  # noqa: E402

FLAGS = flags.FLAGS

define_config_flag()
flags.DEFINE_string("spm_model_file",
                    os.path.join(SHARED_DATA_DIR, "spm", "albert-recipe-de-30k.model"),
                    "SentencePiece model with the config's vocab_size pieces.")
flags.DEFINE_integer("max_seq_length", 128, "Preprocessing length and timed input length.")
flags.DEFINE_integer("warmup_calls", 3, "Untimed calls per function before timing.")
flags.DEFINE_integer("timed_calls", 20, "Timed calls per function.")


def directory_megabytes(path: str) -> float:
    total = sum(os.path.getsize(os.path.join(root, name))
                for root, _, names in os.walk(path) for name in names)
    return total / 1e6


def main(argv: list[str]) -> None:
    del argv
    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    tokenizer = FullTokenizer(spm_model_file=FLAGS.spm_model_file, do_lower_case=True)
    model = AlbertPretrainingModel(config)
    length = FLAGS.max_seq_length
    model({"input_ids": tf.ones([1, length], tf.int32),
           "masked_lm_positions": tf.zeros([1, 1], tf.int32)})
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "albert_hub")
        start = time.perf_counter()
        export_encoder(model, tokenizer, path, length)
        print(f"export: {time.perf_counter() - start:.1f} s")
        print(f"saved_model.pb: {os.path.getsize(os.path.join(path, 'saved_model.pb')) / 1e6:.1f} MB, "
              f"variables/: {directory_megabytes(os.path.join(path, 'variables')):.1f} MB, "
              f"preprocessing/: {directory_megabytes(os.path.join(path, 'preprocessing')):.1f} MB, "
              f"total: {directory_megabytes(path):.1f} MB")
        start = time.perf_counter()
        loaded = tf.saved_model.load(path)
        print(f"load: {time.perf_counter() - start:.1f} s")
        ids = tf.constant(np.random.default_rng(0).integers(5, config.vocab_size, (1, length)),
                          tf.int32)
        ones, zeros = tf.ones_like(ids), tf.zeros_like(ids)
        calls = {
            "tokens signature": lambda: loaded.signatures["tokens"](
                input_ids=ids, input_mask=ones, segment_ids=zeros),
            "TF2 root call": lambda: loaded(
                {"input_word_ids": ids, "input_mask": ones, "input_type_ids": zeros}),
            "TF2 root call, training=True": lambda: loaded(
                {"input_word_ids": ids, "input_mask": ones, "input_type_ids": zeros},
                training=True),
        }
        times: dict[str, list[float]] = {name: [] for name in calls}
        for index in range(FLAGS.warmup_calls + FLAGS.timed_calls):
            for name, call in calls.items():
                start = time.perf_counter()
                call()
                if index >= FLAGS.warmup_calls:
                    times[name].append(time.perf_counter() - start)
        for name, values in times.items():
            print(f"{name}: median {1000 * statistics.median(values):.1f} ms per call "
                  f"(batch 1 x {length})")
    print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    app.run(main)
