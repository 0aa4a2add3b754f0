"""Fine-tuning speed on CPU, side by side: albert_tf's commands against Hugging Face PyTorch.

What it measures: the examples/s a user gets when fine-tuning ALBERT-base shapes on CPU with the
command albert_tf ships (``run_classifier.py``, ``run_ner.py``, run as subprocesses exactly as a
user runs them) and with Hugging Face transformers on PyTorch (``AlbertForSequenceClassification`` /
``AlbertForTokenClassification``), in steady state, plus the speed of one evaluation pass. Figures
and ratios only, never pass/fail.

transformers' ``Trainer`` needs the ``accelerate`` package, which is not among this project's
test requirements (requirements-test.txt), so the Hugging Face side is the Trainer's training step
written out with transformers' own parts, as ``Trainer`` + ``TrainingArguments(use_cpu=True)`` with
its defaults would run it: a ``DataLoader`` of batch 32 with a seeded ``RandomSampler`` (or
transformers' ``LengthGroupedSampler``) and transformers' data collator; forward (under
``torch.autocast("cpu", bfloat16)`` for bf16, as ``bf16=True``), backward, gradients clipped to
global norm 1.0, fused ``torch.optim.AdamW`` (the default ``optim`` with torch >= 2.8; no weight
decay on biases and LayerNorm, as the Trainer), ``get_linear_schedule_with_warmup``. The Trainer's
own bookkeeping (callbacks, logging, which is off here) is not in it; at seconds per step it would
not show.

The case (both frameworks): ALBERT-base shapes from configs/albert_base_v2.json (vocab 30000, E 128,
H 768, L 12, A 12, I 3072, dropout 0 as the v2 configs), random initialisation, batch 32,
``--max_seq_length=128``, AdamW with the same learning rate, linear warmup and decay, weight decay
0.01, epsilon 1e-6 and gradient clipping at global norm 1.0.

Data:

- classification: ``--num_train`` phrases (default 1,536), a seeded sample of
  ../shared/data/glue/SST-2/train.tsv (real SST-2 training phrases), and for the evaluation pass the
  872 labelled sentences of GLUE's public SST-2 dev set (SST-2/test.tsv there). albert_tf reads them
  as your own TSV files (``--train_file`` / ``--dev_file``, docs/own_data.md).
- NER: real English news sentences, ../shared/data/pretraining/rte_docs.txt (RTE premises and
  hypotheses, one sentence per line), split into words CoNLL-style (punctuation apart), sentences of
  at most ``--ner_max_words`` words (mean ~16 words; CoNLL-2003's is ~14), written as a CoNLL file
  (``word<TAB>tag``, a blank line between sentences, docs/ner.md). **The tags are synthetic**: a
  capitalised word that does not start its sentence is an entity (B-MISC, I-MISC for the next
  capitalised words), every other word O. Only the sentence lengths matter for speed.
  ``--num_train`` training sentences and ``--ner_num_eval`` (default 256) others for the
  evaluation pass, both seeded samples.

Tokenization: both frameworks get identical token ids. The SentencePiece model is the English one
here (../shared/data/pretraining/en8k.model, 8,000 pieces) extended with 22,000 unused pieces
(type UNUSED: never produced, so every sentence gets the same pieces as with the original model) to
the 30,000 of the config. The only 30k model available,
../shared/data/spm/albert-recipe-de-30k.model, is German: it cuts English words into far more pieces
(SST-2 training phrases: 23.5 pieces on average against 17.6 with en8k; dev sentences 46 against
35), which would exaggerate every padding effect.
(A real English 30k model would give fewer pieces still, so the padded-to-128 cost is, if anything,
understated here.) albert_tf tokenizes its files itself; the Hugging Face side gets the ids computed
here with albert_tf's tokenizer and feature code (what run_classifier / run_ner do), and the ids are
checked against the feature records albert_tf wrote.

Variants (classification: ``--variants``, each in every ``--dtypes``, by default all of them; NER:
``--ner_variants`` and ``--ner_dtypes``, by default ``default`` and ``group_by_length`` in float32):

- ``default``: albert_tf's command as is; Hugging Face with ``DataCollatorWithPadding`` (each batch
  padded to its longest example; ``DataCollatorForTokenClassification`` for NER), transformers'
  default;
- ``group_by_length``: albert_tf's ``--group_by_length`` (printed "n/a" where the command lacks the
  flag); Hugging Face's ``LengthGroupedSampler``, what ``TrainingArguments(train_sampling_strategy=
  "group_by_length")`` (transformers 5's name for the former ``group_by_length=True``) uses, with
  the same collator;
- ``padded``: Hugging Face only, every example padded to ``--max_seq_length`` (what albert_tf did
  before length-aware batching).

``--dtypes=bfloat16``: albert_tf ``--dtype=bfloat16`` (mixed precision) against autocast
(``TrainingArguments(bf16=True)``).

How it is timed:

- albert_tf training: ``--iterations_per_loop=--loop_steps`` and ``--train_step`` =
  ``--loop_steps`` x (1 + ``--timed_loops``); the Trainer prints one progress line per loop with its
  examples/s; the first loop (tracing) is skipped, the others are combined (examples / seconds).
  One checkpoint, at the last step, after the last timed loop.
- Hugging Face training: the steps after the first ``--loop_steps`` (warm-up) are timed, for
  ``--loop_steps`` x ``--timed_loops`` steps (data loading and collation included, as albert_tf's
  loops include its input pipeline); each variant runs in a fresh process.
- evaluation: albert_tf's ``--do_eval`` sweep over the two checkpoints of the ``default`` command
  (two passes over the dev set, ``--eval_batch_size``); its examples/s come from the Trainer's
  line ``predicted N examples in T s (R examples/s ...`` of the second pass (the first one also
  traces the prediction step, once per run), else from the time between the output lines that
  open and close the first pass, and the table says which. Hugging Face: what
  ``trainer.predict`` does, on the same examples (dynamic padding, in order, under
  ``torch.no_grad`` and, for bf16, autocast), twice, the second pass timed,
  after training, same batch size.

What is timed (the same batches on both sides): by default one epoch of training steps after
the warm-up (``--timed_loops=0``): ``--num_train`` 1,600 examples are 50 batches of 32, so both
time the same examples. With ``group_by_length`` albert_tf sorts chunks of 50 batches (here the
whole epoch) and Hugging Face's LengthGroupedSampler megabatches of min(50, N / (4 x batch))
batches (here 12): its batches are a little wider, which the printed widths show. A few steps
would not do: batch widths vary from step to step, grouped ones by a factor of 4. The mean width of the timed batches
is printed for both (albert_tf's from its training input rebuilt as the command builds it; Hugging
Face's beside that of a whole epoch) to show that they compute on the same widths. The ``padded``
variant has one width: ``--padded_timed_loops`` (4) steps. The machine may be shared: the load
average is printed at the start and the end. Everything is written to a temporary directory,
deleted at the end.

Run from the repository root (the defaults: about 45 min on this project's 2 cores):

    .venv/bin/python benchmarks/bench_fine_tuning.py
    .venv/bin/python benchmarks/bench_fine_tuning.py --tasks=classification --dtypes=float32 \
        --variants=default --timed_loops=1 --num_eval=64     # a quick check
    .venv/bin/python benchmarks/bench_fine_tuning.py --tasks=ner --ner_dtypes=float32,bfloat16
    .venv/bin/python benchmarks/bench_fine_tuning.py --frameworks=hf --timed_loops=10  # 10 steps
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

from absl import app, flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks.base_config import define_config_flag  # noqa: E402
from benchmarks.machine_load import load_average  # noqa: E402

SHARED = os.path.join(REPO_ROOT, "..", "shared", "data")

FRAMEWORKS = ("albert_tf", "hf")
TASKS = ("classification", "ner")
VARIANTS = ("default", "group_by_length", "padded")
DTYPES = ("float32", "bfloat16")
SCRIPTS = {"classification": "run_classifier.py", "ner": "run_ner.py"}

FLAGS = flags.FLAGS
flags.DEFINE_list("frameworks", list(FRAMEWORKS), "albert_tf and/or hf.")
flags.DEFINE_list("tasks", list(TASKS), "classification (SST-2) and/or ner.")
flags.DEFINE_list("variants", list(VARIANTS), "Classification: default, group_by_length, padded "
                  "(Hugging Face only).")
flags.DEFINE_list("dtypes", list(DTYPES), "Classification: float32 and/or bfloat16.")
flags.DEFINE_list("ner_variants", ["default", "group_by_length"], "NER: as --variants.")
flags.DEFINE_list("ner_dtypes", ["float32"], "NER: as --dtypes.")
flags.DEFINE_boolean("eval", True, "Also time one evaluation pass per framework, task and dtype.")
flags.DEFINE_integer("loop_steps", 1, "Steps per albert_tf loop (--iterations_per_loop); also the "
                     "untimed warm-up steps of Hugging Face.")
flags.DEFINE_integer("timed_loops", 0, "Timed loops after the warm-up loop of the default and "
                     "group_by_length variants (Hugging Face: loop_steps x timed_loops timed "
                     "steps); 0: one epoch's steps, so both frameworks time batches of the same "
                     "widths.")
flags.DEFINE_integer("padded_timed_loops", 4, "Timed loops of the padded variant (every batch "
                     "of width max_seq_length: a few are representative).")
flags.DEFINE_integer("train_batch_size", 32, "Training batch.")
flags.DEFINE_integer("eval_batch_size", 32, "Evaluation batch.")
flags.DEFINE_integer("max_seq_length", 128, "S.")
flags.DEFINE_float("learning_rate", 2e-5, "Peak learning rate (AdamW) of both frameworks.")
flags.DEFINE_integer("seed", 12345, "Seed of the data samples and of both initialisations.")
flags.DEFINE_integer("num_train", 1600, "Training examples (SST-2 phrases; NER sentences); "
                     "1,600 = 50 batches of 32, one length-grouping chunk of albert_tf.")
flags.DEFINE_integer("num_eval", 872, "Classification evaluation examples (the first N SST-2 dev "
                     "sentences; 872: all).")
flags.DEFINE_integer("ner_num_eval", 256, "NER evaluation sentences.")
flags.DEFINE_integer("ner_max_words", 32, "Longest NER sentence kept, in words.")
define_config_flag("Model shapes (the v2 base config).")
flags.DEFINE_string("spm_model_file", os.path.join(SHARED, "pretraining", "en8k.model"),
                    "SentencePiece model; extended with unused pieces to the config's vocab_size.")
flags.DEFINE_string("sst2_dir", os.path.join(SHARED, "glue", "SST-2"),
                    "Folder with SST-2 train.tsv and the labelled dev set as test.tsv.")
flags.DEFINE_string("ner_corpus", os.path.join(SHARED, "pretraining", "rte_docs.txt"),
                    "English sentences, one per line, for the NER files.")
flags.DEFINE_string("work_dir", None, "Keep everything here (default: a temporary directory, "
                    "deleted).")
flags.DEFINE_string("hf_job", None, "Internal: run the Hugging Face job this JSON file describes.")

_PROGRESS = re.compile(r"^step (\d+)/(\d+)\s.*\s([\d.]+) examples/s")
_PREDICTED = re.compile(r"predicted (\d+) examples in ([\d.]+) s \(([\d.]+) examples/s")
_WORD = re.compile(r"\w+(?:['’.-]\w+)*|[^\w\s]")


# -- data ------------------------------------------------------------------------------------------

def _varint(value: int) -> bytes:
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        if not value:
            return out + bytes([byte])
        out += bytes([byte | 0x80])


def extended_spm_model(source: str, vocab_size: int, target: str) -> str:
    """``source`` with unused pieces ``<unusedN>`` appended up to ``vocab_size`` pieces.

    Appends repeated field 1 (ModelProto.pieces: piece = 1, score = 2, type = 3, UNUSED = 5) to the
    serialized model: protobuf concatenates repeated fields, and SentencePiece never emits UNUSED
    pieces, so the segmentation of every text is unchanged."""
    import sentencepiece as spm

    with open(source, "rb") as handle:
        model = handle.read()
    size = spm.SentencePieceProcessor(model_file=source).get_piece_size()
    if size > vocab_size:
        raise app.UsageError(f"{source} has {size} pieces, more than vocab_size {vocab_size}.")
    pieces = []
    for index in range(size, vocab_size):
        text = f"<unused{index}>".encode()
        body = (b"\x0a" + _varint(len(text)) + text + b"\x15" + struct.pack("<f", 0.0)
                + b"\x18" + _varint(5))
        pieces.append(b"\x0a" + _varint(len(body)) + body)
    with open(target, "wb") as handle:
        handle.write(model + b"".join(pieces))
    return target


def sst2_rows(path: str, count: int | None, seed: int | None) -> list[tuple[str, str]]:
    """(sentence, label) of an SST-2 TSV (header skipped): a seeded sample, or the first count."""
    with open(path, encoding="utf-8") as handle:
        next(handle)
        rows = [tuple(line.rstrip("\n").split("\t")) for line in handle if line.strip()]
    rows = [(sentence.strip(), label) for sentence, label in rows]
    if seed is None:
        return rows[:count]
    return random.Random(seed).sample(rows, count)


def write_own_tsv(path: str, rows: list[tuple[str, str]]) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("text\tlabel\n")
        for text, label in rows:
            handle.write(f"{text}\t{label}\n")
    return path


def synthetic_tags(words: list[str]) -> list[str]:
    """A capitalised word that does not start the sentence is an entity (B-MISC, then I-MISC)."""
    tags = []
    for index, word in enumerate(words):
        if index > 0 and word[:1].isupper():
            tags.append("I-MISC" if tags[-1] != "O" else "B-MISC")
        else:
            tags.append("O")
    return tags


def ner_sentences(path: str, num_train: int, num_eval: int, max_words: int,
                  seed: int) -> tuple[list[list[str]], list[list[str]]]:
    """Two disjoint seeded samples of the corpus's sentences of 2..max_words words (as words)."""
    with open(path, encoding="utf-8") as handle:
        sentences = [_WORD.findall(line) for line in handle if line.strip()]
    sentences = [words for words in sentences if 2 <= len(words) <= max_words]
    if len(sentences) < num_train + num_eval:
        raise app.UsageError(f"{path}: {len(sentences)} sentences of 2..{max_words} words, fewer "
                             f"than --num_train + --ner_num_eval = {num_train + num_eval}.")
    sample = random.Random(seed).sample(sentences, num_train + num_eval)
    return sample[:num_train], sample[num_train:]


