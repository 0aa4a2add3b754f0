"""Every signature and function of every export names the input a caller got wrong.

Tiny exports of every kind (the classifier with label names, RACE, SQuAD v1.1 and v2.0, NER, each
``ids_only`` and ``with_text``; the hub-style encoder and its preprocessing model) are built once
and loaded in this process with ``tf.saved_model.load``. A table of calls (export x callable x
input x kind of mistake) is run on them; each row says what must happen: the error's type and the
parts of its message that name the input and what was expected, or, for an input that is accepted
(int64 where a cast is safe, NumPy arrays), outputs equal to those of the right input. The TF2
encoder call is also run through ``tensorflow_hub.KerasLayer`` under tf-keras, in a fresh process
(``TF_USE_LEGACY_KERAS`` must be set before TensorFlow loads).

The callables and what answers a mistake (docs/export.md, "Wrong inputs"):

- ``signature``: ``loaded.signatures[name](**inputs)`` (as TF Serving calls them). TensorFlow
  refuses a missing or unknown keyword (TypeError naming it) and an eager tensor of another dtype
  (InvalidArgumentError naming the input by its position, ``input #k``, k counting the inputs in
  alphabetical order) before the graph runs; everything else is the graph's checks.
- ``function``: a module function with an input signature (``loaded.serve(dict)``,
  ``loaded.tokens(dict)``, ...: what Keras' TFSMLayer calls). TensorFlow refuses keys, dtypes and
  ranks (TypeError naming the input); shapes and values are the graph's checks.
- ``tf2``: the TF2 encoder convention's call (``loaded(dict, training=...)``, ``loaded.mlm(dict)``),
  which cannot have an input signature: it is saved with a trace for each mistake, so its graph
  names a missing input, a dtype, a rank, the other convention's names; int64 is cast.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops of with_text)

from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.serving import export_classifier
from albert_tf.tasks.multiple_choice.model import AlbertMultipleChoiceModel
from albert_tf.tasks.multiple_choice.serving import export_multiple_choice
from albert_tf.tasks.pretraining.hub_export import export_encoder
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tasks.question_answering.model import AlbertSquadModel
from albert_tf.tasks.question_answering.serving import export_squad
from albert_tf.tasks.token_classification.model import AlbertTokenClassifierModel
from albert_tf.tasks.token_classification.serving import export_token_classifier
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from tests import spm_fixtures
from tests.shared_setup import subprocess_env, tiny_config

VOCAB, MAX_POSITIONS = 500, 32  # the tiny models' vocabulary and position embeddings
BATCH, SEQ, POSITIONS = 2, 8, 3  # the shape of the right inputs
IDS = ("input_ids", "input_mask", "segment_ids")
TF2 = ("input_word_ids", "input_mask", "input_type_ids")
TEXT = "The cat sat on the mat all day."
Inputs = dict[str, np.ndarray]
InvalidArgument = tf.errors.InvalidArgumentError


# ------------------------------------------------------------------------------ the exports


@pytest.fixture(scope="session")
def loaded(tmp_path_factory) -> dict[str, object]:
    """{"<export>/<variant>": the loaded SavedModel} of every export of tiny random models."""
    root = tmp_path_factory.mktemp("serving_inputs")
    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(VOCAB),
                              do_lower_case=True)
    config = tiny_config(vocab_size=VOCAB, max_position_embeddings=MAX_POSITIONS,
                         num_hidden_layers=1)
    export_classifier(AlbertClassifierModel(config, 2), str(root / "classifier"),
                      tokenizer=tokenizer, max_seq_length=16, label_names=["neg", "pos"])
    export_multiple_choice(AlbertMultipleChoiceModel(config), str(root / "race"), tokenizer, 24, 8)
    export_squad(AlbertSquadModel(config), str(root / "squad1"), tokenizer, 24, 8)
    export_squad(AlbertSquadModel(config, version_2=True), str(root / "squad2"), tokenizer, 24, 8)
    export_token_classifier(AlbertTokenClassifierModel(config, 3), str(root / "ner"),
                            ["O", "B-X", "I-X"], tokenizer, 16)
    export_encoder(AlbertPretrainingModel(config), tokenizer, str(root / "hub"), 16)
    paths = {f"{task}/{variant}": root / task / variant
             for task in ("classifier", "race", "squad1", "squad2", "ner")
             for variant in ("ids_only", "with_text")}
    paths.update({"hub": root / "hub", "preprocessing": root / "hub" / "preprocessing"})
    models = {name: tf.saved_model.load(str(path)) for name, path in paths.items()}
    models["paths"] = {name: str(path) for name, path in paths.items()}
    return models


# ------------------------------------------------------------------------- the callables


def ids(names=IDS, shape=(BATCH, SEQ)) -> Inputs:
    """Right int32 ids: token 5, mask 1, segment 0 (p_mask 0, positions 1)."""
    values = {"input_ids": 5, "input_word_ids": 5, "input_mask": 1, "segment_ids": 0,
              "input_type_ids": 0, "p_mask": 0}
    inputs = {name: np.full(shape, values[name], np.int32) for name in names
              if name in values}
    for name in set(names) - set(values):  # MLM positions
        inputs[name] = np.ones((shape[0], POSITIONS), np.int32)
    return inputs


def texts(*names: str) -> Inputs:
    inputs = {name: np.full((BATCH,), TEXT) for name in names}
    if "options" in names:
        inputs["options"] = np.full((BATCH, 4), "on the mat")
    if "words" in names:
        inputs["words"] = np.array([["the", "cat", "sat"], ["a", "dog", ""]])
    return inputs


@dataclass(frozen=True)
class ServingCall:
    """One callable of one export: ``kind`` (signature, function, tf2), ``target`` (a signature
    name or an attribute path; "" = the root), its right ``inputs``, the input whose shape the
    others must have (``reference``), an out-of-range value per input (``outside``), and the
    inputs whose positions (last axis) may differ from the reference's (``own_length``)."""
    export: str
    kind: str
    target: str
    make_inputs: Callable[[], Inputs]
    reference: str
    outside: dict[str, int] = field(default_factory=dict)
    own_length: tuple[str, ...] = ()
    training: bool | None = None

    @property
    def label(self) -> str:
        training = "" if self.training is None else f"[training={self.training}]"
        return f"{self.export}:{self.kind}:{self.target or 'root'}{training}"

    @property
    def inputs(self) -> Inputs:
        return self.make_inputs()

    @property
    def text(self) -> bool:
        return self.inputs[self.reference].dtype.kind == "U"


