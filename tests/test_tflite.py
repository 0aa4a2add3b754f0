"""TFLite export of the GLUE classifier and the SQuAD v1.1 model.

The .tflite files are run in a fresh Python process that imports only tensorflow and numpy, with the
interpreter's default kernels (XNNPACK) and with its reference kernels; their outputs must equal the
Keras models' within 1e-4 on real inputs (SST-2 sentences, RTE pairs, SQuAD question/context
windows, tokenized with en8k). The tiny models get random weights of standard deviation 0.3
(LayerNorm kept at its identity), so that the compared outputs are of order one and differ
between inputs, unlike the near-zero logits of the default initialisation.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.serving import tflite
from albert_tf.serving.tflite import SIGNATURE_KEY, TFLiteExportError, check_tflite_path
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.serving import export_classifier_tflite
from albert_tf.tasks.question_answering.model import AlbertSquadModel
from albert_tf.tasks.question_answering.serving import export_squad_tflite
from data_prep.classification.features import convert_example
from data_prep.classification.processors import RteProcessor, Sst2Processor
from data_prep.question_answering.examples import read_squad_examples
from data_prep.question_answering.features import FeatureSettings, convert_examples
from tests.shared_setup import GLUE_DIR, SHARED_DATA_DIR, subprocess_env, tiny_config

SEQ_LENGTH = 64
TOLERANCE = 1e-4
SQUAD_V1_SAMPLE = os.path.join(SHARED_DATA_DIR, "squad", "dev-v1.1-sample.json")

# Runs every (model, inputs, outputs) triple of argv with tf.lite only; prints each model's
# signature list and input details as JSON.
INTERPRETER_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf

RESOLVERS = {"default": tf.lite.experimental.OpResolverType.AUTO,
             "reference": tf.lite.experimental.OpResolverType.BUILTIN_REF}
report = {}
args = sys.argv[1:]
for model_path, inputs_path, outputs_path in zip(args[0::3], args[1::3], args[2::3]):
    inputs = np.load(inputs_path)
    names = list(inputs.files)
    outputs = {}
    for resolver, kind in RESOLVERS.items():
        interpreter = tf.lite.Interpreter(model_path=model_path, experimental_op_resolver_type=kind)
        runner = interpreter.get_signature_runner("serving_default")
        rows = [runner(**{name: inputs[name][i:i + 1] for name in names})
                for i in range(len(inputs[names[0]]))]
        for key in rows[0]:
            outputs[f"{resolver}/{key}"] = np.concatenate([row[key] for row in rows])
    np.savez(outputs_path, **outputs)
    report[model_path] = {
        "signatures": interpreter.get_signature_list(),
        "inputs": {detail["name"]: [detail["shape"].tolist(), np.dtype(detail["dtype"]).name]
                   for detail in interpreter.get_input_details()}}
report["modules"] = sorted(name for name in sys.modules if name.split(".")[0] == "albert_tf")
print(json.dumps(report))
"""


def randomize(model: keras.Model, seed: int) -> keras.Model:
    """Every weight but LayerNorm's drawn from N(0, 0.3²). (A random LayerNorm scale would shrink
    the residual stream below its constant offset and make every position's output alike.)"""
    rng = np.random.default_rng(seed)
    for variable in model.variables:
        if "LayerNorm" not in variable.path:
            variable.assign(rng.normal(0.0, 0.3, variable.shape).astype(np.float32))
    return model


def glue_inputs(en8k) -> dict[str, np.ndarray]:
    """SST-2 sentences (padded) and RTE pairs (truncated), as run_classifier's features."""
    rows = []
    for processor, count in ((Sst2Processor(), 4), (RteProcessor(), 3)):
        for example in processor.get_examples(GLUE_DIR, "dev")[:count]:
            rows.append(convert_example(example, processor.get_labels(), SEQ_LENGTH, en8k))
    return {name: np.array([getattr(row, name) for row in rows], np.int32) for name in INPUT_NAMES}


def squad_inputs(en8k) -> dict[str, np.ndarray]:
    """The windows of the first two SQuAD v1.1 questions, as run_squad's features."""
    examples = read_squad_examples(SQUAD_V1_SAMPLE, is_training=False)[:2]
    settings = FeatureSettings(max_seq_length=SEQ_LENGTH, doc_stride=32, max_query_length=16)
    features = [feature for _, feature in
                convert_examples(examples, en8k.sp_model, True, settings, False)][:6]
    return {name: np.array([getattr(feature, name) for feature in features], np.int32)
            for name in INPUT_NAMES}


