"""Early exit (PABEE, run_classifier --early_exit) on real data on CPU: what it saves and what it
costs.

For each task (SST-2, RTE sentences, the quickstart's 3 classes and 5 sources, below), a small
randomly initialised 12-layer ALBERT (en8k's vocabulary, all layers sharing one block; the widths
are flags: ALBERT-base's too) is fine-tuned by run_classifier.py with the same seeds and steps,
as the variants say:

- ``ordinary``: no early exit;
- ``two_stage``: --early_exit with two-stage training (the default) from the ordinary run's
  directory (--init_checkpoint): stage 1 is that run (a two-stage run that trains stage 1 itself
  trains the same weights bit for bit, tests/test_early_exit.py), stage 2 trains the internal
  classifiers for the same steps, the rest frozen, with the default self-distillation;
- ``two_stage_labels``: the same, stage 2 on the labels alone (--early_exit_distillation=0);
- ``joint``: --early_exit --early_exit_training=joint (PABEE's loss, from the same start);
- ``shared``: --early_exit --early_exit_heads=shared (joint, one classifier after every layer).

Each run sweeps its checkpoints on dev and exports its best one. Printed per task:

- the dev accuracy of the ordinary model and of each early-exit model's full depth;
- for each early-exit model, patience 1..L and each confidence: dev accuracy and mean layers used
  (the sweep's table, early_exit_results.json), and the rule it chose;
- the batch-1 latency of the exported SavedModels (ids_only, ``serve_patience`` and
  ``serve_confidence``) on the dev examples at their real length, mean over examples, for each
  patience and confidence, against the ordinary
  export's ``serving_default`` timed just before it (the speed-up), and the mean layers the
  served model used on them (the table's mean is over the whole dev set). Both exports run
  with TensorFlow's intra- and inter-op threads at 1, and each call is measured twice: the
  process's CPU time (what the call computed: on a shared machine, time spent waiting for a CPU
  is not counted) and the wall time (what a caller waits; it moves with the machine's load).
  The speed-up is given by both;
- one summary line per early-exit variant: at the rule chosen on dev (a patience or a
  confidence), the accuracy lost against the ordinary model (points), the mean layers, and the
  batch-1 speed-up (CPU, wall) of the export's ``serving_default`` (the rule recorded at export)
  timed the same way: what a client gets, one straight pass without the loop when the rule
  cannot stop early (``serve_patience``, timed in the table, always runs the loop);
- under it (``--base_width_latency``, default on) the same exits timed at ALBERT-base widths
  (E 128, H 768, 12 heads, FFN 3,072, L layers, random weights): at H 64 the loop's bookkeeping
  after every layer weighs as much as a layer, at ALBERT-base's a layer dominates, which is the
  model a user serves. No such model can be trained to the small one's accuracy on these CPUs,
  so each timed example is run by a base-width early-exit export for exactly the layers the
  small model's export used on it (its internal classifiers made to agree: a patience of k - 1
  stops after layer k, a confidence of 0.5 after layer 1), against the same model's ordinary
  computation (the straight full-depth pass, bit for bit the ordinary model's), both timed
  per group of examples that exit at the same layer, paired.

SST-2: train.tsv (60,614 phrases) trains; test.tsv, which holds the 872 labelled sentences of the
public GLUE dev set, is the dev set (as benchmarks/bench_glue_sst2.py).

RTE sentences ("rte-sentences"), the second real set: who wrote this sentence, a news writer or an
RTE annotator? pretraining/rte_docs.txt of the shared data holds, for every RTE pair of the shared
train and test files (2,628), the premise split into sentences (news and encyclopaedia text) and
then the hypothesis (a short claim an annotator wrote about it). Each pair gives two examples: its
hypothesis ("claim") and one sentence of its premise drawn with a fixed seed ("news"); 700 pairs
(1,400 examples) are the dev set, the other 1,928 (3,856 examples) train, split by pair so that a
claim and its own premise are never on both sides. RTE's own label (entailment) stays at chance
for a small ALBERT from scratch (no pretrained model exists here), and so did, in 600 steps, the
pair task "does this hypothesis belong to this premise?"; the writer of a sentence is real text
with a real label that such a model learns on CPU, from its wording and its length. The files are
written under the work directory as JSON Lines and read by run_classifier as your own files
(--train_file, --dev_file). The other real sets here are too small to measure half a point
(wiki_00.txt's two articles: 518 sentences).

The quickstart's 3 classes ("quickstart"): scripts/quickstart_labelled/{train,dev}.csv (cooking,
sport, weather; 210 training and 60 dev sentences: one dev sentence is 1.7 points).

Five sources ("sources"), a set of 5 classes of real shared text: who wrote this sentence? A
positive and a negative film review (SST-2: the training phrases of 8 words or more train, the 872
GLUE dev sentences are dev), a news writer and an RTE annotator (rte_docs.txt's premise sentences
and hypotheses, split by pair as above), or Wikipedia (corpus/wiki_00.txt's paragraphs split into
sentences, 30% of them dev). At most 2,000 training and 300 dev examples per class (Wikipedia has
fewer). (GLUE's MNLI is not in the shared data: no 3-class GLUE set here.)

Figures, never pass/fail. The machine may be shared: the load average is printed.

Run from the repository root:

    .venv/bin/python benchmarks/bench_early_exit.py --work_dir=/tmp/early_exit
    .venv/bin/python benchmarks/bench_early_exit.py --tasks=rte-sentences \
        --variants=ordinary,two_stage,joint
    .venv/bin/python benchmarks/bench_early_exit.py --tasks=rte-sentences --embedding_size=128 \
        --hidden_size=768 --num_attention_heads=12 --intermediate_size=3072 --train_step=100 \
        --train_batch_size=16 --latency_examples=100    # ALBERT-base widths

With --work_dir a rerun skips the runs whose export exists and measures again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks.machine_load import load_average  # noqa: E402

SHARED_DATA = os.environ.get("ALBERT_TF_SHARED_DATA",
                             os.path.join(REPO_ROOT, "..", "shared", "data"))
GLUE_DIR = os.path.join(SHARED_DATA, "glue")
WIKI = os.path.join(SHARED_DATA, "corpus", "wiki_00.txt")
QUICKSTART = os.path.join(REPO_ROOT, "scripts", "quickstart_labelled")
EN8K_MODEL = os.path.join(SHARED_DATA, "pretraining", "en8k.model")
# GLUE task name -> (GLUE folder, {split the run reads: file of the shared folder})
GLUE_TASKS = {"sst-2": ("SST-2", {"train": "train.tsv", "dev": "test.tsv"}),
              "rte": ("RTE", {"train": "train.tsv", "dev": "dev.tsv"})}
SENTENCES = "rte-sentences"  # RTE's premise sentences and hypotheses (module doc)
SOURCES = "sources"  # five sources of real text (module doc)
SOURCE_LABELS = ("review_positive", "review_negative", "news", "claim", "wikipedia")
SOURCE_SIZES = {"train": 2000, "dev": 300}
TASKS = [*GLUE_TASKS, SENTENCES, "quickstart", SOURCES]
SENTENCE_LABELS = ("claim", "news")
DEV_PAIRS = 700
RTE_DOCS = os.path.join(SHARED_DATA, "pretraining", "rte_docs.txt")
VARIANTS = {"ordinary": [], "two_stage": ["--early_exit"],
            "two_stage_labels": ["--early_exit", "--early_exit_distillation=0"],
            "joint": ["--early_exit", "--early_exit_training=joint"],
            "shared": ["--early_exit", "--early_exit_heads=shared"]}

FLAGS = flags.FLAGS
flags.DEFINE_list("tasks", ["sst-2", SENTENCES, "quickstart", SOURCES], f"Some of {TASKS}.")
flags.DEFINE_list("variants", ["ordinary", "two_stage"], f"Some of {list(VARIANTS)} "
                  "(the two_stage ones start from the ordinary run: list it first).")
flags.DEFINE_integer("embedding_size", 64, "E.")
flags.DEFINE_integer("hidden_size", 64, "H.")
flags.DEFINE_integer("num_hidden_layers", 12, "L.")
flags.DEFINE_integer("num_attention_heads", 2, "A.")
flags.DEFINE_integer("intermediate_size", 256, "I.")
flags.DEFINE_integer("max_seq_length", 64, "S.")
flags.DEFINE_integer("train_batch_size", 32, "Batch.")
flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate (5e-4 left 12 layers at chance).")
flags.DEFINE_integer("train_step", 1500, "Training steps.")
flags.DEFINE_integer("warmup_step", 150, "Warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 500, "Checkpoint cadence (sweep granularity).")
flags.DEFINE_integer("latency_examples", 300, "Dev examples timed at batch 1 (the first ones).")
flags.DEFINE_string("work_dir", None, "Keep the runs here (default: a temporary directory).")
flags.DEFINE_bool("base_width_latency", True, "Also time the chosen rule's exit layers at "
                  "ALBERT-base widths (module doc).")
flags.DEFINE_float("early_exit_distillation", None, "two_stage's --early_exit_distillation "
                   "(default: run_classifier's); give each value its own --work_dir.")


def task_layout(task: str, root: str) -> str:
    """root/glue/<folder>/{train,dev}.tsv linked to the shared files; returns root/glue."""
    folder, files = GLUE_TASKS[task]
    task_dir = os.path.join(root, "glue", folder)
    os.makedirs(task_dir, exist_ok=True)
    for split, name in files.items():
        link = os.path.join(task_dir, f"{split}.tsv")
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(os.path.join(GLUE_DIR, folder, name)), link)
    return os.path.dirname(task_dir)


def rte_documents() -> list[list[str]]:
    """The documents of rte_docs.txt: each premise's sentences, then its hypothesis."""
    with open(RTE_DOCS, encoding="utf-8") as handle:
        blocks = handle.read().split("\n\n")
    return [lines for lines in (block.strip().splitlines() for block in blocks) if len(lines) > 1]


