"""The hub export's TF2 encoder convention, used as its users use it.

The export (``export_encoder``, behind ``python -m albert_tf.export_hub``; the command itself is
tested in tests/test_export_hub.py) of a tiny ALBERT with dropout, over a tiny SentencePiece model:

- under tf-keras (``TF_USE_LEGACY_KERAS=1``, in a fresh process since it must be set before
  TensorFlow loads), ``tensorflow_hub`` loads it: the root call, ``mlm`` and the dropout of
  ``training=True``; a classifier on ``hub.KerasLayer(export, trainable=True)`` fine-tunes the
  encoder's own weights (the loss falls); the preprocessing model's root call, ``tokenize``,
  ``get_special_tokens_dict`` and ``bert_pack_inputs`` feed it from raw text;
- under Keras 3 (this process), ``keras.layers.TFSMLayer(export)`` serves it;
- every output equals the Keras model's; a wrong input is named by its TF2 name.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.pretraining.hub_export import export_encoder
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from tests import spm_fixtures
from tests.shared_setup import DROPOUT, subprocess_env, tiny_config

VOCAB = 500  # the tiny SentencePiece model's
SEQ = 16  # the preprocessing model's length
BATCH, LENGTH, POSITIONS = 4, 12, 3

# ------------------------------------------------------------------------------------ the export


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The export of a pretraining model with non-zero biases and dropout 0.1, its Keras model
    and encoder inputs (TF2 names, ``masked_lm_positions``) of random ids with padding."""
    root = tmp_path_factory.mktemp("hub_tf2")
    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(VOCAB),
                              do_lower_case=True)
    keras.utils.set_random_seed(5)
    model = AlbertPretrainingModel(tiny_config(vocab_size=VOCAB, **DROPOUT))
    for variable in model.weights:
        variable.assign(variable + np.random.normal(0.0, 0.05, variable.shape))
    export_encoder(model, tokenizer, str(root / "albert_hub"), SEQ)
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, LENGTH + 1, BATCH)
    mask = (np.arange(LENGTH)[None, :] < lengths[:, None]).astype(np.int32)
    inputs = {"input_word_ids": (rng.integers(5, VOCAB, (BATCH, LENGTH)) * mask).astype(np.int32),
              "input_mask": mask,
              "input_type_ids": ((np.arange(LENGTH)[None, :] >= lengths[:, None] // 2)
                                 * mask).astype(np.int32),
              "masked_lm_positions": np.stack([rng.choice(length, POSITIONS, replace=False)
                                               for length in lengths]).astype(np.int32)}
    expected = model({"input_ids": inputs["input_word_ids"], "input_mask": inputs["input_mask"],
                      "segment_ids": inputs["input_type_ids"],
                      "masked_lm_positions": inputs["masked_lm_positions"]}, training=False)
    return types.SimpleNamespace(path=root / "albert_hub", model=model, inputs=inputs,
                                 expected=expected, work=root)


def ids_of(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: inputs[name] for name in ("input_word_ids", "input_mask", "input_type_ids")}


def assert_close(actual, expected) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    assert np.max(np.abs(actual - expected)) <= 1e-5


# ----------------------------------------------------------- tf-keras and tensorflow_hub, as users

HUB_SCRIPT = r"""
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tf.keras = tf-keras (Keras 2), which TF-Hub needs
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub

encoder_dir, inputs_file, texts_file, arrays_file, json_file = sys.argv[1:]
arrays, report = {}, {}


def fit(model, x, y, epochs):
    model.compile(tf.keras.optimizers.Adam(1e-3),
                  tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return [float(loss) for loss in model.fit(x, y, epochs=epochs, batch_size=8,
                                              verbose=0).history["loss"]]


def encoder_api(data):
    # The SavedModel API: root call, mlm (both conventions), dropout, reusable attributes.
    ids = {k: tf.constant(data[k]) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    positions = tf.constant(data["masked_lm_positions"])
    encoder = hub.load(encoder_dir)
    outputs = encoder(ids)
    for name in ("sequence_output", "pooled_output", "default"):
        arrays["call/" + name] = outputs[name].numpy()
    report["encoder_outputs"] = len(outputs["encoder_outputs"])
    for index, output in enumerate(outputs["encoder_outputs"]):
        arrays[f"call/encoder_outputs/{index}"] = output.numpy()
    mlm = encoder.mlm({**ids, "masked_lm_positions": positions})
    report["mlm_keys"] = sorted(mlm)
    arrays["mlm/mlm_logits"] = mlm["mlm_logits"].numpy()
    arrays["mlm/pooled_output"] = mlm["pooled_output"].numpy()
    reference = {"input_ids": ids["input_word_ids"], "input_mask": ids["input_mask"],
                 "segment_ids": ids["input_type_ids"], "mlm_positions": positions}
    arrays["reference_mlm/attribute"] = encoder.mlm(reference)["mlm_logits"].numpy()
    arrays["reference_mlm/signature"] = encoder.signatures["mlm"](**reference)["mlm_logits"]
    first, second = (encoder(ids, training=True)["pooled_output"].numpy() for _ in range(2))
    report["dropout"] = [float(np.abs(first - second).max()),
                         float(np.abs(first - arrays["call/pooled_output"]).max())]
    report["variables"] = {
        "root": [len(encoder.variables), len(encoder.trainable_variables)],
        "mlm": [len(encoder.mlm.variables), len(encoder.mlm.trainable_variables)],
        "regularization_losses": [len(encoder.regularization_losses),
                                  len(encoder.mlm.regularization_losses)]}
    report["imported"] = sorted({m.split(".")[0] for m in sys.modules} & {"albert_tf",
                                                                          "tensorflow_text"})
    # Fine-tuning through hub.KerasLayer(trainable=True): a classifier of the first id's parity.
    layer = hub.KerasLayer(encoder_dir, trainable=True)
    symbolic = {name: tf.keras.Input((None,), dtype=tf.int32, name=name) for name in ids}
    logits = tf.keras.layers.Dense(2)(layer(symbolic)["pooled_output"])
    classifier = tf.keras.Model(symbolic, logits)
    arrays["keras_layer/pooled_output"] = layer(ids)["pooled_output"].numpy()
    report["layer_weights"] = [len(layer.trainable_weights), len(layer.non_trainable_weights)]
    before = [w.numpy() for w in layer.trainable_weights]
    rng = np.random.default_rng(0)
    x = {"input_word_ids": rng.integers(5, int(data["vocab"]), (32, 8)).astype(np.int32),
         "input_mask": np.ones((32, 8), np.int32), "input_type_ids": np.zeros((32, 8), np.int32)}
    report["losses"] = fit(classifier, x, x["input_word_ids"][:, 0] % 2, epochs=5)
    report["encoder_change"] = max(float(np.abs(w.numpy() - b).max())
                                   for w, b in zip(layer.trainable_weights, before))


def preprocessing_api(texts):
    # The preprocessing model, from raw text (it holds SentencePiece ops).
    import tensorflow_text  # registers them

    preprocessor = hub.load(encoder_dir + "/preprocessing")
    report["special_tokens"] = {k: int(v) for k, v in
                                preprocessor.tokenize.get_special_tokens_dict().items()}
    sentences = tf.constant(texts["a"])
    tokens = preprocessor.tokenize(sentences)
    report["tokenize"] = tokens.to_list()
    as_lists = lambda packed: {k: v.numpy().tolist() for k, v in packed.items()}
    report["root_call"] = as_lists(preprocessor(sentences))
    report["pack_single"] = as_lists(preprocessor.bert_pack_inputs([tokens]))
    report["pack_pair"] = as_lists(preprocessor.bert_pack_inputs(
        [tokens, preprocessor.tokenize(tf.constant(texts["b"]))], seq_length=texts["seq_length"]))
    # As TF-Hub's guides use it: Keras layers from raw text to a fine-tuned encoder.
    text_a = tf.keras.Input((), dtype=tf.string)
    text_b = tf.keras.Input((), dtype=tf.string)
    tokenize = hub.KerasLayer(preprocessor.tokenize)
    pack = hub.KerasLayer(preprocessor.bert_pack_inputs, arguments={"seq_length": 12})
    encoder_layer = hub.KerasLayer(encoder_dir, trainable=True)
    pooled = encoder_layer(pack([tokenize(text_a), tokenize(text_b)]))["pooled_output"]
    pairs = tf.keras.Model([text_a, text_b], tf.keras.layers.Dense(2)(pooled))
    report["text_losses"] = fit(pairs, [tf.constant(texts["a"] * 4), tf.constant(texts["b"] * 4)],
                                np.array(texts["labels"] * 4), epochs=5)
    root_layer = hub.KerasLayer(encoder_dir + "/preprocessing")
    single = tf.keras.Model(text_a, encoder_layer(root_layer(text_a))["default"])
    report["single_shape"] = list(single(sentences).shape)


# The encoder first: it must load before anything imports tensorflow_text.
tf.keras.utils.set_random_seed(1)
encoder_api(dict(np.load(inputs_file)))
tf.keras.utils.set_random_seed(1)
preprocessing_api(json.load(open(texts_file)))
np.savez(arrays_file, **arrays)
json.dump(report, open(json_file, "w"))
"""


@pytest.fixture(scope="module")
def hub_run(exported) -> types.SimpleNamespace:
    """HUB_SCRIPT on the export in one fresh tf-keras process (the encoder's API, then the
    preprocessing model's): its arrays, report and the texts it was given."""
    work = exported.work / "hub_script"
    work.mkdir()
    np.savez(work / "inputs.npz", vocab=VOCAB, **exported.inputs)
    lines = [line for line in spm_fixtures.fixture_corpus_lines() if line.strip()]
    texts = {"a": lines[:8], "b": lines[8:15] + [""], "labels": [0, 1] * 4, "seq_length": 10}
    (work / "texts.json").write_text(json.dumps(texts))
    result = subprocess.run(
        [sys.executable, "-c", HUB_SCRIPT, str(exported.path), str(work / "inputs.npz"),
         str(work / "texts.json"), str(work / "arrays.npz"), str(work / "report.json")],
        capture_output=True, text=True, env=subprocess_env(TF_USE_LEGACY_KERAS="1"), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return types.SimpleNamespace(arrays=dict(np.load(work / "arrays.npz")), texts=texts,
                                 report=json.loads((work / "report.json").read_text()))


@pytest.fixture(scope="module")
def tokenizer() -> FullTokenizer:
    return FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(VOCAB), do_lower_case=True)


@pytest.mark.subprocess  # hub.KerasLayer in a fresh process (TF_USE_LEGACY_KERAS)
def test_the_root_call_and_mlm_equal_the_keras_model(exported, hub_run):
    arrays, expected = hub_run.arrays, exported.expected
    for name in ("sequence_output", "pooled_output"):
        assert_close(arrays["call/" + name], expected[name])
    assert_close(arrays["call/default"], expected["pooled_output"])
    assert hub_run.report["encoder_outputs"] == len(expected["encoder_outputs"]) == 2
    for index, output in enumerate(expected["encoder_outputs"]):
        assert_close(arrays[f"call/encoder_outputs/{index}"], output)
    assert hub_run.report["mlm_keys"] == ["default", "encoder_outputs", "mlm_logits",
                                          "pooled_output", "sequence_output"]
    assert_close(arrays["mlm/mlm_logits"], expected["mlm_logits"])  # [B, P, V]
    assert_close(arrays["mlm/pooled_output"], expected["pooled_output"])
    assert_close(arrays["keras_layer/pooled_output"], expected["pooled_output"])
    # The reference module's mlm, as attribute and signature: [B*P, V], unchanged.
    flat = tf.reshape(expected["mlm_logits"], [BATCH * POSITIONS, VOCAB])
    assert_close(arrays["reference_mlm/attribute"], flat)
    assert_close(arrays["reference_mlm/signature"], flat)


@pytest.mark.subprocess  # hub.KerasLayer in a fresh process (TF_USE_LEGACY_KERAS)
def test_training_true_runs_dropout_and_the_attributes_make_it_reusable(exported, hub_run):
    report = hub_run.report
    between_training_calls, against_inference = report["dropout"]
    assert between_training_calls > 1e-3 and against_inference > 1e-3
    encoder_variables = len(exported.model.albert.weights)
    mlm_variables = encoder_variables + len(exported.model.mlm_head.weights)
    assert report["variables"] == {"root": [encoder_variables, encoder_variables],
                                   "mlm": [mlm_variables, mlm_variables],
                                   "regularization_losses": [0, 0]}
    assert report["layer_weights"] == [encoder_variables, 0]  # the SOP and MLM heads stay out
    assert report["imported"] == []  # neither albert_tf nor tensorflow_text loads the encoder


@pytest.mark.subprocess  # hub.KerasLayer in a fresh process (TF_USE_LEGACY_KERAS)
def test_hub_keras_layer_fine_tunes_the_encoder(hub_run):
    losses = hub_run.report["losses"]
    assert losses[-1] < 0.8 * losses[0], losses
    assert hub_run.report["encoder_change"] > 1e-4  # the encoder's own weights moved


@pytest.mark.subprocess  # hub.KerasLayer in a fresh process (TF_USE_LEGACY_KERAS)
def test_the_preprocessing_model_follows_the_tf2_convention(hub_run, tokenizer):
    report, texts = hub_run.report, hub_run.texts
    assert report["special_tokens"] == {"vocab_size": VOCAB, "start_of_sequence_id": tokenizer.cls_id,
                                        "end_of_segment_id": tokenizer.sep_id, "padding_id": 0,
                                        "mask_id": tokenizer.mask_id}
    ids_a = [tokenizer.encode_text(text) for text in texts["a"]]
    ids_b = [tokenizer.encode_text(text) for text in texts["b"]]
    assert report["tokenize"] == ids_a
    names = ["input_word_ids", "input_mask", "input_type_ids"]
    assert sorted(report["root_call"]) == sorted(names)
    assert report["root_call"] == report["pack_single"]
    for row, ids in zip(report["root_call"]["input_word_ids"], ids_a):
        kept = ids[:SEQ - 2]
        assert row == [tokenizer.cls_id, *kept, tokenizer.sep_id] + [0] * (SEQ - 2 - len(kept))
    assert ids_b[0]  # the first row is a pair, the last (text_b "") a single segment
    pair = report["pack_pair"]
    assert all(len(row) == texts["seq_length"] for row in pair["input_word_ids"])
    assert pair["input_type_ids"][-1] == [0] * texts["seq_length"]  # empty text_b: one segment
    assert 1 in pair["input_type_ids"][0]


@pytest.mark.subprocess  # hub.KerasLayer in a fresh process (TF_USE_LEGACY_KERAS)
def test_raw_text_fine_tunes_through_the_preprocessing_and_encoder_layers(hub_run):
    losses = hub_run.report["text_losses"]
    assert losses[-1] < losses[0], losses
    assert hub_run.report["single_shape"] == [8, 32]


# ------------------------------------------------------------------------ Keras 3 and wrong inputs


@pytest.fixture(scope="module")
def loaded(exported):
    """The export loaded in this (Keras 3) process."""
    return tf.saved_model.load(str(exported.path))


def test_keras3_tfsmlayer_serves_the_encoder(exported):
    layer = keras.layers.TFSMLayer(str(exported.path))  # the default endpoint: serve
    symbolic = {name: keras.Input((None,), dtype="int32", name=name)
                for name in ("input_word_ids", "input_mask", "input_type_ids")}
    outputs = layer(symbolic)
    model = keras.Model(symbolic, [outputs["sequence_output"], outputs["default"]])
    sequence_output, default = model.predict(ids_of(exported.inputs), verbose=0)
    assert_close(sequence_output, exported.expected["sequence_output"])
    assert_close(default, exported.expected["pooled_output"])
    assert len(layer(ids_of(exported.inputs))["encoder_outputs"]) == 2
    # The reference-style mlm endpoint still answers the reference's dict.
    inputs = exported.inputs
    reference = {"input_ids": inputs["input_word_ids"], "input_mask": inputs["input_mask"],
                 "segment_ids": inputs["input_type_ids"],
                 "mlm_positions": inputs["masked_lm_positions"]}
    mlm_logits = keras.layers.TFSMLayer(str(exported.path), call_endpoint="mlm")(reference)
    assert_close(mlm_logits["mlm_logits"],
                 tf.reshape(exported.expected["mlm_logits"], [BATCH * POSITIONS, VOCAB]))


@pytest.mark.parametrize("changed, message", [
    ({"input_type_ids": np.zeros((BATCH, LENGTH - 1), np.int32)},
     f"input_type_ids has shape [{BATCH},{LENGTH - 1}] but input_word_ids has [{BATCH},{LENGTH}]"),
    ({"input_word_ids": np.full((BATCH, LENGTH), VOCAB, np.int32)},
     f"input_word_ids must lie in [0, {VOCAB}) (vocab_size of the config)"),
    ({"masked_lm_positions": np.full((BATCH, 2), LENGTH, np.int32)},
     f"masked_lm_positions must lie in [0, {LENGTH}) (the positions of input_word_ids)"),
])
def test_a_wrong_input_is_named_by_its_tf2_name(exported, loaded, changed, message):
    call = loaded.mlm if "masked_lm_positions" in changed else loaded
    inputs = {**exported.inputs, **changed}
    if call is loaded:
        inputs = ids_of(inputs)
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(f"failed: [{message}")):
        call({name: tf.constant(value) for name, value in inputs.items()})


def test_an_empty_batch_gives_empty_outputs(loaded):
    empty = {name: tf.zeros([0, LENGTH], tf.int32)
             for name in ("input_word_ids", "input_mask", "input_type_ids")}
    outputs = loaded(empty)
    assert outputs["sequence_output"].shape == [0, LENGTH, 32]
    assert outputs["default"].shape == [0, 32]
    mlm = loaded.mlm({**empty, "masked_lm_positions": tf.zeros([0, POSITIONS], tf.int32)})
    assert mlm["mlm_logits"].shape == [0, POSITIONS, VOCAB]
