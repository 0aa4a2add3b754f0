"""SST-2 from scratch on CPU: a small randomly initialised ALBERT fine-tuned by run_classifier.py.

What it measures: the whole GLUE path (SentencePiece model, feature cache, the Trainer loop, the
checkpoint sweep) on real data, and whether a small model learns sentiment in a CPU budget
(target: >= 78% dev accuracy in under 20 minutes on 2 cores). It prints figures, never pass/fail.

Data: ../shared/data/glue/SST-2/train.tsv (60,614 phrases) for training and SST-2/test.tsv, which
holds the 872 sentences of the public GLUE dev set with labels, for evaluation. A temporary GLUE
directory links them as SST-2/train.tsv and SST-2/dev.tsv, so the SST-2 processor reads them as the
train and dev splits.

Steps, all in a temporary directory:
1. a SentencePiece model (``data_prep.train_sentencepiece``, ALBERT recipe, ``--vocab_size`` pieces)
   trained on the training sentences;
2. ``run_classifier.py --do_train`` (random initialisation: no --init_checkpoint), timed;
3. ``run_classifier.py --nodo_train --do_eval``: every checkpoint on the 872 dev sentences, best kept.

Printed: accuracy of the best checkpoint (and of every checkpoint), training time, examples/s, eval
and total time, and the load average (the machine may be shared).

Run from the repository root:

    .venv/bin/python benchmarks/bench_glue_sst2.py
    .venv/bin/python benchmarks/bench_glue_sst2.py --train_step=2000 --hidden_size=128
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from absl import app, flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from data_prep.pretraining.vocabulary import train_sentencepiece  # noqa: E402

SST2_DIR = os.path.join(REPO_ROOT, "..", "shared", "data", "glue", "SST-2")

FLAGS = flags.FLAGS
flags.DEFINE_string("sst2_dir", SST2_DIR, "Folder with SST-2 train.tsv and the labelled dev set "
                    "as test.tsv.")
flags.DEFINE_integer("vocab_size", 8000, "SentencePiece pieces.")
flags.DEFINE_integer("embedding_size", 64, "E.")
flags.DEFINE_integer("hidden_size", 128, "H.")
flags.DEFINE_integer("num_hidden_layers", 2, "L.")
flags.DEFINE_integer("num_attention_heads", 4, "A.")
flags.DEFINE_integer("intermediate_size", 512, "I.")
flags.DEFINE_float("dropout", 0.1, "hidden and attention dropout of the encoder.")
flags.DEFINE_integer("max_seq_length", 64, "S.")
flags.DEFINE_integer("train_batch_size", 32, "Batch.")
flags.DEFINE_float("learning_rate", 5e-4, "Peak learning rate (adamw; 1e-3 diverged at step ~400).")
flags.DEFINE_integer("train_step", 3000, "Training steps.")
flags.DEFINE_integer("warmup_step", 300, "Warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 500, "Checkpoint cadence (sweep granularity).")
flags.DEFINE_string("work_dir", None, "Keep the run here (default: a temporary directory, deleted).")


def _sst2_layout(sst2_dir: str, root: str) -> str:
    """root/glue/SST-2/{train,dev}.tsv -> the shared train.tsv and the public dev set (test.tsv)."""
    task_dir = os.path.join(root, "glue", "SST-2")
    os.makedirs(task_dir)
    os.symlink(os.path.abspath(os.path.join(sst2_dir, "train.tsv")),
               os.path.join(task_dir, "train.tsv"))
    os.symlink(os.path.abspath(os.path.join(sst2_dir, "test.tsv")),
               os.path.join(task_dir, "dev.tsv"))
    return os.path.dirname(task_dir)


def _training_sentences(sst2_dir: str, path: str) -> str:
    """The sentence column of train.tsv (header skipped), one per line."""
    with open(os.path.join(sst2_dir, "train.tsv"), encoding="utf-8") as source, \
            open(path, "w", encoding="utf-8") as target:
        next(source)
        for line in source:
            target.write(line.split("\t")[0].strip() + "\n")
    return path


def _run(args: list[str]) -> float:
    """Runs run_classifier.py with ``args``; returns the wall time. Output goes to the console."""
    started = time.time()
    subprocess.run([sys.executable, os.path.join(REPO_ROOT, "run_classifier.py")] + args,
                   check=True, cwd=REPO_ROOT)
    return time.time() - started


def _eval_blocks(path: str) -> list[dict[str, str]]:
    """eval_results.txt -> one {key: value} per evaluated checkpoint."""
    blocks, current = [], {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("="):
                blocks.append(current)
                current = {}
            elif " = " in line:
                key, value = line.rstrip("\n").split(" = ", 1)
                current[key] = value
    return blocks


def main(argv):
    del argv
    root = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_glue_sst2_")
    os.makedirs(root, exist_ok=True)
    load_before = os.getloadavg()
    try:
        started = time.time()
        data_dir = _sst2_layout(FLAGS.sst2_dir, root)
        spm_model = train_sentencepiece(
            _training_sentences(FLAGS.sst2_dir, os.path.join(root, "sentences.txt")),
            os.path.join(root, "sst2"), vocab_size=FLAGS.vocab_size, num_threads=2, quiet=True)
        spm_seconds = time.time() - started
        config_path = os.path.join(root, "albert_config.json")
        with open(config_path, "w", encoding="utf-8") as handle:
            json.dump({"vocab_size": FLAGS.vocab_size, "embedding_size": FLAGS.embedding_size,
                       "hidden_size": FLAGS.hidden_size,
                       "num_hidden_layers": FLAGS.num_hidden_layers,
                       "num_attention_heads": FLAGS.num_attention_heads,
                       "intermediate_size": FLAGS.intermediate_size,
                       "hidden_dropout_prob": FLAGS.dropout,
                       "attention_probs_dropout_prob": FLAGS.dropout,
                       "max_position_embeddings": FLAGS.max_seq_length}, handle)
        output_dir = os.path.join(root, "output")
        common = ["--task_name=sst-2", f"--data_dir={data_dir}",
                  f"--albert_config_file={config_path}", f"--spm_model_file={spm_model}",
                  f"--output_dir={output_dir}", f"--max_seq_length={FLAGS.max_seq_length}",
                  f"--train_step={FLAGS.train_step}", "--do_lower_case", "--optimizer=adamw"]
        train_seconds = _run(common + [
            "--do_train", f"--train_batch_size={FLAGS.train_batch_size}",
            f"--learning_rate={FLAGS.learning_rate}", f"--warmup_step={FLAGS.warmup_step}",
            f"--save_checkpoints_steps={FLAGS.save_checkpoints_steps}",
            f"--iterations_per_loop={min(100, FLAGS.save_checkpoints_steps)}"])
        eval_seconds = _run(common + ["--do_eval", "--eval_batch_size=64"])
        total_seconds = time.time() - started
        blocks = _eval_blocks(os.path.join(output_dir, "eval_results.txt"))
        best = max(blocks, key=lambda block: float(block["eval_accuracy"]))
        examples = FLAGS.train_step * FLAGS.train_batch_size
        print("\n== SST-2 from scratch (872 public dev sentences) ==")
        print(f"model: E={FLAGS.embedding_size} H={FLAGS.hidden_size} L={FLAGS.num_hidden_layers} "
              f"A={FLAGS.num_attention_heads} I={FLAGS.intermediate_size} V={FLAGS.vocab_size} "
              f"S={FLAGS.max_seq_length}; batch {FLAGS.train_batch_size}, {FLAGS.train_step} steps "
              f"({examples / 60614:.2f} epochs), adamw lr {FLAGS.learning_rate:g}")
        for block in blocks:
            print(f"  step {block['global_step']:>6}: eval_accuracy {float(block['eval_accuracy']):.4f}"
                  f"  eval_loss {float(block['eval_loss']):.4f}")
        print(f"best dev accuracy: {float(best['eval_accuracy']):.4f} (step {best['global_step']}; "
              f"chosen on the same dev set, hence optimistic); last checkpoint: "
              f"{float(blocks[-1]['eval_accuracy']):.4f}")
        print(f"sentencepiece: {spm_seconds:.0f} s; training: {train_seconds:.0f} s "
              f"({examples / train_seconds:.1f} examples/s incl. start-up and feature caching); "
              f"eval sweep: {eval_seconds:.0f} s; total: {total_seconds:.0f} s "
              f"({total_seconds / 60:.1f} min)")
        load_after = os.getloadavg()
        print(f"load average before {load_before[0]:.2f}, after (1/5/15 min) "
              f"{load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f} on "
              f"{os.cpu_count()} cores")
    finally:
        if not FLAGS.work_dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    app.run(main)
