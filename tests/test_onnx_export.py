"""ONNX export of the GLUE classifier and the SQuAD v1.1 model (albert_tf/serving/onnx_export.py),
run by ONNX Runtime.

The tiny models of tests/test_tflite.py (random weights of deviation 0.3, outputs spanning about
4 to 6) on the same SST-2 / RTE / SQuAD inputs, each example padded to max_seq_length and cut to
its real tokens: ONNX Runtime's outputs equal the Keras model's at the real positions within
float32 rounding. The file records its max_seq_length; an early-exit classifier exported at a
fixed depth holds that depth's matrix products only. Refused before converting: the SQuAD 2.0
model, a directory as the path, tf2onnx missing.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
import onnxruntime
import pytest

from albert_tf.serving.onnx_export import LENGTH_KEY, OnnxExportError
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.serving import export_classifier_onnx
from albert_tf.tasks.question_answering.model import AlbertSquadModel
from albert_tf.tasks.question_answering.serving import export_squad_onnx
from tests.shared_setup import randomized, tiny_config
from tests.test_tflite import LAYER_NORM, SEQ_LENGTH, glue_inputs, keras_outputs, squad_inputs

# Largest |ONNX Runtime - Keras| as a fraction of the spread of the Keras outputs: float32 on
# both sides, only the order of the sums differs (ONNX Runtime fuses the attention and the
# LayerNorm), as for the float32 TFLite file.
TOLERANCE = 2e-5


def run(path: str, inputs: dict[str, np.ndarray], cut: bool) -> dict[str, np.ndarray]:
    """Every example of ``inputs`` through ONNX Runtime, one per call, padded or (``cut``) on its
    real tokens; per-position outputs padded back with NaN."""
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    width = inputs["input_ids"].shape[1]
    rows = []
    for row, length in enumerate(inputs["input_mask"].sum(axis=1)):
        end = length if cut else width
        values = session.run(None, {name: value[row:row + 1, :end]
                                    for name, value in inputs.items()})
        rows.append({name: np.pad(value, [(0, 0), (0, width - end)], constant_values=np.nan)
                     if value.shape[1] == end else value for name, value in zip(names, values)})
    return {name: np.concatenate([row[name] for row in rows]) for name in names}


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("task", ["classifier", "squad"])
def test_onnx_runtime_gives_the_keras_outputs_at_every_length(tmp_path, en8k, task):
    if task == "classifier":
        model = randomized(AlbertClassifierModel(tiny_config(), 3), 1, keep=LAYER_NORM)
        inputs = glue_inputs(en8k)
        path = export_classifier_onnx(model, str(tmp_path / "model.onnx"), SEQ_LENGTH)
    else:
        model = randomized(AlbertSquadModel(tiny_config()), 2, keep=LAYER_NORM)
        inputs = squad_inputs(en8k)
        path = export_squad_onnx(model, str(tmp_path / "model.onnx"), SEQ_LENGTH)
    lengths = set(inputs["input_mask"].sum(axis=1).tolist())
    assert len([length for length in lengths if length < SEQ_LENGTH]) >= 3
    expected = keras_outputs(model, inputs)
    for cut in (False, True):
        actual = run(path, inputs, cut)
        assert sorted(actual) == sorted(expected)
        for name, wanted in expected.items():
            real = ~np.isnan(run(path, inputs, True)[name]) if cut else np.ones_like(wanted, bool)
            difference = np.abs(actual[name] - wanted)[real].max()
            assert difference <= TOLERANCE * np.ptp(wanted), (name, cut, difference)


def test_the_file_takes_one_example_of_any_length_and_records_max_seq_length(tmp_path):
    path = export_classifier_onnx(AlbertClassifierModel(tiny_config(), 2),
                                  str(tmp_path / "model.onnx"), 48)
    model = onnx.load(path)
    assert {entry.key: entry.value for entry in model.metadata_props}[LENGTH_KEY] == "48"
    for graph_input in model.graph.input:
        dims = graph_input.type.tensor_type.shape.dim
        assert dims[0].dim_value == 1 and not dims[1].HasField("dim_value"), graph_input
        assert graph_input.type.tensor_type.elem_type == onnx.TensorProto.INT32


def test_an_early_exit_classifier_at_a_fixed_depth_computes_that_depth_only(tmp_path):
    """The layer-2 classifier of a 3-layer early-exit model; the files of depth 1, 2 and 3 hold
    one layer's matrix products more at each step (the speed-up of exiting early, kept)."""
    model = randomized(AlbertClassifierModel(tiny_config(num_hidden_layers=3), 3,
                                             early_exit="separate"), 5, keep=LAYER_NORM)
    paths = [export_classifier_onnx(model, str(tmp_path / f"{layers}.onnx"), 16, layers=layers)
             for layers in (1, 2, 3)]
    shallow = paths[1]
    rng = np.random.default_rng(0)
    inputs = {"input_ids": rng.integers(5, 8000, (1, 11)).astype(np.int32),
              "input_mask": np.ones((1, 11), np.int32), "segment_ids": np.zeros((1, 11), np.int32)}
    want = model(inputs, training=False)["layer_logits"].numpy()[:, 1]
    got = run(shallow, inputs, cut=False)["logits"]
    np.testing.assert_allclose(got, want, atol=TOLERANCE * np.ptp(want) + 1e-6)

    def matrix_products(path: str) -> int:
        return sum(node.op_type in ("MatMul", "Gemm", "BatchMatMul", "Einsum")
                   for node in onnx.load(path).graph.node)

    one, two, three = (matrix_products(path) for path in paths)
    assert two - one == three - two > 0


