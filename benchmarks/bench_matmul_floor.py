"""The floor of a batch-1 classifier call on one CPU core: the model's arithmetic at the rate the
core's matrix products reach, in float32 and in int8.

At batch 1 an ALBERT classifier's time is its matrix products: per layer and token Q, K, V and
the attention output (4 H x H) and the feed-forward pair (2 H x I), the products of a weight,
plus the attention's two products over the L tokens (2 L x H per token), the products of two
activations; the last layer computes K and V for every token and the rest for [CLS] alone (all
the classifier reads, as albert_tf's exports do; Hugging Face's computes it for every token).
This prints, for the model of ``--albert_config_file`` (ALBERT-base by default) and each length
of ``--lengths``:

- the multiply-adds of one call, with the last layer for [CLS] alone and for every token;
- the rates ONNX Runtime's matrix kernels (MLAS, which every ONNX engine of bench_serving runs)
  reach on one thread on the call's own weight shapes ([L, H] x [H, H], [L, H] x [H, I] and
  [L, I] x [I, H]), by CPU time, the best of ``--repeats`` rounds: float32 (``MatMul``) and int8
  (``DynamicQuantizeMatMul`` with one scale per output column, the int8 ONNX files' product: the
  activation rounded to 8 bits in the call);
- the floors: the call's multiply-adds at those rates, in ms, all float32, and int8 for the
  weights' products with the attention's in float32, as both int8 files compute them. An engine
  on those kernels cannot go below them, whatever else it saves.

It also prints the float32 rate of NumPy's BLAS on a large square product ([2048, 2048] x
[2048, 2048], one thread), a second library's kernel at its most efficient shape: when it
reaches the rate MLAS reaches on the call's shapes, that rate is the core's, not one kernel's.

benchmarks/bench_serving.py's one-thread figures (``--threads=1``), set beside these floors, say
how much of an engine's time is anything but arithmetic: when the engines sit at the floor, one
engine can lead another only by computing less.

    .venv/bin/python benchmarks/bench_matmul_floor.py            # about half a minute
"""

from __future__ import annotations

import os
import subprocess
import sys

from absl import app, flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks.base_config import define_config_flag  # noqa: E402
from benchmarks.machine_load import load_average  # noqa: E402

FLAGS = flags.FLAGS
define_config_flag()
flags.DEFINE_list("lengths", ["16", "48", "128"], "Real tokens per request.")
flags.DEFINE_integer("repeats", 5, "Rounds of the matrix products; the fastest counts.")

# Times the call's weight products, [L, H] x [H, H], [L, H] x [H, I] and [L, I] x [I, H], in
# ONNX Runtime on one thread: MLAS, the matrix kernel of every ONNX engine of bench_serving (and
# faster than NumPy's BLAS at these shapes). argv: L, H, I, repeats, precision (float32: MatMul;
# int8: DynamicQuantizeMatMul, int8 weights with one scale per column); prints multiply-adds per
# CPU second of the fastest round.
_RATE_PROBE = r"""
import sys, time
import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper
length, hidden, inner, repeats = (int(value) for value in sys.argv[1:5])
int8 = sys.argv[5] == "int8"
rng = np.random.default_rng(0)
products = {"h_h": ("x", (hidden, hidden), "y"), "h_i": ("x", (hidden, inner), "z"),
            "i_h": ("z", (inner, hidden), "w")}
nodes, weights = [], []
for name, (source, shape, output) in products.items():
    if int8:
        weights += [numpy_helper.from_array(rng.integers(-127, 128, shape).astype(np.int8), name),
                    numpy_helper.from_array(rng.uniform(1e-3, 1e-2, shape[1]).astype(np.float32),
                                            name + "_scale"),
                    numpy_helper.from_array(np.zeros(shape[1], np.int8), name + "_zero")]
        nodes.append(helper.make_node("DynamicQuantizeMatMul",
                                      [source, name, name + "_scale", name + "_zero"], [output],
                                      domain="com.microsoft"))
    else:
        weights.append(numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name))
        nodes.append(helper.make_node("MatMul", [source, name], [output]))
graph = helper.make_graph(
    nodes, "products", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [length, hidden])],
    [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "w")], weights)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.microsoft", 1)])
options = onnxruntime.SessionOptions()
options.intra_op_num_threads = 1
session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
x = {"x": rng.standard_normal((length, hidden)).astype(np.float32)}
macs = length * (hidden * hidden + 2 * hidden * inner)
calls = max(1, int((8e9 if int8 else 2e9) // macs))
session.run(None, x)
best = float("inf")
for _ in range(repeats):
    start = time.process_time()
    for _ in range(calls):
        session.run(None, x)
    best = min(best, (time.process_time() - start) / calls)
print(macs / best)
"""

