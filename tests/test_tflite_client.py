"""TFLiteModel (albert_tf/serving/tflite_client.py): a TFLite export fed a wrong input names it.

LiteRT's own runner answers a wrong length with an XNNPACK reshape failure, an id outside the
vocabulary with ``gather index out of bounds Node number 0``, and runs an input of another rank
or a mask of 2 silently; TFLiteModel refuses each, naming the input, in every weight storage, and
computes what the plain runner computes on correct inputs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from albert_tf.serving.tflite import QUANTIZATIONS, SIGNATURE_KEY
from albert_tf.serving.tflite_client import TFLiteInputError, TFLiteModel, check_inputs
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
               f"input_ids has shape (1, {SEQ + 1}) but this TFLite model takes [1, {SEQ}]"),
    "a batch of two": ({"input_mask": np.ones((2, SEQ), np.int32)},
                       f"input_mask has shape (2, {SEQ}) but this TFLite model takes [1, {SEQ}]"),
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
    assert model.value_bounds == {"input_ids": 30, "segment_ids": 2}
    expected = runner(**good_inputs())
    given = {name: value.astype(np.int64).tolist() for name, value in good_inputs().items()}
    for name, value in model(**given).items():  # lists of int64 values are accepted
        np.testing.assert_array_equal(value, expected[name])


def test_check_inputs_without_a_model_bounds_only_the_mask():
    shapes = {"input_ids": (1, 4), "input_mask": (1, 4)}
    checked = check_inputs({"input_ids": [[9999, 1, 2, 3]], "input_mask": [[1, 1, 1, 0]]},
                           shapes, rows={})
    assert checked["input_ids"].dtype == np.int32
    with pytest.raises(TFLiteInputError, match="input_mask must lie in"):
        check_inputs({"input_ids": [[1, 1, 1, 1]], "input_mask": [[1, 1, 3, 0]]}, shapes, rows={})


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