def ranges(names, p_mask=False, positions=None) -> dict[str, int]:
    """Out-of-range values: an id = vocab_size, a mask or segment id 2, a position = SEQ."""
    word_ids, type_ids = names[0], names[2]
    outside = {word_ids: VOCAB, "input_mask": 2, type_ids: 2}
    if p_mask:
        outside["p_mask"] = 2
    if positions:
        outside[positions] = SEQ
    return outside


def task_calls() -> list[ServingCall]:
    squad2 = IDS + ("p_mask",)
    race_shape = (BATCH, 4, SEQ)
    table = []
    for variant in ("ids_only", "with_text"):
        for task, names, shape in (("classifier", IDS, (BATCH, SEQ)), ("race", IDS, race_shape),
                                   ("squad1", IDS, (BATCH, SEQ)), ("squad2", squad2, (BATCH, SEQ)),
                                   ("ner", IDS, (BATCH, SEQ))):
            export = f"{task}/{variant}"
            make = (lambda names=names, shape=shape: ids(names, shape))
            outside = ranges(names, p_mask=task == "squad2")
            table += [ServingCall(export, kind, target, make, "input_ids", outside)
                      for kind, target in (("signature", "serving_default"), ("function", "serve"))]
    for task, names in (("classifier", ("text_a", "text_b")),
                        ("race", ("article", "question", "options")),
                        ("squad1", ("question", "context")), ("squad2", ("question", "context")),
                        ("ner", ("text",))):
        make = (lambda names=names: texts(*names))
        table += [ServingCall(f"{task}/with_text", kind, "serve_text", make, names[0])
                  for kind in ("signature", "function")]
    table += [ServingCall("ner/with_text", kind, "serve_words", lambda: texts("words"), "words")
              for kind in ("signature", "function")]
    return table


