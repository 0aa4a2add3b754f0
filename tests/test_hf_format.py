"""The Hugging Face format without PyTorch: names and layouts, the albert_tf -> HF -> albert_tf round
trip, ``python -m albert_tf.convert_checkpoint --to=huggingface`` / ``--hf_checkpoint``, and what the
format refuses. What transformers and keras-hub compute from such a directory:
tests/test_hf_interop.py."""

import json
import os

import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf

from albert_tf.checkpoints.conversion import ConversionError, check_hf_output_dir, to_huggingface
from albert_tf.checkpoints.hf_format import (is_hf_directory, load_hf_checkpoint, read_hf_config,
                                             write_hf_directory)
from albert_tf.checkpoints.hf_names import (HuggingFaceFormatError, albert_config_from_hf,
                                            check_representable, hf_config_dict)
from albert_tf.checkpoints.report import CheckpointMismatchError
from albert_tf.checkpoints.tf1_names import tf1_variable_map
from albert_tf.checkpoints.warm_start import (HUGGING_FACE, load_checkpoint,
                                              resolve_checkpoint_source)
from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import AlbertModel
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from tests import numpy_albert, spm_fixtures
from tests.command_runner import run_command
from tests.shared_setup import (REFERENCE_MAX_PREDICTIONS, REFERENCE_SEQ_LENGTH, randomized,
                                tiny_config)
from tests.tf1_fixtures import write_reference_checkpoint


def small_config(**overrides):
    """3 layers in 2 groups of 2 inner blocks: every index of the HF names is exercised."""
    values = dict(vocab_size=40, embedding_size=8, hidden_size=12, num_hidden_layers=3,
                  num_hidden_groups=2, inner_group_num=2, num_attention_heads=3,
                  intermediate_size=16, max_position_embeddings=12)
    values.update(overrides)
    return AlbertConfig.from_dict(values)



def weights_of(model):
    return {name: variable.numpy() for name, variable in tf1_variable_map(model).items()}


def read_safetensors(directory):
    with open(os.path.join(directory, "model.safetensors"), "rb") as handle:
        return safetensors.numpy.load(handle.read())


