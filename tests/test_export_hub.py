"""The hub-style encoder export and the preprocessing model (python -m albert_tf.export_hub).

The exports are written by the command line and loaded in fresh Python processes that import only
tensorflow (the encoder) or tensorflow and tensorflow_text (the preprocessing model), never
albert_tf; their outputs are compared with the Keras model's and the Python features' on real text.
Wrong inputs fail in the loaded graph with a message naming the input (the fine-tuned exports'
messages); an empty batch gives empty outputs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import tf1_format
from albert_tf.checkpoints.warm_start import resolve_checkpoint_source
from albert_tf.serving.saved_model import save_new_directory
from albert_tf.serving.tf2_encoder import TF2_INPUT_NAMES
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.task import ClassifierTask
from albert_tf.tasks.pretraining.hub_export import (CONFIG_ASSET, HubExportError,
                                                    checkpoint_to_export, export_encoder,
                                                    load_pretraining_weights)
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.training import optimization
from albert_tf.training.trainer import RunConfig, Trainer
from data_prep.classification.features import build_features, convert_example
from data_prep.classification.processors import InputExample, Sst2Processor, read_tsv
from tests.command_runner import run_command
from tests.shared_setup import EN8K_MODEL, GLUE_DIR, SHARED_DATA_DIR, subprocess_env, tiny_config

SEQ = 48  # the export's preprocessing length
PACK_SEQ = 20  # an explicit seq_length given to bert_pack_inputs
MLM_POSITIONS = 5

# ---------------------------------------------------------------------------------------- real text


def rte_pairs(count: int = 40) -> list[tuple[str, str]]:
    rows = list(read_tsv(os.path.join(GLUE_DIR, "RTE", "dev.tsv")))[1:count + 1]
    return [(cells[1], cells[2]) for _, cells in rows]


def sst2_sentences(count: int = 60) -> list[str]:
    rows = list(read_tsv(os.path.join(GLUE_DIR, "SST-2", "dev.tsv")))[1:count + 1]
    return [cells[0] for _, cells in rows]


def squad_pairs() -> list[tuple[str, str]]:
    """(question, context) of the first question of every paragraph of the SQuAD samples."""
    pairs = []
    for name in ("dev-v1.1-sample.json", "dev-v2.0-sample.json"):
        with open(os.path.join(SHARED_DATA_DIR, "squad", name), encoding="utf-8") as handle:
            for article in json.load(handle)["data"]:
                for paragraph in article["paragraphs"]:
                    pairs.append((paragraph["qas"][0]["question"], paragraph["context"]))
    return pairs


def wikipedia_lines(count: int = 60) -> list[str]:
    with open(os.path.join(SHARED_DATA_DIR, "corpus", "wiki_00.txt"), encoding="utf-8") as handle:
        lines = [line.strip() for line in handle if line.strip() and not line.startswith("<")]
    return lines[:count]


def python_features(text_a: str, text_b: str, seq_length: int, tokenizer) -> list[list[int]]:
    """input_ids, input_mask, segment_ids of the GLUE feature code for raw texts (b may be "")."""
    processor = Sst2Processor()
    example = InputExample("x", processor.process_text(text_a), processor.process_text(text_b),
                           None)
    features = convert_example(example, None, seq_length, tokenizer)
    return [features.input_ids, features.input_mask, features.segment_ids]


# ---------------------------------------------------------------------------------------- fixtures


def run_python(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          env=subprocess_env(), timeout=600)


def export_hub(**flags: str):
    """``-m albert_tf.export_hub`` with en8k, lowercasing and ``flags``, in this process."""
    return run_command("-m albert_tf.export_hub", f"--spm_model_file={EN8K_MODEL}",
                       "--do_lower_case", *(f"--{name}={value}" for name, value in flags.items()))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A pretraining run directory: ``model.ckpt-best`` (the weights to export) and a newer
    ``model.ckpt-7`` with other weights, which the state file names as the latest."""
    directory = tmp_path_factory.mktemp("pretraining_run")
    config = tiny_config()
    keras.utils.set_random_seed(3)
    best, newer = AlbertPretrainingModel(config), AlbertPretrainingModel(config)
    for variable in best.weights:  # non-zero biases and LayerNorm offsets too
        variable.assign(variable + np.random.normal(0.0, 0.05, variable.shape))
    tf.train.Checkpoint(model=best).write(str(directory / "model.ckpt-best"))
    newer_prefix = tf.train.Checkpoint(model=newer).write(str(directory / "model.ckpt-7"))
    tf.compat.v1.train.update_checkpoint_state(str(directory), newer_prefix)
    config.to_json_file(str(directory / "albert_config.json"))
    return types.SimpleNamespace(directory=directory, config=config, model=best)