def hub_calls() -> list[ServingCall]:
    mlm = IDS + ("mlm_positions",)
    tf2_mlm = TF2 + ("masked_lm_positions",)
    table = []
    for kind in ("signature", "function"):
        for target in ("tokens", "sop") + (("serving_default",) if kind == "signature" else ()):
            table.append(ServingCall("hub", kind, target, lambda: ids(IDS), "input_ids",
                                     ranges(IDS)))
    table.append(ServingCall("hub", "signature", "mlm", lambda: ids(mlm), "input_ids",
                             ranges(mlm, positions="mlm_positions"), ("mlm_positions",)))
    table.append(ServingCall("hub", "function", "serve", lambda: ids(TF2), "input_word_ids",
                             ranges(TF2)))
    for training in (False, True):
        table.append(ServingCall("hub", "tf2", "", lambda: ids(TF2), "input_word_ids",
                                 ranges(TF2), training=training))
    table.append(ServingCall("hub", "tf2", "mlm", lambda: ids(tf2_mlm), "input_word_ids",
                             ranges(tf2_mlm, positions="masked_lm_positions"),
                             ("masked_lm_positions",), training=False))
    pair = (lambda: texts("text_a", "text_b"))
    table += [ServingCall("preprocessing", "signature", "serving_default", pair, "text_a"),
              ServingCall("preprocessing", "function", "preprocess", pair, "text_a")]
    return table


SERVING_CALLS = task_calls() + hub_calls()


def call(loaded, served: ServingCall, inputs: dict) -> dict:
    model = loaded[served.export]
    if served.kind == "signature":
        return model.signatures[served.target](**inputs)
    function = model
    for part in filter(None, served.target.split(".")):
        function = getattr(function, part)
    if served.kind == "tf2":
        return function(inputs, training=served.training)
    return function(inputs)


# ---------------------------------------------------------------------- the mistakes, per input

def with_input(inputs: Inputs, name: str, value) -> Inputs:
    return {**inputs, name: value}


def mistakes(served: ServingCall, name: str) -> dict[str, Inputs | None]:
    """{mistake: the right inputs with that mistake made on input ``name``, or None where it does
    not apply}."""
    inputs = served.inputs
    value = inputs[name]
    text = value.dtype.kind == "U"
    others = [other for other in inputs if other != name]
    fewer_rows = with_input(inputs, name, value[:1]) if others else None
    cases = {
        "missing": {key: item for key, item in inputs.items() if key != name},
        "rank_plus_one": with_input(inputs, name, value[..., None]),
        "rows": fewer_rows,
        "positions": (None if text or name in served.own_length
                      else with_input(inputs, name, value[..., :-1])),
        "dtype": with_input(inputs, name, np.zeros(value.shape, np.int32) if text
                            else value.astype(np.float32)),
        "int64": None if text else with_input(inputs, name, value.astype(np.int64)),
        "outside": (with_input(inputs, name, np.full_like(value, served.outside[name]))
                    if name in served.outside else None),
    }
    if served.kind == "tf2":
        cases["int64_beyond_int32"] = with_input(inputs, name, np.full(value.shape, 2**33))
    return cases


