"""Fine-tuned exports of every task on real data: GLUE, RACE, SQuAD v1.1 and v2.0.

Every export is loaded in a fresh process that imports only tensorflow (``ids_only``) or tensorflow
and tensorflow_text (``with_text``); its outputs must equal the Keras model's (max-abs <= 1e-5) and
its text signatures' ids the Python features' (SST-2 sentences, Wikipedia lines, the RACE and SQuAD
samples, long texts truncated). SQuAD's text signature packs a request to its longest row (v2.0:
at least the beam): on the sample, on short contexts and below the beam, its outputs at the real
positions are those of the features padded to max_seq_length. The SQuAD character spans cut the
reference's texts, and the post-processing of the text signature's outputs equals the reference's
on the same windows.
Wrong inputs (shapes, batch sizes, lengths, RACE option counts, ids outside the vocabulary) fail in
the loaded graph with a message naming the input, in both variants of every task; an empty batch
gives empty outputs. run_race.py (the harness's run, tests/task_harness.py) and run_squad.py write
their exports with --export_dir end to end. The tests that load exports are marked ``subprocess``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.classification.serving import export_classifier
from albert_tf.tasks.multiple_choice.model import AlbertMultipleChoiceModel
from albert_tf.tasks.multiple_choice.serving import export_multiple_choice, fill_in_options
from albert_tf.tasks.question_answering import postprocessing
from albert_tf.tasks.question_answering.model import V1_OUTPUTS, AlbertSquadModel
from albert_tf.tasks.question_answering.serving import (export_squad, min_positions,
                                                        postprocess_text_outputs)
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.spans import SpanTokenizer
from data_prep.classification.features import build_features
from data_prep.multiple_choice.reader import (convert_examples, fill_in_option, race_sources,
                                              read_race_examples)
from data_prep.question_answering.examples import SquadExample, read_squad_examples
from data_prep.question_answering.features import (FeatureConverter, SquadFeatureSettings,
                                                   tokenize_paragraph)
from tests.command_runner import run_command
from tests.shared_setup import (EN8K_MODEL, GERMAN_30K_MODEL, GLUE_DIR, SHARED_DATA_DIR,
                                subprocess_env, tiny_config)

RACE_DATA = os.path.join(SHARED_DATA_DIR, "race")
SQUAD_SAMPLES = {version: os.path.join(SHARED_DATA_DIR, "squad", f"dev-v{version}-sample.json")
                 for version in ("1.1", "2.0")}
GLUE_SEQ = 128
RACE_SEQ, RACE_QA = 96, 24
SQUAD_SEQ, SQUAD_QUERY = 128, 32

# Loads SavedModels in a process of its own (each once) and calls their signatures. argv: a JSON
# list of calls {"export", "signature", "inputs" (.npz), "outputs" (.npz), "text"}, in order; the
# first call with "text" true imports tensorflow_text before it runs (the calls before it run
# without the SentencePiece op registered). A signature "keras:<function>" calls the function
# through keras.layers.TFSMLayer instead. A call that raises writes the error's type and message
# instead.
LOADER = r"""
import json, sys
import numpy as np
import tensorflow as tf
loaded = {}
for call in json.loads(sys.argv[1]):
    if call["text"] and "tensorflow_text" not in sys.modules:
        import tensorflow_text  # registers the SentencePiece op of the text signatures
    try:
        inputs = {name: tf.constant(value) for name, value in np.load(call["inputs"]).items()}
        if call["signature"].startswith("keras:"):
            import keras
            layer = keras.layers.TFSMLayer(call["export"], call_endpoint=call["signature"][6:])
            outputs = layer(inputs)
        else:
            if call["export"] not in loaded:
                loaded[call["export"]] = tf.saved_model.load(call["export"])
            outputs = loaded[call["export"]].signatures[call["signature"]](**inputs)
        outputs = {name: value.numpy() for name, value in outputs.items()}
    except Exception as error:
        outputs = {"error": np.array(f"{type(error).__name__}: {error}")}
    np.savez(call["outputs"], **outputs)
