"""SavedModel exports of fine-tuned models: the layout and writer every task shares.

Layout. ``write_export(export_dir, ...)`` (behind every script's ``--export_dir``) writes two
SavedModels of one model:

- ``<export_dir>/ids_only``: signature ``serving_default`` on token ids. It needs TensorFlow alone,
  so the stock TF Serving binary, which has no SentencePiece op, serves it.
- ``<export_dir>/with_text`` (SentencePiece models only, ``has_text_signature``): the same
  ``serving_default`` plus ``serve_text`` on raw strings, normalised, tokenised and truncated in the
  graph exactly as the Python features are. Load it after ``import tensorflow_text``: a SavedModel
  that holds a SentencePiece op does not load at all without it, whichever signature is called.
  Hence two.

Files given as ``assets`` (e.g. the label list) go to ``assets.extra`` of each. The directory
appears only once complete, and an existing non-empty one is never overwritten
(``check_new_directory``, ``save_new_directory``: the rule of every export, the hub-style and
preprocessing ones included).

Every ids signature takes int32 ids of any length from 1 to the config's max_position_embeddings,
in its vocabulary, every input of the shape of ``input_ids``; a text signature takes one row per
example in each input, truncates as in training and pads to the longest example of its batch. An
empty batch gives empty outputs. A wrong input is an InvalidArgumentError naming it, raised by
checks inside the saved graph: first each input's rank (``with_ranks``: a signature called with
an eager tensor of another rank is not refused by TensorFlow), then ``ServingModule.ids_checks`` /
``text_checks`` (albert_tf/serving/input_checks.py). What TensorFlow refuses before the graph
runs (a missing or unknown keyword, a module function's input of another dtype or rank) is its
TypeError naming the input.
Unlike the reference's export (serialized ``tf.Example`` strings of fixed length), clients need no
protobuf step.

Each task's ``ServingModule`` subclass, signatures and outputs are in
albert_tf/tasks/<task>/serving.py (GLUE: albert_tf/tasks/classification/serving.py).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import keras
import tensorflow as tf

from albert_tf.errors.user_error import ExistingFileError
from albert_tf.files.atomic import temporary_path
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.serving.input_checks import (IDS_LAYOUT, TEXT_LAYOUT, Layout, gated, same_rows,
                                            token_ids_checks, with_ranks)
from albert_tf.tokenization.full_tokenizer import FullTokenizer

IDS_ONLY = "ids_only"
WITH_TEXT = "with_text"


def ids_specs(names: Sequence[str] = INPUT_NAMES,
              shape: Sequence[int | None] = (None, None)) -> list[tf.TensorSpec]:
    """int32 input specs of an ids signature, one per name."""
    return [tf.TensorSpec(shape, tf.int32, name=name) for name in names]


def text_specs(*names: str, shape: Sequence[int | None] = (None,)) -> list[tf.TensorSpec]:
    """string input specs of a text signature, one per name."""
    return [tf.TensorSpec(shape, tf.string, name=name) for name in names]


class ServingModule(tf.Module):
    """The Keras model and the serving functions of one export (inference mode, no dropout).

    Subclasses compute their outputs in ``outputs_from_ids(**ids)`` (and
    ``outputs_from_text(**texts)``) and call ``define_signatures`` last in ``__init__``. The module
    then has ``serve(ids: dict)`` and, when text inputs are given, ``serve_text(texts: dict)``: one
    dict argument, as ``keras.layers.TFSMLayer`` calls them; the signatures of the same names
    (``serving_default`` for ``serve``) take the dict's entries as keyword arguments. Both run
    ``ids_checks`` / ``text_checks`` on their inputs before anything else. A module without text
    holds no SentencePiece op.
    """

    def __init__(self, model: keras.Model, name: str):
        super().__init__(name=name)
        self.model = model

    def define_signatures(self, ids_inputs: Sequence[tf.TensorSpec],
                          text_inputs: Sequence[tf.TensorSpec] | None = None,
                          layouts: Mapping[str, Layout] | None = None) -> None:
        """layouts: {input name: its axes, as messages name them} where they are not
        ``[batch, seq]`` (ids) or ``[batch]`` (texts); their lengths are the specs' ranks."""
        self.layouts = {spec.name: IDS_LAYOUT for spec in ids_inputs}
        self.layouts.update({spec.name: TEXT_LAYOUT for spec in text_inputs or ()})
        self.layouts.update(layouts or {})
        for spec in (*ids_inputs, *(text_inputs or ())):
            if len(self.layouts[spec.name]) != spec.shape.rank:
                raise ValueError(f"{spec.name}: layout {self.layouts[spec.name]} for a spec of "
                                 f"rank {spec.shape.rank}")
        self.ids_names = tuple(spec.name for spec in ids_inputs)
        self.serve = tf.function(self._outputs_from_ids_dict, autograph=False,
                                 input_signature=[{spec.name: spec for spec in ids_inputs}])
        if text_inputs is not None:
            self.text_names = tuple(spec.name for spec in text_inputs)
            self.serve_text = tf.function(self._outputs_from_texts_dict, autograph=False,
                                          input_signature=[{spec.name: spec for spec in text_inputs}])

    def checked_ranks(self, inputs: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """``inputs`` behind the checks of their ranks (their ``layouts``), run before any other."""
        return with_ranks(inputs, {name: self.layouts[name] for name in inputs})

    def _outputs_from_ids_dict(self, ids: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        ids = self.checked_ranks(ids)
        return self.outputs_from_ids(**gated(ids, self.ids_checks(ids)))

    def _outputs_from_texts_dict(self, texts: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        texts = self.checked_ranks(texts)
        return self.outputs_from_text(**gated(texts, self.text_checks(texts)))

    def ids_checks(self, ids: Mapping[str, tf.Tensor]) -> list[tf.Operation]:
        """The in-graph checks of ``serve``'s inputs (albert_tf/serving/input_checks.py), after those
        of their ranks: each has the shape of ``input_ids``, whose positions fit the model and
        whose ids its vocabulary; the mask is 0 or 1. A subclass adds its own."""
        return token_ids_checks(ids, self.model.config)

    def text_checks(self, texts: Mapping[str, tf.Tensor]) -> list[tf.Operation]:
        """The in-graph checks of ``serve_text``'s inputs: as many rows in each as in the first
        text input. A subclass adds its own."""
        return same_rows({name: texts[name] for name in self.text_names}, self.text_names[0])

    def signatures(self) -> dict[str, tf.types.experimental.GenericFunction]:
        """{signature name: function}: ``serving_default`` and, if defined, ``serve_text``."""
        signatures = {"serving_default": self.serve}
        if hasattr(self, "serve_text"):
            signatures["serve_text"] = self.serve_text
        return signatures

    def serve_features(self, features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """``serve`` on the ids inputs among ``features`` (a packer's output)."""
        return self.serve({name: features[name] for name in self.ids_names})


def write_export(export_dir: str, serving_module: Callable[[bool], ServingModule],
                 with_text: bool, assets: Mapping[str, str] | None = None) -> str:
    """Writes ``export_dir/ids_only`` and, if ``with_text``, ``export_dir/with_text``; returns
    ``export_dir``.

    serving_module(with_text) builds the module of each SavedModel. assets: {file name: text},
    written to ``assets.extra`` of each. Raises FileExistsError if ``export_dir`` is not new or
    empty.
    """
    def save(directory: str) -> None:
        for variant in [IDS_ONLY] + ([WITH_TEXT] if with_text else []):
            module = serving_module(variant == WITH_TEXT)
            path = f"{directory}/{variant}"
            tf.saved_model.save(module, path, signatures=module.signatures())
            for name, text in (assets or {}).items():
                tf.io.gfile.makedirs(f"{path}/assets.extra")
                with tf.io.gfile.GFile(f"{path}/assets.extra/{name}", "w") as handle:
                    handle.write(text)

    save_new_directory(export_dir, save)
    return export_dir


def has_text_signature(tokenizer: FullTokenizer | None) -> bool:
    """Whether an export can tokenise in the graph: only with a SentencePiece model."""
    return tokenizer is not None and tokenizer.sp_model is not None


def output_name(path: str, flag: str | None = None) -> str:
    """How an error message names an output: ``--flag=path`` when a flag gave it, else ``path``."""
    return f"--{flag}={path}" if flag else path


def check_new_directory(path: str, flag: str | None = None) -> None:
    """Raises ExistingFileError (a FileExistsError) unless ``path`` is absent or an empty
    directory: an export is never written over anything. Commands call it before any work;
    ``flag`` names the flag in the message."""
    if tf.io.gfile.exists(path) and (not tf.io.gfile.isdir(path) or tf.io.gfile.listdir(path)):
        raise ExistingFileError(f"{output_name(path, flag)} exists and is not an empty directory; "
                                "choose a new directory (an export is never overwritten).")


def save_new_directory(path: str, save: Callable[[str], None]) -> None:
    """Runs ``save(directory)`` on a temporary directory beside ``path`` and renames it to ``path``
    when ``save`` returns; on any error nothing is left. ``path`` must be new or empty
    (``check_new_directory``)."""
    check_new_directory(path)
    if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)  # empty: the rename needs the name free
    with temporary_path(path.rstrip("/")) as directory:
        save(directory)
