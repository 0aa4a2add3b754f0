"""OnnxModel (albert_tf/serving/onnx_client.py): an ONNX export fed a wrong input names it.

ONNX Runtime itself runs an input longer than the export's max_seq_length; OnnxModel refuses it
and every other wrong input of the TFLite client's cases (tests/test_tflite_client.py: the same
checks, albert_tf/serving/request_checks.py), naming the input, before the session runs, and
gives what the plain session gives on correct inputs at several lengths. The bounds are read off
the file: max_seq_length from its metadata, the embedding tables' rows from its graph.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
import pytest

from albert_tf.serving.onnx_client import LENGTH_KEY, OnnxFileError, OnnxModel, session_options
from albert_tf.serving.request_checks import ModelInputError
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.serving import export_classifier_onnx
from tests.shared_setup import subprocess_env
from tests.test_checkpoints import small_config
from tests.test_tflite_client import SEQ, WRONG, good_inputs


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    """A tiny classifier (vocab_size 30, 2 segments, 3 labels, 12 positions) exported at S = 8."""
    model = AlbertClassifierModel(small_config(), 3)
    return export_classifier_onnx(model, str(tmp_path_factory.mktemp("onnx") / "model.onnx"),
                                  SEQ)


@pytest.fixture
def session_runs(monkeypatch):
    """The inputs of every ONNX Runtime session run in the test, in order."""
    runs = []
    run = onnxruntime.InferenceSession.run

    def recorded(session, output_names, feed, *args, **kwargs):
        runs.append(feed)
        return run(session, output_names, feed, *args, **kwargs)

    monkeypatch.setattr(onnxruntime.InferenceSession, "run", recorded)
    return runs


@pytest.mark.parametrize("label", sorted(WRONG))
def test_a_wrong_input_is_named_before_the_session_runs(path, session_runs, label):
    model = OnnxModel(path)
    changed, message = WRONG[label]
    with pytest.raises(ModelInputError) as error:
        model(**{**good_inputs(), **changed})
    message = message.replace("this TFLite model", "this ONNX model")
    assert str(error.value).startswith(message), str(error.value)
    assert session_runs == []
    assert model(**good_inputs())["logits"].shape == (1, 3)
    assert len(session_runs) == 1


def test_a_missing_input_is_named(path, session_runs):
    inputs = good_inputs()
    del inputs["segment_ids"]
    with pytest.raises(ModelInputError, match="^segment_ids is missing: this ONNX model takes "
                       "input_ids, input_mask, segment_ids$"):
        OnnxModel(path)(**inputs)
    assert session_runs == []


def test_the_bounds_are_read_off_the_file(path):
    model = OnnxModel(path, num_threads=1)
    assert model.max_seq_length == SEQ
    assert model.input_shapes == {name: (1, -1) for name in good_inputs()}
    assert model.value_bounds == {"input_ids": 30, "segment_ids": 2}


def test_correct_inputs_give_the_plain_sessions_outputs(path):
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    model = OnnxModel(path)
    outputs = {}
    for length in (SEQ, 3):
        inputs = {name: value[:, :length] for name, value in good_inputs().items()}
        expected = dict(zip(names, session.run(None, inputs)))
        given = {name: value.astype(np.int64).tolist() for name, value in inputs.items()}
        outputs[length] = model(**given)  # lists of int64 values are accepted
        assert sorted(outputs[length]) == sorted(expected) == ["logits", "probabilities"]
        for name, value in outputs[length].items():
            assert value.dtype == expected[name].dtype
            np.testing.assert_array_equal(value, expected[name])
    # The two lengths are different requests: a client that ignored its inputs would fail here.
    assert not np.array_equal(outputs[SEQ]["logits"], outputs[3]["logits"])


def configured_spinning(options) -> str:
    """The session's allow_spinning entry; "unset" for ONNX Runtime's default (spinning)."""
    try:
        return options.get_session_config_entry("session.intra_op.allow_spinning")
    except RuntimeError:  # ONNX Runtime raises for a key never set
        return "unset"


def test_the_session_runs_on_the_threads_asked_for_spinning_or_asleep(path):
    """The client's session runs on the threads asked for; its threads spin while they wait for
    work, as ONNX Runtime's do by default, unless ``spinning=False`` (a CPU shared with other
    work: docs/export.md); either way it gives the plain session's outputs."""
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    inputs = good_inputs()
    expected = session.run(["logits"], inputs)[0]
    for threads, spinning in ((1, True), (2, False)):
        model = OnnxModel(path, num_threads=threads, spinning=spinning)
        options = model._session.get_session_options()  # the options the session was built with
        assert options.intra_op_num_threads == threads
        assert configured_spinning(options) == ("unset" if spinning else "0")
        np.testing.assert_array_equal(model(**inputs)["logits"], expected)
    default = session_options(onnxruntime, None)
    assert default.intra_op_num_threads == onnxruntime.SessionOptions().intra_op_num_threads
    assert default.graph_optimization_level == onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL


def test_the_plain_session_runs_what_the_client_refuses(path):
    """Why the client exists: ONNX Runtime runs SEQ + 2 tokens (within the model's 12 positions)
    although the file was exported for SEQ."""
    length = SEQ + 2
    inputs = {"input_ids": np.ones((1, length), np.int32),
              "input_mask": np.ones((1, length), np.int32),
              "segment_ids": np.zeros((1, length), np.int32)}
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    assert session.run(["logits"], inputs)[0].shape == (1, 3)
    with pytest.raises(ModelInputError, match=f"^input_ids has shape \\(1, {length}\\) but this "
                       f"ONNX model takes \\[1, L\\] with L from 1 to {SEQ}"):
        OnnxModel(path)(**inputs)


def test_a_file_without_its_max_seq_length_is_refused(path, tmp_path):
    proto = onnx.load(path)
    assert [entry.key for entry in proto.metadata_props] == [LENGTH_KEY]
    del proto.metadata_props[:]
    bare = str(tmp_path / "bare.onnx")
    onnx.save(proto, bare)
    with pytest.raises(OnnxFileError, match=f"^{bare} records no max_seq_length in its "
                       "metadata_props: not an ONNX export of albert_tf"):
        OnnxModel(bare)


@pytest.mark.subprocess  # which modules a fresh process imports
def test_the_client_imports_neither_tensorflow_nor_keras(path):
    script = ("import sys, numpy as np\n"
              "from albert_tf.serving.onnx_client import OnnxModel\n"
              f"out = OnnxModel({path!r})(input_ids=np.ones((1, 5), np.int32), "
              "input_mask=np.ones((1, 5), np.int32), segment_ids=np.zeros((1, 5), np.int32))\n"
              "print(sorted(out), 'tensorflow' in sys.modules, 'keras' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=subprocess_env(), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "['logits', 'probabilities'] False False"
