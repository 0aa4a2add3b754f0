"""Token classification (NER) on CoNLL or JSON Lines files, as run_ner.py runs it (docs/ner.md)."""

from __future__ import annotations

import dataclasses
import functools

from albert_tf.checkpoints.label_set import LabelSet, recorded_label_set
from albert_tf.cli.settings import RunSettings
from albert_tf.cli.task_spec import (EVALUATE, PREDICT, TRAIN, Outputs, RunStart, Split,
                                     SplitFeatures, Sweep, TaskData, TaskRun, TaskSpec, Training)
from albert_tf.files.run_files import inputs as declared_inputs
from albert_tf.files.run_manifest import manifest_path
from albert_tf.models.config import AlbertConfig
from albert_tf.tasks.token_classification.file_formats import (CONLL, JSON_LINES, NerDataError,
                                                               resolve_format)
from albert_tf.tasks.token_classification.predictions import write_predictions
from albert_tf.tasks.token_classification.records import SEQUENCE_FEATURES, parse_ner_record
from albert_tf.tasks.token_classification.serving import export_token_classifier
from albert_tf.tasks.token_classification.task import (SELECTION_METRIC, NerEvalContext,
                                                       TokenClassifierTask, word_predictions)
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep.common.feature_cache import cache_file_pattern
from data_prep.token_classification.features import NerFeatureSettings, ner_feature_file
from data_prep.token_classification.reader import Sentence, read_sentences, tag_set
from task_specs.common import glue_sweep_policy, split_features

TASK_TYPE = "token_classification"
CACHE_NAME = "ner"
SPLIT_FLAGS = {"train": "--train_file", "dev": "--eval_file", "test": "--predict_file"}


@dataclasses.dataclass(frozen=True)
class NerSettings:
    """run_ner's own flags: its files ({"train" | "dev" | "test": path} of the files this run reads;
    a --train_file given beside evaluation or prediction is read for its tags), their format and
    tag scheme, the window stride."""

    files: dict
    file_format: str
    tag_scheme: str
    doc_stride: int


@dataclasses.dataclass(frozen=True)
class NerData:
    """The tag set (id = index) and every file's sentences, read and checked."""

    tags: tuple[str, ...]
    sentences: dict[str, list[Sentence]]


def ner_spec(settings: RunSettings, own: NerSettings) -> TaskSpec:
    """Its dev, test and train files (those given), windows of --max_seq_length pieces."""
    parse = functools.partial(parse_ner_record, max_seq_length=settings.max_seq_length)
    purposes = {"dev": EVALUATE, "test": PREDICT, "train": TRAIN}
    splits = tuple(Split(split, purposes[split], declared_inputs((SPLIT_FLAGS[split], path)),
                         cache_file_pattern(CACHE_NAME),
                         functools.partial(_features, settings, own, split, parse))
                   for split in ("dev", "test", "train") if (path := own.files.get(split)))
    return TaskSpec(
        name=CACHE_NAME, settings=own, splits=splits,
        read_data=functools.partial(read_ner_data, own),
        training=Training(functools.partial(_task, settings.max_seq_length), SEQUENCE_FEATURES),
        sweep=Sweep("do_eval", SELECTION_METRIC, glue_sweep_policy(settings),
                    settings.eval_batch_size),
        outputs=Outputs((f"predictions.{CONLL}", f"predictions.{JSON_LINES}"),
                        predict=functools.partial(predict, own), export=export))


def read_ner_data(own: NerSettings, start: RunStart) -> TaskData:
    """Every file read and checked now: the tags of --train_file (or the recorded ones), then
    --eval_file's tags must belong to them."""
    read = functools.partial(read_sentences, file_format=own.file_format, scheme=own.tag_scheme)
    files, sentences = own.files, {}
    stored = recorded_label_set(start.manifest)
    if "train" in files:
        sentences["train"] = read(files["train"])
        tags, source = tag_set(sentences["train"]), f"the tags of {files['train']}"
        if len(tags) < 2:
            raise NerDataError(f"{files['train']}: every word is tagged O; a tagger needs at "
                               "least one entity tag.")
    elif stored is not None and stored.task_type == TASK_TYPE:
        tags, source = list(stored.labels), manifest_path(start.settings.output_dir)
    else:
        raise NerDataError(f"no tag set: {manifest_path(start.settings.output_dir)} does not "
                           "record the tags of a tagger (the run with --do_train records them); "
                           "give --train_file")
    if "dev" in files:
        sentences["dev"] = read(files["dev"], known_tags=tags)
    if "test" in files:
        sentences["test"] = read(files["test"], labelled=False)
    return TaskData(LabelSet(TASK_TYPE, tuple(tags)), source,
                    content=NerData(tuple(tags), sentences))


def _features(settings: RunSettings, own: NerSettings, split: str, parse, data: TaskData,
              tokenizer: FullTokenizer) -> SplitFeatures:
    """A file's windows (each word predicted from its max-context window); dev's gold tags for
    the entity-level scores."""
    ner: NerData = data.content
    sentences = ner.sentences[split]
    feature_settings = NerFeatureSettings.for_sentences(sentences, ner.tags,
                                                        settings.max_seq_length, own.doc_stride)
    features = ner_feature_file(own.files[split], split, sentences, feature_settings, tokenizer,
                                settings.cached_dir)
    context = (NerEvalContext(ner.tags, tuple(sentence.tags for sentence in sentences))
               if split == "dev" else None)
    return split_features(features, parse, f"NER {split}: {features.metadata['num_sentences']} "
                          f"sentences, {features.num_records} windows", context)


def _task(max_seq_length: int, config: AlbertConfig, data: TaskData) -> TokenClassifierTask:
    return TokenClassifierTask(config, len(data.content.tags), max_seq_length)


def predict(own: NerSettings, run: TaskRun, dev_best: dict[str, float] | None) -> None:
    """--predict_file's tags by model.ckpt-best, in the input's format."""
    features = run.features["test"]
    outputs = run.trainer.predict(run.dataset(features, run.settings.predict_batch_size))
    predicted = word_predictions(outputs, features.metadata["words_per_sentence"])
    input_path = own.files["test"]
    file_format = resolve_format(input_path, own.file_format)
    tags = run.data.content.tags
    path = write_predictions(input_path, run.output_path(f"predictions.{file_format}"),
                             [[tags[tag] for tag in sentence] for sentence in predicted],
                             file_format)
    print(f"Predicted {features.metadata['num_words']} words of "
          f"{features.metadata['num_sentences']} sentences -> {path}")


def export(run: TaskRun) -> None:
    export_token_classifier(run.trainer.model, run.settings.export_dir,
                            list(run.data.content.tags), run.tokenizer,
                            run.settings.max_seq_length)
