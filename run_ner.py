"""Fine-tunes ALBERT for token classification (NER) on CoNLL or JSON Lines files (docs/ner.md).

--train_file gives the tag set in every run (tag id = index of ``O`` then the sorted others);
--do_train trains from --init_checkpoint (resuming from the latest checkpoint in --output_dir) on
each word's first piece; --do_eval evaluates every checkpoint on --eval_file (entity precision,
recall and F1 with conlleval's semantics, micro and per type, and word accuracy) and keeps the best
F1 as model.ckpt-best, as run_classifier's sweep does; --do_predict writes --predict_file's tags,
predicted by model.ckpt-best, to predictions.conll or predictions.jsonl in --output_dir, in the
input's format; --export_dir writes SavedModels of model.ckpt-best (ids, and text returning a tag
per word). Sentences longer than a window are split into overlapping windows; each word is
predicted from the window where it has the most context. Every file is read and checked before
training (a mistake: one line naming the file and line).
"""

from __future__ import annotations

import functools
import os

from absl import flags

from albert_tf.cli import command_line, flag_definitions

FLAGS = flags.FLAGS

flags.DEFINE_string("train_file", None, "Training data (CoNLL or JSON Lines); its tags are the tag "
                    "set of every run, so it is required even without --do_train.")
flags.DEFINE_string("eval_file", None, "Labelled data for --do_eval (tags of the training set).")
flags.DEFINE_string("predict_file", None, "Data to tag with --do_predict (tags, if any, ignored).")
flags.DEFINE_enum("tag_scheme", "IOB2", ["IOB1", "IOB2", "BIOES"], "Tag scheme of the labelled "
                  "files; a sentence that breaks it is an error (never repaired).")
flags.DEFINE_enum("file_format", "auto", ["auto", "conll", "jsonl"], "Format of the data files; "
                  "auto: .jsonl / .json are JSON Lines, anything else CoNLL.")
flag_definitions.define(
    *[name for name in flag_definitions.FINE_TUNING_FLAGS if name != "data_dir"], "train_step",
    "warmup_step", "doc_stride", max_seq_length=128, doc_stride=64, keep_checkpoint_max=0)

command_line.parse_before_imports(__name__)  # --help, flag mistakes: before TensorFlow loads

import tensorflow as tf  # noqa: E402
from albert_tf.cli import error_boundary, run_flags  # noqa: E402
from albert_tf.evaluation.best_checkpoint import (  # noqa: E402
    best_checkpoint_prefix, restore_best_checkpoint, run_checkpoint_sweep)
from albert_tf.evaluation.checkpoint_sweep import BEST_PREFIX, SweepPolicy  # noqa: E402
from albert_tf.tasks.token_classification.file_formats import resolve_format  # noqa: E402
from albert_tf.tasks.token_classification.predictions import write_predictions  # noqa: E402
from albert_tf.tasks.token_classification.records import parse_ner_record  # noqa: E402
from albert_tf.tasks.token_classification.serving import export_token_classifier  # noqa: E402
from albert_tf.tasks.token_classification.task import (  # noqa: E402
    SELECTION_METRIC, NerEvalContext, TokenClassifierTask, word_predictions)
from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from albert_tf.training.input_pipeline import (  # noqa: E402
    needs_static_batches, record_eval_dataset)
from albert_tf.training.task import EvalSet  # noqa: E402
from albert_tf.training.trainer import Trainer  # noqa: E402
from data_prep.common.feature_cache import FeatureFile  # noqa: E402
from data_prep.token_classification.features import (  # noqa: E402
    NerFeatureSettings, ner_feature_file)
from data_prep.token_classification.reader import (  # noqa: E402
    Sentence, read_sentences, tag_set)


def validate_flags() -> None:
    run_flags.reject_hub_module_handle()
    run_flags.require_action("do_train", "do_eval", "do_predict", "export_dir")
    run_flags.require_flags("train_file", "output_dir", "albert_config_file")
    if FLAGS.do_eval:
        run_flags.require_flags("eval_file")
    if FLAGS.do_predict:
        run_flags.require_flags("predict_file")
    if (FLAGS.do_predict or FLAGS.export_dir) and not FLAGS.do_eval:
        best_checkpoint_prefix(FLAGS.output_dir)  # fails before training when there is none


def read_data() -> tuple[list[str], dict[str, tuple[str, list[Sentence]]]]:
    """(tag list, {split: (file, sentences)}) of every file this run reads, all checked now."""
    read = functools.partial(read_sentences, file_format=FLAGS.file_format,
                             scheme=FLAGS.tag_scheme)
    train = read(FLAGS.train_file)
    tags = tag_set(train)
    if len(tags) < 2:
        raise ValueError(f"{FLAGS.train_file}: every word is tagged O; a tagger needs at least one "
                         "entity tag.")
    data = {"train": (FLAGS.train_file, train)}
    if FLAGS.do_eval:
        data["dev"] = (FLAGS.eval_file, read(FLAGS.eval_file, known_tags=tags))
    if FLAGS.do_predict:
        data["test"] = (FLAGS.predict_file, read(FLAGS.predict_file, labelled=False))
    return tags, data


