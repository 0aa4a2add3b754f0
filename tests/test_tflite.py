"""TFLite export of the GLUE classifier and the SQuAD v1.1 model, in each weight storage.

Every model is exported three times (``QUANTIZATIONS``: float32, int8 dynamic range, float16) and
the .tflite files are run with LiteRT's interpreter (``ai_edge_litert``) in a fresh Python process
that imports only LiteRT and NumPy, with the interpreter's default kernels (XNNPACK) and with its
reference kernels, on real inputs (SST-2 sentences, RTE pairs, SQuAD question/context windows,
tokenized with en8k), each example twice: zero-padded to the export's max_seq_length and cut to
its real tokens (the sequence axis of the files is dynamic; the examples have many lengths).
Their outputs are compared with the Keras model's on the padded examples (which the SavedModel
exports reproduce), at the real positions, within a tolerance per storage (``TOLERANCES``). The
tiny models get random weights of standard deviation 0.3 (LayerNorm kept at its identity), so
that the compared outputs are of order one and differ between inputs, unlike the near-zero
logits of the default initialisation.

run_classifier.py and run_squad.py write the TFLite model of model.ckpt-best with --tflite_file
in the storage --tflite_quantization names (slow: a command run each; float32 through training:
the harness, tests/task_harness.py), and refuse the flag combinations they cannot export before
any work (in the test process, tests/command_runner.py).
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
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.serving import tflite
from albert_tf.serving.tflite import (LENGTH_SIGNATURE_KEY, QUANTIZATIONS, SIGNATURE_KEY,
                                      TFLiteExportError, check_tflite_path)
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.serving import export_classifier_tflite
from albert_tf.tasks.question_answering.model import AlbertSquadModel
from albert_tf.tasks.question_answering.serving import export_squad_tflite
from data_prep.classification.features import convert_example
from data_prep.classification.processors import RteProcessor, Sst2Processor
from data_prep.question_answering.examples import read_squad_examples
from data_prep.question_answering.features import SquadFeatureSettings, convert_examples
from tests.command_runner import run_command
from tests.shared_setup import (EN8K_MODEL, GLUE_DIR, SHARED_DATA_DIR, randomized, subprocess_env,
                                tiny_config)

SEQ_LENGTH = 64
# Largest |TFLite - Keras| allowed, as a fraction of the spread (max - min) of the Keras outputs
# (logits spanning about 4 to 6), per storage. float32: rounding only (measured: at most 4e-6).
# float16: the weights rounded to 11 significant bits (measured: at most 3e-3). int8 dynamic
# range: weights and activations rounded to 8 bits (measured: at most 0.09); these random weights
# of deviation 0.3 amplify the rounding from layer to layer more than trained weights do, so
# every input's predicted class and span ends must also stay those of the Keras model (int8: or a
# near-tie of them, within twice its tolerance).
# The weights the random models keep: a random LayerNorm scale would shrink the residual stream
# below its constant offset and make every position's output alike.
LAYER_NORM = "LayerNorm"
TOLERANCES = {"none": 2e-5, "float16": 1e-2, "dynamic_range": 0.15}
SQUAD_V1_SAMPLE = os.path.join(SHARED_DATA_DIR, "squad", "dev-v1.1-sample.json")

# Runs every (model, inputs, outputs) triple of argv with LiteRT only, each example padded
# ("padded/") and cut to its real tokens, the positions where input_mask is 1 ("real/"; outputs per
# position padded back with NaN); prints, per model, its signature list, the inputs' shape
# signatures, the max_seq_length it records and the number of weight tensors of each dtype, as JSON.
INTERPRETER_SCRIPT = r"""
import json, sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

