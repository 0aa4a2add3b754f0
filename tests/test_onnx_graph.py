"""The rewritten ONNX graph (albert_tf/serving/onnx_graph.py) and the int8 ONNX file
(albert_tf/serving/onnx_quantize.py), run by ONNX Runtime.

The rewrite must compute what tf2onnx's graph computes: both run on the same inputs of several
lengths and agree within float32 rounding, and the rewritten graph holds what the rewrite says
(one ``LayerNormalization`` per layer norm, no reshape target computed at run time, the query,
key and value weights joined once for all the layers that share them). The int8 file, served by
``OnnxModel``, gives the Keras model's outputs within the tolerance of the TFLite int8 file (the
same rounding: 8-bit weights, activations rounded to 8 bits per call, the products of two
activations in float32), holds int8 weight products, and keeps every input check. Skipped
without onnx, onnxruntime or tf2onnx (the optional installs).
"""

from __future__ import annotations

import copy
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("tf2onnx")

from albert_tf.serving.onnx_client import OnnxModel, table_rows  # noqa: E402
from albert_tf.serving.onnx_export import OnnxExportError, tf2onnx_graph  # noqa: E402
from albert_tf.serving.onnx_graph import optimize  # noqa: E402
from albert_tf.serving.request_checks import ModelInputError  # noqa: E402
from albert_tf.tasks.classification.model import AlbertClassifierModel  # noqa: E402
from albert_tf.tasks.classification.serving import (export_classifier_onnx,  # noqa: E402
                                                    file_outputs)
from albert_tf.tasks.question_answering.model import AlbertSquadModel  # noqa: E402
from albert_tf.tasks.question_answering.serving import export_squad_onnx  # noqa: E402
from tests.shared_setup import randomized, tiny_config  # noqa: E402
from tests.test_onnx_export import TOLERANCE, run  # noqa: E402
from tests.test_tflite import (LAYER_NORM, SEQ_LENGTH, TOLERANCES, glue_inputs,  # noqa: E402
                               keras_outputs, squad_inputs)

SEQ = 32
LENGTHS = (1, 6, 17, SEQ)
LAYERS = 3


def random_inputs(length: int, seed: int = 0) -> dict[str, np.ndarray]:
    """One example of ``length`` real tokens: ids from the vocabulary, the second half
    segment 1."""
    rng = np.random.default_rng(seed + length)
    segments = np.zeros((1, length), np.int32)
    segments[:, length // 2:] = 1
    return {"input_ids": rng.integers(5, 8000, (1, length)).astype(np.int32),
            "input_mask": np.ones((1, length), np.int32), "segment_ids": segments}


def session_outputs(model: "onnx.ModelProto", inputs: dict) -> dict[str, np.ndarray]:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(None, inputs)))


@pytest.fixture(scope="module")
def classifier():
    """A 3-layer classifier (3 labels) of random weights, biases included (so that tf2onnx keeps
    every bias Add the rewrite must carry), LayerNorm kept (test_tflite.py says why)."""
    return randomized(AlbertClassifierModel(tiny_config(num_hidden_layers=LAYERS), 3), 1,
                      keep=LAYER_NORM)


@pytest.fixture(scope="module")
def graphs(classifier):
    """(tf2onnx's graph, the rewritten graph, the rewrite's counts)."""
    raw = tf2onnx_graph(classifier, SEQ, file_outputs(classifier))
    rewritten = copy.deepcopy(raw)
    return raw, rewritten, optimize(rewritten)


def test_the_rewritten_graph_computes_what_tf2onnx_wrote(graphs):
    raw, rewritten, _ = graphs
    for length in LENGTHS:
        inputs = random_inputs(length)
        expected, actual = session_outputs(raw, inputs), session_outputs(rewritten, inputs)
        assert sorted(actual) == sorted(expected) == ["logits", "probabilities"]
        for name, wanted in expected.items():
            assert np.abs(actual[name] - wanted).max() <= TOLERANCE * np.ptp(wanted) + 1e-7, (
                name, length)