def whole_call_mistakes(served: ServingCall) -> dict[str, Inputs | None]:
    """{mistake: the inputs of a call with that mistake, or None where it does not apply}."""
    inputs = served.inputs
    filler = np.full((BATCH,), TEXT) if served.text else np.ones((BATCH, SEQ), np.int32)
    cases = {"unknown_input": {**inputs, "foo": filler},
             "unbatched": {name: value[0] for name, value in inputs.items()},
             # Given as NumPy arrays (row_inputs), the others as tensors.
             "numpy_int64": None if served.text else {name: value.astype(np.int64)
                                                      for name, value in inputs.items()}}
    if not served.text:
        shape = inputs[served.reference].shape
        long = np.ones(shape[:-1] + (MAX_POSITIONS + 1,), np.int32)
        cases["too_long"] = {name: value if name in served.own_length else long
                             for name, value in inputs.items()}
    if served.kind == "tf2":
        cases["all_int64"] = {name: value.astype(np.int64) for name, value in inputs.items()}
        cases["all_float32"] = {name: value.astype(np.float32) for name, value in inputs.items()}
        cases["all_float64"] = {name: value.astype(np.float64) for name, value in inputs.items()}
        reference_names = dict(zip(TF2, IDS), masked_lm_positions="mlm_positions")
        cases["reference_names"] = {reference_names[name]: value for name, value in inputs.items()
                                    if name != "masked_lm_positions"}
        if not served.target:
            cases["mlm_input"] = {**inputs, "masked_lm_positions": np.ones((BATCH, 2), np.int32)}
    if served.export.startswith("race"):
        if served.text:
            cases["3_options"] = with_input(inputs, "options", inputs["options"][:, :3])
        else:
            cases["3_options"] = {name: value[:, :3] for name, value in inputs.items()}
    if served.export.startswith("squad2") and not served.text:
        cases["shorter_than_the_beam"] = {name: value[:, :3] for name, value in inputs.items()}
    return cases


# ------------------------------------------------------------------- what must happen, per row

ACCEPTED = "accepted"  # outputs equal to those of the right inputs


def declared_dtype(served: ServingCall) -> str:
    return "string" if served.text else "int32"


def expected_for_input(served: ServingCall, name: str, mistake: str):
    """(error type, [parts of the message]) or ACCEPTED for ``mistake`` made on input ``name``."""
    kind, names = served.kind, sorted(served.inputs)
    in_graph = {
        "rank_plus_one": [f"{name} has shape [", "] but must have rank "],
        # The reference input changed: the others are named against it.
        "rows": ([f"but {name} has "] if name == served.reference else [f"{name} has "]),
        "positions": ([f"but {name} has "] if name == served.reference else [f"{name} has "]),
        "outside": [f"{name} must lie in ["],
    }
    if kind == "signature":
        if mistake == "missing":
            return TypeError, [f"missing a required argument: '{name}'"]
        if mistake in ("dtype", "int64"):
            return InvalidArgument, [f"input #{names.index(name)}(zero-based) was expected to be "
                                     f"a {declared_dtype(served)} tensor"]
    elif kind == "function":
        if mistake == "missing":  # TensorFlow's message lists the given and the expected keys
            return TypeError, ["has different keys with the TraceType", f"'{name}'"]
        if mistake in ("dtype", "int64", "rank_plus_one"):
            return TypeError, ["Can not cast TensorSpec(", f"name='{name}')"]
    else:
        call_name = "encoder.mlm" if served.target else "the encoder call"
        special = {"missing": [f"{name} is missing: {call_name} takes int32 (or int64) "],
                   "dtype": [f"{name} has dtype float32 but must be int32 or int64"],
                   "int64_beyond_int32": [f"{name} holds values from 8589934592 to 8589934592, "
                                          "outside int32"],
                   "int64": ACCEPTED}
        if mistake in special:
            return ACCEPTED if special[mistake] == ACCEPTED else (InvalidArgument, special[mistake])
    return InvalidArgument, ["assertion failed: [", *in_graph[mistake]]