@pytest.fixture(scope="module")
def exports(source, tmp_path_factory):
    """The command line's exports; the encoder is then moved to another directory."""
    root = tmp_path_factory.mktemp("exports")
    written = root / "written" / "albert_hub"
    result = export_hub(albert_config_file=source.directory / "albert_config.json",
                        checkpoint=source.directory, export_path=written,
                        preprocessing_export_path=root / "preprocessing", max_seq_length=SEQ)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "model.ckpt-best" in result.stdout
    moved = root / "moved" / "albert_hub"
    moved.parent.mkdir()
    shutil.move(str(written), str(moved))
    return types.SimpleNamespace(encoder=moved, preprocessing=root / "preprocessing")


# ------------------------------------------------------- one fresh process runs both exports

FRESH_PROCESS_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf

encoder_dir, preprocessing_dir, inputs_file, texts_file, calls_file, arrays_file, json_file = (
    sys.argv[1:])
report = {}


# {label: the error message, or the outputs' shapes} of every {label: (signature, inputs)}, the
# inputs given as {name: [shape, fill value]}.
def call_all(module, calls):
    results = {}
    for label, (signature, inputs) in calls.items():
        inputs = {name: tf.constant(np.full(shape, fill, int if isinstance(fill, int) else object),
                                    dtype=tf.int32 if isinstance(fill, int) else tf.string)
                  for name, (shape, fill) in inputs.items()}
        try:
            outputs = module.signatures[signature](**inputs)
            results[label] = {name: value.shape.as_list() for name, value in outputs.items()}
        except tf.errors.InvalidArgumentError as error:
            results[label] = error.message
    return results

# 1. The encoder, with tensorflow alone.
loaded = tf.saved_model.load(encoder_dir)
inputs = {k: tf.constant(v) for k, v in np.load(inputs_file).items()}
ids = {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}
arrays = {}
for name in ("tokens", "sop", "serving_default"):
    for key, value in loaded.signatures[name](**ids).items():
        arrays[f"{name}/{key}"] = value.numpy()
for key, value in loaded.signatures["mlm"](**ids, mlm_positions=inputs["mlm_positions"]).items():
    arrays[f"mlm/{key}"] = value.numpy()
arrays["function/sop_log_probs"] = loaded.sop(ids)["sop_log_probs"].numpy()
layer = tf.keras.layers.TFSMLayer(encoder_dir, call_endpoint="tokens")
symbolic = {name: tf.keras.Input((None,), dtype="int32", name=name) for name in ids}
arrays["keras/pooled_output"] = tf.keras.Model(symbolic, layer(symbolic))(ids)["pooled_output"]
np.savez(arrays_file, **arrays)
tokenization = loaded.signatures["tokenization_info"]()
report["vocab_file"] = tokenization["vocab_file"].numpy().decode()
report["do_lower_case"] = bool(tokenization["do_lower_case"].numpy())
report["signatures"] = {
    name: {"inputs": {k: [s.dtype.name, s.shape.as_list()]
                      for k, s in function.structured_input_signature[1].items()},
           "outputs": sorted(function.structured_outputs)}
    for name, function in loaded.signatures.items()}
calls = json.load(open(calls_file))
report["encoder_calls"] = call_all(loaded, calls["encoder"])
report["imported"] = sorted({m.split(".")[0] for m in sys.modules} & {"albert_tf",
                                                                      "tensorflow_text"})

# 2. The preprocessing model (on its own; its copy inside the encoder export), with tensorflow_text.
import tensorflow_text  # registers the SentencePiece op