RESOLVERS = {"default": OpResolverType.AUTO, "reference": OpResolverType.BUILTIN_REF}
report = {}
args = sys.argv[1:]
for model_path, inputs_path, outputs_path in zip(args[0::3], args[1::3], args[2::3]):
    inputs = np.load(inputs_path)
    names = list(inputs.files)
    lengths = inputs["input_mask"].sum(axis=1)
    outputs = {}
    for resolver, kind in RESOLVERS.items():
        interpreter = Interpreter(model_path=model_path, experimental_op_resolver_type=kind)
        runner = interpreter.get_signature_runner("serving_default")
        for cut in ("padded", "real"):
            rows = []
            for i, length in enumerate(lengths):
                end = length if cut == "real" else None
                row = runner(**{name: inputs[name][i:i + 1, :end] for name in names})
                width = inputs["input_ids"].shape[1]
                rows.append({key: np.pad(value, [(0, 0), (0, width - value.shape[1])],
                                         constant_values=np.nan)
                             if value.shape[1] == length else value
                             for key, value in row.items()})
            for key in rows[0]:
                outputs[f"{resolver}/{cut}/{key}"] = np.concatenate([row[key] for row in rows])
    np.savez(outputs_path, **outputs)
    weights = {}
    for detail in interpreter.get_tensor_details():
        if len(detail["shape"]) == 2 and min(detail["shape"]) > 1:   # matrices and tables
            name = np.dtype(detail["dtype"]).name
            weights[name] = weights.get(name, 0) + 1
    limit = interpreter.get_signature_runner("serving_max_seq_length")()
    report[model_path] = {
        "signatures": interpreter.get_signature_list(),
        "inputs": {name: [detail["shape_signature"].tolist(), np.dtype(detail["dtype"]).name]
                   for name, detail in runner.get_input_details().items()},
        "max_seq_length": int(limit["serving_max_seq_length"]),
        "lengths": sorted(set(lengths.tolist())),
        "matrix_dtypes": weights}
report["modules"] = sorted(name for name in sys.modules
                           if name.split(".")[0] in ("albert_tf", "tensorflow", "keras"))
print(json.dumps(report))
"""



def glue_inputs(en8k) -> dict[str, np.ndarray]:
    """SST-2 sentences (padded) and RTE pairs (truncated), as run_classifier's features."""
    rows = []
    for processor, count in ((Sst2Processor(), 4), (RteProcessor(), 3)):
        for example in processor.get_examples(GLUE_DIR, "dev")[:count]:
            rows.append(convert_example(example, processor.get_labels(), SEQ_LENGTH, en8k))
    return {name: np.array([getattr(row, name) for row in rows], np.int32) for name in INPUT_NAMES}


def squad_inputs(en8k) -> dict[str, np.ndarray]:
    """The windows of the first two SQuAD v1.1 questions, as run_squad's features, and those of
    the first question at three shorter max_seq_lengths (zero-padded to SEQ_LENGTH, as shorter
    contexts would be): windows of several real lengths."""
    examples = read_squad_examples(SQUAD_V1_SAMPLE, is_training=False)[:2]
    rows = []
    for seq_length, count in ((SEQ_LENGTH, 6), (48, 1), (36, 1), (28, 1)):
        settings = SquadFeatureSettings(max_seq_length=seq_length, doc_stride=32,
                                        max_query_length=16)
        features = [feature for _, feature in
                    convert_examples(examples, en8k.sp_model, True, settings)][:count]
        rows += [{name: np.pad(getattr(feature, name), (0, SEQ_LENGTH - seq_length))
                  for name in INPUT_NAMES} for feature in features]
    return {name: np.array([row[name] for row in rows], np.int32) for name in INPUT_NAMES}