def expected_for_call(served: ServingCall, mistake: str):
    kind, first = served.kind, served.reference
    if mistake == "numpy_int64" or mistake == "all_int64":
        return ACCEPTED
    if mistake == "unknown_input":
        return {"signature": (TypeError, ["got an unexpected keyword argument 'foo'"]),
                "function": (TypeError, ["has different keys with the TraceType", "'foo'"]),
                # No trace can be saved for any name: TensorFlow's error, listing the given dict.
                "tf2": (ValueError, ["Could not find matching concrete function", "'foo'"])}[kind]
    if mistake == "unbatched":
        if kind == "function":
            return TypeError, ["Can not cast TensorSpec(", "name='"]
        return InvalidArgument, [" has shape [", "] but must have rank "]
    parts = {
        "too_long": [f"{first} has {MAX_POSITIONS + 1} positions but this model takes 1 to "
                     f"{MAX_POSITIONS} (max_position_embeddings)"],
        "all_float32": [f"{name} has dtype float32" for name in served.inputs],
        "all_float64": [f"{name} has dtype float64" for name in served.inputs],
        "reference_names": ["input_ids is not an input of", "(its TF2 name is input_word_ids)"],
        "mlm_input": ["masked_lm_positions is not an input of the encoder call (an input of "
                      "encoder.mlm, not of the encoder)"],
        "3_options": ["RACE needs 4 options per question, got 3 ("],
        "shorter_than_the_beam": ["input_ids has 3 positions but SQuAD 2.0 inputs need at least 5"],
    }[mistake]
    if mistake == "reference_names" and served.target == "mlm":
        # Without mlm_positions the reference's dict is the reference convention's, missing it.
        parts = ["mlm_positions is missing: encoder.mlm on the reference names takes int32 (or "
                 "int64) input_ids [batch, seq]"]
    return InvalidArgument, ["assertion failed: [", *parts]


def rows() -> dict[str, tuple[ServingCall, str, str | None]]:
    """{row id: (callable, mistake, input or None for a mistake of the whole call)}."""
    table = {}
    for served in SERVING_CALLS:
        for name in served.inputs:
            for mistake, inputs in mistakes(served, name).items():
                if inputs is not None:
                    table[f"{served.label}:{name}:{mistake}"] = (served, mistake, name)
        for mistake, inputs in whole_call_mistakes(served).items():
            if inputs is not None:
                table[f"{served.label}:{mistake}"] = (served, mistake, None)
    return table


ROWS = rows()


def row_params(rows_by_id: dict) -> list:
    """The rows as pytest parameters: the default suite keeps, per callable, every mistake of the
    whole call and every mistake of its first input (each check's code path); the same mistakes of
    its other inputs are marked slow (`-m slow`)."""
    params = []
    for row in sorted(rows_by_id):
        served, _, name = rows_by_id[row]
        first = name is None or name == next(iter(served.inputs))
        params.append(row if first else pytest.param(row, marks=pytest.mark.slow))
    return params


def row_inputs(served: ServingCall, mistake: str, name: str | None) -> dict:
    """The row's inputs as the caller gives them: tensors (NumPy arrays for numpy_int64)."""
    if name is not None:
        inputs = mistakes(served, name)[mistake]
    else:
        inputs = whole_call_mistakes(served)[mistake]
    if mistake == "numpy_int64":
        return inputs
    return {key: tf.constant(value) for key, value in inputs.items()}


@pytest.fixture(scope="session")
def right_outputs(loaded) -> dict[str, dict[str, np.ndarray]]:
    """The outputs of every callable on its right inputs."""
    outputs = {}
    for served in SERVING_CALLS:
        result = call(loaded, served, {key: tf.constant(value)
                                          for key, value in served.inputs.items()})
        outputs[served.label] = tf.nest.map_structure(lambda tensor: tensor.numpy(), result)
    return outputs


def assert_answer(expected, run: Callable[[], dict], right: dict | None, label: str) -> None:
    if expected == ACCEPTED:
        outputs = tf.nest.map_structure(lambda tensor: tensor.numpy(), run())
        tf.nest.map_structure(np.testing.assert_array_equal, outputs, right)
        return
    error_type, parts = expected
    with pytest.raises(Exception) as raised:
        run()
    message = str(raised.value)
    assert isinstance(raised.value, error_type), (label, type(raised.value).__name__,
                                                   message[:800])
    for part in parts:
        assert part in message, (label, part, message[:1500])