def write_conll(path: str, sentences: list[list[str]]) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        for words in sentences:
            for word, tag in zip(words, synthetic_tags(words)):
                handle.write(f"{word}\t{tag}\n")
            handle.write("\n")
    return path


def classification_ids(tokenizer, path: str, split: str,
                       labels: list[str]) -> list[dict[str, list[int] | int]]:
    """run_classifier's features of the own-data file ``path`` (unpadded): input_ids and the label
    id. The file is read as run_classifier reads it (the reader applies the tokenizer's text
    normalization, accents included)."""
    from data_prep.classification.features import convert_example
    from data_prep.classification.own_data import Columns, OwnDataReader

    examples = []
    reader = OwnDataReader(Columns(), use_spm=True, do_lower_case=True)
    for example in reader.read(path, split):
        features = convert_example(example, labels, FLAGS.max_seq_length, tokenizer)
        length = sum(features.input_mask)
        examples.append({"input_ids": features.input_ids[:length], "label": features.label_id})
    return examples


def ner_ids(tokenizer, sentences: list[list[str]],
            tag_list: list[str]) -> list[dict[str, list[int]]]:
    """run_ner's windows of ``sentences`` (unpadded): input_ids and per position the tag id of a
    word's first piece, -100 elsewhere (left out of the loss, as albert_tf's label weights)."""
    from data_prep.token_classification.features import sentence_windows, word_pieces

    examples = []
    for index, words in enumerate(sentences):
        tag_ids = [tag_list.index(tag) for tag in synthetic_tags(words)]
        for window in sentence_windows(word_pieces(words, tokenizer), tag_ids, index,
                                       FLAGS.max_seq_length, 64, tokenizer.cls_id,
                                       tokenizer.sep_id):
            length = sum(window.input_mask)
            examples.append({"input_ids": window.input_ids[:length],
                             "labels": [label if weight else -100 for label, weight in
                                        zip(window.label_ids[:length],
                                            window.label_weights[:length])]})
    return examples