texts = json.load(open(texts_file))
a, b = tf.constant(texts["text_a"]), tf.constant(texts["text_b"])
as_lists = lambda outputs: {k: v.numpy().tolist() for k, v in outputs.items()}
preprocessing = tf.saved_model.load(preprocessing_dir)
signature = as_lists(preprocessing.signatures["serving_default"](text_a=a, text_b=b))
tokens_a, tokens_b = preprocessing.tokenize(a), preprocessing.tokenize(b)
report["preprocessing"] = {
    "tokenize": preprocessing.tokenize(tf.constant(texts["lines"])).to_list(),
    "signature": signature,
    "function": as_lists(preprocessing.preprocess({"text_a": a, "text_b": b})),
    "pack_pair": as_lists(preprocessing.bert_pack_inputs([tokens_a, tokens_b])),
    "pack_single": as_lists(preprocessing.bert_pack_inputs([tokens_a],
                                                           seq_length=texts["pack_seq"])),
}
inside = tf.saved_model.load(encoder_dir + "/preprocessing")
report["inside_signature"] = as_lists(inside.signatures["serving_default"](text_a=a, text_b=b))
report["preprocessing_calls"] = call_all(preprocessing, calls["preprocessing"])
json.dump(report, open(json_file, "w"))
"""


# ---------------------------------------------------------- wrong inputs and empty batches

# Inputs of a call as the fresh process builds them: {name: [shape, fill value]} (int32 or text).


def id_inputs(batch: int = 2, length: int = 8, **changed) -> dict[str, list]:
    """Valid encoder inputs (ids, mask, segment ids 1) of [batch, length]; ``changed``: {name:
    [shape, fill]} replaces or adds an input."""
    inputs = {name: [[batch, length], 1] for name in ("input_ids", "input_mask", "segment_ids")}
    return {**inputs, **changed}


TOO_LONG = "input_ids has 129 positions but this model takes 1 to 128 (max_position_embeddings)"
ENCODER_WRONG = {  # label: (signature, inputs, part of the message)
    "mask_shape": ("tokens", id_inputs(input_mask=[[2, 7], 1]),
                   "input_mask has shape [2,7] but input_ids has [2,8]: they must be equal"),
    # Broadcast against [B, S] before the checks: silently an all-ones mask.
    "mask_of_one_column": ("sop", id_inputs(input_mask=[[2, 1], 1]),
                           "input_mask has shape [2,1] but input_ids has [2,8]"),
    "batch_sizes": ("serving_default", id_inputs(segment_ids=[[3, 8], 1]),
                    "segment_ids has shape [3,8] but input_ids has [2,8]: they must be equal"),
    "too_long": ("tokens", id_inputs(length=129), TOO_LONG),
    "too_long_mlm": ("mlm", id_inputs(length=129, mlm_positions=[[2, 3], 1]), TOO_LONG),
    "id_outside_vocabulary": ("tokens", id_inputs(input_ids=[[2, 8], 8000]),
                              "input_ids must lie in [0, 8000) (vocab_size of the config)"),
    "mlm_positions_rows": ("mlm", id_inputs(mlm_positions=[[3, 2], 1]),
                           "mlm_positions has 3 rows but input_ids has 2"),
    "mlm_positions_outside": ("mlm", id_inputs(mlm_positions=[[2, 2], 8]),
                              "mlm_positions must lie in [0, 8) (the positions of input_ids) but "
                              "holds values from 8 to 8"),
}
ENCODER_EMPTY = {"empty_tokens": ("tokens", id_inputs(batch=0)),
                 "empty_sop": ("sop", id_inputs(batch=0)),
                 "empty_mlm": ("mlm", id_inputs(batch=0, mlm_positions=[[0, 3], 1]))}
PREPROCESSING_WRONG = {"batch_sizes": ("serving_default", {"text_a": [[2], "a cat"],
                                                           "text_b": [[1], "a dog"]},
                                       "text_b has 1 rows but text_a has 2")}
PREPROCESSING_EMPTY = {"empty": ("serving_default", {"text_a": [[0], ""], "text_b": [[0], ""]})}


def calls_of(table: dict) -> dict[str, list]:
    """{label: [signature, inputs]} of a table, for the fresh process."""
    return {label: list(entry[:2]) for label, entry in table.items()}


@pytest.fixture(scope="module")
def fresh_run(exports, source, en8k, tmp_path_factory):
    """Both exports run in one fresh Python process: the moved encoder on ids of real text (RTE
    pairs, SST-2 sentences) with the Keras model's outputs on the same inputs; the preprocessing
    model on SQuAD (question, context) and RTE pairs, SST-2 sentences and Wikipedia lines; both on
    the wrong inputs and empty batches of the tables above."""
    work = tmp_path_factory.mktemp("fresh_run")
    features = [python_features(a, b, SEQ, en8k) for a, b in rte_pairs(6)]
    features += [python_features(text, "", SEQ, en8k) for text in sst2_sentences(6)]
    input_ids, input_mask, segment_ids = (np.array(column, np.int32) for column in zip(*features))
    rng = np.random.default_rng(0)
    positions = np.stack([rng.choice(int(mask.sum()), MLM_POSITIONS, replace=False)
                          for mask in input_mask]).astype(np.int32)
    inputs = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
              "mlm_positions": positions}
    np.savez(work / "inputs.npz", **inputs)
    pairs = squad_pairs() + rte_pairs() + [(text, "") for text in sst2_sentences()]
    lines = wikipedia_lines() + [context for _, context in squad_pairs()] + sst2_sentences()
    texts = {"text_a": [a for a, _ in pairs], "text_b": [b for _, b in pairs], "lines": lines,
             "pack_seq": PACK_SEQ}
    (work / "texts.json").write_text(json.dumps(texts))
    calls = {"encoder": calls_of({**ENCODER_WRONG, **ENCODER_EMPTY}),
             "preprocessing": calls_of({**PREPROCESSING_WRONG, **PREPROCESSING_EMPTY})}
    (work / "calls.json").write_text(json.dumps(calls))
    result = run_python(FRESH_PROCESS_SCRIPT, str(exports.encoder), str(exports.preprocessing),
                        *(str(work / name) for name in ("inputs.npz", "texts.json", "calls.json",
                                                         "arrays.npz", "report.json")))
    assert result.returncode == 0, result.stderr[-3000:]
    keras_outputs = source.model({**inputs, "masked_lm_positions": positions}, training=False)
    return types.SimpleNamespace(exported=dict(np.load(work / "arrays.npz")),
                                 report=json.loads((work / "report.json").read_text()),
                                 keras=keras_outputs, texts=texts, pairs=pairs)


# ------------------------------------------------------------------------------ the encoder export


def assert_close(exported: np.ndarray, expected: tf.Tensor) -> None:
    expected = np.asarray(expected)
    assert exported.shape == expected.shape
    assert np.max(np.abs(exported - expected)) <= 1e-5


@pytest.mark.subprocess  # the exports run in a fresh process
@pytest.mark.requires_shared_data
def test_tokens_and_serving_default_equal_the_encoder(fresh_run):
    for signature in ("tokens", "serving_default"):
        for output in ("sequence_output", "pooled_output"):
            assert_close(fresh_run.exported[f"{signature}/{output}"], fresh_run.keras[output])
    assert_close(fresh_run.exported["keras/pooled_output"], fresh_run.keras["pooled_output"])


@pytest.mark.subprocess  # the exports run in a fresh process
@pytest.mark.requires_shared_data
def test_sop_and_mlm_equal_the_pretraining_heads(fresh_run):
    keras_outputs = fresh_run.keras
    sop_log_probs = tf.nn.log_softmax(keras_outputs["sop_logits"], axis=-1)
    assert_close(fresh_run.exported["sop/sop_log_probs"], sop_log_probs)
    assert_close(fresh_run.exported["function/sop_log_probs"], sop_log_probs)
    assert_close(fresh_run.exported["sop/pooled_output"], keras_outputs["pooled_output"])
    mlm_logits = keras_outputs["mlm_logits"]
    assert_close(fresh_run.exported["mlm/mlm_logits"],
                 tf.reshape(mlm_logits, [-1, mlm_logits.shape[-1]]))
    assert_close(fresh_run.exported["mlm/sequence_output"], keras_outputs["sequence_output"])


@pytest.mark.subprocess  # the exports run in a fresh process
@pytest.mark.requires_shared_data
def test_signatures_are_the_reference_modules_and_load_with_tensorflow_alone(fresh_run):
    signatures = fresh_run.report["signatures"]
    assert sorted(signatures) == ["mlm", "serving_default", "sop", "tokenization_info", "tokens"]
    ids = {name: ["int32", [None, None]] for name in ("input_ids", "input_mask", "segment_ids")}
    assert signatures["tokens"]["inputs"] == signatures["sop"]["inputs"] == ids
    assert signatures["mlm"]["inputs"] == {**ids, "mlm_positions": ["int32", [None, None]]}
    assert signatures["tokens"]["outputs"] == ["pooled_output", "sequence_output"]
    assert signatures["sop"]["outputs"] == ["pooled_output", "sequence_output", "sop_log_probs"]
    assert signatures["mlm"]["outputs"] == ["mlm_logits", "pooled_output", "sequence_output"]
    assert signatures["tokenization_info"] == {"inputs": {},
                                               "outputs": ["do_lower_case", "vocab_file"]}
    assert fresh_run.report["imported"] == []  # neither albert_tf nor tensorflow_text


@pytest.mark.subprocess  # the exports run in a fresh process
@pytest.mark.requires_shared_data
def test_tokenization_info_points_at_the_asset_inside_the_moved_export(exports, fresh_run):
    vocab_file = fresh_run.report["vocab_file"]
    assert os.path.dirname(vocab_file) == str(exports.encoder / "assets")
    with open(vocab_file, "rb") as exported, open(EN8K_MODEL, "rb") as original:
        assert exported.read() == original.read()
    assert fresh_run.report["do_lower_case"] is True
    config = json.loads((exports.encoder / "assets" / CONFIG_ASSET).read_text())
    assert config["vocab_size"] == 8000 and config["hidden_size"] == 32


@pytest.mark.subprocess  # the exports run in a fresh process
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("label", sorted(ENCODER_WRONG))
def test_a_wrong_input_of_the_encoder_is_named_by_the_loaded_graph(fresh_run, label):
    """The fine-tuned exports' checks and messages (albert_tf/serving/input_checks.py), run by
    the encoder loaded with tensorflow alone."""
    message = fresh_run.report["encoder_calls"][label]
    assert isinstance(message, str), message  # not the outputs' shapes
    assert f"assertion failed: [{ENCODER_WRONG[label][2]}" in message, message[:600]


@pytest.mark.subprocess  # the exports run in a fresh process
@pytest.mark.requires_shared_data
def test_the_preprocessing_model_names_a_text_without_its_pair(fresh_run):
    (label, (_, _, expected)), = PREPROCESSING_WRONG.items()
    assert f"assertion failed: [{expected}" in fresh_run.report["preprocessing_calls"][label]


@pytest.mark.subprocess  # the exports run in a fresh process
@pytest.mark.requires_shared_data
def test_an_empty_batch_gives_empty_outputs(fresh_run):
    calls = fresh_run.report["encoder_calls"]
    assert calls["empty_tokens"] == {"sequence_output": [0, 8, 32], "pooled_output": [0, 32]}
    assert calls["empty_sop"] == {**calls["empty_tokens"], "sop_log_probs": [0, 2]}
    assert calls["empty_mlm"] == {**calls["empty_tokens"], "mlm_logits": [0, 8000]}
    assert fresh_run.report["preprocessing_calls"]["empty"] == {
        name: [0, SEQ] for name in ("input_ids", "input_mask", "segment_ids")}


# -------------------------------------------------------------------------- the preprocessing model


@pytest.mark.subprocess  # the exports run in a fresh process
@pytest.mark.requires_shared_data
def test_tokenize_equals_full_tokenizer_on_real_text(fresh_run, en8k):
    expected = [en8k.encode_text(line) for line in fresh_run.texts["lines"]]
    assert fresh_run.report["preprocessing"]["tokenize"] == expected


def rows(packed: dict[str, list],
         names: tuple[str, ...] = ("input_ids", "input_mask", "segment_ids")) -> list[list[list[int]]]:
    """[[ids, mask, segment ids] per example] of packed inputs named by ``names``."""
    return [list(row) for row in zip(*(packed[name] for name in names))]


@pytest.mark.subprocess  # the exports run in a fresh process
@pytest.mark.requires_shared_data
def test_text_signature_equals_the_python_features(fresh_run, en8k):
    expected = [python_features(a, b, SEQ, en8k) for a, b in fresh_run.pairs]
    assert any(sum(mask) == SEQ for _, mask, _ in expected)  # some pairs are truncated
    assert any(1 not in segments for _, _, segments in expected)  # some are single sentences
    preprocessing = fresh_run.report["preprocessing"]
    assert rows(preprocessing["signature"]) == expected
    assert rows(preprocessing["function"]) == expected
    assert rows(fresh_run.report["inside_signature"]) == expected  # the copy in the encoder


@pytest.mark.subprocess  # the exports run in a fresh process
@pytest.mark.requires_shared_data
def test_bert_pack_inputs_packs_like_the_python_features(fresh_run, en8k):
    texts = fresh_run.texts
    ids_a = [en8k.encode_text(text) for text in texts["text_a"]]
    ids_b = [en8k.encode_text(text) for text in texts["text_b"]]
    pairs = [build_features(a, b, SEQ, en8k.cls_id, en8k.sep_id, 0) for a, b in zip(ids_a, ids_b)]
    singles = [build_features(a, None, PACK_SEQ, en8k.cls_id, en8k.sep_id, 0) for a in ids_a]
    preprocessing = fresh_run.report["preprocessing"]
    for packed, features in ((preprocessing["pack_pair"], pairs),
                             (preprocessing["pack_single"], singles)):
        # bert_pack_inputs answers in the TF2 encoder's input names.
        assert rows(packed, TF2_INPUT_NAMES) == [[f.input_ids, f.input_mask, f.segment_ids]
                                                 for f in features]


# ------------------------------------------------------------------- fine-tuning from the export


def classifier_trainer(output_dir, config) -> Trainer:
    return Trainer(tf.distribute.get_strategy(), ClassifierTask(config, ("accuracy",), 3),
                   lambda: optimization.create_optimizer("adamw", 1e-4, 10, 0),
                   RunConfig(output_dir=str(output_dir)), log=lambda message: None)


@pytest.mark.requires_shared_data
def test_fine_tuning_from_the_export_starts_from_the_checkpoints_encoder(exports, source,
                                                                         tmp_path):
    from_export = classifier_trainer(tmp_path / "from_export", source.config)
    message = from_export.initialize(
        init_checkpoint=resolve_checkpoint_source(str(exports.encoder)))
    assert str(exports.encoder) in message
    from_checkpoint = classifier_trainer(tmp_path / "from_checkpoint", source.config)
    from_checkpoint.initialize(init_checkpoint=resolve_checkpoint_source(
        str(source.directory / "model.ckpt-best")))
    exported_weights = [w.numpy() for w in from_export.model.albert.weights]
    assert len(exported_weights) == len(source.model.albert.weights)
    for exported, loaded, original in zip(exported_weights, from_checkpoint.model.albert.weights,
                                          source.model.albert.weights):
        np.testing.assert_array_equal(exported, loaded.numpy())
        np.testing.assert_array_equal(exported, original.numpy())


# --------------------------------------------------------------------- checkpoints and errors


def test_a_directory_exports_its_best_checkpoint_not_its_latest(source):
    assert tf.train.latest_checkpoint(str(source.directory)).endswith("model.ckpt-7")
    assert checkpoint_to_export(str(source.directory)).path == str(
        source.directory / "model.ckpt-best")


def test_a_reference_tf1_checkpoint_loads_with_its_heads(source, tmp_path):
    prefix = tf1_format.export_tf1_checkpoint(source.model, str(tmp_path / "model.ckpt"))
    model = AlbertPretrainingModel(source.config)
    assert load_pretraining_weights(model, checkpoint_to_export(prefix)).startswith(
        "reference checkpoint")
    for loaded, original in zip(model.weights, source.model.weights):
        np.testing.assert_array_equal(loaded.numpy(), original.numpy())


def test_a_fine_tuned_checkpoint_without_heads_is_refused(source, tmp_path):
    classifier = AlbertClassifierModel(source.config, 2)
    prefix = tf.train.Checkpoint(model=classifier).write(str(tmp_path / "model.ckpt-1"))
    with pytest.raises(HubExportError, match="lacks the MLM and SOP heads"):
        load_pretraining_weights(AlbertPretrainingModel(source.config),
                                 checkpoint_to_export(prefix))


def test_a_missing_checkpoint_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "nowhere" / "model.ckpt-best")
    with pytest.raises(HubExportError, match="nowhere"):
        checkpoint_to_export(missing)
    with pytest.raises(HubExportError, match="No checkpoint found"):
        checkpoint_to_export(str(tmp_path))


@pytest.mark.requires_shared_data
def test_an_existing_export_is_never_overwritten(source, en8k, tmp_path):
    existing = tmp_path / "export"
    existing.mkdir()
    (existing / "saved_model.pb").write_text("an earlier export")
    with pytest.raises(FileExistsError, match="not an empty directory"):
        export_encoder(source.model, en8k, str(existing), SEQ)
    assert (existing / "saved_model.pb").read_text() == "an earlier export"


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("overrides, seq_length, message", [
    ({"vocab_size": 9000}, SEQ, "does not match the 8000 pieces"),
    ({}, 200, "exceeds max_position_embeddings=128 of the config"),
])
def test_a_config_that_does_not_fit_is_refused(en8k, tmp_path, overrides, seq_length, message):
    model = AlbertPretrainingModel(tiny_config(**overrides))
    with pytest.raises(HubExportError, match=message):
        export_encoder(model, en8k, str(tmp_path / "export"), seq_length)
    assert not (tmp_path / "export").exists()


def test_a_failed_export_leaves_nothing(tmp_path):
    def fail(directory):
        os.makedirs(os.path.join(directory, "variables"))
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        save_new_directory(str(tmp_path / "export"), fail)
    assert os.listdir(tmp_path) == []


@pytest.mark.requires_shared_data
def test_the_command_reports_bad_input_without_a_traceback(source, tmp_path):
    result = export_hub(albert_config_file=source.directory / "albert_config.json",
                        checkpoint=tmp_path / "nowhere", export_path=tmp_path / "export")
    assert result.returncode == 1
    assert "export_hub: error: --checkpoint:" in result.stderr
    assert "nowhere" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "export").exists()


@pytest.mark.requires_shared_data
@pytest.mark.parametrize("overrides, flags, message", [
    ({"vocab_size": 9000}, {}, "vocab_size=9000 in {config} does not match the 8000 pieces"),
    ({}, {"max_seq_length": 200}, "exceeds max_position_embeddings=128 in {config}"),
])
def test_the_command_checks_config_and_tokenizer_before_reading_the_checkpoint(
        source, tmp_path, overrides, flags, message):
    config = tmp_path / "albert_config.json"
    config.write_text(tiny_config(**overrides).to_json_string())
    result = export_hub(albert_config_file=config, checkpoint=source.directory,
                        export_path=tmp_path / "export", **flags)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert message.format(config=config) in result.stderr.strip().splitlines()[-1]
    assert "Loaded" not in result.stdout  # the checkpoint was not read
    assert not (tmp_path / "export").exists()


@pytest.mark.requires_shared_data
def test_a_config_of_fewer_groups_than_the_checkpoint_is_refused(tmp_path):
    two_groups = tiny_config(num_hidden_groups=2)
    tf.train.Checkpoint(model=AlbertPretrainingModel(two_groups)).write(
        str(tmp_path / "run" / "model.ckpt-best"))
    config = tmp_path / "albert_config.json"
    config.write_text(tiny_config(num_hidden_groups=1).to_json_string())
    result = export_hub(albert_config_file=config, checkpoint=tmp_path / "run",
                        export_path=tmp_path / "export")
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"encoder variable(s) that the model of {config} has no place for" in last
    assert "group_1" in last and not (tmp_path / "export").exists()