project = sorted({name.split(".")[0] for name in sys.modules} & {"albert_tf", "data_prep", "tests"})
assert not project, project
"""


def serve(directory, calls: dict[str, tuple], text_calls: dict[str, tuple] | None = None
          ) -> dict[str, dict]:
    """Runs {label: (SavedModel dir, signature, inputs)} in one fresh process, ``calls`` before
    tensorflow_text is imported and ``text_calls`` after; returns the outputs of each label."""
    directory.mkdir()
    specs = []
    for text, group in ((False, calls), (True, text_calls or {})):
        for label, (export, signature, inputs) in group.items():
            paths = [str(directory / f"{label}_{kind}.npz") for kind in ("in", "out")]
            np.savez(paths[0], **inputs)
            specs.append({"label": label, "export": str(export), "signature": signature,
                          "inputs": paths[0], "outputs": paths[1], "text": text})
    result = subprocess.run([sys.executable, "-c", LOADER, json.dumps(specs)], capture_output=True,
                            text=True, env=subprocess_env(), timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return {spec["label"]: dict(np.load(spec["outputs"])) for spec in specs}


def strings(values) -> np.ndarray:
    return np.array(list(values), dtype=str)


def padded(rows, length: int) -> np.ndarray:
    """int32 [len(rows), length] rows cut or zero-padded to ``length``."""
    return np.array([list(row)[:length] + [0] * (length - len(row)) for row in rows], np.int32)


def assert_close(actual, expected):
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5)


# -- real data and what the Python features make of it ------------------------------------------------

def glue_texts() -> list[tuple[str, str]]:
    """(text_a, text_b): SST-2 sentences alone, and Wikipedia lines as long pairs (truncated)."""
    with open(os.path.join(GLUE_DIR, "SST-2", "dev.tsv"), encoding="utf-8") as handle:
        sentences = [line.split("\t")[0] for line in handle.read().splitlines()[1:13]]
    with open(os.path.join(SHARED_DATA_DIR, "corpus", "wiki_00.txt"), encoding="utf-8") as handle:
        lines = [line for line in handle.read().splitlines() if len(line) > 80][:12]
    return [(s, "") for s in sentences] + list(zip(lines[::2], lines[1::2]))


def glue_features(tokenizer: FullTokenizer, texts) -> dict[str, np.ndarray]:
    features = [build_features(tokenizer.encode_text(a), tokenizer.encode_text(b) if b else None,
                               GLUE_SEQ, tokenizer.cls_id, tokenizer.sep_id, 0) for a, b in texts]
    return {name: np.array([getattr(f, name) for f in features], np.int32)
            for name in ("input_ids", "input_mask", "segment_ids")}


def race_raw_questions() -> list[dict]:
    """article, question and options of every sample question, as the JSON files hold them, in the
    reader's order (middle, then high; files sorted)."""
    questions = []
    for source in race_sources(RACE_DATA, "dev"):
        with open(source.path, encoding="utf-8") as handle:
            article = json.load(handle)
        questions += [{"article": article["article"], "question": question, "options": options}
                      for question, options in zip(article["questions"], article["options"])]
    return questions


def race_features(tokenizer: FullTokenizer) -> dict[str, np.ndarray]:
    examples = read_race_examples(race_sources(RACE_DATA, "dev")).examples
    features = list(convert_examples(examples, tokenizer, RACE_SEQ, RACE_QA))
    return {name: np.array([getattr(f, name) for f in features], np.int32)
            for name in ("input_ids", "input_mask", "segment_ids")}


# SQuAD requests to serve_text: the sample's questions (every first window fills S, so the rows
# have S positions); the same with each context cut to its first 40 + 20 i characters (rows of
# different lengths, all shorter than S); one empty question on the context "a" ([CLS] [SEP] ▁a
# [SEP]: 4 positions, fewer than SQuAD 2.0's beam of 5).
SQUAD_REQUESTS = ("sample", "short", "tiny")


def squad_examples(version: str, request: str = "sample") -> list[SquadExample]:
    """The questions of a SQuAD request (``SQUAD_REQUESTS``)."""
    if request == "tiny":
        return [SquadExample("tiny", "", "a", 0)]
    examples = read_squad_examples(SQUAD_SAMPLES[version], is_training=False)
    if request == "short":
        return [dataclasses.replace(example, paragraph_text=example.paragraph_text[:40 + 20 * i])
                for i, example in enumerate(examples)]
    return examples


def squad_text_label(name: str, request: str) -> str:
    """The label of ``request``'s serve_text call on the export ``name`` in ``served``."""
    return f"{name}_text" if request == "sample" else f"{name}_text_{request}"


def squad_first_windows(tokenizer: FullTokenizer, version: str, request: str = "sample"):
    """(questions, the Python features' first window of each, padded to S) of a SQuAD request."""
    examples = squad_examples(version, request)
    converter = FeatureConverter(tokenizer.sp_model, tokenizer.do_lower_case,
                                 SquadFeatureSettings(SQUAD_SEQ, 64, SQUAD_QUERY))
    return examples, [converter.convert(example, index)[0] for index, example in enumerate(examples)]


