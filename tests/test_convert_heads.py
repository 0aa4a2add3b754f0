"""python -m albert_tf.convert_checkpoint carries a fine-tuned head (classifier, early-exit
classifier, SQuAD v1/v2, RACE) under the reference's TF1 names, and back: albert_tf -> TF1 ->
albert_tf is bit for bit; the Hugging Face export names the early-exit classifiers it leaves out."""

import os

import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf

from albert_tf.checkpoints.conversion import (ConversionError, albert_tf_to_tf1, choose_task_model,
                                              tf1_to_albert_tf, to_huggingface)
from albert_tf.checkpoints.object_format import load_object_checkpoint
from albert_tf.checkpoints.tf1_names import encoder_variable_map
from albert_tf.convert_checkpoint import HEAD_NAMES, TASK_HEADS
from albert_tf.files.run_manifest import add_facts
from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.classification.classifier_heads import HEADS
from albert_tf.tasks.classification.model import AlbertClassifierModel
from albert_tf.tasks.multiple_choice.model import AlbertMultipleChoiceModel
from albert_tf.tasks.pretraining.model import AlbertPretrainingModel
from albert_tf.tasks.question_answering.model import AlbertSquadModel
from tests.command_runner import run_command, run_command_checked

H = 12


def small_config():
    return AlbertConfig.from_dict(dict(
        vocab_size=30, embedding_size=8, hidden_size=H, num_hidden_layers=2, num_hidden_groups=1,
        num_attention_heads=3, intermediate_size=16, max_position_embeddings=12,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


# The reference's head names and shapes, written out from its code (not from albert_tf's maps).
REFERENCE_HEADS = {
    "classifier": {"output_weights": (3, H), "output_bias": (3,)},
    "squad_v1": {"cls/squad/output_weights": (2, H), "cls/squad/output_bias": (2,)},
    "squad_v2": {"start_logits/dense/kernel": (H, 1), "start_logits/dense/bias": (1,),
                 "end_logits/dense_0/kernel": (2 * H, H), "end_logits/dense_0/bias": (H,),
                 "end_logits/LayerNorm/beta": (H,), "end_logits/LayerNorm/gamma": (H,),
                 "end_logits/dense_1/kernel": (H, 1), "end_logits/dense_1/bias": (1,),
                 "answer_class/dense_0/kernel": (2 * H, H), "answer_class/dense_0/bias": (H,),
                 "answer_class/dense_1/kernel": (H, 1)},
    "race": {"output_weights": (1, H), "output_bias": (1,)},
    # The early-exit names are albert_tf's own (docs/early_exit.md): layer 1 of the 2 layers; the
    # last layer's classifier is the ordinary one.
    "early_exit": {"output_weights": (3, H), "output_bias": (3,),
                   "early_exit/layer_1/output_weights": (3, H),
                   "early_exit/layer_1/output_bias": (3,)},
}
MODELS = {"classifier": lambda cfg: AlbertClassifierModel(cfg, 3),
          "squad_v1": lambda cfg: AlbertSquadModel(cfg),
          "squad_v2": lambda cfg: AlbertSquadModel(cfg, version_2=True),
          "race": lambda cfg: AlbertMultipleChoiceModel(cfg),
          "early_exit": lambda cfg: AlbertClassifierModel(cfg, 3, early_exit="separate")}


def fine_tuned(kind, cfg, seed=3):
    """A task model with every variable random (heads start at zero), as after fine-tuning."""
    model = MODELS[kind](cfg)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))
    return model


def save(model, directory):
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(directory),
                                         max_to_keep=None, checkpoint_name="model.ckpt")
    return manager.save(checkpoint_number=7)


