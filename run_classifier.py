"""Fine-tunes ALBERT on a GLUE task with the reference's flags (spec 1.3 and 7).

--do_train trains from --init_checkpoint (resuming from the latest checkpoint in --output_dir);
--do_eval evaluates every checkpoint on the full dev set (the reference's sweep: eval_results.txt,
best_trial.txt, non-best checkpoints deleted, the best renamed to model.ckpt-best; MNLI evaluates
dev_matched and dev_mismatched); --do_predict writes test_results.tsv and submit_results.tsv from
model.ckpt-best; --export_dir writes a SavedModel of model.ckpt-best. See the README.
"""

from __future__ import annotations

import functools
import math
import os

import tensorflow as tf
from absl import app, flags

from albert_tf import classifier, export, run_flags
from albert_tf.checkpoint_sweep import BEST_PREFIX, SweepPolicy, sweep_checkpoints
from albert_tf.metrics import selection_metric
from albert_tf.optimization import OPTIMIZER_NAMES
from albert_tf.tokenization import FullTokenizer
from albert_tf.training import Trainer
from data_prep.glue import GlueDataError, cached_glue_features, get_processor, parse_glue_example

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None, "GLUE root; task subfolders (MRPC/, SST-2/, ...) below it.")
flags.DEFINE_string("albert_config_file", None, "ALBERT config JSON of the pretrained model.")
flags.DEFINE_string("task_name", None, "GLUE task: cola, mnli, mismnli, mrpc, rte, sst-2, sts-b, "
                    "qqp, qnli, wnli (ax: predict only).")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab, used only without --spm_model_file.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model of the pretrained model.")
flags.DEFINE_string("output_dir", None, "Checkpoints, eval/predict results, TensorBoard logs.")
flags.DEFINE_string("cached_dir", None, "Where the feature TFRecords are cached (default "
                    "--output_dir); a cache is reused only if built from the same inputs.")
flags.DEFINE_string("init_checkpoint", None, "Pretrained checkpoint: a reference TF1 checkpoint or "
                    "an albert_tf one (prefix or directory).")
flags.DEFINE_string("albert_hub_module_handle", None, "[Reference flag] TF-Hub module; not "
                    "supported (use the released checkpoint with --init_checkpoint).")