def squad_inputs(windows, version_2: bool) -> dict[str, np.ndarray]:
    names = ("input_ids", "input_mask", "segment_ids") + (("p_mask",) if version_2 else ())
    return {name: np.array([getattr(w, name) for w in windows], np.int32) for name in names}


# -- the exports, built once --------------------------------------------------------------------------

def spread_heads(model, seed: int = 0):
    """Gives the head's weight matrices unit variance: a random encoder's outputs differ little
    between examples, and the scores (arg-max, top-k) must differ well beyond float rounding."""
    rng = np.random.default_rng(seed)
    for name, variable in model.tf1_head_variables().items():
        if name.endswith(("kernel", "output_weights")):
            variable.assign(rng.normal(size=variable.shape))
    return model


@pytest.fixture(scope="module")
def exports(tmp_path_factory, en8k):
    """Tiny random models of every task and their exports. The initialisation is seeded: the
    post-processing tests need scores spread enough for several n-best entries per question,
    which an unseeded encoder (drawn from whatever the test process drew before) did not always
    give."""
    root = tmp_path_factory.mktemp("exports")
    keras.utils.set_random_seed(7)
    config = tiny_config()
    models = {"glue": AlbertClassifierModel(config, num_labels=2),
              "race": AlbertMultipleChoiceModel(config),
              "squad1": AlbertSquadModel(config),
              "squad2": AlbertSquadModel(config, version_2=True)}
    for model in models.values():
        spread_heads(model)
    export_classifier(models["glue"], str(root / "glue"), threshold=0.25,
                      assets={"labels.txt": "0\n1\n"}, tokenizer=en8k, max_seq_length=GLUE_SEQ)
    export_multiple_choice(models["race"], str(root / "race"), en8k, RACE_SEQ, RACE_QA)
    for name in ("squad1", "squad2"):
        export_squad(models[name], str(root / name), en8k, SQUAD_SEQ, SQUAD_QUERY)
    return root, models


# -- wrong inputs and empty batches, for every export -----------------------------------------------

TASKS = ("glue", "race", "squad1", "squad2")
VARIANTS = ("ids_only", "with_text")
TEXT_INPUTS = {"glue": ("text_a", "text_b"), "race": ("article", "question", "options"),
               "squad1": ("question", "context"), "squad2": ("question", "context")}


def ids_of(task: str, batch: int = 2, length: int = 8, **rows: int) -> dict[str, np.ndarray]:
    """Valid ids of ``task``'s serving_default (RACE: [batch, 4, length]; SQuAD 2.0 with p_mask):
    ids, mask and segment ids 1, p_mask 0. ``rows``: {name: batch of that input}, to mismatch."""
    names = INPUT_NAMES + (("p_mask",) if task == "squad2" else ())
    choices = (4,) if task == "race" else ()
    return {name: np.full((rows.get(name, batch), *choices, length), int(name != "p_mask"),
                          np.int32) for name in names}


def shape_text(task: str, batch: int, length: int) -> str:
    """How the checks print the shape of ``ids_of(task, batch, length)``'s inputs."""
    return f"[{batch},4,{length}]" if task == "race" else f"[{batch},{length}]"


def wrong_ids(task: str) -> dict[str, tuple[dict[str, np.ndarray], str]]:
    """{case: (serving_default's inputs, part of the message)} of ``task``'s wrong ids."""
    def replaced(name: str, value: np.ndarray) -> dict[str, np.ndarray]:
        return {**ids_of(task), name: value}

    mask_like = ids_of(task)["input_mask"]
    cases = {
        "mask_shape": (replaced("input_mask", mask_like[..., :7]),
                       f"input_mask has shape {shape_text(task, 2, 7)} but input_ids has "
                       f"{shape_text(task, 2, 8)}: they must be equal"),
        # Broadcast against [B, S] before the checks: silently an all-ones mask.
        "mask_of_one_column": (replaced("input_mask", mask_like[..., :1]),
                               f"input_mask has shape {shape_text(task, 2, 1)} but input_ids has"),
        "batch_sizes": (ids_of(task, segment_ids=3),
                        f"segment_ids has shape {shape_text(task, 3, 8)} but input_ids has "
                        f"{shape_text(task, 2, 8)}: they must be equal"),
        "too_long": (ids_of(task, length=129),
                     "input_ids has 129 positions but this model takes 1 to 128 "
                     "(max_position_embeddings)"),
    }
    if task == "glue":
        outside = ids_of(task)
        outside["input_ids"][1, 3] = 8000
        cases["no_positions"] = (ids_of(task, length=0), "input_ids has 0 positions")
        cases["id_outside_vocabulary"] = (outside, "input_ids must lie in [0, 8000) (vocab_size "
                                                   "of the config) but holds values from 1 to 8000")
        cases["segment_id_2"] = (replaced("segment_ids", 2 * mask_like),
                                 "segment_ids must lie in [0, 2) (type_vocab_size of the config)")
    if task == "squad2":
        cases["p_mask_shape"] = (replaced("p_mask", np.zeros((2, 9), np.int32)),
                                 "p_mask has shape [2,9] but input_ids has [2,8]")
        cases["shorter_than_the_beam"] = (ids_of(task, length=3), "input_ids has 3 positions but "
                                          "SQuAD 2.0 inputs need at least 5 (start_n_top, "
                                          "end_n_top)")
    if task == "race":
        for count in (0, 3, 5):
            cases[f"{count}_options"] = (
                {name: np.ones((2, count, 8), np.int32) for name in INPUT_NAMES},
                f"RACE needs 4 options per question, got {count} (input_ids has shape "
                f"[2,{count},8])")
    return cases


