"""TFLiteModel (albert_tf/serving/tflite_client.py): a TFLite export fed a wrong input names it.

LiteRT's own runner answers inputs of different lengths with a failure deep in the model, an id
outside the vocabulary with ``gather index out of bounds Node number 0``, and runs an input of
another rank, a mask of 2 or more positions than the export's max_seq_length silently;
TFLiteModel refuses each, naming the input, in every weight storage, and computes what the plain
runner computes on correct inputs of any length from 1 to max_seq_length (the runner resizing
the interpreter when the length changes). A file of an earlier export, of fixed length, keeps
its fixed length."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

from albert_tf.serving import tflite
from albert_tf.serving.tflite import QUANTIZATIONS, SIGNATURE_KEY
from albert_tf.serving.request_checks import check_inputs
from albert_tf.serving.tflite_client import TFLiteInputError, TFLiteModel
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.serving import export_classifier_tflite
from tests.shared_setup import subprocess_env
from tests.test_checkpoints import small_config

SEQ = 8


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{quantization: path} of a tiny classifier (vocab_size 30, 3 labels) at S = 8."""
    directory = tmp_path_factory.mktemp("tflite")
    model = AlbertClassifierModel(small_config(), 3)
    return {quantization: export_classifier_tflite(model, str(directory / f"{quantization}.tflite"),
                                                   SEQ, quantization=quantization)
            for quantization in QUANTIZATIONS}


def good_inputs():
    ids = np.array([[2, 7, 9, 3, 11, 3, 0, 0]], np.int32)
    return {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "segment_ids": np.array([[0, 0, 0, 0, 1, 1, 0, 0]], np.int32)}


WRONG = {  # label: (changed inputs, the message's start)
    "longer": ({"input_ids": np.ones((1, SEQ + 1), np.int32)},
               f"input_ids has shape (1, {SEQ + 1}) but this TFLite model takes [1, L] with L "
               f"from 1 to {SEQ}: one example per call, at most the export's max_seq_length {SEQ}"),
    "no positions": ({name: np.zeros((1, 0), np.int32) for name in good_inputs()},
                     "input_ids has shape (1, 0) but this TFLite model takes [1, L] with L from 1"),
    "a batch of two": ({"input_mask": np.ones((2, SEQ), np.int32)},
                       f"input_mask has shape (2, {SEQ}) but this TFLite model takes [1, L]"),
    "lengths differ": ({"segment_ids": np.zeros((1, SEQ - 2), np.int32)},
                       f"segment_ids has shape (1, {SEQ - 2}) but input_ids has (1, {SEQ}): they "
                       "must be equal"),
    "no batch axis": ({"segment_ids": np.zeros(SEQ, np.int32)},
                      f"segment_ids has shape ({SEQ},) but"),
    "float mask": ({"input_mask": np.ones((1, SEQ), np.float32)},
                   "input_mask has dtype float32 but must be int32"),
    "id beyond the vocabulary": ({"input_ids": np.full((1, SEQ), 30, np.int32)},
                                 "input_ids must lie in [0, 30)"),
    "negative id": ({"input_ids": np.full((1, SEQ), -1, np.int32)},
                    "input_ids must lie in [0, 30)"),
    "segment 2": ({"segment_ids": np.full((1, SEQ), 2, np.int32)},
                  "segment_ids must lie in [0, 2)"),
    "mask 2": ({"input_mask": np.full((1, SEQ), 2, np.int32)}, "input_mask must lie in [0, 2)"),
    "int64 beyond int32": ({"input_ids": np.full((1, SEQ), 2**33, np.int64)},
                           "input_ids holds values from 8589934592 to 8589934592, outside int32"),
    "unknown name": ({"token_type_ids": np.zeros((1, SEQ), np.int32)},
                     "token_type_ids is not an input: this TFLite model takes input_ids, "
                     "input_mask, segment_ids"),
}


@pytest.mark.parametrize("quantization", QUANTIZATIONS)
@pytest.mark.parametrize("label", sorted(WRONG))
def test_a_wrong_input_is_named_before_the_interpreter_runs(files, quantization, label):
    model = TFLiteModel(files[quantization])
    changed, message = WRONG[label]
    with pytest.raises(TFLiteInputError) as error:
        model(**{**good_inputs(), **changed})
    assert str(error.value).startswith(message), str(error.value)
    model(**good_inputs())  # the runner is not left in a broken state


