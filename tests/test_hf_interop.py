"""What other libraries compute from albert_tf's Hugging Face directories, and albert_tf from theirs.

- ``transformers`` (PyTorch, CPU) loads an exported directory as it is, with
  ``AlbertForPreTraining`` / ``AlbertModel`` / ``AutoTokenizer``, and computes albert_tf's outputs
  on a padded batch (sequence, pooled, MLM and SOP logits) to 1e-4;
- keras-hub's ``AlbertBackbone.from_preset(directory)`` loads it and computes its sequence output;
- a directory written by transformers' own ``save_pretrained`` warm-starts albert_tf as
  ``--init_checkpoint`` (the Trainer's warm start) and computes transformers' outputs.

With tests/test_hf_tokenizer.py (the tokenizer on real text), the only test module that imports
torch, transformers and keras-hub (test-only dependencies).
"""

import copy
import os

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from albert_tf.checkpoints.hf_format import write_hf_directory
from albert_tf.checkpoints.hf_names import HuggingFaceFormatError
from albert_tf.checkpoints.warm_start import load_checkpoint, resolve_checkpoint_source
from albert_tf.models.config import AlbertConfig
from albert_tf.models.encoder import AlbertModel
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tasks.pretraining.task import PretrainingTask
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.training import optimization
from albert_tf.training.trainer import RunConfig, Trainer
from tests import spm_fixtures
from tests.shared_setup import randomized

TOLERANCE = 1e-4
SEQ = 9


def small_config(vocab_size, **overrides):
    """4 layers in 2 groups of 2 inner blocks (keras-hub needs groups that divide the layers)."""
    values = dict(vocab_size=vocab_size, embedding_size=8, hidden_size=16, num_hidden_layers=4,
                  num_hidden_groups=2, inner_group_num=2, num_attention_heads=2,
                  intermediate_size=24, max_position_embeddings=12)
    values.update(overrides)
    return AlbertConfig.from_dict(values)



def padded_batch(vocab_size):
    """ids, mask, segments int32 [3, SEQ]: a full pair, a short pair padded, a single sentence."""
    rng = np.random.default_rng(3)
    ids = rng.integers(5, vocab_size, (3, SEQ)).astype(np.int32)
    mask = np.array([[1] * 9, [1] * 6 + [0] * 3, [1] * 4 + [0] * 5], np.int32)
    segments = np.array([[0] * 5 + [1] * 4, [0] * 3 + [1] * 3 + [0] * 3, [0] * 9], np.int32)
    ids[mask == 0] = 0
    return ids, mask, segments


def albert_tf_outputs(model, ids, mask, segments):
    positions = np.tile(np.arange(SEQ, dtype=np.int32), (len(ids), 1))  # every position
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    if isinstance(model, AlbertPretrainingModel):
        inputs["masked_lm_positions"] = positions
    return {key: value.numpy() for key, value in model(inputs).items()
            if key != "encoder_outputs"}


def torch_outputs(directory_or_model, ids, mask, segments):
    """transformers' outputs, named as albert_tf's: sequence and pooled output (AlbertModel), MLM
    logits at every position and SOP logits (AlbertForPreTraining)."""
    pretraining = (transformers.AlbertForPreTraining.from_pretrained(directory_or_model)
                   if isinstance(directory_or_model, str) else directory_or_model).eval()
    arguments = dict(input_ids=torch.tensor(ids, dtype=torch.long),
                     attention_mask=torch.tensor(mask, dtype=torch.long),
                     token_type_ids=torch.tensor(segments, dtype=torch.long))
    with torch.no_grad():
        heads = pretraining(**arguments)
        encoder = pretraining.albert(**arguments)
    return {"sequence_output": encoder.last_hidden_state.numpy(),
            "pooled_output": encoder.pooler_output.numpy(),
            "mlm_logits": heads.prediction_logits.numpy(), "sop_logits": heads.sop_logits.numpy()}