def texts_of(task: str, batch: int = 2, options_per_question: int = 4,
             **rows: int) -> dict[str, np.ndarray]:
    """serve_text's inputs of ``task``: ``batch`` rows of a short text (RACE: with
    ``options_per_question`` options); ``rows``: {name: rows of that input}, to mismatch."""
    texts = {}
    for name in TEXT_INPUTS[task]:
        count = rows.get(name, batch)
        shape = (count, options_per_question) if name == "options" else (count,)
        texts[name] = np.full(shape, "The cat sat on the mat all day.")
    return texts


def wrong_texts(task: str) -> dict[str, tuple[dict[str, np.ndarray], str]]:
    """{case: (serve_text's inputs, part of the message)} of ``task``'s wrong texts."""
    first, second = TEXT_INPUTS[task][:2]
    cases = {"batch_sizes": (texts_of(task, **{second: 1}),
                             f"{second} has 1 rows but {first} has 2")}
    if task == "race":
        cases["options_rows"] = (texts_of(task, options=3), "options has 3 rows but article has 2")
        for count in (0, 3, 5):
            cases[f"{count}_options"] = (texts_of(task, options_per_question=count),
                                         f"RACE needs 4 options per question, got {count} "
                                         f"(options has shape [2,{count}])")
    return cases


def wrong_calls() -> dict[str, tuple[str, str, dict[str, np.ndarray], str]]:
    """{label: (export, signature, inputs, part of the message)}: the ids cases on serving_default
    of both variants, the text cases on serve_text; RACE's 3 options also through Keras'
    TFSMLayer (the function ``serve``, not the signature)."""
    calls = {}
    for task in TASKS:
        for variant in VARIANTS:
            for case, (inputs, message) in wrong_ids(task).items():
                calls[f"wrong.{task}.{variant}.ids.{case}"] = (f"{task}/{variant}",
                                                               "serving_default", inputs, message)
        for case, (inputs, message) in wrong_texts(task).items():
            calls[f"wrong.{task}.with_text.text.{case}"] = (f"{task}/with_text", "serve_text",
                                                            inputs, message)
    inputs, message = wrong_ids("race")["3_options"]
    calls["wrong.race.ids_only.keras.3_options"] = ("race/ids_only", "keras:serve", inputs, message)
    return calls


def empty_calls() -> dict[str, tuple[str, str, dict[str, np.ndarray], str]]:
    """{label: (export, signature, inputs, label of the real call with the same outputs)}: a batch
    of no example on every signature."""
    calls = {}
    for task in TASKS:
        for variant in VARIANTS:
            calls[f"empty.{task}.{variant}.ids"] = (f"{task}/{variant}", "serving_default",
                                                    ids_of(task, batch=0), task)
        calls[f"empty.{task}.with_text.text"] = (f"{task}/with_text", "serve_text",
                                                 texts_of(task, batch=0), f"{task}_text")
    return calls


WRONG_CALLS, EMPTY_CALLS = wrong_calls(), empty_calls()