@pytest.mark.parametrize("kind", sorted(REFERENCE_HEADS))
def test_a_fine_tuned_head_goes_to_the_reference_names_and_back_bit_for_bit(tmp_path, kind, capsys):
    cfg = small_config()
    original = fine_tuned(kind, cfg)
    save(original, tmp_path / "run")

    model = choose_task_model(str(tmp_path / "run"), "checkpoint", cfg, TASK_HEADS)
    assert type(model) is type(original)
    assert getattr(model, "early_exit", None) == getattr(original, "early_exit", None)
    _, tf1_prefix, count = albert_tf_to_tf1(model, str(tmp_path / "run"), str(tmp_path / "tf1"))
    stored = tf.train.load_checkpoint(tf1_prefix)
    shapes = stored.get_variable_to_shape_map()
    encoder = encoder_variable_map(original.albert)
    assert set(shapes) == set(encoder) | set(REFERENCE_HEADS[kind]) | {"global_step"}
    assert count == len(shapes) - 1
    for name, shape in REFERENCE_HEADS[kind].items():
        assert tuple(shapes[name]) == shape, name
    np.testing.assert_array_equal(stored.get_tensor("bert/pooler/dense/kernel"),
                                  original.albert.pooler.kernel.numpy())
    assert "Dropped" not in capsys.readouterr().out

    # Back: RACE's [1, H] root head could be a one-output classifier's, so it is named.
    head = "race" if kind == "race" else None
    model = choose_task_model(str(tmp_path / "tf1"), "tf1_checkpoint", cfg, TASK_HEADS, head)
    assert type(model) is type(original)
    assert getattr(model, "early_exit", None) == getattr(original, "early_exit", None)
    back = tf1_to_albert_tf(model, str(tmp_path / "tf1"), str(tmp_path / "back"))
    restored = MODELS[kind](cfg)
    report = load_object_checkpoint(restored, back)
    assert report.missing == [] and report.unused == []
    assert len(restored.weights) == len(original.weights)
    for want, got in zip(original.weights, restored.weights):
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=want.path)


def test_a_one_output_root_head_needs_head_to_say_whose_it_is(tmp_path):
    cfg = small_config()
    save(fine_tuned("race", cfg), tmp_path / "run")
    albert_tf_to_tf1(choose_task_model(str(tmp_path / "run"), "checkpoint", cfg, TASK_HEADS),
                     str(tmp_path / "run"), str(tmp_path / "tf1"))
    with pytest.raises(ConversionError, match="fits more than one model; give --head=classifier "
                                              "or --head=race"):
        choose_task_model(str(tmp_path / "tf1"), "tf1_checkpoint", cfg, TASK_HEADS)
    regression = choose_task_model(str(tmp_path / "tf1"), "tf1_checkpoint", cfg, TASK_HEADS,
                                   "classifier")
    assert isinstance(regression, AlbertClassifierModel) and regression.num_labels == 1


def test_a_head_without_reference_name_in_the_chosen_model_is_named_as_dropped(tmp_path, capsys):
    """A pretraining checkpoint that also holds a classifier head: the pretraining heads win (more
    variables) and the classifier's are said to be dropped, not silently lost."""
    cfg = small_config()
    pretraining, classifier = AlbertPretrainingModel(cfg), fine_tuned("classifier", cfg)
    pretraining.classifier = classifier.classifier  # a checkpoint of both heads
    save(pretraining, tmp_path / "both")
    model = choose_task_model(str(tmp_path / "both"), "checkpoint", cfg, TASK_HEADS)
    assert isinstance(model, AlbertPretrainingModel)
    _, prefix, _ = albert_tf_to_tf1(model, str(tmp_path / "both"), str(tmp_path / "tf1"))
    out = capsys.readouterr().out
    dropped = [line for line in out.splitlines() if line.startswith("Dropped")]
    assert dropped and "classifier/output_weights" in dropped[0] and prefix in dropped[0]
    assert "output_weights" not in tf.train.load_checkpoint(prefix).get_variable_to_shape_map()


def test_the_command_carries_a_squad_head_both_ways(tmp_path):
    cfg = small_config()
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(cfg.to_json_string())
    original = fine_tuned("squad_v2", cfg)
    save(original, tmp_path / "run")

    def convert(*args):
        return run_command_checked("-m albert_tf.convert_checkpoint",
                                   f"--albert_config_file={config_file}", *args).stdout

    out = convert(f"--checkpoint={tmp_path / 'run'}", f"--output_dir={tmp_path / 'tf1'}")
    assert "missing from the checkpoint (0)" in out and "Dropped" not in out
    stored = tf.train.load_checkpoint(str(tmp_path / "tf1" / "model.ckpt"))
    assert set(REFERENCE_HEADS["squad_v2"]) <= set(stored.get_variable_to_shape_map())
    convert(f"--tf1_checkpoint={tmp_path / 'tf1'}", f"--output_dir={tmp_path / 'back'}")
    restored = MODELS["squad_v2"](cfg)
    report = load_object_checkpoint(restored, os.path.join(tmp_path, "back", "model.ckpt-0"))
    assert report.missing == [] and report.unused == []
    for want, got in zip(original.weights, restored.weights):
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=want.path)


def test_the_head_flag_names_every_task_head():
    assert tuple(head.name for head in TASK_HEADS) == HEAD_NAMES