# NumPy's BLAS on one thread (the environment the probe runs in says so) on a large square
# float32 product; argv: repeats; prints multiply-adds per CPU second of the fastest product.
_BLAS_PROBE = r"""
import sys, time
import numpy as np
size, repeats = 2048, int(sys.argv[1])
rng = np.random.default_rng(0)
a, b = (rng.standard_normal((size, size)).astype(np.float32) for _ in range(2))
a @ b
best = float("inf")
for _ in range(repeats):
    start = time.process_time()
    a @ b
    best = min(best, time.process_time() - start)
print(size ** 3 / best)
"""

# The environment that holds every BLAS NumPy may be built on to one thread.
_ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                      "MKL_NUM_THREADS", "BLIS_NUM_THREADS")}


def call_macs(hidden: int, intermediate: int, layers: int, embedding: int, length: int,
              first_token_last_layer: bool) -> tuple[int, int]:
    """(multiply-adds of the products of a weight, of the attention's products of two
    activations) of one batch-1 classifier call on ``length`` tokens: the embedding projection,
    every layer's products, the pooler; the last layer for [CLS] alone when
    ``first_token_last_layer``."""
    per_token = 4 * hidden * hidden + 2 * hidden * intermediate
    attention = 2 * length * hidden  # per query token: scores and the weighted sum
    if first_token_last_layer:  # K and V for every token, the rest for [CLS]
        last_weights = length * 2 * hidden * hidden + per_token - 2 * hidden * hidden
        last_attention = attention
    else:
        last_weights, last_attention = length * per_token, length * attention
    weights = length * embedding * hidden + (layers - 1) * length * per_token + last_weights
    return weights + hidden * hidden, (layers - 1) * length * attention + last_attention


def probe(script: str, *argv: object) -> float:
    """The number ``script`` prints, run in a process of its own (so no other engine's threads
    share its core) with every BLAS held to one thread."""
    result = subprocess.run([sys.executable, "-c", script, *map(str, argv)], capture_output=True,
                            text=True, check=True, env={**os.environ, **_ONE_THREAD})
    return float(result.stdout)


def main(argv: list[str]) -> None:
    del argv
    from albert_tf.models.config import AlbertConfig

    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    hidden, intermediate = config.hidden_size, config.intermediate_size
    print(f"{FLAGS.albert_config_file}: H {hidden}, I {intermediate}, "
          f"{config.num_hidden_layers} layers; load average {load_average()}")
    blas = probe(_BLAS_PROBE, FLAGS.repeats)
    print(f"NumPy's BLAS, float32 [2048, 2048] x [2048, 2048], 1 thread: {blas / 1e9:.1f} GMAC/s")
    print(f"{'L':>5} {'M MACs ([CLS] last)':>20} {'M MACs (all)':>13} {'GMAC/s f32':>11} "
          f"{'GMAC/s int8':>12} {'f32 floor ms ([CLS] / all)':>27} "
          f"{'int8 floor ms ([CLS] / all)':>28}")
    for length in (int(value) for value in FLAGS.lengths):
        macs = {first: call_macs(hidden, intermediate, config.num_hidden_layers,
                                 config.embedding_size, length, first)
                for first in (True, False)}
        float_rate = probe(_RATE_PROBE, length, hidden, intermediate, FLAGS.repeats, "float32")
        int8_rate = probe(_RATE_PROBE, length, hidden, intermediate, FLAGS.repeats, "int8")
        float_floor = {first: sum(macs[first]) / float_rate * 1e3 for first in macs}
        int8_floor = {first: (macs[first][0] / int8_rate + macs[first][1] / float_rate) * 1e3
                      for first in macs}
        print(f"{length:>5} {sum(macs[True]) / 1e6:>20.0f} {sum(macs[False]) / 1e6:>13.0f} "
              f"{float_rate / 1e9:>11.1f} {int8_rate / 1e9:>12.1f} "
              f"{float_floor[True]:>18.1f} / {float_floor[False]:>6.1f} "
              f"{int8_floor[True]:>19.1f} / {int8_floor[False]:>6.1f}")
    print(f"load average {load_average()}")


if __name__ == "__main__":
    app.run(main)