@pytest.fixture(scope="module")
def served(exports, en8k, tmp_path_factory):
    """Every signature called on real data, and on the wrong inputs and empty batches above, in
    one fresh process (tensorflow_text imported after the ids-only calls): {label: outputs}."""
    root, _ = exports
    texts, race = glue_texts(), race_raw_questions()
    ids_only = {
        "glue": (root / "glue" / "ids_only", "serving_default", glue_features(en8k, texts)),
        # A SavedModel holding the SentencePiece op does not load without tensorflow_text.
        "glue_with_text": (root / "glue" / "with_text", "serving_default", ids_of("glue")),
        "race": (root / "race" / "ids_only", "serving_default", race_features(en8k)),
        "race_keras": (root / "race" / "ids_only", "keras:serve", race_features(en8k)),
        "squad1": (root / "squad1" / "ids_only", "serving_default",
                   squad_inputs(squad_first_windows(en8k, "1.1")[1], version_2=False)),
        "squad2": (root / "squad2" / "ids_only", "serving_default",
                   squad_inputs(squad_first_windows(en8k, "2.0")[1], version_2=True)),
    }
    with_text = {
        "glue_text": (root / "glue" / "with_text", "serve_text",
                      {"text_a": strings(a for a, _ in texts), "text_b": strings(b for _, b in texts)}),
        "race_text": (root / "race" / "with_text", "serve_text",
                      {"article": strings(q["article"] for q in race),
                       "question": strings(q["question"] for q in race),
                       "options": np.array([q["options"] for q in race], dtype=str)}),
    }
    for name, version in (("squad1", "1.1"), ("squad2", "2.0")):
        for request in SQUAD_REQUESTS:
            examples = squad_examples(version, request)
            with_text[squad_text_label(name, request)] = (
                root / name / "with_text", "serve_text",
                {"question": strings(e.question_text for e in examples),
                 "context": strings(e.paragraph_text for e in examples)})
    with_text["squad2_text_keras"] = (root / "squad2" / "with_text", "keras:serve_text",
                                      with_text["squad2_text"][2])
    for label, (export, signature, inputs, _) in {**WRONG_CALLS, **EMPTY_CALLS}.items():
        calls = with_text if export.endswith("with_text") else ids_only
        calls[label] = (root / export, signature, inputs)
    directory = tmp_path_factory.mktemp("served")
    return serve(directory / "calls", ids_only, with_text)


def softmax(logits: np.ndarray) -> np.ndarray:
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


# -- the layout ---------------------------------------------------------------------------------------

@pytest.mark.subprocess
@pytest.mark.requires_shared_data
def test_layout_keras_loading_and_long_ids(exports, served):
    """ids_only loads with tensorflow alone, with_text needs tensorflow_text; TFSMLayer calls
    ``serve`` / ``serve_text``."""
    root, _ = exports
    assert "error" not in served["glue"] and "error" not in served["race"]
    assert served["race_keras"].keys() == served["race"].keys()
    for key, value in served["race"].items():
        np.testing.assert_array_equal(served["race_keras"][key], value)
    assert served["squad2_text_keras"].keys() == served["squad2_text"].keys()
    for key, value in served["squad2_text"].items():
        np.testing.assert_array_equal(served["squad2_text_keras"][key], value)
    assert "Op type not registered 'Sentencepiece" in str(served["glue_with_text"]["error"])
    for variant in ("ids_only", "with_text"):
        assert (root / "glue" / variant / "assets.extra" / "labels.txt").read_text() == "0\n1\n"


def test_an_export_never_overwrites_and_rejects_bad_lengths(tmp_path):
    model = AlbertMultipleChoiceModel(tiny_config())
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("keep")
    with pytest.raises(FileExistsError, match="not an empty directory"):
        export_multiple_choice(model, str(tmp_path / "taken"), max_seq_length=RACE_SEQ,
                               max_qa_length=RACE_QA)
    assert (tmp_path / "taken" / "file").read_text() == "keep"
    with pytest.raises(ValueError, match="max_qa_length"):
        export_multiple_choice(model, str(tmp_path / "new"), max_seq_length=20, max_qa_length=18)
    with pytest.raises(ValueError, match="max_query_length"):
        export_squad(AlbertSquadModel(tiny_config()), str(tmp_path / "new"), max_seq_length=35)
    assert not (tmp_path / "new").exists()


# -- wrong inputs and empty batches ------------------------------------------------------------------

@pytest.mark.subprocess
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("label", sorted(WRONG_CALLS))
def test_a_wrong_input_is_named_by_the_loaded_graph(served, label):
    """Each check runs in the SavedModel loaded without albert_tf, before the model: the error is
    the check's, whatever the model would have done (failed in a Reshape, or answered)."""
    error = str(served[label].get("error", ""))
    assert error.startswith("InvalidArgumentError"), (label, sorted(served[label]))
    assert f"assertion failed: [{WRONG_CALLS[label][3]}" in error, error[:600]