def test_pretraining_model_round_trips_with_the_formats_names_and_layouts(tmp_path):
    cfg = small_config()
    model = randomized(AlbertPretrainingModel(cfg), stddev=0.5)
    count = write_hf_directory(model, str(tmp_path / "hf"))
    tensors = read_safetensors(tmp_path / "hf")
    assert count == len(tensors) == len(tf1_variable_map(model))
    # Dense kernels are transposed (torch Linear [out, in]); tables and the SOP weights are not.
    block = model.albert.transformer.groups[1][1]
    prefix = "albert.encoder.albert_layer_groups.1.albert_layers.1."
    np.testing.assert_array_equal(tensors[prefix + "attention.query.weight"],
                                  block.query.kernel.numpy().T)
    np.testing.assert_array_equal(tensors[prefix + "ffn_output.weight"],
                                  block.ffn_output.kernel.numpy().T)
    np.testing.assert_array_equal(tensors[prefix + "full_layer_layer_norm.weight"],
                                  block.ffn_layer_norm.gamma.numpy())
    np.testing.assert_array_equal(tensors["albert.embeddings.word_embeddings.weight"],
                                  model.albert.embeddings.word_embeddings.numpy())
    np.testing.assert_array_equal(tensors["sop_classifier.classifier.weight"],
                                  model.sop_head.output_weights.numpy())
    np.testing.assert_array_equal(tensors["predictions.bias"], model.mlm_head.output_bias.numpy())
    assert "predictions.decoder.weight" not in tensors  # tied to the word embeddings
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["AlbertForPreTraining"] and config["model_type"] == "albert"
    assert config["hidden_act"] == "gelu_new" and config["layer_norm_eps"] == 1e-12
    assert config["tie_word_embeddings"] is True
    assert (config["num_hidden_groups"], config["inner_group_num"]) == (2, 2)
    assert is_hf_directory(str(tmp_path / "hf"))

    back = AlbertPretrainingModel(read_hf_config(str(tmp_path / "hf")))
    report = load_checkpoint(back, resolve_checkpoint_source(str(tmp_path / "hf")))
    assert report.kind == "Hugging Face" and report.missing == [] and report.unused == []
    assert len(report.loaded) == len(tf1_variable_map(model))
    expected = weights_of(model)
    for name, value in weights_of(back).items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_encoder_with_e_equal_h_gets_an_identity_projection_and_round_trips(tmp_path):
    cfg = small_config(embedding_size=12)
    encoder = randomized(AlbertModel(cfg), stddev=0.5)
    assert encoder.embedding_projection is None
    write_hf_directory(encoder, str(tmp_path / "hf"))
    tensors = read_safetensors(tmp_path / "hf")
    np.testing.assert_array_equal(
        tensors["albert.encoder.embedding_hidden_mapping_in.weight"], np.eye(12))
    assert not np.any(tensors["albert.encoder.embedding_hidden_mapping_in.bias"])
    assert not any(key.startswith(("predictions.", "sop_")) for key in tensors)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["AlbertModel"]

    classifier = AlbertClassifierModel(cfg, 3)
    report = load_hf_checkpoint(classifier, str(tmp_path / "hf"))
    assert report.unused == [] and report.missing == ["output_weights", "output_bias"]
    report.require_complete_encoder()
    expected = weights_of(encoder)
    for name, value in weights_of(classifier.albert).items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)

    # A projection other than the identity cannot be held by a model without one.
    tensors["albert.encoder.embedding_hidden_mapping_in.weight"] = 2 * np.eye(12, dtype=np.float32)
    safetensors.numpy.save_file(tensors, str(tmp_path / "hf" / "model.safetensors"),
                                metadata={"format": "pt"})
    before = weights_of(classifier)
    with pytest.raises(CheckpointMismatchError, match="is not the identity"):
        load_hf_checkpoint(randomized(classifier, seed=1, stddev=0.5), str(tmp_path / "hf"))
    assert not np.array_equal(weights_of(classifier)["bert/pooler/dense/kernel"],
                              before["bert/pooler/dense/kernel"])  # randomized, then untouched
    changed = weights_of(randomized(classifier, seed=1, stddev=0.5))
    with pytest.raises(CheckpointMismatchError):
        load_hf_checkpoint(classifier, str(tmp_path / "hf"))
    for name, value in weights_of(classifier).items():
        np.testing.assert_array_equal(value, changed[name])  # refused before any assignment


def test_what_the_format_cannot_represent_is_refused(tmp_path):
    with pytest.raises(HuggingFaceFormatError, match="cross_layer_sharing 'attention'"):
        write_hf_directory(AlbertModel(small_config(cross_layer_sharing="attention")),
                           str(tmp_path / "shared"))
    assert not (tmp_path / "shared").exists()
    # transformers maps layer l to group int(l / (L / G)); the reference int(l / L * G).
    with pytest.raises(HuggingFaceFormatError, match="num_hidden_layers 22 with num_hidden_groups "
                                                     "22.*layer 15 in group 15.*group 14"):
        check_representable(AlbertConfig.from_dict(dict(vocab_size=4, num_hidden_layers=22,
                                                        num_hidden_groups=22)))
    check_representable(AlbertConfig.from_dict(dict(vocab_size=4, num_hidden_layers=24,
                                                    num_hidden_groups=24)))
    values = hf_config_dict(small_config(), True, 0, 2, 3)
    assert albert_config_from_hf(values, "c").to_dict() == small_config().to_dict()
    for change, message in (({"hidden_act": "gelu"}, "exact erf GELU"),
                            ({"layer_norm_eps": 1e-5}, "layer_norm_eps 1e-05"),
                            ({"position_embedding_type": "relative_key"}, "absolute"),
                            ({"model_type": "bert"}, "model_type 'bert'")):
        with pytest.raises(HuggingFaceFormatError, match=message):
            albert_config_from_hf({**values, **change}, "c")


