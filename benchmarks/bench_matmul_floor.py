"""The floor of a batch-1 classifier call on one CPU core: the model's arithmetic at the rate the
core's matrix products reach.

At batch 1 an ALBERT classifier's time is its matrix products: per layer and token Q, K, V and
the attention output (4 H x H) and the feed-forward pair (2 H x I), plus the attention's two
products over the L tokens (2 L x H per token); the last layer computes K and V for every token
and the rest for [CLS] alone (all the classifier reads, as albert_tf's exports do; Hugging Face's
computes it for every token). This prints, for the model of ``--albert_config_file`` (ALBERT-base
by default) and each length of ``--lengths``:

- the multiply-adds of one call, with the last layer for [CLS] alone and for every token;
- the rate ONNX Runtime's matrix kernel (MLAS, which every ONNX engine of bench_serving runs)
  reaches on one thread on the call's own shapes ([L, H] x [H, H], [L, H] x [H, I] and
  [L, I] x [I, H], float32), by CPU time, the best of ``--repeats`` rounds;
- the floor: the call's float32 multiply-adds at that rate, in ms: an engine on those kernels
  cannot go below it, whatever else it saves.

benchmarks/bench_serving.py's one-thread figures (``--threads=1``), set beside these floors, say
how much of an engine's time is anything but arithmetic: when the engines sit at the floor, one
engine can lead another only by computing less.

    .venv/bin/python benchmarks/bench_matmul_floor.py            # a few seconds
"""

from __future__ import annotations

import os
import subprocess
import sys

from absl import app, flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks.machine_load import load_average  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("albert_config_file", os.path.join(REPO_ROOT, "configs", "albert_base_v2.json"),
                    "ALBERT config JSON.")
flags.DEFINE_list("lengths", ["16", "48", "128"], "Real tokens per request.")
flags.DEFINE_integer("repeats", 5, "Rounds of the matrix products; the fastest counts.")

# Times the call's float32 products, [L, H] x [H, H], [L, H] x [H, I] and [L, I] x [I, H], in
# ONNX Runtime on one thread: MLAS, the matrix kernel of every ONNX engine of bench_serving (and
# faster than NumPy's BLAS at these shapes); argv: L, H, I, repeats; prints multiply-adds per
# second of the fastest round.
_RATE_PROBE = r"""
import sys, time
import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper
length, hidden, inner, repeats = (int(value) for value in sys.argv[1:5])
rng = np.random.default_rng(0)
weights = {"h_h": (hidden, hidden), "h_i": (hidden, inner), "i_h": (inner, hidden)}
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "h_h"], ["y"]),
     helper.make_node("MatMul", ["x", "h_i"], ["z"]),
     helper.make_node("MatMul", ["z", "i_h"], ["w"])], "products",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [length, hidden])],
    [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "w")],
    [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
     for name, shape in weights.items()])
options = onnxruntime.SessionOptions()
options.intra_op_num_threads = 1
session = onnxruntime.InferenceSession(
    helper.make_model(graph).SerializeToString(), options, providers=["CPUExecutionProvider"])
x = {"x": rng.standard_normal((length, hidden)).astype(np.float32)}
macs = length * (hidden * hidden + 2 * hidden * inner)
calls = max(1, int(2e9 // macs))
session.run(None, x)
best = float("inf")
for _ in range(repeats):
    start = time.process_time()
    for _ in range(calls):
        session.run(None, x)
    best = min(best, (time.process_time() - start) / calls)
print(macs / best)
"""


def call_macs(hidden: int, intermediate: int, layers: int, embedding: int, length: int,
              first_token_last_layer: bool) -> int:
    """Multiply-adds of one batch-1 classifier call on ``length`` tokens: the embedding
    projection, every layer's products, the pooler; the last layer for [CLS] alone when
    ``first_token_last_layer``."""
    per_token = 4 * hidden * hidden + 2 * hidden * intermediate
    attention = 2 * length * hidden  # per query token: scores and the weighted sum
    full_layer = length * (per_token + attention)
    if first_token_last_layer:
        last = length * 2 * hidden * hidden + per_token - 2 * hidden * hidden + attention
    else:
        last = full_layer
    return length * embedding * hidden + (layers - 1) * full_layer + last + hidden * hidden


def single_thread_rate(length: int, hidden: int, intermediate: int) -> float:
    """Multiply-adds per CPU second of MLAS's float32 products of the call's shapes on one thread
    (a process of its own, so no other engine's threads share it)."""
    result = subprocess.run([sys.executable, "-c", _RATE_PROBE, str(length), str(hidden),
                             str(intermediate), str(FLAGS.repeats)], capture_output=True,
                            text=True, check=True)
    return float(result.stdout)


def main(argv: list[str]) -> None:
    del argv
    from albert_tf.models.config import AlbertConfig

    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    hidden, intermediate = config.hidden_size, config.intermediate_size
    print(f"{FLAGS.albert_config_file}: H {hidden}, I {intermediate}, "
          f"{config.num_hidden_layers} layers; load average {load_average()}")
    print(f"{'L':>5} {'M MACs ([CLS] last)':>20} {'M MACs (all)':>13} {'GMAC/s, 1 thread':>17} "
          f"{'floor ms ([CLS] last)':>22} {'floor ms (all)':>15}")
    for length in (int(value) for value in FLAGS.lengths):
        macs = {first: call_macs(hidden, intermediate, config.num_hidden_layers,
                                 config.embedding_size, length, first)
                for first in (True, False)}
        rate = single_thread_rate(length, hidden, intermediate)
        print(f"{length:>5} {macs[True] / 1e6:>20.0f} {macs[False] / 1e6:>13.0f} "
              f"{rate / 1e9:>17.1f} {macs[True] / rate * 1e3:>22.1f} "
              f"{macs[False] / rate * 1e3:>15.1f}")
    print(f"load average {load_average()}")


if __name__ == "__main__":
    app.run(main)
