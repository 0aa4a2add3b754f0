"""Fine-tunes ALBERT for token classification (NER) on CoNLL or JSON Lines files (docs/ner.md).

--do_train trains from --init_checkpoint (resuming from the latest checkpoint in --output_dir) on
each word's first piece; the training file's tags are the tag set (tag id = index of ``O`` then the
sorted others), recorded in <output_dir>/run_manifest.json by the first run: every later run there
uses (and checks) it, so evaluation, prediction and export need no --train_file. --do_eval
evaluates every checkpoint on --eval_file (entity precision, recall and F1 with conlleval's
semantics, micro and per type, and word accuracy) and keeps the best F1 as model.ckpt-best, as
run_classifier's sweep does; --do_predict writes --predict_file's tags, predicted by
model.ckpt-best, to predictions.conll or predictions.jsonl in --output_dir, in the input's format;
--export_dir writes SavedModels of model.ckpt-best (ids, and text returning a tag per word).
Sentences longer than a window are split into overlapping windows; each word is predicted from the
window where it has the most context. Every file is read and checked before training (a mistake:
one line naming the file and line).
"""

from __future__ import annotations

from absl import flags

from albert_tf.cli import command_line, flag_checks, flag_definitions
from albert_tf.tasks.token_classification.recipes import NER_RECIPE

FLAGS = flags.FLAGS

flags.DEFINE_string("train_file", None, "Training data (CoNLL or JSON Lines); its tags are the tag "
                    "set, recorded in --output_dir for every later run there.")
flags.DEFINE_string("eval_file", None, "Labelled data for --do_eval (tags of the training set).")
flags.DEFINE_string("predict_file", None, "Data to tag with --do_predict (tags, if any, ignored).")
flags.DEFINE_enum("tag_scheme", "IOB2", ["IOB1", "IOB2", "BIOES"], "Tag scheme of the labelled "
                  "files; a sentence that breaks it is an error (never repaired).")
flags.DEFINE_enum("file_format", "auto", ["auto", "conll", "jsonl"], "Format of the data files; "
                  "auto: .jsonl / .json are JSON Lines, anything else CoNLL.")
flag_definitions.define(
    *[name for name in flag_definitions.FINE_TUNING_FLAGS if name != "data_dir"], "train_step",
    "warmup_step", "doc_stride", max_seq_length=128, doc_stride=64, keep_checkpoint_max=0)


def check_flags() -> None:
    """Before TensorFlow loads: what to do, the file each action reads, room for a piece."""
    flag_checks.fine_tuning_checks("do_train", "do_eval", "do_predict", "export_dir")
    for action, name in (("do_train", "train_file"), ("do_eval", "eval_file"),
                         ("do_predict", "predict_file")):
        if FLAGS[action].value:
            flag_checks.require_flags(name)
    flag_checks.require_sequence_room(3, "[CLS], a piece and [SEP]")


command_line.parse_before_imports(__name__, checks=[flag_checks.print_recipe(lambda: NER_RECIPE),
                                                     check_flags])

from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.cli.driver import run_task  # noqa: E402
from albert_tf.cli.settings import RunSettings  # noqa: E402
from task_specs.token_classification import NerSettings, ner_spec  # noqa: E402


def settings_from_flags() -> NerSettings:
    """run_ner's own flags, read once: the files the run's actions read (and --train_file beside
    evaluation or prediction, read for its tags, checked against the recorded ones)."""
    wanted = {"train": FLAGS.do_train, "dev": FLAGS.do_eval, "test": FLAGS.do_predict}
    given = {"train": FLAGS.train_file, "dev": FLAGS.eval_file, "test": FLAGS.predict_file}
    files = {split: path for split, path in given.items()
             if path and (wanted[split] or split == "train")}
    return NerSettings(files, FLAGS.file_format, FLAGS.tag_scheme, FLAGS.doc_stride)


def main(argv):
    del argv
    settings = RunSettings.from_flags()
    run_task(settings, ner_spec(settings, settings_from_flags()))


if __name__ == "__main__":
    error_boundary.run(main, when_stopped=error_boundary.TRAINING_STOPPED)