def test_what_has_no_onnx_export_is_refused_before_converting(tmp_path, monkeypatch):
    with pytest.raises(OnnxExportError, match="the SQuAD 2.0 model has no ONNX export"):
        export_squad_onnx(AlbertSquadModel(tiny_config(), version_2=True),
                          str(tmp_path / "m.onnx"), 16)
    with pytest.raises(OnnxExportError, match=f"^{tmp_path} is a directory; the ONNX export is "
                       "one file: give a file path, e.g. "):
        export_classifier_onnx(AlbertClassifierModel(tiny_config(), 2), str(tmp_path), 16)
    monkeypatch.setitem(sys.modules, "tf2onnx", None)  # as if not installed
    with pytest.raises(OnnxExportError, match="needs tf2onnx .*pip install -r "
                       "requirements-onnx.txt"):
        export_classifier_onnx(AlbertClassifierModel(tiny_config(), 2),
                               str(tmp_path / "m.onnx"), 16)
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize("name", ["own_regression", "glue_early_exit", "squad_v1"])
def test_a_script_exports_its_best_checkpoint_as_the_tflite_file_computes(task_runs, tmp_path,
                                                                         name):
    """--onnx_file alone on a harness run's directory (tests/task_harness.py): the file of
    model.ckpt-best, whose outputs in ONNX Runtime equal the float32 TFLite file the run wrote of
    the same checkpoint (an early-exit model's at the same fixed depth), on its real tokens at
    several lengths."""
    from albert_tf.serving.tflite_client import TFLiteModel
    from tests.command_runner import run_command
    from tests.task_harness import arguments, only_actions

    run = task_runs.get(name)
    path = tmp_path / "model.onnx"
    result = run_command(run.case.script, *arguments(
        {**only_actions(run.case, run.flags), "onnx_file": str(path)}))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Wrote the ONNX model of model.ckpt-best (float32, one example of up to" in (
        result.stdout)
    tflite = TFLiteModel(str(run.tflite_file))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    names = [output.name for output in session.get_outputs()]
    for length in (3, 11, tflite.max_seq_length):
        wanted, served = {}, {}
        for _ in range(8):
            inputs = {"input_ids": rng.integers(5, 400, (1, length)).astype(np.int32),
                      "input_mask": np.ones((1, length), np.int32),
                      "segment_ids": np.zeros((1, length), np.int32)}
            for output, value in tflite(**inputs).items():
                wanted.setdefault(output, []).append(value)
            for output, value in zip(names, session.run(None, inputs)):
                served.setdefault(output, []).append(value)
        for output, values in wanted.items():
            # Each file is within TOLERANCE of the Keras model (the tests above), so within twice
            # that of each other; the spread is over the 8 inputs too (a regression's one score
            # has none within an output, and one score alone may lie near 0).
            values = np.stack(values)
            assert (np.abs(np.stack(served[output]) - values).max()
                    <= 2 * TOLERANCE * np.ptp(values)), (output, length)


def test_onnx_quantization_writes_the_int8_file_of_the_best_checkpoint(task_runs, tmp_path):
    """--onnx_file with --onnx_quantization=dynamic_range on a harness run's directory: the int8
    file (its weight products quantized), served by OnnxModel within the int8 tolerance
    (tests/test_tflite.py, of the same rounding) of the float32 TFLite file of the same
    checkpoint."""
    from albert_tf.serving.onnx_client import OnnxModel
    from albert_tf.serving.tflite_client import TFLiteModel
    from tests.command_runner import run_command
    from tests.task_harness import arguments, only_actions
    from tests.test_tflite import TOLERANCES

    run = task_runs.get("own_regression")
    path = tmp_path / "model.int8.onnx"
    result = run_command(run.case.script, *arguments(
        {**only_actions(run.case, run.flags), "onnx_file": str(path),
         "onnx_quantization": "dynamic_range"}))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Wrote the ONNX model of model.ckpt-best (int8, one example of up to" in result.stdout
    assert "MatMulInteger" in {node.op_type for node in onnx.load(str(path)).graph.node}
    tflite, int8 = TFLiteModel(str(run.tflite_file)), OnnxModel(str(path))
    rng = np.random.default_rng(1)
    for length in (4, tflite.max_seq_length):
        # The score's spread over 16 inputs, as test_tflite's tolerance is of the spread: one
        # score alone may lie near 0, far below the rounding of the products that make it.
        wanted, served = [], []
        for _ in range(16):
            inputs = {"input_ids": rng.integers(5, 400, (1, length)).astype(np.int32),
                      "input_mask": np.ones((1, length), np.int32),
                      "segment_ids": np.zeros((1, length), np.int32)}
            expected, actual = tflite(**inputs), int8(**inputs)
            wanted.append(np.concatenate([expected[name].ravel() for name in sorted(expected)]))
            served.append(np.concatenate([actual[name].ravel() for name in sorted(expected)]))
        wanted, served = np.stack(wanted), np.stack(served)
        spread = np.ptp(wanted, axis=0)
        assert spread.min() > 0
        assert (np.abs(served - wanted).max(axis=0)
                <= TOLERANCES["dynamic_range"] * spread).all(), (length, spread)