def keras_outputs(model: keras.Model, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    outputs = model(inputs, training=False)
    if isinstance(model, AlbertSquadModel):
        return {name: outputs[name].numpy() for name in ("start_logits", "end_logits")}
    logits = outputs["logits"].numpy()
    return {"logits": logits, "probabilities": keras.ops.softmax(logits, axis=-1).numpy()}


@pytest.fixture(scope="module")
def exported(tmp_path_factory, en8k):
    """{name: (Keras outputs, TFLite outputs by resolver/name)} plus the interpreter's report."""
    directory = tmp_path_factory.mktemp("tflite")
    cases = {
        "classifier": (randomize(AlbertClassifierModel(tiny_config(), 3), 1), glue_inputs(en8k)),
        "squad": (randomize(AlbertSquadModel(tiny_config()), 2), squad_inputs(en8k)),
    }
    exporters = {"classifier": export_classifier_tflite, "squad": export_squad_tflite}
    args = []
    for name, (model, inputs) in cases.items():
        model_path = exporters[name](model, str(directory / f"{name}.tflite"), SEQ_LENGTH)
        np.savez(directory / f"{name}_inputs.npz", **inputs)
        args += [model_path, str(directory / f"{name}_inputs.npz"),
                 str(directory / f"{name}_out.npz")]
    done = subprocess.run([sys.executable, "-c", INTERPRETER_SCRIPT, *args], env=subprocess_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    results = {name: (keras_outputs(model, inputs), dict(np.load(directory / f"{name}_out.npz")),
                      report[str(directory / f"{name}.tflite")])
               for name, (model, inputs) in cases.items()}
    return results, report["modules"]


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("name, outputs", [("classifier", ("logits", "probabilities")),
                                           ("squad", ("start_logits", "end_logits"))])
def test_tflite_outputs_equal_the_keras_model(exported, name, outputs):
    expected, actual, _ = exported[0][name]
    assert np.ptp(expected[outputs[0]], axis=0).max() > 0.5  # inputs give clearly different outputs
    for resolver in ("default", "reference"):
        for output in outputs:
            difference = np.abs(actual[f"{resolver}/{output}"] - expected[output]).max()
            assert difference <= TOLERANCE, (resolver, output, difference)


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("name, outputs", [("classifier", ["logits", "probabilities"]),
                                           ("squad", ["end_logits", "start_logits"])])
def test_tflite_signature_has_fixed_int32_inputs_and_named_outputs(exported, name, outputs):
    _, _, report = exported[0][name]
    signature = report["signatures"][SIGNATURE_KEY]
    assert sorted(signature["inputs"]) == sorted(INPUT_NAMES)
    assert sorted(signature["outputs"]) == outputs
    assert sorted(report["inputs"].values()) == [[[1, SEQ_LENGTH], "int32"]] * 3


@pytest.mark.requires_shared_data
def test_interpreter_process_never_imported_albert_tf(exported):
    assert exported[1] == []


def test_the_squad_2_model_is_refused_and_nothing_is_written(tmp_path):
    with pytest.raises(TFLiteExportError, match="SQuAD 2.0"):
        export_squad_tflite(AlbertSquadModel(tiny_config(), version_2=True),
                            str(tmp_path / "model.tflite"), SEQ_LENGTH)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seq_length", [0, tiny_config().max_position_embeddings + 1])
def test_sequence_length_outside_the_position_table_is_refused(tmp_path, seq_length):
    with pytest.raises(TFLiteExportError, match="max_position_embeddings"):
        export_classifier_tflite(AlbertClassifierModel(tiny_config(), 2),
                                 str(tmp_path / "m.tflite"), seq_length)
    assert list(tmp_path.iterdir()) == []


def test_a_mixed_precision_model_is_refused(tmp_path):
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = AlbertClassifierModel(tiny_config(), 2)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    with pytest.raises(TFLiteExportError, match="float32"):
        export_classifier_tflite(model, str(tmp_path / "m.tflite"), SEQ_LENGTH)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_directory_is_refused_by_its_name_before_converting(tmp_path, monkeypatch):
    """Not a rename error naming the temporary file, after a conversion of minutes."""
    def convert(*args):
        raise AssertionError("converted before checking the path")

    monkeypatch.setattr(tflite, "convert_to_tflite", convert)
    taken = tmp_path / "model.tflite"
    taken.mkdir()
    message = f"{taken} is a directory; the TFLite export is one file: give a file path, e.g. " \
              f"{taken}/model.tflite."
    with pytest.raises(TFLiteExportError, match=re.escape(message)):
        export_classifier_tflite(AlbertClassifierModel(tiny_config(), 2), str(taken), SEQ_LENGTH)
    assert os.listdir(tmp_path) == ["model.tflite"] and os.listdir(taken) == []
    with pytest.raises(TFLiteExportError, match=re.escape(f"--tflite_file={message}")):
        check_tflite_path(str(taken), flag="tflite_file")  # a command names its flag
    check_tflite_path(str(tmp_path / "new.tflite"), flag="tflite_file")