def assert_close(ours, theirs, keys):
    for key in keys:
        difference = np.max(np.abs(ours[key] - theirs[key]))
        assert difference <= TOLERANCE, f"{key}: max difference {difference}"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(albert_tf pretraining model, its Hugging Face directory with a lower-casing tokenizer)."""
    spm_model = spm_fixtures.cached_tiny_spm()
    cfg = small_config(FullTokenizer(spm_model_file=spm_model).vocab_size)
    model = randomized(AlbertPretrainingModel(cfg))
    directory = str(tmp_path_factory.mktemp("hf") / "albert")
    write_hf_directory(model, directory, spm_model_file=spm_model, do_lower_case=True)
    return model, directory


def test_transformers_computes_albert_tfs_outputs_on_a_padded_batch(exported):
    model, directory = exported
    batch = padded_batch(model.config.vocab_size)
    ours, theirs = albert_tf_outputs(model, *batch), torch_outputs(directory, *batch)
    assert_close(ours, theirs, ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"))
    encoder = transformers.AlbertModel.from_pretrained(directory).eval()
    with torch.no_grad():
        alone = encoder(input_ids=torch.tensor(batch[0], dtype=torch.long),
                        attention_mask=torch.tensor(batch[1], dtype=torch.long),
                        token_type_ids=torch.tensor(batch[2], dtype=torch.long))
    assert_close(ours, {"sequence_output": alone.last_hidden_state.numpy()}, ["sequence_output"])


def test_transformers_tokenizer_of_the_directory_encodes_as_albert_tf(exported):
    _, directory = exported
    tokenizer = FullTokenizer(spm_model_file=os.path.join(directory, "spiece.model"),
                              do_lower_case=True)
    theirs = transformers.AutoTokenizer.from_pretrained(directory)
    for text in ("Hello World, Café déjà VU: it's great!", "The SECOND  sentence."):
        ids = [tokenizer.cls_id] + tokenizer.encode_text(text) + [tokenizer.sep_id]
        assert theirs(text)["input_ids"] == ids


def test_an_encoder_with_e_equal_h_computes_the_same_through_the_identity_projection(tmp_path):
    cfg = small_config(50, embedding_size=16)
    encoder = randomized(AlbertModel(cfg), seed=4)
    write_hf_directory(encoder, str(tmp_path / "hf"))
    batch = padded_batch(cfg.vocab_size)
    theirs = transformers.AlbertModel.from_pretrained(str(tmp_path / "hf")).eval()
    with torch.no_grad():
        out = theirs(input_ids=torch.tensor(batch[0], dtype=torch.long),
                     attention_mask=torch.tensor(batch[1], dtype=torch.long),
                     token_type_ids=torch.tensor(batch[2], dtype=torch.long))
    assert_close(albert_tf_outputs(encoder, *batch),
                 {"sequence_output": out.last_hidden_state.numpy(),
                  "pooled_output": out.pooler_output.numpy()},
                 ("sequence_output", "pooled_output"))


def test_keras_hub_backbone_loads_the_directory_as_it_is(exported):
    import keras_hub

    model, directory = exported
    backbone = keras_hub.models.AlbertBackbone.from_preset(directory)
    ids, mask, segments = padded_batch(model.config.vocab_size)
    theirs = backbone({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    ours = albert_tf_outputs(model, ids, mask, segments)
    assert_close(ours, {"sequence_output": np.asarray(theirs["sequence_output"])},
                 ["sequence_output"])


def random_transformers_model():
    """A tiny random AlbertForPreTraining, every parameter drawn (LayerNorm and biases too)."""
    torch.manual_seed(0)
    config = transformers.AlbertConfig(
        vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=3, num_hidden_groups=2,
        inner_group_num=2, num_attention_heads=2, intermediate_size=24,
        max_position_embeddings=12, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.AlbertForPreTraining(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3)
    return model


def test_a_directory_saved_by_transformers_warm_starts_albert_tf(tmp_path):
    theirs = random_transformers_model()
    theirs.save_pretrained(str(tmp_path / "hf"))
    batch = padded_batch(60)
    expected = torch_outputs(theirs, *batch)

    cfg = small_config(60, num_hidden_layers=3)
    run = RunConfig(output_dir=str(tmp_path / "run"), train_batch_size=2, num_train_steps=1,
                    save_checkpoints_steps=1, iterations_per_loop=1)
    trainer = Trainer(tf.distribute.get_strategy(), PretrainingTask(cfg),
                      lambda: optimization.create_optimizer("adamw", learning_rate=1e-3,
                                                            num_train_steps=1,
                                                            num_warmup_steps=0),
                      run, log=lambda message: None)
    # --init_checkpoint's path
    message = trainer.initialize(init_checkpoint=resolve_checkpoint_source(str(tmp_path / "hf")))
    assert "Hugging Face checkpoint" in message
    assert_close(albert_tf_outputs(trainer.model, *batch), expected,
                 ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"))

    # Shards listed by model.safetensors.index.json load as one file.
    theirs.save_pretrained(str(tmp_path / "sharded"), max_shard_size="20KB")
    assert os.path.exists(tmp_path / "sharded" / "model.safetensors.index.json")
    sharded = AlbertPretrainingModel(cfg)
    assert not load_checkpoint(sharded,
                               resolve_checkpoint_source(str(tmp_path / "sharded"))).missing
    assert_close(albert_tf_outputs(sharded, *batch), expected, ["mlm_logits"])
    # bfloat16 weights have no NumPy type: one clear error.
    copy.deepcopy(theirs).to(torch.bfloat16).save_pretrained(str(tmp_path / "bf16"))
    with pytest.raises(HuggingFaceFormatError, match="save the model in float32"):
        load_checkpoint(AlbertPretrainingModel(cfg),
                        resolve_checkpoint_source(str(tmp_path / "bf16")))

    # AlbertModel's own save has no "albert." prefix.
    theirs.albert.save_pretrained(str(tmp_path / "encoder"))
    encoder = AlbertModel(cfg)
    report = load_checkpoint(encoder, resolve_checkpoint_source(str(tmp_path / "encoder")))
    assert report.missing == [] and report.unused == []
    assert_close(albert_tf_outputs(encoder, *batch), expected, ("sequence_output",
                                                                "pooled_output"))
