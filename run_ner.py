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

import dataclasses
import functools

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

from albert_tf.checkpoints.label_set import LabelSet  # noqa: E402
from albert_tf.cli import error_boundary  # noqa: E402
from albert_tf.cli.fine_tuning import (  # noqa: E402
    FineTuningHooks, FineTuningRun, TrainingData, feature_cache_files, run_fine_tuning)
from albert_tf.cli.settings import RunSettings  # noqa: E402
from albert_tf.evaluation.checkpoint_sweep import SweepPolicy  # noqa: E402
from albert_tf.files.run_files import RunFiles  # noqa: E402
from albert_tf.files.run_manifest import manifest_path  # noqa: E402
from albert_tf.files.run_files import inputs as declared_inputs  # noqa: E402
from albert_tf.tasks.token_classification.serving import export_token_classifier  # noqa: E402
from albert_tf.tasks.token_classification.task import (  # noqa: E402
    SELECTION_METRIC, NerEvalContext, TokenClassifierTask, word_predictions)
from albert_tf.training.task import EvalSet  # noqa: E402
from data_prep.common.feature_cache import (  # noqa: E402
    FeatureFile, cache_file_pattern, feature_file_source)
from data_prep.token_classification.features import (  # noqa: E402
    NerFeatureSettings, ner_feature_file)
from albert_tf.tasks.token_classification.file_formats import (  # noqa: E402
    CONLL, JSON_LINES, NerDataError, resolve_format)
from albert_tf.tasks.token_classification.predictions import write_predictions  # noqa: E402
from albert_tf.tasks.token_classification.records import (  # noqa: E402
    SEQUENCE_FEATURES, parse_ner_record)
from data_prep.token_classification.reader import Sentence, read_sentences, tag_set  # noqa: E402

TASK_TYPE = "token_classification"
CACHE_NAME = "ner"


@dataclasses.dataclass(frozen=True)
class NerSettings:
    """run_ner's own flags: its files, their format and tag scheme, the window stride."""

    files: dict  # {"train" | "dev" | "test": path} of the files this run reads
    file_format: str
    tag_scheme: str
    doc_stride: int

    @classmethod
    def from_flags(cls) -> "NerSettings":
        wanted = {"train": FLAGS.do_train, "dev": FLAGS.do_eval, "test": FLAGS.do_predict}
        given = {"train": FLAGS.train_file, "dev": FLAGS.eval_file, "test": FLAGS.predict_file}
        # A --train_file given beside evaluation or prediction is read for its tags (checked
        # against the recorded ones).
        files = {split: path for split, path in given.items()
                 if path and (wanted[split] or split == "train")}
        return cls(files, FLAGS.file_format, FLAGS.tag_scheme, FLAGS.doc_stride)