def test_the_rewrite_fuses_what_it_says_and_keeps_the_weights_shared(graphs):
    raw, rewritten, counts = graphs
    ops = [node.op_type for node in rewritten.graph.node]
    # Every layer norm (the embeddings' and two per layer) is one node; none is left as moments.
    assert counts["layer_norms"] == ops.count("LayerNormalization") == 2 * LAYERS + 1
    assert "GlobalAveragePool" not in ops and "Sqrt" not in ops
    # Every reshape target is a constant: nothing computes shapes at run time but the slice of the
    # position table to the request's length.
    constants = {tensor.name for tensor in rewritten.graph.initializer}
    assert all(node.input[1] in constants for node in rewritten.graph.node
               if node.op_type == "Reshape")
    assert ops.count("Shape") <= 1 and "Concat" not in ops
    # The query, key and value products: one per layer, reading one joined weight [H, 3H] stored
    # once; but the last layer's, which computes the query of the first token only (all the
    # classifier reads), so joins its key and value [H, 2H] alone.
    joined = {tuple(tensor.dims): tensor.name for tensor in rewritten.graph.initializer
              if "/joined_" in tensor.name and tensor.name.rsplit("_", 1)[-1].isdigit()}
    assert sorted(joined) == [(32, 64), (32, 96)]
    readers = {dims: sum(name in node.input for node in rewritten.graph.node)
               for dims, name in joined.items()}
    assert readers == {(32, 96): LAYERS - 1, (32, 64): 1}
    assert counts["joined_matmuls"] == ops.count("Split") == LAYERS
    assert len(ops) < len(raw.graph.node) / 2
    # The weights stay shared: the rewrite adds the two joined weights, drops the key and value
    # weights no product reads any more (the query's is read by the last layer), and copies no
    # weight per layer.
    weights = sum(np.prod(tensor.dims) for tensor in rewritten.graph.initializer
                  if len(tensor.dims) == 2)
    raw_weights = sum(np.prod(tensor.dims) for tensor in raw.graph.initializer
                      if len(tensor.dims) == 2)
    assert weights == raw_weights + 32 * 96 + 32 * 64 - 2 * 32 * 32


@pytest.fixture(scope="module")
def int8_files(tmp_path_factory, en8k):
    """{task: (Keras model, inputs, float32 path, int8 path)}: test_tflite.py's classifier and
    SQuAD v1.1 models and inputs (real SST-2 / RTE and SQuAD text), the conditions its int8
    tolerance was measured in, exported at its max_seq_length."""
    directory = tmp_path_factory.mktemp("onnx_int8")
    cases = {
        "classifier": (randomized(AlbertClassifierModel(tiny_config(), 3), 1, keep=LAYER_NORM),
                       glue_inputs(en8k), export_classifier_onnx),
        "squad": (randomized(AlbertSquadModel(tiny_config()), 2, keep=LAYER_NORM),
                  squad_inputs(en8k), export_squad_onnx)}
    return {task: (model, inputs, *(export(model, str(directory / f"{task}.{quantization}.onnx"),
                                           SEQ_LENGTH, quantization=quantization)
                                    for quantization in ("none", "dynamic_range")))
            for task, (model, inputs, export) in cases.items()}


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("task", ["classifier", "squad"])
def test_the_int8_file_gives_the_keras_outputs_within_the_int8_tolerance(int8_files, task):
    """TOLERANCES["dynamic_range"] is the TFLite int8 file's, of the same rounding, as a fraction
    of the spread of the Keras outputs over every example, each cut to its real tokens, as
    test_tflite.py takes it. The file must also differ from the float32 one by more than rounding
    (it is quantized)."""
    model, inputs, float32_path, int8_path = int8_files[task]
    expected = keras_outputs(model, inputs)
    actual, unquantized = run(int8_path, inputs, cut=True), run(float32_path, inputs, cut=True)
    largest = 0.0
    for name, wanted in expected.items():
        real = ~np.isnan(actual[name])
        spread = np.ptp(wanted)
        difference = np.abs(actual[name] - wanted)[real].max()
        assert difference <= TOLERANCES["dynamic_range"] * spread, (name, difference, spread)
        assert np.abs(unquantized[name] - wanted)[real].max() <= TOLERANCE * spread
        largest = max(largest, difference / spread)
    assert largest > 10 * TOLERANCE