def test_a_config_json_that_computes_another_model_is_refused(tmp_path):
    model = randomized(AlbertPretrainingModel(small_config()), stddev=0.5)
    write_hf_directory(model, str(tmp_path / "hf"))
    # Same weight shapes, another model: 4 layers over the same 2 groups.
    with pytest.raises(CheckpointMismatchError,
                       match=r"model of c\.json: .*num_hidden_layers 3 \(the model.s: 4\)"):
        load_hf_checkpoint(AlbertPretrainingModel(small_config(num_hidden_layers=4)),
                           str(tmp_path / "hf"), config_file="c.json")
    with pytest.raises(CheckpointMismatchError,
                       match=r"mapping_in/kernel has shape \(8, 12\).*expects \(8, 6\)"):
        load_hf_checkpoint(AlbertPretrainingModel(small_config(hidden_size=6)),
                           str(tmp_path / "hf"))
    # Growing 2 groups into 3 from group 0, as for the other formats.
    grown = AlbertPretrainingModel(small_config(num_hidden_groups=3))
    report = load_hf_checkpoint(grown, str(tmp_path / "hf"), init_from_group0=True)
    grown_names = {name: source for name, source in report.loaded.items() if name != source}
    assert report.missing == [] and report.unused == [] and grown_names
    assert all("/group_2/" in name and "/group_0/" in source
               for name, source in grown_names.items())
    # An untied MLM decoder is not albert_tf's.
    tensors = read_safetensors(tmp_path / "hf")
    tensors["predictions.decoder.weight"] = tensors["albert.embeddings.word_embeddings.weight"] + 1
    safetensors.numpy.save_file(tensors, str(tmp_path / "hf" / "model.safetensors"),
                                metadata={"format": "pt"})
    with pytest.raises(CheckpointMismatchError, match="predictions.decoder.weight differs"):
        load_hf_checkpoint(AlbertPretrainingModel(small_config()), str(tmp_path / "hf"))


def test_output_directory_and_heads_the_format_lacks(tmp_path, capsys):
    cfg = small_config()
    classifier = randomized(AlbertClassifierModel(cfg, 3), stddev=0.5)
    prefix = tf.train.Checkpoint(model=classifier).write(str(tmp_path / "run" / "model.ckpt-1"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConversionError, match="holds other files"):
        to_huggingface(AlbertClassifierModel(cfg, 3), prefix, "checkpoint", str(tmp_path / "other"))
    with pytest.raises(HuggingFaceFormatError, match="holds other files"):
        write_hf_directory(classifier, str(tmp_path / "other"))
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
    to_huggingface(AlbertClassifierModel(cfg, 3), prefix, "checkpoint", str(tmp_path / "hf"))
    out = capsys.readouterr().out
    assert "pretraining heads only): output_weights, output_bias." in out
    # 3 layers over 2 groups: keras-hub would run 1 layer per group.
    assert "keras-hub's AlbertBackbone loads" in out and "runs 1 layer(s) per group" in out
    tensors = read_safetensors(tmp_path / "hf")
    assert not any("classifier" in key for key in tensors)
    with pytest.raises(ConversionError, match="pass --overwrite"):
        check_hf_output_dir(str(tmp_path / "hf"), overwrite=False)
    check_hf_output_dir(str(tmp_path / "hf"), overwrite=True)
    # What the scripts resolve --init_checkpoint to.
    assert resolve_checkpoint_source(str(tmp_path / "hf")).kind == HUGGING_FACE


def test_a_reference_checkpoint_converts_to_huggingface(tmp_path):
    cfg = small_config()
    values = write_reference_checkpoint(str(tmp_path / "ref" / "model.ckpt"),
                                        numpy_albert.reference_variable_shapes(cfg))
    read, count = to_huggingface(AlbertPretrainingModel(cfg), str(tmp_path / "ref"),
                                 "tf1_checkpoint", str(tmp_path / "hf"))
    assert read.startswith(str(tmp_path / "ref" / "model.ckpt")) and count == len(values)
    tensors = read_safetensors(tmp_path / "hf")
    prefix = "albert.encoder.albert_layer_groups.1.albert_layers.0."
    np.testing.assert_array_equal(
        tensors[prefix + "attention.dense.weight"],
        values["bert/encoder/transformer/group_1/inner_group_0/attention_1/output/dense/kernel"].T)
    np.testing.assert_array_equal(tensors["predictions.LayerNorm.bias"],
                                  values["cls/predictions/transform/LayerNorm/beta"])
    back = AlbertPretrainingModel(cfg)
    assert not load_checkpoint(back, resolve_checkpoint_source(str(tmp_path / "hf"))).missing
    for name, value in weights_of(back).items():
        np.testing.assert_array_equal(value, values[name], err_msg=name)


def run_converter(*args, check=True):
    result = run_command("-m albert_tf.convert_checkpoint", *args)
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_conversion_command_to_huggingface_and_back(tmp_path):
    spm_model = spm_fixtures.cached_tiny_spm()
    cfg = small_config(vocab_size=FullTokenizer(spm_model_file=spm_model).vocab_size)
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(cfg.to_json_string())
    model = randomized(AlbertPretrainingModel(cfg), stddev=0.5)
    tf.train.Checkpoint(model=model).write(str(tmp_path / "run" / "model.ckpt-5"))

    out = run_converter(f"--albert_config_file={config_file}",
                        f"--checkpoint={tmp_path / 'run' / 'model.ckpt-5'}", "--to=huggingface",
                        f"--spm_model_file={spm_model}", "--nodo_lower_case",
                        f"--output_dir={tmp_path / 'hf'}").stdout
    assert "missing from the checkpoint (0)" in out and "with the tokenizer of" in out
    assert sorted(os.listdir(tmp_path / "hf")) == ["config.json", "model.safetensors",
                                                   "spiece.model", "tokenizer.json",
                                                   "tokenizer_config.json"]
    tokenizer = FullTokenizer(spm_model_file=spm_model)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (config["bos_token_id"], config["eos_token_id"]) == (tokenizer.cls_id,
                                                                tokenizer.sep_id)
    assert config["pad_token_id"] == tokenizer.vocab["<pad>"]
    tokenizer_config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert tokenizer_config["do_lower_case"] is False
    assert tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast"  # loads tokenizer.json

    out = run_converter(f"--hf_checkpoint={tmp_path / 'hf'}",
                        f"--output_dir={tmp_path / 'back'}").stdout
    assert "Hugging Face checkpoint" in out and "missing from the checkpoint (0)" in out
    assert AlbertConfig.from_json_file(str(tmp_path / "back" / "albert_config.json")).to_dict() \
        == cfg.to_dict()
    assert (tmp_path / "back" / "spiece.model").read_bytes() == open(spm_model, "rb").read()
    back = AlbertPretrainingModel(cfg)
    report = load_checkpoint(back, resolve_checkpoint_source(str(tmp_path / "back")))
    assert report.kind == "albert_tf" and not report.missing
    expected = weights_of(model)
    for name, value in weights_of(back).items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)