class Run:
    """What the steps of one run share: the tags, the data, the tokenizer and the trainer."""

    def __init__(self, tags: list[str], data: dict, tokenizer: FullTokenizer, trainer: Trainer):
        self.tags = tags
        self.data = data
        self.tokenizer = tokenizer
        self.trainer = trainer
        self.parse = functools.partial(parse_ner_record, max_seq_length=FLAGS.max_seq_length)

    def features(self, split: str) -> FeatureFile:
        path, sentences = self.data[split]
        settings = NerFeatureSettings.for_sentences(sentences, self.tags, FLAGS.max_seq_length,
                                                    FLAGS.doc_stride)
        return ner_feature_file(path, split, sentences, settings, self.tokenizer,
                                FLAGS.cached_dir or FLAGS.output_dir)

    def dataset(self, path: str, batch_size: int) -> tf.data.Dataset:
        return record_eval_dataset(path, self.parse, batch_size,
                                   needs_static_batches(self.trainer.strategy))


def train(run: Run) -> None:
    train_file = run.features("train")
    run_flags.train_from_flags(run.trainer, train_file.path, run.parse,
                               f"NER train: {train_file.metadata['num_sentences']} sentences, "
                               f"{train_file.num_records} windows")


def evaluate(run: Run) -> None:
    """The sweep over every checkpoint on --eval_file, keeping the best entity F1."""
    eval_file = run.features("dev")
    gold = tuple(sentence.tags for sentence in run.data["dev"][1])
    eval_set = EvalSet("", functools.partial(run.dataset, eval_file.path, FLAGS.eval_batch_size),
                       NerEvalContext(tuple(run.tags), gold))
    policy = SweepPolicy.glue(FLAGS.train_step,
                              max_wait_seconds=0 if FLAGS.do_train else FLAGS.max_eval_wait_secs)
    run_checkpoint_sweep(run.trainer, [eval_set], SELECTION_METRIC, policy)


def predict(run: Run) -> None:
    """--predict_file's tags by model.ckpt-best, in the input's format."""
    predict_file = run.features("test")
    outputs = run.trainer.predict(run.dataset(predict_file.path, FLAGS.predict_batch_size))
    predicted = word_predictions(outputs, predict_file.metadata["words_per_sentence"])
    file_format = resolve_format(FLAGS.predict_file, FLAGS.file_format)
    path = write_predictions(FLAGS.predict_file,
                             os.path.join(FLAGS.output_dir, f"predictions.{file_format}"),
                             [[run.tags[tag] for tag in sentence] for sentence in predicted],
                             file_format)
    print(f"Predicted {predict_file.metadata['num_words']} words of "
          f"{predict_file.metadata['num_sentences']} sentences -> {path}")


def main(argv):
    del argv
    validate_flags()
    config = run_flags.load_config(FLAGS.albert_config_file, FLAGS.max_seq_length)
    tokenizer = run_flags.tokenizer_from_flags(config)
    if FLAGS.do_train:
        run_flags.check_init_checkpoint(FLAGS.init_checkpoint)
    tags, data = read_data()
    run = Run(tags, data, tokenizer,
              run_flags.trainer_from_flags(TokenClassifierTask(config, len(tags)),
                                           FLAGS.train_step, FLAGS.warmup_step))
    # Every feature file the run reads is built (or found in the cache) before training.
    for split in ("dev", "test", "train"):
        if split in data and (split != "train" or FLAGS.do_train):
            run.features(split)
    if FLAGS.do_train:
        train(run)
    if FLAGS.do_eval:
        evaluate(run)
    if FLAGS.do_predict or FLAGS.export_dir:
        restore_best_checkpoint(run.trainer)
    if FLAGS.do_predict:
        predict(run)
    if FLAGS.export_dir:
        export_token_classifier(run.trainer.model, FLAGS.export_dir, tags, tokenizer,
                                FLAGS.max_seq_length)
        print(f"Exported the SavedModels of {BEST_PREFIX} to {FLAGS.export_dir}")


if __name__ == "__main__":
    error_boundary.run(main, checks=[run_flags.check_outputs_spare_inputs,
                                     run_flags.check_output_directories,
                                     run_flags.lock_output_dir],
                       when_stopped=error_boundary.TRAINING_STOPPED, catch_sigterm=False)