@pytest.mark.subprocess
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("label", sorted(EMPTY_CALLS))
def test_an_empty_batch_gives_empty_outputs(served, label):
    outputs, real = served[label], served[EMPTY_CALLS[label][3]]
    assert "error" not in outputs, outputs.get("error")
    assert set(outputs) == set(real)
    for key, value in outputs.items():
        if key != "threshold":  # a scalar
            assert value.shape[0] == 0 and value.ndim == real[key].ndim, (key, value.shape)


# -- GLUE -----------------------------------------------------------------------------------------------

@pytest.mark.subprocess
@pytest.mark.requires_shared_data
def test_glue_export_equals_the_keras_model_and_the_python_features(exports, served, en8k):
    _, models = exports
    features = glue_features(en8k, glue_texts())
    logits = models["glue"](features, training=False)["logits"].numpy()
    for label in ("glue", "glue_text"):
        assert_close(served[label]["probabilities"], softmax(logits))
        np.testing.assert_array_equal(served[label]["predictions"], logits.argmax(-1))
        assert float(served[label]["threshold"]) == 0.25
    ids = served["glue_text"]["input_ids"]
    np.testing.assert_array_equal(padded(ids, GLUE_SEQ), features["input_ids"])
    assert ids.shape[1] == GLUE_SEQ  # the Wikipedia pairs were truncated to the sequence length


# -- RACE -----------------------------------------------------------------------------------------------

@pytest.mark.subprocess
@pytest.mark.requires_shared_data
def test_race_export_equals_the_keras_model_and_the_python_features(exports, served, en8k):
    _, models = exports
    features = race_features(en8k)
    assert features["input_ids"].shape == (31, 4, RACE_SEQ)
    assert features["input_mask"][:, :, -1].all()  # every article was cut
    probabilities = softmax(models["race"](features, training=False)["logits"].numpy())
    for label in ("race", "race_text"):
        assert_close(served[label]["probabilities"], probabilities)
        # The served prediction is the arg-max of the served probabilities (which equal the Keras
        # model's): a random encoder can leave two options within float rounding of each other,
        # so comparing with the Keras arg-max would test the rounding.
        np.testing.assert_array_equal(served[label]["predictions"],
                                      served[label]["probabilities"].argmax(-1))
    ids = served["race_text"]["input_ids"]
    np.testing.assert_array_equal(ids, features["input_ids"][:, :, :ids.shape[2]])


def test_fill_in_options_is_the_readers_rule():
    questions = ["the cat is _ .", "_ and _", "why?", "", "_"]
    options = [["a", "b c", "", "_"]] * len(questions)
    filled = fill_in_options(tf.constant(questions), tf.constant(options)).numpy()
    assert [[text.decode() for text in row] for row in filled] == [
        [fill_in_option(q, o) for o in row] for q, row in zip(questions, options)]


# -- SQuAD ----------------------------------------------------------------------------------------------

@pytest.mark.subprocess
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("request_name", SQUAD_REQUESTS)
@pytest.mark.parametrize("name, version", [("squad1", "1.1"), ("squad2", "2.0")])
def test_squad_export_equals_the_keras_model_and_the_python_features(exports, served, en8k, name,
                                                                      version, request_name):
    """serve_text packs a request to its longest row, L (SQuAD 2.0: at least its beam, 5), not to
    S: ``input_ids``, the spans and the per-position outputs are [B, L], and every output at the
    real positions is the Keras model's on the Python features' first windows padded to S (floats
    within 1e-5, top-k indices equal). The sample's ids (padded to S) through serving_default too.
    """
    _, models = exports
    examples, windows = squad_first_windows(en8k, version, request_name)
    inputs = squad_inputs(windows, version_2=name == "squad2")
    longest = int(inputs["input_mask"].sum(1).max())
    length = max(longest, min_positions(models[name]))  # SQuAD 2.0: the beam, 5
    assert {"sample": longest == SQUAD_SEQ,  # some contexts were cut after the first window
            "short": longest < SQUAD_SEQ and not inputs["input_mask"][:, longest - 1].all(),
            "tiny": longest == 4}[request_name]
    expected = {key: value.numpy() for key, value in models[name](inputs, training=False).items()}
    label = squad_text_label(name, request_name)
    text = served[label]
    for key in ("input_ids", "char_start", "char_end"):
        assert text[key].shape == (len(examples), length), key
    np.testing.assert_array_equal(text["input_ids"], inputs["input_ids"][:, :length])
    # {label: the positions of its per-position outputs}; serving_default: the ids as given.
    calls = {label: length, **({name: SQUAD_SEQ} if request_name == "sample" else {})}
    for served_label, seq in calls.items():
        outputs = served[served_label]
        keys = set(outputs) - {"input_ids", "char_start", "char_end"}
        assert keys == set(V1_OUTPUTS) if name == "squad1" else {
            "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
            "cls_logits"}
        for key in keys:
            want = expected[key][:, :seq] if key in V1_OUTPUTS else expected[key]
            assert outputs[key].shape == want.shape, (key, outputs[key].shape, want.shape)
            if key.endswith("_index"):
                np.testing.assert_array_equal(outputs[key], want)
            else:
                assert_close(outputs[key], want)
    # Each context token's span cuts the text the reference's offsets cut (stripped).
    for example, window, starts, ends in zip(examples, windows, text["char_start"], text["char_end"]):
        positions = np.flatnonzero(starts >= 0)
        assert positions.tolist() == list(range(window.doc_offset,
                                                window.doc_offset + len(positions)))
        context = example.paragraph_text
        assert [context[s:e].strip() for s, e in zip(starts[positions], ends[positions])] == [
            context[s:e + 1].strip() for s, e in zip(window.tok_start_to_orig_index,
                                                     window.tok_end_to_orig_index)]