def keras_outputs(model: keras.Model, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    outputs = model(inputs, training=False)
    if isinstance(model, AlbertSquadModel):
        return {name: outputs[name].numpy() for name in ("start_logits", "end_logits")}
    logits = outputs["logits"].numpy()
    return {"logits": logits, "probabilities": keras.ops.softmax(logits, axis=-1).numpy()}


@pytest.fixture(scope="module")
def exported(tmp_path_factory, en8k):
    """{(name, quantization): (Keras outputs, TFLite outputs by "resolver/output", interpreter's
    report, file size)} and the modules the interpreter's process imported."""
    directory = tmp_path_factory.mktemp("tflite")
    cases = {
        "classifier": (randomized(AlbertClassifierModel(tiny_config(), 3), 1, keep=LAYER_NORM),
                       glue_inputs(en8k)),
        "squad": (randomized(AlbertSquadModel(tiny_config()), 2, keep=LAYER_NORM),
                  squad_inputs(en8k)),
    }
    exporters = {"classifier": export_classifier_tflite, "squad": export_squad_tflite}
    args = []
    for name, (model, inputs) in cases.items():
        np.savez(directory / f"{name}_inputs.npz", **inputs)
        for quantization in QUANTIZATIONS:
            model_path = exporters[name](model, str(directory / f"{name}_{quantization}.tflite"),
                                         SEQ_LENGTH, quantization)
            args += [model_path, str(directory / f"{name}_inputs.npz"),
                     str(directory / f"{name}_{quantization}_out.npz")]
    done = subprocess.run([sys.executable, "-c", INTERPRETER_SCRIPT, *args], env=subprocess_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    results = {}
    for name, (model, inputs) in cases.items():
        expected = keras_outputs(model, inputs)
        for quantization in QUANTIZATIONS:
            model_path = str(directory / f"{name}_{quantization}.tflite")
            results[name, quantization] = (
                expected, dict(np.load(directory / f"{name}_{quantization}_out.npz")),
                report[model_path], os.path.getsize(model_path))
    return results, report["modules"]


OUTPUTS = {"classifier": ("logits", "probabilities"), "squad": ("start_logits", "end_logits")}


@pytest.mark.subprocess  # LiteRT in a fresh process
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("quantization", QUANTIZATIONS)
@pytest.mark.parametrize("name", OUTPUTS)
def test_tflite_outputs_equal_the_keras_model_within_the_storage_tolerance(exported, name,
                                                                          quantization):
    """Padded to max_seq_length or cut to its real tokens, every example gives the Keras model's
    outputs (on the padded example) at its real positions; a per-position output's padding
    positions, which the post-processing never reads, are left out (SQuAD's max_context and
    spans exclude them)."""
    expected, actual, report, _ = exported[0][name, quantization]
    # The examples have several lengths below max_seq_length, each run at its own length.
    assert len([length for length in report["lengths"] if length < SEQ_LENGTH]) >= 3
    outputs = OUTPUTS[name]
    assert np.ptp(expected[outputs[0]], axis=0).max() > 0.5  # inputs give clearly different outputs
    for resolver in ("default", "reference"):
        for cut in ("padded", "real"):
            for output in outputs:
                real = ~np.isnan(actual[f"{resolver}/real/{output}"])
                given, wanted = actual[f"{resolver}/{cut}/{output}"], expected[output]
                spread = np.ptp(wanted)
                difference = np.abs(given - wanted)[real].max()
                assert difference <= TOLERANCES[quantization] * spread, (resolver, cut, output,
                                                                         difference)
                # The predicted class / span end is Keras's, or a near-tie of it: each of two
                # scores may move by the tolerance, so one within twice the tolerance of the best
                # may overtake it (int8: one end of one window, 1.2% of the spread from the best).
                chosen = np.where(real, given, -np.inf).argmax(-1)
                rows = np.arange(len(chosen))
                best = np.where(real, wanted, -np.inf).max(-1)
                assert np.all(best - wanted[rows, chosen]
                              <= 2 * TOLERANCES[quantization] * spread), (resolver, cut, output)
                if quantization != "dynamic_range":
                    np.testing.assert_array_equal(
                        chosen, np.where(real, wanted, -np.inf).argmax(-1))


@pytest.mark.subprocess  # LiteRT in a fresh process
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("name", OUTPUTS)
def test_quantized_files_store_their_weights_as_asked_and_are_smaller(exported, name):
    """float32 keeps every matrix float32; float16 stores them as float16 (the file about half);
    dynamic range stores the large ones as int8 (the file under a third), so its outputs differ
    from float32's by more than rounding."""
    results = {quantization: exported[0][name, quantization] for quantization in QUANTIZATIONS}
    dtypes = {quantization: result[2]["matrix_dtypes"] for quantization, result in results.items()}
    sizes = {quantization: result[3] for quantization, result in results.items()}
    assert set(dtypes["none"]) == {"float32"}
    assert dtypes["float16"].get("float16", 0) >= 7 and "int8" not in dtypes["float16"]
    assert dtypes["dynamic_range"].get("int8", 0) >= 7 and "float16" not in dtypes["dynamic_range"]
    assert 0.4 < sizes["float16"] / sizes["none"] < 0.6
    assert sizes["dynamic_range"] / sizes["none"] < 0.35
    output = OUTPUTS[name][0]
    float32, int8 = results["none"][1][f"default/padded/{output}"], results["dynamic_range"][1][
        f"default/padded/{output}"]
    assert np.abs(int8 - float32).max() > 10 * TOLERANCES["none"]


@pytest.mark.subprocess  # LiteRT in a fresh process
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("quantization", QUANTIZATIONS)
@pytest.mark.parametrize("name", OUTPUTS)
def test_tflite_signature_has_int32_inputs_of_any_length_and_named_outputs(exported, name,
                                                                          quantization):
    """[1, -1]: one example of a dynamic length; the file records its max_seq_length."""
    _, _, report, _ = exported[0][name, quantization]
    signature = report["signatures"][SIGNATURE_KEY]
    assert sorted(signature["inputs"]) == sorted(INPUT_NAMES)
    assert sorted(signature["outputs"]) == sorted(OUTPUTS[name])
    assert report["inputs"] == {name: [[1, -1], "int32"] for name in INPUT_NAMES}
    assert report["signatures"][LENGTH_SIGNATURE_KEY] == {"inputs": [],
                                                          "outputs": [LENGTH_SIGNATURE_KEY]}
    assert report["max_seq_length"] == SEQ_LENGTH


@pytest.mark.subprocess  # LiteRT in a fresh process
@pytest.mark.requires_shared_data
def test_interpreter_process_imported_neither_albert_tf_nor_tensorflow(exported):
    """A client needs LiteRT and NumPy only."""
    assert exported[1] == []


def test_an_unknown_quantization_is_refused_before_converting(tmp_path, monkeypatch):
    def convert(*args):
        raise AssertionError("converted before checking the quantization")

    monkeypatch.setattr(tflite, "convert_to_tflite", convert)
    with pytest.raises(TFLiteExportError, match=re.escape(
            "quantization must be one of none, dynamic_range, float16; got 'int8'.")):
        export_classifier_tflite(AlbertClassifierModel(tiny_config(), 2),
                                 str(tmp_path / "m.tflite"), SEQ_LENGTH, "int8")
    assert list(tmp_path.iterdir()) == []


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


# -- the commands: --tflite_file and --tflite_quantization -----------------------------------------

def command_flags(tmp_path, model: keras.Model) -> list[str]:
    """A tiny config and ``model`` saved as model.ckpt-best of an output directory, as a sweep
    leaves it; the flags that point a command at them."""
    config = tmp_path / "config.json"
    config.write_text(tiny_config().to_json_string())
    output_dir = tmp_path / "out"
    tf.train.Checkpoint(model=model).write(str(output_dir / "model.ckpt-best"))
    return [f"--albert_config_file={config}", f"--spm_model_file={EN8K_MODEL}",
            f"--output_dir={output_dir}", f"--max_seq_length={SEQ_LENGTH}"]


def run_litert(model_path: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every example of ``inputs`` through LiteRT's interpreter, one per call."""
    runner = Interpreter(model_path=model_path).get_signature_runner(SIGNATURE_KEY)
    rows = [runner(**{name: value[i:i + 1] for name, value in inputs.items()})
            for i in range(len(inputs["input_ids"]))]
    return {key: np.concatenate([row[key] for row in rows]) for key in rows[0]}


@pytest.mark.slow  # a command run: 15-30 s each
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("script, quantization", [("run_classifier.py", "float16"),
                                                  ("run_squad.py", "dynamic_range")])
def test_a_command_writes_the_tflite_model_of_its_best_checkpoint(tmp_path, en8k, script,
                                                                  quantization):
    """Export only (no training or sweep): the file holds model.ckpt-best in the asked storage."""
    if script == "run_classifier.py":
        model = randomized(AlbertClassifierModel(tiny_config(), 2), 3, keep=LAYER_NORM)
        inputs = glue_inputs(en8k)
        task_flags = [f"--data_dir={GLUE_DIR}", "--task_name=rte"]
    else:
        model = randomized(AlbertSquadModel(tiny_config()), 4, keep=LAYER_NORM)
        inputs = squad_inputs(en8k)
        task_flags = ["--max_query_length=16"]
    expected = keras_outputs(model, inputs)
    path = tmp_path / "exports" / "albert_model.tflite"
    result = run_command(script, *command_flags(tmp_path, model), *task_flags,
                         f"--tflite_file={path}", f"--tflite_quantization={quantization}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (f"Wrote the TFLite model of model.ckpt-best ({quantization}, S={SEQ_LENGTH}) to "
            f"{path}") in result.stdout
    assert os.listdir(path.parent) == ["albert_model.tflite"]
    actual = run_litert(str(path), inputs)
    assert sorted(actual) == sorted(expected)
    for output, values in expected.items():
        difference = np.abs(actual[output] - values).max()
        assert difference <= TOLERANCES[quantization] * np.ptp(values), (output, difference)
        assert difference > TOLERANCES["none"] * np.ptp(values)  # not the float32 file


@pytest.mark.parametrize("script, args, culprit", [
    ("run_classifier.py", ["--dtype=bfloat16", "--tflite_file={tmp}/m.tflite"],
     "--tflite_file needs --dtype=float32"),
    ("run_classifier.py", ["--do_eval", "--tflite_quantization=float16"],
     "--tflite_quantization chooses the weights of the --tflite_file model: give --tflite_file"),
    ("run_squad.py", ["--version_2_with_negative", "--tflite_file={tmp}/m.tflite"],
     "the SQuAD 2.0 model has no TFLite export"),
    ("run_classifier.py", ["--tflite_file={tmp}/m.tflite"],
     "model.ckpt-best does not exist: prediction and export use the best checkpoint"),
    ("run_squad.py", ["--tflite_file={tmp}"],
     "--tflite_file '{tmp}' is a directory: give a file path (e.g. inside it)"),
    ("run_classifier.py", ["--tflite_file={tmp}/config.json"],
     "--tflite_file '{tmp}/config.json' is also an input (--albert_config_file"),
])
def test_a_command_refuses_a_tflite_export_it_cannot_write_before_any_work(tmp_path, script, args,
                                                                           culprit):
    """The flag mistakes when the command line is parsed; the missing checkpoint and the directory
    in the way before the model is built."""
    config = tmp_path / "config.json"
    config.write_text(tiny_config().to_json_string())
    task_flags = ["--data_dir=glue", "--task_name=rte"] if script == "run_classifier.py" else []
    spm_model = tmp_path / "spm.model"  # never read: the command stops before
    spm_model.write_text("a SentencePiece model")
    result = run_command(script, f"--albert_config_file={config}", f"--spm_model_file={spm_model}",
                         *task_flags,
                         f"--output_dir={tmp_path / 'out'}",
                         *[arg.format(tmp=tmp_path) for arg in args])
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert lines[-1].startswith(f"{script[:-3]}: error: "), lines[-1]
    assert culprit.format(tmp=tmp_path) in lines[-1], lines[-1]
    assert not list(tmp_path.glob("**/*.tflite"))
    assert config.read_text() == tiny_config().to_json_string()