flags.DEFINE_bool("do_lower_case", True, "Lowercase the text (must match the pretrained model).")
flags.DEFINE_integer("max_seq_length", 512, "Tokens per example, [CLS]/[SEP] included.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate every checkpoint on the dev set, keep the best.")
flags.DEFINE_bool("do_predict", False, "Predict the test set with model.ckpt-best.")
flags.DEFINE_integer("train_batch_size", 32, "Global train batch.")
flags.DEFINE_integer("eval_batch_size", 8, "Eval batch.")
flags.DEFINE_integer("predict_batch_size", 8, "Predict batch.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("train_step", 1000, "Training steps (also the decay horizon and the step the "
                     "eval sweep waits for).")
flags.DEFINE_integer("warmup_step", 0, "Linear warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every this many steps (the "
                     "granularity of the best-checkpoint selection).")
flags.DEFINE_integer("keep_checkpoint_max", 0, "Checkpoints kept while training (0: all, the "
                     "reference's behaviour; it ignores this flag).")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps per tf.function call (capped at "
                     "save_checkpoints_steps).")
flags.DEFINE_enum("optimizer", "adamw", list(OPTIMIZER_NAMES), "Optimizer.")
flags.DEFINE_string("export_dir", None, "Write a SavedModel of model.ckpt-best here.")
flags.DEFINE_float("threshold_to_export", float("nan"), "If set, a constant 'threshold' output is "
                   "added to the SavedModel's signature.")
run_flags.define_tpu_flags()
run_flags.define_loop_flags()
run_flags.define_eval_flags()

# task -> [(name suffix of result keys and files, processor key)]: MNLI runs matched and mismatched.
_SPLIT_SETS = {"mnli": [("", "mnli"), ("mismatched", "mismnli")]}


def split_sets(task_name: str) -> list[tuple[str, str]]:
    return _SPLIT_SETS.get(task_name, [("", task_name)])


def validate_flags() -> None:
    if FLAGS.albert_hub_module_handle:
        raise app.UsageError(
            "--albert_hub_module_handle: TF-Hub modules (the TF1 hub format) are not supported. "
            "Use the released checkpoint tarball instead (model.ckpt-best, albert_config.json, "
            "30k-clean.model): --init_checkpoint=<dir>/model.ckpt-best "
            "--albert_config_file=<dir>/albert_config.json --spm_model_file=<dir>/30k-clean.model. "
            "Reference checkpoints are read directly (or convert once: python -m "
            "albert_tf.checkpoints --tf1_checkpoint=...).")
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
        raise app.UsageError("Nothing to do: set --do_train, --do_eval, --do_predict or "
                             "--export_dir.")
    for name in ("data_dir", "task_name", "output_dir", "albert_config_file"):
        if not FLAGS[name].value:
            raise app.UsageError(f"--{name} is required.")
    if not (FLAGS.spm_model_file or FLAGS.vocab_file):
        raise app.UsageError("--spm_model_file is required (or --vocab_file for a WordPiece "
                             "model).")


def main(argv):
    del argv
    validate_flags()
    task_name = FLAGS.task_name.lower()
    try:
        processor = get_processor(task_name)
    except GlueDataError as error:
        raise app.UsageError(str(error)) from None
    config = run_flags.load_config(FLAGS.albert_config_file, FLAGS.max_seq_length)
    tokenizer = FullTokenizer(vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
                              spm_model_file=FLAGS.spm_model_file)
    classifier.check_vocab_size(config, FLAGS.albert_config_file, tokenizer.vocab_size,
                                tokenizer.source_file)
    if FLAGS.do_train:
        run_flags.check_init_checkpoint(FLAGS.init_checkpoint)
    strategy = run_flags.strategy_from_flags()
    if FLAGS.do_eval:
        run_flags.check_eval_strategy(strategy)
    on_tpu = isinstance(strategy, tf.distribute.TPUStrategy)
    run_config = run_flags.run_config_from_flags(
        FLAGS.output_dir, FLAGS.train_batch_size, FLAGS.train_step, FLAGS.save_checkpoints_steps,
        FLAGS.keep_checkpoint_max, FLAGS.iterations_per_loop)
    output_dir = run_config.output_dir
    cached_dir = FLAGS.cached_dir or output_dir
    optimizer_fn = run_flags.optimizer_factory(FLAGS.optimizer, FLAGS.learning_rate,
                                               FLAGS.train_step, FLAGS.warmup_step)
    task = classifier.ClassifierTask(config, task_name, processor.num_labels())
    trainer = Trainer(strategy, task, optimizer_fn, run_config)
    parse = functools.partial(parse_glue_example, max_seq_length=FLAGS.max_seq_length,
                              is_regression=processor.is_regression)

    def features(key: str, split: str, batch_size: int):
        return cached_glue_features(key, FLAGS.data_dir, split, tokenizer, FLAGS.max_seq_length,
                                    cached_dir, pad_to_multiple_of=batch_size if on_tpu else 1)

    def dataset(path: str, batch_size: int):
        return classifier.eval_dataset(path, parse, batch_size, drop_remainder=on_tpu)

    if FLAGS.do_train:
        train = cached_glue_features(task_name, FLAGS.data_dir, "train", tokenizer,
                                     FLAGS.max_seq_length, cached_dir)
        print(f"{task_name} train: {train.num_examples} examples, batch "
              f"{FLAGS.train_batch_size}, {FLAGS.train_step} steps")
        trainer.initialize(FLAGS.init_checkpoint)
        trainer.train(classifier.train_dataset_fn(train.path, parse, seed=FLAGS.input_seed))

    if FLAGS.do_eval:
        dev_sets = [(suffix, features(key, "dev", FLAGS.eval_batch_size).path)
                    for suffix, key in split_sets(task_name)]

        def evaluate(prefix: str) -> dict[str, float]:
            trainer.restore_weights(prefix)
            metrics = {}
            for suffix, path in dev_sets:
                results = task.eval_metrics(trainer.predict(dataset(path, FLAGS.eval_batch_size)))
                metrics.update({(f"{suffix}_{k}" if suffix else k): v for k, v in results.items()})
            return metrics

        key = selection_metric(task_name)
        policy = SweepPolicy.glue(FLAGS.train_step,
                                  max_wait_seconds=0 if FLAGS.do_train else FLAGS.max_eval_wait_secs)
        best_step, best = sweep_checkpoints(output_dir, evaluate, key, policy=policy)
        trainer.write_eval_summaries(best, best_step)
        print(f"Best checkpoint: step {best_step}, {key} {best[key]:.4f} -> "
              f"{os.path.join(output_dir, BEST_PREFIX)}; all results in "
              f"{os.path.join(output_dir, 'eval_results.txt')}")

    if FLAGS.do_predict or FLAGS.export_dir:
        best_prefix = os.path.join(output_dir, BEST_PREFIX)
        if not tf.io.gfile.exists(best_prefix + ".index"):
            raise FileNotFoundError(f"{best_prefix} does not exist: --do_predict and --export_dir "
                                    "use the best checkpoint, which --do_eval selects; run "
                                    "--do_eval first.")
        trainer.restore_weights(best_prefix)

    if FLAGS.do_predict:
        for suffix, key in split_sets(task_name):
            test = features(key, "test", FLAGS.predict_batch_size)
            guids = [example.guid for example in get_processor(
                key, tokenizer.uses_sentencepiece, FLAGS.do_lower_case).get_test_examples(
                    FLAGS.data_dir)]
            outputs = trainer.predict(dataset(test.path, FLAGS.predict_batch_size))
            paths = classifier.write_predictions(output_dir, guids, outputs, processor.get_labels(),
                                                 suffix=f"_{suffix}" if suffix else "")
            print(f"Predicted {len(guids)} {key} test examples -> {', '.join(paths)}")

    if FLAGS.export_dir:
        threshold = None if math.isnan(FLAGS.threshold_to_export) else FLAGS.threshold_to_export
        labels = processor.get_labels()
        export.export_classifier(trainer.model, FLAGS.export_dir, threshold,
                                 assets={"labels.txt": "\n".join(labels) + "\n"} if labels else None,
                                 tokenizer=tokenizer, max_seq_length=FLAGS.max_seq_length)
        print(f"Exported the SavedModel of {BEST_PREFIX} to {FLAGS.export_dir}")


if __name__ == "__main__":
    app.run(main)