@pytest.mark.subprocess
@pytest.mark.requires_shared_data
@pytest.mark.parametrize("request_name", ["sample", "short"])
@pytest.mark.parametrize("name, version", [("squad1", "1.1"), ("squad2", "2.0")])
def test_squad_postprocessing_of_the_text_outputs_is_the_references(served, en8k, name, version,
                                                                    request_name):
    examples, windows = squad_first_windows(en8k, version, request_name)
    outputs = served[squad_text_label(name, request_name)]
    ours = postprocess_text_outputs([e.qas_id for e in examples],
                                    [e.paragraph_text for e in examples], outputs,
                                    n_best_size=20, max_answer_length=30)
    # The reference's post-processing on the Python features' windows and the export's scores.
    features = [postprocessing.WindowMetadata(
        unique_id=i, example_index=i, doc_offset=w.doc_offset,
        tok_start_to_orig_index=tuple(w.tok_start_to_orig_index),
        tok_end_to_orig_index=tuple(w.tok_end_to_orig_index),
        max_context=np.ones(len(w.tok_start_to_orig_index), bool)) for i, w in enumerate(windows)]
    reference_examples = [postprocessing.Question(e.qas_id, e.paragraph_text)
                          for e in examples]
    if name == "squad1":
        results = [postprocessing.V1RawResult(i, outputs["start_logits"][i],
                                              outputs["end_logits"][i])
                   for i in range(len(windows))]
        reference = postprocessing.postprocess_v1(reference_examples, features, results)
        assert ours.predictions == reference.predictions
    else:
        results = [postprocessing.V2RawResult(i, *(outputs[key][i] for key in (
            "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
            "cls_logits"))) for i in range(len(windows))]
        reference = postprocessing.postprocess_v2(reference_examples, features, results)
        assert ours.best_texts == reference.best_texts and ours.null_odds == reference.null_odds
    assert ours.nbest == reference.nbest
    assert sum(len(entries) for entries in ours.nbest.values()) > 3 * len(examples)


def test_squad_postprocessing_without_context_tokens_and_bad_rows():
    outputs = {"start_logits": np.zeros((1, 6)), "end_logits": np.zeros((1, 6)),
               "char_start": np.full((1, 6), -1), "char_end": np.full((1, 6), -1)}
    result = postprocess_text_outputs(["q"], ["   "], outputs)
    assert result.predictions == {"q": "empty"}  # the reference's answer without a window
    with pytest.raises(postprocessing.SquadPostprocessingError, match="2 question ids"):
        postprocess_text_outputs(["q", "r"], ["a", "b"], outputs)


# -- character spans ------------------------------------------------------------------------------------

def span_texts(tokenizer: FullTokenizer, texts: list[str]):
    """Per text: (its ids, the stripped text of each token's span, the reference's) ."""
    spans = SpanTokenizer(tokenizer)(tf.constant(texts))
    rows = zip(texts, *(spans[key].to_list() for key in ("ids", "char_start", "char_end")))
    for text, ids, starts, ends in rows:
        paragraph = tokenize_paragraph(text, tokenizer.sp_model, tokenizer.do_lower_case)
        ours = [text[s:e].strip() for s, e in zip(starts, ends)]
        reference = [text[s:e + 1].strip() for s, e in zip(paragraph.tok_start_to_orig_index,
                                                            paragraph.tok_end_to_orig_index)]
        yield text, ids, ours, reference, paragraph.piece_ids