def test_a_missing_input_is_named(files):
    inputs = good_inputs()
    del inputs["segment_ids"]
    with pytest.raises(TFLiteInputError, match="^segment_ids is missing: this TFLite model takes"):
        TFLiteModel(files["none"])(**inputs)


@pytest.mark.parametrize("quantization", QUANTIZATIONS)
def test_correct_inputs_give_the_plain_runners_outputs(files, quantization):
    runner = Interpreter(model_path=files[quantization]).get_signature_runner(SIGNATURE_KEY)
    model = TFLiteModel(files[quantization])
    assert model.max_seq_length == SEQ
    assert model.input_shapes == {name: (1, -1) for name in good_inputs()}
    assert model.value_bounds == {"input_ids": 30, "segment_ids": 2}
    # Lengths in an order that makes the runner resize up and down between calls.
    for length in (SEQ, 1, 6, 3, SEQ):
        inputs = {name: value[:, :length] for name, value in good_inputs().items()}
        expected = runner(**inputs)
        given = {name: value.astype(np.int64).tolist() for name, value in inputs.items()}
        outputs = model(**given)  # lists of int64 values are accepted
        assert outputs["logits"].shape == (1, 3)
        for name, value in outputs.items():
            np.testing.assert_array_equal(value, expected[name])


def test_the_real_tokens_alone_give_the_padded_inputs_outputs(files):
    """The 6 real tokens of good_inputs, unpadded, give the logits of the same example padded to
    8: the mask keeps padding out of attention, so only the order of float32 sums differs (the
    logits are of order 1e-2 here; a padding key counted in attention would move them by about
    their own size)."""
    model = TFLiteModel(files["none"])
    padded = model(**good_inputs())["logits"]
    real = model(**{name: value[:, :6] for name, value in good_inputs().items()})["logits"]
    np.testing.assert_allclose(real, padded, atol=1e-6, rtol=1e-5)


def test_a_file_of_fixed_length_takes_that_length_only(tmp_path, monkeypatch):
    """A file written before the sequence axis was dynamic ([1, S] inputs)."""
    monkeypatch.setattr(tflite, "input_specs", lambda: [
        tf.TensorSpec([1, SEQ], tf.int32, name=name) for name in good_inputs()])
    path = export_classifier_tflite(AlbertClassifierModel(small_config(), 3),
                                    str(tmp_path / "fixed.tflite"), SEQ)
    model = TFLiteModel(path)
    assert model.max_seq_length == SEQ and model.input_shapes["input_ids"] == (1, SEQ)
    assert model(**good_inputs())["logits"].shape == (1, 3)
    with pytest.raises(TFLiteInputError, match=rf"^input_ids has shape \(1, 6\) but this TFLite "
                       rf"model takes \[1, {SEQ}\]: one example per call, padded to the export's "
                       rf"max_seq_length {SEQ} \(this file has a fixed shape\)$"):
        model(**{name: value[:, :6] for name, value in good_inputs().items()})


def test_check_inputs_without_a_model_bounds_only_the_mask():
    shapes = {"input_ids": (1, 4), "input_mask": (1, 4)}
    checked = check_inputs({"input_ids": [[9999, 1, 2, 3]], "input_mask": [[1, 1, 1, 0]]},
                           shapes, rows={}, engine="TFLite")
    assert checked["input_ids"].dtype == np.int32
    with pytest.raises(TFLiteInputError, match="input_mask must lie in"):
        check_inputs({"input_ids": [[1, 1, 1, 1]], "input_mask": [[1, 1, 3, 0]]}, shapes, rows={},
                     engine="TFLite")


@pytest.mark.subprocess  # which modules a fresh process imports
def test_the_client_imports_neither_tensorflow_nor_keras(files):
    script = ("import sys, numpy as np\n"
              "from albert_tf.serving.tflite_client import TFLiteModel\n"
              f"out = TFLiteModel({files['none']!r})(input_ids=np.ones((1, {SEQ}), np.int32), "
              f"input_mask=np.ones((1, {SEQ}), np.int32), "
              f"segment_ids=np.zeros((1, {SEQ}), np.int32))\n"
              "print(sorted(out), 'tensorflow' in sys.modules, 'keras' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=subprocess_env(), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "['logits', 'probabilities'] False False"