@pytest.mark.requires_shared_data
def test_the_int8_file_holds_int8_weight_products_and_is_smaller(int8_files):
    _, _, float32_path, int8_path = int8_files["classifier"]
    layers = tiny_config().num_hidden_layers
    graph = onnx.load(int8_path).graph
    weights = {tensor.name for tensor in graph.initializer}
    ops = [node.op_type for node in graph.node]
    # Every product with a weight is in int8; only the attention's two products of activations
    # per layer stay float32.
    assert not [node.name for node in graph.node
                if node.op_type == "MatMul" and node.input[1] in weights]
    assert ops.count("MatMulInteger") >= 4 * layers
    assert ops.count("MatMul") == 2 * layers
    float32_size = len(open(float32_path, "rb").read())
    assert len(open(int8_path, "rb").read()) < 0.4 * float32_size


@pytest.mark.requires_shared_data
def test_the_int8_file_keeps_every_input_check(int8_files):
    _, _, float32_path, int8_path = int8_files["classifier"]
    int8, float32 = OnnxModel(int8_path), OnnxModel(float32_path)
    assert int8.max_seq_length == float32.max_seq_length == SEQ_LENGTH
    assert int8.value_bounds == float32.value_bounds == {"input_ids": 8000, "segment_ids": 2}
    inputs = random_inputs(5)
    inputs["input_ids"][0, 2] = 8000
    with pytest.raises(ModelInputError, match="^input_ids"):
        int8(**inputs)
    longer = SEQ_LENGTH + 1
    with pytest.raises(ModelInputError, match=f"^input_ids has shape \\(1, {longer}\\)"):
        int8(**random_inputs(longer))


def test_the_table_rows_of_a_fused_embedding_are_read(graphs):
    """A graph fused by onnxruntime.transformers holds EmbedLayerNormalization instead of the
    Gathers: its word and segment tables still bound the ids and segment ids."""
    _, rewritten, _ = graphs
    graph = copy.deepcopy(rewritten.graph)
    gathers = {node.input[1]: node.input[0] for node in graph.node if node.op_type == "Gather"}
    for node in [node for node in graph.node if node.op_type == "Gather"]:
        graph.node.remove(node)
    graph.node.append(onnx.helper.make_node(
        "EmbedLayerNormalization", ["input_ids", "segment_ids", gathers["input_ids"], "positions",
                                    gathers["segment_ids"], "gamma", "beta"], ["embedded"],
        domain="com.microsoft"))
    assert table_rows(graph, ["input_ids", "input_mask", "segment_ids"]) == {
        "input_ids": 8000, "segment_ids": 2}


def test_a_wrong_quantization_or_a_missing_quantizer_is_refused_before_converting(
        classifier, tmp_path, monkeypatch):
    path = tmp_path / "m.onnx"
    with pytest.raises(OnnxExportError, match="^quantization must be one of none, dynamic_range; "
                       "got 'float16'"):
        export_classifier_onnx(classifier, str(path), SEQ, quantization="float16")
    monkeypatch.setitem(sys.modules, "onnxruntime.quantization", None)  # as if not installed
    with pytest.raises(OnnxExportError, match="needs ONNX Runtime's quantizer .*pip install "
                       "onnxruntime"):
        export_classifier_onnx(classifier, str(path), SEQ, quantization="dynamic_range")
    assert not path.exists()