class NerHooks(FineTuningHooks):
    """Token classification on CoNLL or JSON Lines files."""

    run_outputs = (f"predictions.{CONLL}", f"predictions.{JSON_LINES}")
    sequence_features = SEQUENCE_FEATURES
    selection_metric = SELECTION_METRIC

    def __init__(self, own: NerSettings):
        self.own = own
        self.tags: tuple[str, ...] = ()
        self.sentences: dict[str, list[Sentence]] = {}

    def files(self, settings: RunSettings) -> RunFiles:
        flag = {"train": "--train_file", "dev": "--eval_file", "test": "--predict_file"}
        return feature_cache_files(settings, declared_inputs(*(
            (flag[split], path) for split, path in self.own.files.items())),
            [cache_file_pattern(CACHE_NAME)])

    def load_data(self, run: FineTuningRun, stored: LabelSet | None) -> tuple[LabelSet, str]:
        """Every file read and checked now: the tags of --train_file (or the recorded ones), then
        --eval_file's tags must belong to them."""
        read = functools.partial(read_sentences, file_format=self.own.file_format,
                                 scheme=self.own.tag_scheme)
        files = self.own.files
        if "train" in files:
            self.sentences["train"] = read(files["train"])
            tags, source = tag_set(self.sentences["train"]), f"the tags of {files['train']}"
            if len(tags) < 2:
                raise NerDataError(f"{files['train']}: every word is tagged O; a tagger needs at "
                                   "least one entity tag.")
        elif stored is not None and stored.task_type == TASK_TYPE:
            tags, source = list(stored.labels), manifest_path(run.settings.output_dir)
        else:
            raise NerDataError(f"no tag set: {manifest_path(run.settings.output_dir)} does not "
                               "record the tags of a tagger (the run with --do_train records "
                               "them); give --train_file")
        self.tags = tuple(tags)
        if "dev" in files:
            self.sentences["dev"] = read(files["dev"], known_tags=tags)
        if "test" in files:
            self.sentences["test"] = read(files["test"], labelled=False)
        return LabelSet(TASK_TYPE, self.tags), source

    def training_task(self, run: FineTuningRun, label_set: LabelSet) -> TokenClassifierTask:
        return TokenClassifierTask(run.config, len(self.tags), run.settings.max_seq_length)

    def parse(self, run: FineTuningRun):
        return functools.partial(parse_ner_record, max_seq_length=run.settings.max_seq_length)

    def features(self, run: FineTuningRun, split: str) -> FeatureFile:
        sentences = self.sentences[split]
        settings = NerFeatureSettings.for_sentences(sentences, self.tags,
                                                    run.settings.max_seq_length,
                                                    self.own.doc_stride)
        return ner_feature_file(self.own.files[split], split, sentences, settings, run.tokenizer,
                                run.settings.cached_dir)

    def prepare_features(self, run: FineTuningRun) -> None:
        settings = run.settings
        for split, wanted in (("dev", settings.do_eval), ("test", settings.do_predict),
                              ("train", settings.do_train)):
            if wanted:
                self.features(run, split)

    def training_data(self, run: FineTuningRun) -> TrainingData:
        train_file = self.features(run, "train")
        return TrainingData(train_file.path, self.parse(run),
                            f"NER train: {train_file.metadata['num_sentences']} sentences, "
                            f"{train_file.num_records} windows")

    def eval_sets(self, run: FineTuningRun) -> list[EvalSet]:
        """--eval_file, with its gold tags for the entity-level scores."""
        eval_file = self.features(run, "dev")
        gold = tuple(sentence.tags for sentence in self.sentences["dev"])
        return [EvalSet("", functools.partial(run.eval_dataset, eval_file.path, self.parse(run),
                                              run.settings.eval_batch_size),
                        NerEvalContext(self.tags, gold),
                        source=feature_file_source(eval_file))]

    def sweep_policy(self, settings: RunSettings) -> SweepPolicy:
        return SweepPolicy.glue(settings.num_train_steps, max_wait_seconds=0 if settings.do_train
                                else settings.max_eval_wait_secs)

    def predict(self, run: FineTuningRun, dev_best: dict[str, float] | None) -> None:
        """--predict_file's tags by model.ckpt-best, in the input's format."""
        predict_file = self.features(run, "test")
        outputs = run.trainer.predict(run.eval_dataset(predict_file.path, self.parse(run),
                                                       run.settings.predict_batch_size))
        predicted = word_predictions(outputs, predict_file.metadata["words_per_sentence"])
        input_path = self.own.files["test"]
        file_format = resolve_format(input_path, self.own.file_format)
        path = write_predictions(input_path, run.output_path(f"predictions.{file_format}"),
                                 [[self.tags[tag] for tag in sentence] for sentence in predicted],
                                 file_format)
        print(f"Predicted {predict_file.metadata['num_words']} words of "
              f"{predict_file.metadata['num_sentences']} sentences -> {path}")

    def export(self, run: FineTuningRun) -> None:
        export_token_classifier(run.trainer.model, run.settings.export_dir, list(self.tags),
                                run.tokenizer, run.settings.max_seq_length)


def main(argv):
    del argv
    run_fine_tuning(RunSettings.from_flags(), NerHooks(NerSettings.from_flags()))


if __name__ == "__main__":
    error_boundary.run(main, when_stopped=error_boundary.TRAINING_STOPPED)