@pytest.mark.requires_shared_data
def test_spans_cut_the_references_texts_on_wikipedia_and_special_characters(en8k):
    with open(os.path.join(SHARED_DATA_DIR, "corpus", "wiki_00.txt"), encoding="utf-8") as handle:
        texts = [line for line in handle.read().splitlines() if line.strip()]
    texts.append("  Café\tNAÏVE ﬁne  ΟΔΟΣ in 30, days; x$45, ok ☃ Ⅻ\u00a0end e\u0301 \u02dc b ")
    dummy_prefixes = 0
    for text, ids, ours, reference, piece_ids in span_texts(en8k, texts):
        assert ids == en8k.encode_text(text) == piece_ids, text
        assert ours == reference, text
        # A lone "▁" first (before "<doc" or "Gender"): the reference's first character.
        dummy_prefixes += ids[0] == en8k.sp_model.PieceToId("▁") and ours[0] != ""
    assert dummy_prefixes >= 5


@pytest.mark.requires_shared_data
def test_spans_of_digit_comma_sub_pieces():
    german = FullTokenizer(spm_model_file=GERMAN_30K_MODEL, do_lower_case=True)
    texts = ["Im Jahr 2014, kam er.", "Die Saison 1997/12, und am 03/12, und 5/07, 6/09,"]
    cut = set()
    for text, ids, ours, reference, _ in span_texts(german, texts):
        assert ids == german.encode_text(text)
        assert len(ids) > len(german.sp_model.EncodeAsIds(text.lower()))  # the rule split pieces
        assert ours == reference
        cut.update(ours)
    assert {"2014", "12", "09", ","} <= cut  # sub-pieces of "▁2014," and "/09," without the comma


# -- the scripts ----------------------------------------------------------------------------------------

def run_script(script: str, *args: str):
    result = run_command(script, *args)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def best_checkpoint_model(model, output_dir):
    tf.train.Checkpoint(model=model).read(str(output_dir / "model.ckpt-best")).expect_partial()
    return model


@pytest.mark.subprocess
@pytest.mark.requires_shared_data
def test_run_race_exports_the_best_checkpoint(tmp_path, en8k, task_runs):
    """The harness's RACE run (two steps, the sweep, --export_dir): the text signature of its
    export gives the Keras model of its model.ckpt-best."""
    run = task_runs.get("race")
    output_dir, export_dir = run.output_dir, run.export_dir
    assert f"to {export_dir}" in run.result.stdout
    race = race_raw_questions()[:5]
    (outputs,) = serve(tmp_path / "served", {}, {"race": (
        export_dir / "with_text", "serve_text",
        {"article": strings(q["article"] for q in race), "question": strings(q["question"] for q in race),
         "options": np.array([q["options"] for q in race], dtype=str)})}).values()
    model = best_checkpoint_model(AlbertMultipleChoiceModel(tiny_config()), output_dir)
    features = {key: value[:5] for key, value in race_features(en8k).items()}
    assert_close(outputs["probabilities"],
                 softmax(model(features, training=False)["logits"].numpy()))


@pytest.mark.subprocess
@pytest.mark.requires_shared_data
def test_run_squad_exports_the_best_checkpoint(tmp_path, en8k):
    """--export_dir alone exports an output_dir's model.ckpt-best (here a v2 model's, written as a
    sweep leaves it)."""
    config = tmp_path / "config.json"
    config.write_text(tiny_config().to_json_string())
    output_dir, export_dir = tmp_path / "out", tmp_path / "export"
    model = spread_heads(AlbertSquadModel(tiny_config(), version_2=True))
    output_dir.mkdir()
    tf.train.Checkpoint(model=model).write(str(output_dir / "model.ckpt-best"))
    result = run_script("run_squad.py", f"--albert_config_file={config}",
                        f"--spm_model_file={EN8K_MODEL}", f"--output_dir={output_dir}",
                        "--version_2_with_negative", f"--max_seq_length={SQUAD_SEQ}",
                        f"--max_query_length={SQUAD_QUERY}", f"--export_dir={export_dir}")
    assert f"to {export_dir}" in result.stdout
    examples, windows = squad_first_windows(en8k, "2.0")
    (outputs,) = serve(tmp_path / "served", {}, {"squad": (
        export_dir / "with_text", "serve_text",
        {"question": strings(e.question_text for e in examples),
         "context": strings(e.paragraph_text for e in examples)})}).values()
    expected = model(squad_inputs(windows, version_2=True), training=False)
    np.testing.assert_array_equal(outputs["end_top_index"], expected["end_top_index"])
    for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
        assert_close(outputs[key], expected[key].numpy())