def write_sentences(root: str) -> dict[str, str]:
    """root/sentences/{train,dev}.jsonl (module doc); returns {split: path}."""
    import random

    rng = random.Random(0)
    documents = rte_documents()
    rng.shuffle(documents)
    paths = {}
    os.makedirs(os.path.join(root, "sentences"), exist_ok=True)
    for split, chosen in (("dev", documents[:DEV_PAIRS]), ("train", documents[DEV_PAIRS:])):
        examples = []
        for lines in chosen:
            examples.append({"text": lines[-1], "label": SENTENCE_LABELS[0]})
            examples.append({"text": rng.choice(lines[:-1]), "label": SENTENCE_LABELS[1]})
        rng.shuffle(examples)
        paths[split] = os.path.join(root, "sentences", f"{split}.jsonl")
        if not os.path.exists(paths[split]):
            with open(paths[split], "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps(example) + "\n" for example in examples)
    return paths


def source_sentences() -> dict[str, dict[str, list[str]]]:
    """{split: {label: sentences}} of the five sources (module doc), before sampling."""
    import random
    import re

    rng = random.Random(0)
    sources = {split: {label: [] for label in SOURCE_LABELS} for split in SOURCE_SIZES}
    reviews = (("train", os.path.join(GLUE_DIR, "SST-2", "train.tsv")),
               ("dev", os.path.join(GLUE_DIR, "SST-2", "test.tsv")))
    for split, path in reviews:
        with open(path, encoding="utf-8") as handle:
            for line in handle.read().splitlines()[1:]:
                text, label = line.rsplit("\t", 1)
                if split == "dev" or len(text.split()) >= 8:
                    sources[split][SOURCE_LABELS[1 - int(label)]].append(text.strip())
    documents = rte_documents()
    rng.shuffle(documents)
    for split, chosen in (("dev", documents[:DEV_PAIRS]), ("train", documents[DEV_PAIRS:])):
        for lines in chosen:
            sources[split]["claim"].append(lines[-1])
            sources[split]["news"].append(rng.choice(lines[:-1]))
    with open(WIKI, encoding="utf-8") as handle:
        paragraphs = [line.strip() for line in handle
                      if line.strip() and not line.startswith("<") and "." in line]
    sentences = [sentence for paragraph in paragraphs
                 for sentence in re.split(r"(?<=[.!?])\s+", paragraph)
                 if len(sentence.split()) >= 4]
    rng.shuffle(sentences)
    cut = int(0.3 * len(sentences))
    sources["dev"]["wikipedia"], sources["train"]["wikipedia"] = sentences[:cut], sentences[cut:]
    return sources


def write_own_files(name: str, root: str, splits: dict[str, list[dict]]) -> dict[str, str]:
    """root/<name>/<split>.jsonl of ``splits`` ({split: examples}), written once; {split: path}."""
    os.makedirs(os.path.join(root, name), exist_ok=True)
    paths = {}
    for split, examples in splits.items():
        paths[split] = os.path.join(root, name, f"{split}.jsonl")
        if not os.path.exists(paths[split]):
            with open(paths[split], "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps(example) + "\n" for example in examples)
    return paths


def write_sources(root: str) -> dict[str, str]:
    """root/sources/{train,dev}.jsonl: at most SOURCE_SIZES examples per class, shuffled."""
    import random

    rng = random.Random(1)
    splits = {}
    for split, by_label in source_sentences().items():
        examples = []
        for label, sentences in by_label.items():
            rng.shuffle(sentences)
            examples += [{"text": text, "label": label}
                         for text in sentences[:SOURCE_SIZES[split]]]
        rng.shuffle(examples)
        splits[split] = examples
    return write_own_files(SOURCES, root, splits)


def own_files(task: str, root: str) -> dict[str, str] | None:
    """{split: path} of a task read as your own files (None: a GLUE task)."""
    if task == SENTENCES:
        return write_sentences(root)
    if task == SOURCES:
        return write_sources(root)
    if task == "quickstart":
        return {split: os.path.join(QUICKSTART, f"{split}.csv") for split in ("train", "dev")}
    return None


def data_flags(task: str, root: str) -> list[str]:
    """run_classifier's data flags of ``task``: a GLUE task's folder, or your own files."""
    paths = own_files(task, root)
    if paths is not None:
        return [f"--train_file={paths['train']}", f"--dev_file={paths['dev']}"]
    return [f"--task_name={task}", f"--data_dir={task_layout(task, root)}"]


def write_config(path: str) -> str:
    from albert_tf.models.config import AlbertConfig

    config = AlbertConfig.from_dict(dict(
        vocab_size=8000, embedding_size=FLAGS.embedding_size, hidden_size=FLAGS.hidden_size,
        num_hidden_layers=FLAGS.num_hidden_layers, num_attention_heads=FLAGS.num_attention_heads,
        intermediate_size=FLAGS.intermediate_size, max_position_embeddings=FLAGS.max_seq_length,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    with open(path, "w") as handle:
        handle.write(config.to_json_string())
    return path


def fine_tune(data: list[str], config: str, output_dir: str, variant: str) -> float:
    """run_classifier on the data flags ``data``: train, sweep, export; returns the seconds it
    took. A two-stage variant starts from the ordinary run beside ``output_dir``."""
    start_from = ([f"--init_checkpoint={os.path.join(os.path.dirname(output_dir), 'ordinary')}"]
                  if is_two_stage(variant) else [])
    if variant == "two_stage" and FLAGS.early_exit_distillation is not None:
        start_from.append(f"--early_exit_distillation={FLAGS.early_exit_distillation}")
    command = [sys.executable, os.path.join(REPO_ROOT, "run_classifier.py"), *data,
               f"--albert_config_file={config}",
               f"--spm_model_file={EN8K_MODEL}", f"--output_dir={output_dir}",
               f"--cached_dir={os.path.join(os.path.dirname(output_dir), 'cache')}",
               f"--max_seq_length={FLAGS.max_seq_length}", "--do_train", "--do_eval",
               f"--export_dir={os.path.join(output_dir, 'export')}",
               f"--train_batch_size={FLAGS.train_batch_size}", "--eval_batch_size=64",
               f"--learning_rate={FLAGS.learning_rate}", f"--train_step={FLAGS.train_step}",
               f"--warmup_step={FLAGS.warmup_step}",
               f"--save_checkpoints_steps={FLAGS.save_checkpoints_steps}",
               "--iterations_per_loop=100", "--seed=1", *VARIANTS[variant], *start_from]
    start = time.time()
    result = subprocess.run(command, capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return time.time() - start


def is_two_stage(variant: str) -> bool:
    """Whether ``variant`` trains in two stages from the ordinary run."""
    return variant.startswith("two_stage")


def dev_examples(task: str, root: str) -> tuple[list, list[str]]:
    """The first --latency_examples dev examples of ``task`` (``InputExample``) and its labels."""
    import csv

    from data_prep.classification.glue_tasks import get_processor
    from data_prep.classification.processors import InputExample

    paths = own_files(task, root)
    if paths is not None:
        with open(paths["dev"], encoding="utf-8") as handle:
            rows = (list(csv.DictReader(handle)) if paths["dev"].endswith(".csv")
                    else [json.loads(line) for line in handle])
        labels = sorted({row["label"] for row in rows})
        return [InputExample(f"dev-{i}", row["text"], None, row["label"])
                for i, row in enumerate(rows[:FLAGS.latency_examples])], labels
    processor = get_processor(task)
    examples = processor.get_examples(task_layout(task, root), "dev")
    return examples[:FLAGS.latency_examples], processor.get_labels()


def dev_ids(task: str, root: str) -> list[dict]:
    """The first --latency_examples dev examples as int32 ids [1, their real length] each."""
    import numpy as np

    from albert_tf.tokenization.full_tokenizer import FullTokenizer
    from data_prep.classification.features import convert_examples_to_features

    examples, labels = dev_examples(task, root)
    features = convert_examples_to_features(examples, labels, FLAGS.max_seq_length,
                                            FullTokenizer(spm_model_file=EN8K_MODEL))
    requests = []
    for feature in features:
        length = int(sum(feature.input_mask))
        requests.append({name: np.array([getattr(feature, name)[:length]], np.int32)
                         for name in ("input_ids", "input_mask", "segment_ids")})
    return requests


def signature_of(export_dir: str, name: str):
    """The signature ``name`` of ``export_dir/ids_only``, loaded."""
    import tensorflow as tf

    return tf.saved_model.load(os.path.join(export_dir, "ids_only")).signatures[name]


def batch_one_latency(signature, requests: list[dict], rule: dict | None = None
                      ) -> tuple[float, float, float]:
    """(mean CPU seconds per request, mean wall seconds per request, mean layers used) of a
    SavedModel signature called at batch 1 on every request; ``rule``: the request's rule input
    of serve_patience or serve_confidence, e.g. {"patience": 2}. The CPU time is the process's
    (``time.process_time``): with one TensorFlow thread (``main``) it is what the calls
    computed, whatever else the machine runs."""
    import numpy as np
    import tensorflow as tf

    extra = {name: tf.constant(value) for name, value in (rule or {}).items()}
    calls = [{name: tf.constant(value) for name, value in request.items()} for request in requests]
    for call in calls[:20]:  # warm-up: traces and first-call allocations
        signature(**call, **extra)
    layers, cpu_start, wall_start = [], time.process_time(), time.perf_counter()
    for call in calls:
        outputs = signature(**call, **extra)
        if "layers_used" in outputs:
            layers.append(int(outputs["layers_used"][0]))
    cpu, wall = time.process_time() - cpu_start, time.perf_counter() - wall_start
    return (cpu / len(calls), wall / len(calls),
            float(np.mean(layers)) if layers else float("nan"))


def report(task: str, root: str, times: dict[str, float]) -> None:
    """Prints the task's table (see the module doc). Each early-exit timing is paired with a
    timing of the ordinary export taken just before it, so that the speed-up compares the two
    under the same load (the machine may be shared)."""
    from albert_tf.tasks.classification.early_exit import chosen_rule, table_rules

    num_layers = FLAGS.num_hidden_layers
    best = {}
    for variant in FLAGS.variants:
        with open(os.path.join(root, variant, "best_results.json")) as handle:
            best[variant] = json.load(handle)["metrics"]
    print(f"\n== {task}: L={num_layers}, H={FLAGS.hidden_size}, {FLAGS.train_step} steps of "
          f"{FLAGS.train_batch_size} ==")
    for variant in FLAGS.variants:
        print(f"{variant:>9}: dev accuracy (full depth) {best[variant]['eval_accuracy']:.4f}"
              + (f", trained in {times[variant]:.0f} s" if variant in times else ""))
    summary = []
    requests = dev_ids(task, root)
    ordinary = (signature_of(os.path.join(root, "ordinary", "export"), "serving_default")
                if "ordinary" in FLAGS.variants else None)
    print(f"batch-1 latency on the first {len(requests)} dev examples at their real length "
          f"(one TensorFlow thread; load average {load_average()})")
    for variant in [v for v in FLAGS.variants if v != "ordinary"]:
        with open(os.path.join(root, variant, "early_exit_results.json")) as handle:
            results = json.load(handle)
        table, chosen = results["table"], chosen_rule(results)
        export_dir = os.path.join(root, variant, "export")
        print(f"\n{variant} internal classifiers (chosen on dev: {chosen})")
        print("layer accuracy: " + " ".join(
            f"{table[f'early_exit/layer_{j}/eval_accuracy']:.3f}"
            for j in range(1, num_layers + 1)))
        print(f"{'rule':>16} {'accuracy':>9} {'mean layers':>12} {'CPU ms':>7} "
              f"{'ordinary':>9} {'CPU speed-up':>13} {'wall ms':>8} {'ordinary':>9} "
              f"{'wall speed-up':>14} {'served layers':>14}")
        rules = [(rule, "confidence" if rule.confidence is not None else "patience")
                 for rule in table_rules(table)]
        served = {kind: signature_of(export_dir, f"serve_{kind}") for kind in dict(rules).values()}
        for rule, kind in rules:
            base_cpu, base_wall = (batch_one_latency(ordinary, requests)[:2] if ordinary
                                   else (float("nan"),) * 2)
            cpu, wall, served_layers = batch_one_latency(served[kind], requests,
                                                         {kind: getattr(rule, kind)})
            print(f"{str(rule):>16} {table[rule.key('eval_accuracy')]:>9.4f} "
                  f"{table[rule.key('mean_layers')]:>12.2f} {cpu * 1000:>7.2f} "
                  f"{base_cpu * 1000:>9.2f} {base_cpu / cpu:>12.2f}x {wall * 1000:>8.2f} "
                  f"{base_wall * 1000:>9.2f} {base_wall / wall:>13.2f}x {served_layers:>14.2f}"
                  + ("  <- chosen" if rule == chosen else ""))
        accuracy = table[chosen.key("eval_accuracy")]
        points = 100 * (accuracy - best["ordinary"]["eval_accuracy"]) if ordinary else None
        summary.append(
            f"{task} {variant}: {chosen}: accuracy {accuracy:.4f}"
            + (f" against the ordinary {best['ordinary']['eval_accuracy']:.4f} "
               f"({points:+.2f} points)" if points is not None else "")
            + f", {table[chosen.key('mean_layers')]:.2f} mean layers")
        summary.append(served_rule_line(root, variant, chosen, ordinary, requests))
        if FLAGS.base_width_latency:
            summary.append(base_width_line(os.path.join(root, variant, "export"), requests))
    print("\n" + "\n".join(summary) + f"\nload average after the timings: {load_average()}")


def served_rule_line(root: str, variant: str, chosen, ordinary, requests: list[dict]) -> str:
    """``variant``'s export called by ``serving_default`` (the rule recorded at export: the
    ``chosen`` ExitRule) and timed against the ordinary export, paired as in ``report``: what a
    client of the export gets, the batch-1 speed-up. A rule that cannot stop before the last
    layer (patience L - 1 or more) is served there as one straight pass without the loop, which
    ``serve_patience``, timed in the table, always runs."""
    served = signature_of(os.path.join(root, variant, "export"), "serving_default")
    base_cpu, base_wall = (batch_one_latency(ordinary, requests)[:2] if ordinary
                           else (float("nan"),) * 2)
    cpu, wall, served_layers = batch_one_latency(served, requests)
    return (f"  served by serving_default ({chosen} recorded): {served_layers:.2f} "
            f"layers on the timed examples, {cpu * 1000:.2f} CPU ms against the ordinary "
            f"{base_cpu * 1000:.2f}: {base_cpu / cpu:.2f}x (CPU), {base_wall / wall:.2f}x (wall)")


def base_width_exports(directory: str, num_labels: int) -> tuple[str, str]:
    """Two exports of one random ALBERT-base-width early-exit classifier (vocabulary en8k's,
    --num_hidden_layers layers, --max_seq_length positions) whose every classifier answers class
    0 with certainty (bias 20): one served by a confidence of 0.5 (every example exits after
    layer 1; serve_patience k - 1 exits after layer k), one at full depth (the straight pass:
    the ordinary model's computation). Returns (early-exit export, ordinary export)."""
    import keras

    from albert_tf.models.config import AlbertConfig
    from albert_tf.tasks.classification.early_exit import ExitPolicy, ExitRule
    from albert_tf.tasks.classification.model import AlbertClassifierModel
    from albert_tf.tasks.classification.serving import export_classifier

    config = AlbertConfig.from_dict(dict(
        vocab_size=8000, embedding_size=128, hidden_size=768,
        num_hidden_layers=FLAGS.num_hidden_layers, num_attention_heads=12,
        intermediate_size=3072, max_position_embeddings=FLAGS.max_seq_length))
    keras.utils.set_random_seed(0)
    model = AlbertClassifierModel(config, num_labels, early_exit="separate")
    model({name: keras.ops.zeros([1, 8], "int32")
           for name in ("input_ids", "input_mask", "segment_ids")})
    for head in model.layer_heads():
        head.output_bias.assign(keras.ops.one_hot(0, num_labels) * 20.0)
    early, full = os.path.join(directory, "early_exit"), os.path.join(directory, "full_depth")
    export_classifier(model, early, policy=ExitPolicy.of_rule(
        ExitRule(confidence=0.5), config.num_hidden_layers))
    export_classifier(model, full, policy=ExitPolicy.full_depth(config.num_hidden_layers))
    return early, full


def base_width_line(export_dir: str, requests: list[dict]) -> str:
    """The chosen rule's exits on ``requests`` (the layers the small model's export used on each)
    timed at ALBERT-base widths (module doc): the CPU and wall speed-up over the same examples,
    summed over the groups of examples that exit at the same layer, each group's early-exit
    timing paired with an ordinary one just before it."""
    import collections

    served = signature_of(export_dir, "serving_default")
    exits = [int(served(**call)["layers_used"][0]) for call in requests]
    num_labels = int(served(**requests[0])["probabilities"].shape[-1])
    with tempfile.TemporaryDirectory(prefix="base_width_") as directory:
        early_dir, full_dir = base_width_exports(directory, num_labels)
        loop = {name: signature_of(early_dir, name)
                for name in ("serving_default", "serve_patience")}
        ordinary = signature_of(full_dir, "serving_default")
        groups = collections.defaultdict(list)
        for call, layers in zip(requests, exits):
            groups[layers].append(call)
        totals = [0.0] * 4  # early CPU, early wall, ordinary CPU, ordinary wall
        for layers, calls in sorted(groups.items()):
            base_cpu, base_wall = batch_one_latency(ordinary, calls)[:2]
            if layers == 1:
                cpu, wall, used = batch_one_latency(loop["serving_default"], calls)
            else:
                cpu, wall, used = batch_one_latency(loop["serve_patience"], calls,
                                                    {"patience": layers - 1})
            if round(used) != layers:
                raise RuntimeError(f"the base-width export ran {used} layers, not {layers}")
            for index, value in enumerate((cpu, wall, base_cpu, base_wall)):
                totals[index] += value * len(calls)
    cpu, wall, base_cpu, base_wall = (total / len(requests) for total in totals)
    return (f"  at ALBERT-base widths, the same {sum(exits) / len(exits):.2f} layers per example: "
            f"{cpu * 1000:.1f} CPU ms against the ordinary {base_cpu * 1000:.1f}: "
            f"{base_cpu / cpu:.2f}x (CPU), {base_wall / wall:.2f}x (wall)")


def main(argv):
    del argv
    import tensorflow as tf

    # One thread for every timed call: its CPU time is then what it computed (batch_one_latency).
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    root = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_early_exit_")
    os.makedirs(root, exist_ok=True)
    config = write_config(os.path.join(root, "albert_config.json"))
    variants = FLAGS.variants
    first_two_stage = next((i for i, v in enumerate(variants) if is_two_stage(v)), None)
    if first_two_stage is not None and "ordinary" not in variants[:first_two_stage]:
        raise app.UsageError("--variants: the two_stage variants start from the ordinary run; "
                             "list ordinary first.")
    for task in FLAGS.tasks:
        task_root = os.path.join(root, task)
        data = data_flags(task, task_root)
        times = {}
        for variant in FLAGS.variants:
            output_dir = os.path.join(task_root, variant)
            if not os.path.isdir(os.path.join(output_dir, "export")):
                print(f"{task} {variant}: training; load average {load_average()}", flush=True)
                times[variant] = fine_tune(data, config, output_dir, variant)
        report(task, task_root, times)
    print(f"\nruns in {root}; load average {load_average()}")


if __name__ == "__main__":
    app.run(main)
