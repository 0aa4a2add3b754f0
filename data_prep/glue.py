"""GLUE data preparation: the public API of the GLUE processors and features, and a command line.

API (re-exported from ``glue_processors`` and ``glue_features``): ``get_processor``, ``PROCESSORS``,
``InputExample``, ``InputFeatures``, ``convert_examples_to_features``, ``glue_feature_spec``,
``parse_glue_example``, ``cached_glue_features`` and friends.

Command line: writes (or reuses) the feature caches that run_classifier reads, e.g.::

    python -m data_prep.glue --task_name=rte --data_dir=glue_data --spm_model_file=30k-clean.model \\
        --cached_dir=cache --max_seq_length=512 --splits=train,dev,test
    python -m data_prep.glue --task_name=rte --print_recipe   # the paper's run_classifier flags
"""

from __future__ import annotations

from absl import app, flags, logging

from albert_tf.tokenization import FullTokenizer
from data_prep.glue_features import (CACHE_FORMAT_VERSION, FeatureCache, InputFeatures, build_features,
                                     cache_paths, cached_glue_features, convert_example,
                                     convert_examples_to_features, features_to_tf_example,
                                     glue_feature_spec, label_id_of, padding_features,
                                     parse_glue_example, truncate_seq_pair, write_features_tfrecord)
from data_prep.glue_processors import (PROCESSORS, SPLITS, FineTuningRecipe, GlueDataError,
                                       GlueProcessor, InputExample, get_processor, read_tsv)

__all__ = [
    "CACHE_FORMAT_VERSION", "FeatureCache", "InputFeatures", "build_features", "cache_paths",
    "cached_glue_features", "convert_example", "convert_examples_to_features", "features_to_tf_example",
    "glue_feature_spec", "label_id_of", "padding_features", "parse_glue_example", "truncate_seq_pair",
    "write_features_tfrecord", "PROCESSORS", "SPLITS", "FineTuningRecipe", "GlueDataError",
    "GlueProcessor", "InputExample", "get_processor", "read_tsv",
]

FLAGS = flags.FLAGS


def _define_flags() -> None:
    flags.DEFINE_string("task_name", None, f"GLUE task, one of {sorted(PROCESSORS)}.")
    flags.DEFINE_string("data_dir", None, "GLUE root; task subfolders (RTE/, SST-2/, ...) below it.")
    flags.DEFINE_string("spm_model_file", None, "SentencePiece model (SP mode, all released models).")
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab, used only without spm_model_file.")
    flags.DEFINE_bool("do_lower_case", True, "Lowercase the text (must match the pretrained model).")
    flags.DEFINE_integer("max_seq_length", 512, "Tokens per feature, [CLS]/[SEP] included.")
    flags.DEFINE_string("cached_dir", None, "Where the feature TFRecords and their JSON sidecars go.")
    flags.DEFINE_list("splits", ["train", "dev"], f"Splits to prepare, from {list(SPLITS)}.")
    flags.DEFINE_bool("print_recipe", False,
                      "Only print the paper's run_classifier hyper-parameter flags for --task_name.")


def main(argv: list[str]) -> None:
    del argv
    if not FLAGS.task_name:
        raise app.UsageError("--task_name is required")
    try:
        processor = get_processor(FLAGS.task_name)
    except GlueDataError as error:
        raise app.UsageError(str(error)) from None
    if FLAGS.print_recipe:
        if processor.recipe is None:
            raise app.UsageError(f"task {FLAGS.task_name!r} is predict-only and has no recipe")
        print(" ".join([f"--task_name={FLAGS.task_name.lower()}"] + processor.recipe.flags()))
        return
    for name in ("data_dir", "cached_dir"):
        if not FLAGS[name].value:
            raise app.UsageError(f"--{name} is required")
    unknown = [split for split in FLAGS.splits if split not in SPLITS]
    if unknown:
        raise app.UsageError(f"--splits: unknown {unknown}; expected some of {list(SPLITS)}")
    tokenizer = FullTokenizer(vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
                              spm_model_file=FLAGS.spm_model_file)
    for split in FLAGS.splits:
        cache = cached_glue_features(FLAGS.task_name, FLAGS.data_dir, split, tokenizer,
                                     FLAGS.max_seq_length, FLAGS.cached_dir)
        logging.info("%s %s: %d examples in %s", FLAGS.task_name, split, cache.num_examples, cache.path)
        print(f"{split}\t{cache.num_examples}\t{cache.path}")


if __name__ == "__main__":
    _define_flags()
    app.run(main)