@pytest.mark.parametrize("row", row_params(ROWS))
def test_a_wrong_input_is_named(loaded, right_outputs, row):
    served, mistake, name = ROWS[row]
    expected = (expected_for_input(served, name, mistake) if name is not None
                else expected_for_call(served, mistake))
    inputs = row_inputs(served, mistake, name)
    assert_answer(expected, lambda: call(loaded, served, inputs),
                  right_outputs[served.label], row)


def test_every_export_and_callable_is_in_the_table():
    exports = {served.export for served in SERVING_CALLS}
    assert exports == {f"{task}/{variant}" for task in ("classifier", "race", "squad1", "squad2",
                                                         "ner")
                       for variant in ("ids_only", "with_text")} | {"hub", "preprocessing"}
    kinds = {(served.export, served.kind) for served in SERVING_CALLS}
    assert ("hub", "tf2") in kinds and ("ner/with_text", "function") in kinds
    assert len(ROWS) > 400


# ------------------------------------------------------- the preprocessing model's functions


def packed_right(loaded) -> tuple[tf.RaggedTensor, dict]:
    """Token ids of two texts, and the packing of them as a pair."""
    preprocessing = loaded["preprocessing"]
    tokens = preprocessing.tokenize(tf.constant([TEXT, "a dog"]))
    return tokens, preprocessing.bert_pack_inputs([tokens, tokens])


@pytest.mark.parametrize("case, expected", [
    ("three_segments", "bert_pack_inputs takes a list of one or two segments, got 3 segments"),
    ("no_segment", "bert_pack_inputs takes a list of one or two segments, got 0 segments"),
    ("not_a_list", "got one segment not in a list"),
    ("dense", "segments[0] must be a RaggedTensor of token ids [batch, (tokens)]"),
    ("rows", "segments[1] has 1 rows but segments[0] has 2"),
    ("int64_beyond_int32", "segments[0] holds values from 8589934592 to 8589934592, outside int32"),
    ("seq_length_3", "seq_length must be >= 5"),
])
def test_bert_pack_inputs_names_its_wrong_segments(loaded, case, expected):
    pack = loaded["preprocessing"].bert_pack_inputs
    tokens, _ = packed_right(loaded)
    calls = {"three_segments": lambda: pack([tokens] * 3),
             "no_segment": lambda: pack([]),
             "not_a_list": lambda: pack(tokens),
             "dense": lambda: pack([tokens.to_tensor()]),
             "rows": lambda: pack([tokens, tokens[:1]]),
             "int64_beyond_int32": lambda: pack([tokens.with_flat_values(
                 tf.fill(tf.shape(tokens.flat_values), tf.constant(2**33, tf.int64)))]),
             "seq_length_3": lambda: pack([tokens], seq_length=3)}
    with pytest.raises(InvalidArgument, match=re.escape(expected)):
        calls[case]()


def test_bert_pack_inputs_casts_int64_ids(loaded):
    tokens, right = packed_right(loaded)
    as_int64 = tokens.with_flat_values(tf.cast(tokens.flat_values, tf.int64))
    packed = loaded["preprocessing"].bert_pack_inputs([as_int64, as_int64])
    for key, value in right.items():
        np.testing.assert_array_equal(packed[key].numpy(), value.numpy())


@pytest.mark.parametrize("function, inputs, expected", [
    ("", tf.constant([[TEXT]]), "name='sentences'"),
    ("", tf.constant([1, 2]), "name='sentences'"),
    ("tokenize", tf.constant(TEXT), "name='texts'"),
])
def test_the_preprocessing_calls_name_their_input(loaded, function, inputs, expected):
    target = getattr(loaded["preprocessing"], function) if function else loaded["preprocessing"]
    with pytest.raises(TypeError, match=re.escape(expected)):
        target(inputs)


# ----------------------------------------------------------- the TF2 call through hub.KerasLayer