def record_file(output_dir: str, split_word: str) -> str | None:
    """The feature record file albert_tf wrote for a split (None: no such file)."""
    names = [name for name in os.listdir(output_dir)
             if name.endswith(".tf_record") and split_word in name]
    return os.path.join(output_dir, names[0]) if len(names) == 1 else None


def record_ids(output_dir: str, split_word: str) -> list[tuple[int, ...]] | None:
    """The unpadded input_ids of the feature records albert_tf wrote for a split (None: no file)."""
    import tensorflow as tf

    path = record_file(output_dir, split_word)
    if path is None:
        return None
    ids = []
    for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
        values = tf.train.Example.FromString(raw).features.feature["input_ids"].int64_list.value
        ids.append(tuple(int(v) for v in values if v != 0))
    return ids


# -- albert_tf -------------------------------------------------------------------------------------

def flag_available(script: str, flag: str) -> bool:
    """Whether ``script --helpfull`` lists ``--flag`` (the help exits before TensorFlow loads)."""
    result = subprocess.run([sys.executable, os.path.join(REPO_ROOT, script), "--helpfull"],
                            capture_output=True, text=True, cwd=REPO_ROOT)
    return re.search(rf"--(\[no\])?{flag}\b", result.stdout + result.stderr) is not None


def run_command(args: list[str], log_path: str) -> list[tuple[float, str]]:
    """Runs ``args``; returns its output lines, each with the time it arrived. Echoes the progress
    lines; the whole output goes to ``log_path`` (its tail is printed if the command fails)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    lines = []
    with open(log_path, "w", encoding="utf-8") as log, subprocess.Popen(
            args, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1) as process:
        for line in process.stdout:
            lines.append((time.perf_counter(), line.rstrip("\n")))
            log.write(line)
            if _PROGRESS.match(line) or _PREDICTED.search(line):
                print("    " + line.rstrip("\n"), flush=True)
    if process.returncode:
        print("\n".join(text for _, text in lines[-30:]))
        raise RuntimeError(f"{' '.join(args[:2])} failed with status {process.returncode}; "
                           f"log: {log_path}")
    return lines


def albert_tf_train_rate(lines: list[tuple[float, str]]) -> tuple[float, int]:
    """Examples/s over the progress lines but the first (equal loops: examples / summed seconds)."""
    rates = [float(match.group(3)) for _, text in lines if (match := _PROGRESS.match(text))]
    timed = rates[1:]
    if not timed:
        raise RuntimeError("no progress line after the first loop: raise --timed_loops")
    return len(timed) / sum(1.0 / rate for rate in timed), len(timed)


def albert_tf_eval_rate(lines: list[tuple[float, str]], examples: int) -> tuple[float, str]:
    """Examples/s of the evaluation pass: the Trainer's line of the sweep's last pass (the first
    one also traces the prediction step), else the span of the output of the first pass."""
    passes = [match for _, text in lines if (match := _PREDICTED.search(text))]
    if passes:
        return float(passes[-1].group(3)), f"Trainer's line, pass {len(passes)}"
    saved = [index for index, (_, text) in enumerate(lines) if text.startswith("Saved checkpoint")]
    evaluated = [index for index, (_, text) in enumerate(lines) if text.startswith("Evaluated ")]
    if not saved or not evaluated:
        raise RuntimeError("no 'Saved checkpoint' / 'Evaluated' line to time the evaluation by")
    seconds = lines[evaluated[0]][0] - lines[saved[-1] + 1][0]
    return examples / seconds, "output span"


def albert_tf_widths(output_dir: str, grouped: bool, first: int, count: int) -> float:
    """The mean width of albert_tf's training batches ``first`` .. ``first + count - 1`` of a run
    in ``output_dir``: its training input rebuilt as the command builds it (the records, the
    command's --input_seed, each batch cut to its longest example, --group_by_length), read for
    the masks only."""
    import tensorflow as tf

    from albert_tf.training.input_pipeline import record_train_dataset_fn
    from albert_tf.training.length_buckets import MASK_FEATURE, LengthBuckets

    spec = {MASK_FEATURE: tf.io.FixedLenFeature([FLAGS.max_seq_length], tf.int64)}
    dataset_fn = record_train_dataset_fn(
        record_file(output_dir, "_train_"), lambda records: tf.io.parse_example(records, spec),
        seed=FLAGS.seed, grouped=grouped,
        buckets=LengthBuckets.of(FLAGS.max_seq_length, (MASK_FEATURE,), exact=True))
    widths = [int(batch[MASK_FEATURE].shape[1])
              for batch in dataset_fn(FLAGS.train_batch_size, first).take(count)]
    return sum(widths) / len(widths)


def run_albert_tf(task: str, variant: str, dtype: str, files: dict, root: str,
                  with_eval: bool) -> dict:
    """One albert_tf command; its training (and evaluation) examples/s."""
    name = f"albert_tf_{task}_{variant}_{dtype}"
    output_dir = os.path.join(root, name)
    steps = FLAGS.loop_steps * (1 + timed_loops(variant))
    args = [sys.executable, os.path.join(REPO_ROOT, SCRIPTS[task]),
            f"--albert_config_file={files['config']}", f"--spm_model_file={files['spm']}",
            f"--output_dir={output_dir}", f"--max_seq_length={FLAGS.max_seq_length}",
            "--do_train", f"--train_step={steps}", f"--warmup_step={max(1, steps // 10)}",
            f"--iterations_per_loop={FLAGS.loop_steps}",
            # With the evaluation: a checkpoint one step before the end too, so the sweep makes
            # two passes and the second one (steady state) is timed.
            f"--save_checkpoints_steps={steps - 1 if with_eval else steps}",
            f"--train_batch_size={FLAGS.train_batch_size}",
            f"--learning_rate={FLAGS.learning_rate}",
            "--optimizer=adamw", f"--seed={FLAGS.seed}", f"--input_seed={FLAGS.seed}",
            f"--dtype={dtype}"]
    if task == "classification":
        args += [f"--train_file={files['cls_train']}", f"--dev_file={files['cls_eval']}"]
    else:
        args += [f"--train_file={files['ner_train']}", f"--eval_file={files['ner_eval']}"]
    if with_eval:
        args += ["--do_eval", f"--eval_batch_size={FLAGS.eval_batch_size}"]
    if variant == "group_by_length":
        args.append("--group_by_length")
    print(f"  {name}: {SCRIPTS[task]} {'--do_eval ' if with_eval else ''}"
          f"--dtype={dtype}{' --group_by_length' if variant == 'group_by_length' else ''}",
          flush=True)
    started = time.perf_counter()
    lines = run_command(args, os.path.join(root, name + ".log"))
    result = {"wall": time.perf_counter() - started, "output_dir": output_dir}
    result["train"], result["train_loops"] = albert_tf_train_rate(lines)
    result["train_width"] = albert_tf_widths(output_dir, variant == "group_by_length",
                                             FLAGS.loop_steps, steps - FLAGS.loop_steps)
    print(f"    {result['train']:.2f} examples/s training (mean width of the timed batches "
          f"{result['train_width']:.1f})", flush=True)
    if with_eval:
        result["eval"], result["eval_how"] = albert_tf_eval_rate(
            lines, len(files[f"{task}_eval_ids"]))
    return result


# -- Hugging Face (each job in its own process) ----------------------------------------------------

def hf_job(spec_path: str) -> None:
    """Trains (and predicts) one Hugging Face variant as ``spec_path`` says; writes its result."""
    import torch
    from transformers import (AlbertConfig, AlbertForSequenceClassification,
                              AlbertForTokenClassification, AlbertTokenizer,
                              DataCollatorForTokenClassification, DataCollatorWithPadding,
                              default_data_collator,
                              get_linear_schedule_with_warmup)
    from transformers.trainer_pt_utils import LengthGroupedSampler, get_parameter_names

    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    with open(spec["config"], encoding="utf-8") as handle:
        albert = json.load(handle)
    ner = spec["task"] == "ner"
    config = AlbertConfig(
        vocab_size=albert["vocab_size"], embedding_size=albert["embedding_size"],
        hidden_size=albert["hidden_size"], num_hidden_layers=albert["num_hidden_layers"],
        num_attention_heads=albert["num_attention_heads"],
        intermediate_size=albert["intermediate_size"], hidden_act=albert["hidden_act"],
        hidden_dropout_prob=albert["hidden_dropout_prob"],
        attention_probs_dropout_prob=albert["attention_probs_dropout_prob"],
        max_position_embeddings=albert["max_position_embeddings"],
        type_vocab_size=albert["type_vocab_size"], num_labels=spec["num_labels"])
    torch.manual_seed(spec["seed"])
    model = (AlbertForTokenClassification if ner else AlbertForSequenceClassification)(config)
    tokenizer = AlbertTokenizer(vocab_file=spec["spm"])  # pads only: the ids are albert_tf's
    label_key = "labels" if ner else "label"
    max_len = spec["max_seq_length"]

    class Examples(torch.utils.data.Dataset):
        def __init__(self, examples, pad):
            self.examples, self.pad = examples, pad

        def __len__(self):
            return len(self.examples)

        def __getitem__(self, index):
            example = self.examples[index]
            ids = example["input_ids"]
            item = {"input_ids": list(ids), "attention_mask": [1] * len(ids),
                    "labels": example[label_key]}
            if self.pad:
                padding = max_len - len(ids)
                item["input_ids"] += [0] * padding
                item["attention_mask"] += [0] * padding
                if ner:
                    item["labels"] = list(item["labels"]) + [-100] * padding
            return item

    padded = spec["variant"] == "padded"
    collate = (default_data_collator if padded else DataCollatorForTokenClassification(tokenizer)
               if ner else DataCollatorWithPadding(tokenizer))
    widths = []

    def collator(features):
        batch = collate(features)
        widths.append(int(batch["input_ids"].shape[1]))
        return batch

    warmup, timed = spec["loop_steps"], spec["loop_steps"] * spec["timed_loops"]
    steps = warmup + timed
    train_set = Examples(spec["train"], padded)
    batch = spec["train_batch_size"]

    def make_sampler():
        generator = torch.Generator().manual_seed(spec["seed"])
        if spec["variant"] == "group_by_length":
            return LengthGroupedSampler(batch, lengths=[len(e["input_ids"]) for e in spec["train"]],
                                        generator=generator)
        return torch.utils.data.RandomSampler(train_set, generator=generator)

    sampler = make_sampler()
    loader = torch.utils.data.DataLoader(train_set, batch_size=batch, sampler=sampler,
                                         collate_fn=collator)
    # The Trainer's defaults: no weight decay for biases and LayerNorm, fused AdamW (torch >= 2.8),
    # linear warmup and decay, gradients clipped to global norm 1.0.
    decay = set(get_parameter_names(model, [torch.nn.LayerNorm],
                                    [r"bias", r"layernorm", r"rmsnorm", r"(?:^|\.)norm(?:$|\.)",
                                     r"_norm(?:$|\.)"]))
    groups = [{"params": [p for n, p in model.named_parameters() if n in decay],
               "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if n not in decay],
               "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=spec["learning_rate"], betas=(0.9, 0.999), eps=1e-6,
                                  fused=True)
    scheduler = get_linear_schedule_with_warmup(optimizer, max(1, steps // 10), steps)
    bf16 = spec["dtype"] == "bfloat16"
    model.train()
    step, started = 0, None
    while step < steps:
        for inputs in loader:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = model(**inputs).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            model.zero_grad()
            step += 1
            if step == warmup:
                started = time.perf_counter()
            if step == steps:
                break
    # The mean width of the batches of a whole first epoch (the same seeded order), to show how
    # representative the timed ones were.
    order = list(make_sampler())
    epoch_widths = [max_len if padded else max(len(spec["train"][i]["input_ids"])
                                               for i in order[start:start + batch])
                    for start in range(0, len(order), batch)]
    result = {"train": timed * batch / (time.perf_counter() - started),
              "train_width": sum(widths[warmup:steps]) / timed,
              "epoch_width": sum(epoch_widths) / len(epoch_widths)}
    if spec["eval"]:
        widths.clear()
        model.eval()
        eval_loader = torch.utils.data.DataLoader(Examples(spec["eval_examples"], False),
                                                  batch_size=spec["eval_batch_size"],
                                                  collate_fn=collator)
        for _ in range(2):  # two passes, as albert_tf's sweep of two checkpoints; the second timed
            started = time.perf_counter()
            logits = []
            with torch.no_grad():
                for inputs in eval_loader:
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                        logits.append(model(**inputs).logits.float())
            seconds = time.perf_counter() - started
        result.update(eval=len(spec["eval_examples"]) / seconds, eval_how="predict loop",
                      eval_width=sum(widths) / max(1, len(widths)))
    with open(spec["result"], "w", encoding="utf-8") as handle:
        json.dump(result, handle)


def run_hf(task: str, variant: str, dtype: str, files: dict, root: str, with_eval: bool) -> dict:
    name = f"hf_{task}_{variant}_{dtype}"
    spec = {"task": task, "variant": variant, "dtype": dtype, "config": files["config"],
            "spm": files["spm"], "seed": FLAGS.seed, "max_seq_length": FLAGS.max_seq_length,
            "num_labels": files[f"{task}_num_labels"], "train": files[f"{task}_train_ids"],
            "eval_examples": files[f"{task}_eval_ids"], "eval": with_eval,
            "loop_steps": FLAGS.loop_steps, "timed_loops": timed_loops(variant),
            "train_batch_size": FLAGS.train_batch_size, "eval_batch_size": FLAGS.eval_batch_size,
            "learning_rate": FLAGS.learning_rate, "output_dir": os.path.join(root, name),
            "result": os.path.join(root, name + ".result.json")}
    spec_path = os.path.join(root, name + ".json")
    with open(spec_path, "w", encoding="utf-8") as handle:
        json.dump(spec, handle)
    print(f"  {name}: train{' + predict' if with_eval else ''}", flush=True)
    started = time.perf_counter()
    run_command([sys.executable, os.path.abspath(__file__), f"--hf_job={spec_path}"],
                os.path.join(root, name + ".log"))
    with open(spec["result"], encoding="utf-8") as handle:
        result = json.load(handle)
    result["wall"] = time.perf_counter() - started
    print(f"    {result['train']:.2f} examples/s training (mean width of the timed batches "
          f"{result['train_width']:.1f}, of a whole epoch's {result['epoch_width']:.1f})"
          + (f", {result['eval']:.2f} examples/s predict" if with_eval else ""), flush=True)
    return result


# -- main ------------------------------------------------------------------------------------------

def timed_loops(variant: str) -> int:
    """The timed loops of a variant: --padded_timed_loops, else --timed_loops or one epoch."""
    if variant == "padded":
        return FLAGS.padded_timed_loops
    epoch_steps = FLAGS.num_train // FLAGS.train_batch_size
    return FLAGS.timed_loops or max(1, epoch_steps // FLAGS.loop_steps)


def variants_of(task: str) -> list[str]:
    return FLAGS.variants if task == "classification" else FLAGS.ner_variants


def dtypes_of(task: str) -> list[str]:
    return FLAGS.dtypes if task == "classification" else FLAGS.ner_dtypes


def _check_flags() -> None:
    for name, allowed in (("frameworks", FRAMEWORKS), ("tasks", TASKS), ("variants", VARIANTS),
                          ("dtypes", DTYPES), ("ner_variants", VARIANTS),
                          ("ner_dtypes", DTYPES)):
        for value in getattr(FLAGS, name):
            if value not in allowed:
                raise app.UsageError(f"--{name}: {value!r} is not one of {', '.join(allowed)}.")
    if FLAGS.timed_loops < 0:
        raise app.UsageError(f"--timed_loops must be >= 0, got {FLAGS.timed_loops}.")
    for name in ("loop_steps", "padded_timed_loops", "train_batch_size",
                 "eval_batch_size", "num_train",
                 "num_eval", "ner_num_eval", "ner_max_words"):
        if getattr(FLAGS, name) < 1:
            raise app.UsageError(f"--{name} must be >= 1, got {getattr(FLAGS, name)}.")



def prepare(root: str) -> dict:
    """The files of both frameworks, the token ids of the Hugging Face side, length statistics."""
    from albert_tf.tokenization.full_tokenizer import FullTokenizer

    with open(FLAGS.albert_config_file, encoding="utf-8") as handle:
        albert = json.load(handle)
    config = os.path.join(root, "albert_config.json")
    with open(config, "w", encoding="utf-8") as handle:
        json.dump(albert, handle, indent=1)
    spm = extended_spm_model(FLAGS.spm_model_file, albert["vocab_size"],
                             os.path.join(root, "spm.model"))
    tokenizer = FullTokenizer(spm_model_file=spm, do_lower_case=True)
    files = {"config": config, "spm": spm}
    if "classification" in FLAGS.tasks:
        train = sst2_rows(os.path.join(FLAGS.sst2_dir, "train.tsv"), FLAGS.num_train, FLAGS.seed)
        dev = sst2_rows(os.path.join(FLAGS.sst2_dir, "test.tsv"), FLAGS.num_eval, None)
        labels = sorted({label for _, label in train})
        files.update(cls_train=write_own_tsv(os.path.join(root, "sst2_train.tsv"), train),
                     cls_eval=write_own_tsv(os.path.join(root, "sst2_dev.tsv"), dev),
                     classification_num_labels=len(labels))
        files.update(
            classification_train_ids=classification_ids(tokenizer, files["cls_train"], "train",
                                                        labels),
            classification_eval_ids=classification_ids(tokenizer, files["cls_eval"], "dev", labels))
    if "ner" in FLAGS.tasks:
        train, dev = ner_sentences(FLAGS.ner_corpus, FLAGS.num_train, FLAGS.ner_num_eval,
                                   FLAGS.ner_max_words, FLAGS.seed)
        tag_list = ["O", "B-MISC", "I-MISC"]  # run_ner's order: O first, then sorted
        files.update(ner_train=write_conll(os.path.join(root, "ner_train.conll"), train),
                     ner_eval=write_conll(os.path.join(root, "ner_dev.conll"), dev),
                     ner_num_labels=len(tag_list), ner_words=(
                         sum(map(len, train)) / len(train), sum(map(len, dev)) / len(dev)),
                     ner_train_ids=ner_ids(tokenizer, train, tag_list),
                     ner_eval_ids=ner_ids(tokenizer, dev, tag_list))
    return files


def _mean_tokens(examples: list[dict]) -> float:
    return sum(len(example["input_ids"]) for example in examples) / len(examples)


def check_ids(files: dict, task: str, output_dir: str) -> str:
    """Whether albert_tf's feature records hold the ids given to Hugging Face (as multisets)."""
    verdicts = []
    for split, word in (("train", "_train_"), ("eval", "_dev_")):
        ours = sorted(tuple(example["input_ids"]) for example in files[f"{task}_{split}_ids"])
        theirs = record_ids(output_dir, word)
        if theirs is None:
            verdicts.append(f"{split}: no record file")
        else:
            verdicts.append(f"{split}: {'identical' if sorted(theirs) == ours else 'DIFFERENT'} "
                            f"({len(theirs)} records)")
    return "; ".join(verdicts)


def _cell(value: float | None) -> str:
    return f"{value:10.2f}" if value is not None else f"{'-':>10}"


def report(results: dict, unavailable: set, eval_how: dict) -> None:
    print("\n== examples/s (higher is better) ==")
    print(f"{'task':<15}{'pass':<7}{'framework':<11}{'variant':<17}{'float32':>10}{'bfloat16':>10}")
    for task in FLAGS.tasks:
        for phase in ("train", "eval"):
            for framework in FLAGS.frameworks:
                for variant in variants_of(task):
                    if phase == "eval" and variant != "default":
                        continue
                    if framework == "albert_tf" and variant == "padded":
                        continue
                    cells = []
                    for dtype in DTYPES:
                        key = (task, framework, variant, dtype)
                        if dtype not in dtypes_of(task):
                            cells.append(f"{'':>10}")
                        elif framework == "albert_tf" and (task, variant) in unavailable:
                            cells.append(f"{'n/a':>10}")
                        else:
                            cells.append(_cell(results.get(key, {}).get(phase)))
                    label = variant if phase == "train" else (
                        "default" if framework == "albert_tf" else "dynamic padding")
                    print(f"{task:<15}{phase:<7}{framework:<11}{label:<17}{''.join(cells)}")
    if unavailable:
        print("n/a: --group_by_length not available in "
              + ", ".join(sorted({SCRIPTS[task] for task, _ in unavailable})))
    for key, how in sorted(eval_how.items()):
        print(f"eval examples/s of {' '.join(key)}: {how}")

    print("\n== ratios albert_tf / Hugging Face (> 1: albert_tf faster) ==")
    pairs = (("train", "default", "default", "default / HF dynamic padding"),
             ("train", "group_by_length", "group_by_length",
              "--group_by_length / HF group_by_length"),
             ("train", "default", "padded", "default / HF padded to max_seq_length"),
             ("eval", "default", "default", "eval pass / HF predict (dynamic padding)"))
    for task in FLAGS.tasks:
        for phase, ours, theirs, label in pairs:
            cells = []
            for dtype in DTYPES:
                mine = results.get((task, "albert_tf", ours, dtype), {}).get(phase)
                other = results.get((task, "hf", theirs, dtype), {}).get(phase)
                cells.append(f"{mine / other:10.2f}" if mine and other else f"{'-':>10}")
            print(f"{task:<15}{label:<45}{''.join(cells)}")
    print(f"{'':<15}{'':<45}{'float32':>10}{'bfloat16':>10}  (bfloat16: albert_tf --dtype "
          "against HF bf16 autocast)")


def main(argv: list[str]) -> None:
    del argv
    if FLAGS.hf_job:
        hf_job(FLAGS.hf_job)
        return
    _check_flags()
    root = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_fine_tuning_")
    os.makedirs(root, exist_ok=True)
    print(f"load average at start: {load_average()} on {os.cpu_count()} cores", flush=True)
    started = time.perf_counter()
    try:
        files = prepare(root)
        unavailable = set()
        if "albert_tf" in FLAGS.frameworks:
            unavailable = {(task, "group_by_length") for task in FLAGS.tasks
                           if "group_by_length" in variants_of(task)
                           and not flag_available(SCRIPTS[task], "group_by_length")}
        for task in FLAGS.tasks:
            mean_train = _mean_tokens(files[f"{task}_train_ids"])
            mean_eval = _mean_tokens(files[f"{task}_eval_ids"])
            words = (f", words per sentence {files['ner_words'][0]:.1f} / "
                     f"{files['ner_words'][1]:.1f}" if task == "ner" else "")
            print(f"{task}: {len(files[f'{task}_train_ids'])} training / "
                  f"{len(files[f'{task}_eval_ids'])} evaluation sequences, mean tokens "
                  f"([CLS], [SEP] included) {mean_train:.1f} / {mean_eval:.1f}{words}; S "
                  f"{FLAGS.max_seq_length}", flush=True)
        results, eval_how, checks = {}, {}, {}
        for task in FLAGS.tasks:
            for framework in FLAGS.frameworks:
                for dtype in dtypes_of(task):
                    for variant in variants_of(task):
                        if framework == "albert_tf" and (
                                variant == "padded" or (task, variant) in unavailable):
                            continue
                        with_eval = FLAGS.eval and variant == "default"
                        run = run_albert_tf if framework == "albert_tf" else run_hf
                        result = run(task, variant, dtype, files, root, with_eval)
                        results[(task, framework, variant, dtype)] = result
                        if "eval_how" in result:
                            eval_how[(task, framework, dtype)] = result["eval_how"]
                        if framework == "albert_tf" and task not in checks:
                            checks[task] = check_ids(files, task, result["output_dir"])
        for task, verdict in checks.items():
            print(f"token ids, albert_tf's records against those given to Hugging Face ({task}): "
                  f"{verdict}")
        report(results, unavailable, eval_how)
        print(f"\ntraining: {FLAGS.loop_steps * (1 + timed_loops('default'))} steps of batch "
              f"{FLAGS.train_batch_size} per variant ("
              f"{FLAGS.loop_steps * (1 + timed_loops('padded'))} for padded), the "
              f"first {FLAGS.loop_steps} untimed; evaluation batch {FLAGS.eval_batch_size}; total "
              f"{(time.perf_counter() - started) / 60:.1f} min")
        print(f"load average at end: {load_average()} on {os.cpu_count()} cores")
    finally:
        if not FLAGS.work_dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    app.run(main)