@pytest.mark.parametrize("args, message", [
    (["--hf_checkpoint=hf", "--to=reference"], "--hf_checkpoint converts to albert_tf only"),
    (["--hf_checkpoint=hf", "--head=race"], "carries the pretraining heads only"),
    (["--checkpoint=run", "--to=huggingface"], "--albert_config_file is required"),
    (["--checkpoint=run", "--to=albert_tf", "--albert_config_file=c.json"], "converts nothing"),
    (["--checkpoint=run", "--hf_checkpoint=hf"], "Give exactly one of"),
])
def test_conversion_command_refuses_flag_combinations_before_loading(tmp_path, args, message):
    result = run_converter(*args, f"--output_dir={tmp_path / 'out'}", check=False)
    assert result.returncode == 1 and message in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_run_pretraining_warm_starts_from_a_huggingface_directory(tmp_path, pretraining_records):
    cfg = tiny_config()
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(cfg.to_json_string())
    write_hf_directory(randomized(AlbertPretrainingModel(cfg), stddev=0.5), str(tmp_path / "hf"))
    result = run_command(
        "run_pretraining.py", f"--albert_config_file={config_file}",
        f"--input_file={pretraining_records}", f"--output_dir={tmp_path / 'run'}",
        f"--init_checkpoint={tmp_path / 'hf'}", f"--max_seq_length={REFERENCE_SEQ_LENGTH}",
        f"--max_predictions_per_seq={REFERENCE_MAX_PREDICTIONS}", "--train_batch_size=4",
        "--num_train_steps=1", "--num_warmup_steps=0", "--save_checkpoints_steps=1")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert f"from Hugging Face checkpoint {tmp_path / 'hf'}" in output
    assert "missing from the checkpoint (0)" in output
    assert (tmp_path / "run" / "model.ckpt-1.index").exists()