KERAS_LAYER_SCRIPT = r"""
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tf.keras = tf-keras (Keras 2), which TF-Hub needs
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub

export, cases_file, report_file = sys.argv[1:]
layer = hub.KerasLayer(export, trainable=True)
report = {}


def answer(run):
    try:
        return {"pooled_output": np.asarray(run()["pooled_output"]).tolist()}
    except Exception as error:
        return {"error": type(error).__name__, "message": str(error)}


for label, case in json.load(open(cases_file)).items():
    inputs = {name: tf.constant(np.array(value, dtype=dtype))
              for name, (value, dtype) in case["inputs"].items()}
    report[label] = answer(lambda: layer(inputs, training=case["training"]))


def keras_model(dtype):
    inputs = {name: tf.keras.Input((None,), dtype=dtype, name=name)
              for name in ("input_word_ids", "input_mask", "input_type_ids")}
    return tf.keras.Model(inputs, layer(inputs)["pooled_output"])


ones = np.ones((2, 8))
arrays = {"input_word_ids": 5 * ones, "input_mask": ones, "input_type_ids": 0 * ones}
for dtype in ("int32", "int64", "float32"):
    report[f"keras_model_{dtype}"] = answer(lambda: {"pooled_output": keras_model(dtype).predict(
        {name: value.astype(dtype) for name, value in arrays.items()}, verbose=0)})
json.dump(report, open(report_file, "w"))
"""


def keras_layer_rows() -> dict[str, tuple[ServingCall, str, str | None]]:
    return {row: entry for row, entry in ROWS.items()
            if entry[0].kind == "tf2" and not entry[0].target}


@pytest.fixture(scope="session")
def keras_layer_report(loaded, tmp_path_factory) -> dict[str, dict]:
    """Every TF2 root-call row, and Keras models on int32 / int64 / float32 Inputs, run through
    hub.KerasLayer(export, trainable=True) in a fresh tf-keras process."""
    work = tmp_path_factory.mktemp("keras_layer")
    cases = {}
    for row, (served, mistake, name) in keras_layer_rows().items():
        inputs = row_inputs(served, mistake, name)
        cases[row] = {"training": served.training,
                      "inputs": {key: (np.asarray(value).tolist(), np.asarray(value).dtype.name)
                                 for key, value in inputs.items()}}
    (work / "cases.json").write_text(json.dumps(cases))
    result = subprocess.run([sys.executable, "-c", KERAS_LAYER_SCRIPT, loaded["paths"]["hub"],
                             str(work / "cases.json"), str(work / "report.json")],
                            capture_output=True, text=True, timeout=900,
                            env=subprocess_env(TF_USE_LEGACY_KERAS="1"))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((work / "report.json").read_text())


ERROR_NAMES = {InvalidArgument: "InvalidArgumentError", TypeError: "TypeError",
               ValueError: "ValueError"}


@pytest.mark.parametrize("row", row_params(keras_layer_rows()))
def test_hub_keras_layer_names_a_wrong_input(keras_layer_report, right_outputs, row):
    served, mistake, name = ROWS[row]
    expected = (expected_for_input(served, name, mistake) if name is not None
                else expected_for_call(served, mistake))
    answer = keras_layer_report[row]
    if expected == ACCEPTED:
        np.testing.assert_allclose(answer["pooled_output"],
                                   right_outputs[served.label]["pooled_output"], atol=1e-6)
        return
    error_type, parts = expected
    if mistake == "all_float64":  # tf-keras casts floating inputs to the layer's dtype first
        parts = [part.replace("float64", "float32") for part in parts]
    assert answer.get("error") == ERROR_NAMES[error_type], (row, answer)
    for part in parts:
        assert part in answer["message"], (row, part, answer["message"][:1500])


def test_a_keras_model_on_hub_keras_layer_casts_int64_and_names_float_inputs(
        keras_layer_report):
    int32, int64 = keras_layer_report["keras_model_int32"], keras_layer_report["keras_model_int64"]
    assert "error" not in int32 and int64 == int32
    failed = keras_layer_report["keras_model_float32"]
    assert failed.get("error") == "InvalidArgumentError", failed
    assert "input_word_ids has dtype float32 but must be int32 or int64" in failed["message"]