def test_an_early_exit_checkpoint_read_as_a_classifier_names_the_internal_ones_dropped(
        tmp_path, capsys):
    """--head=classifier on an early-exit checkpoint: the ordinary head goes to TF1, the internal
    classifiers are named as dropped, not lost in silence."""
    cfg = small_config()
    save(fine_tuned("early_exit", cfg), tmp_path / "run")
    model = choose_task_model(str(tmp_path / "run"), "checkpoint", cfg, TASK_HEADS, "classifier")
    assert model.early_exit is None
    _, prefix, _ = albert_tf_to_tf1(model, str(tmp_path / "run"), str(tmp_path / "tf1"))
    dropped = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("Dropped")]
    assert dropped and "exit_classifier_1/output_weights" in dropped[0]
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert "output_weights" in shapes and not any(name.startswith("early_exit/")
                                                  for name in shapes)


@pytest.mark.parametrize("heads", ["separate", "shared"])
def test_the_hugging_face_export_says_it_leaves_the_early_exit_classifiers_out(
        tmp_path, capsys, heads):
    """One line names what the Hugging Face directory leaves out: the ordinary head and, for
    separate heads, the internal classifiers of layers 1..L-1 (transformers has no early-exit
    heads); for shared heads, that the classifier is every layer's. None of them is written."""
    cfg = AlbertConfig.from_dict({**small_config().to_dict(), "num_hidden_layers": 3})
    original = perturbed_early_exit(cfg, heads)
    prefix = tf.train.Checkpoint(model=original).write(str(tmp_path / "run" / "model.ckpt-1"))
    to_huggingface(AlbertClassifierModel(cfg, 3, early_exit=heads), prefix, "checkpoint",
                   str(tmp_path / "hf"))
    left_out = [line for line in capsys.readouterr().out.splitlines()
                if line.startswith(f"Left out of {tmp_path / 'hf'} (the Hugging Face format")]
    assert len(left_out) == 1
    if heads == "separate":
        assert left_out[0].endswith(
            "pretraining heads only): output_weights, output_bias, the early-exit internal "
            "classifiers of layers 1-2 (early_exit/layer_<j>/output_weights and output_bias).")
    else:
        assert left_out[0].endswith(
            "pretraining heads only): output_weights, output_bias (the classifier of every "
            "layer: early-exit shared heads, --early_exit_heads=shared).")
    keys = safetensors.numpy.load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert keys and all(key.startswith("albert.") for key in keys)


def perturbed_early_exit(cfg, heads):
    model = AlbertClassifierModel(cfg, 3, early_exit=heads)
    rng = np.random.default_rng(5)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))
    return model


def test_the_command_says_a_classifier_is_every_layers_when_its_run_records_shared_heads(
        tmp_path):
    """A shared-heads run's checkpoint holds an ordinary classifier's variables; its directory's
    record (its run manifest, or an earlier version's classifier_heads.json) tells the command,
    whose outputs then say the head is every layer's (the TF1 export keeps it under output_weights
    / output_bias; the Hugging Face one leaves it out)."""
    cfg = small_config()
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(cfg.to_json_string())
    save(perturbed_early_exit(cfg, "shared"), tmp_path / "run")
    (tmp_path / "run" / "classifier_heads.json").write_text('{"early_exit": "shared"}\n')

    def convert(*args):
        result = run_command("-m albert_tf.convert_checkpoint",
                             f"--albert_config_file={config_file}",
                             f"--checkpoint={tmp_path / 'run'}", *args)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    every_layer = "output_weights and output_bias are the classifier of every layer"
    out = convert(f"--output_dir={tmp_path / 'tf1'}")
    assert every_layer in out
    shapes = tf.train.load_checkpoint(str(tmp_path / "tf1" / "model.ckpt")
                                      ).get_variable_to_shape_map()
    assert {"output_weights", "output_bias"} <= set(shapes)
    out = convert("--to=huggingface", f"--output_dir={tmp_path / 'hf'}")
    assert every_layer in out
    assert ("pretraining heads only): output_weights, output_bias (the classifier of every layer: "
            "early-exit shared heads, --early_exit_heads=shared).") in out
    # Without the record the same checkpoint is an ordinary classifier's.
    (tmp_path / "run" / "classifier_heads.json").write_text('{"early_exit": null}\n')
    out = convert("--to=huggingface", f"--output_dir={tmp_path / 'hf'}", "--overwrite")
    assert "every layer" not in out and "pretraining heads only): output_weights, output_bias." in out
    # A run of this version records it in its run manifest.
    (tmp_path / "run" / "classifier_heads.json").unlink()
    add_facts(str(tmp_path / "run"), {HEADS: ("shared", "its early-exit flags")})
    out = convert("--to=huggingface", f"--output_dir={tmp_path / 'hf'}", "--overwrite")
    assert every_layer in out
