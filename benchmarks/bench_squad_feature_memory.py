"""SQuAD feature conversion memory: peak resident memory for one question on a very long paragraph.

What it measures: ``write_squad_feature_file`` (data_prep/question_answering/feature_file.py) end to
end, training mode, S=384, doc_stride 128, max_query_length 64, one worker, on a synthetic SQuAD
file holding one question on one paragraph of ``--chars`` characters (default 20,000, 61,000 and
500,000): the contexts of ../shared/data/squad/dev-v1.1-sample.json and dev-v2.0-sample.json in
turn, joined by ``--blank_lines`` blank lines (as in a long document), cut to length; the answer is
the paragraph's last word. Tokenizer: the shared en8k.model, lowercased. The pieces' text lacks the
runs of white space, so more blank lines widen the alignment's band (|raw - pieces' text| + 5).

Each length runs in a fresh child process (so peaks do not mix), under an address-space limit of
``--memory_cap_gb`` (RLIMIT_AS): a conversion that needs more fails with MemoryError instead of
taking the shared machine's memory, and is printed as over the cap. Printed per length: the
paragraph's characters and pieces' text length, the child's peak resident memory (ru_maxrss) after
the imports and the tokenizer (baseline) and after the conversion, their difference (what the
conversion itself used), the features written and the seconds taken. Figures only, never pass/fail.

``--repo_root`` selects the checkout whose code is measured (default: the one holding this script),
so that the same script measures an older commit checked out elsewhere, e.g.

    git worktree add /tmp/albert_old 01baf43
    .venv/bin/python benchmarks/bench_squad_feature_memory.py --repo_root=/tmp/albert_old
    .venv/bin/python benchmarks/bench_squad_feature_memory.py
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile

from absl import app, flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(REPO_ROOT, "..", "shared", "data")
SAMPLES = [os.path.join(SHARED_DATA, "squad", name)
           for name in ("dev-v1.1-sample.json", "dev-v2.0-sample.json")]
SPM_MODEL = os.path.join(SHARED_DATA, "pretraining", "en8k.model")

FLAGS = flags.FLAGS
flags.DEFINE_list("chars", ["20000", "61000", "500000"], "Paragraph lengths to measure.")
flags.DEFINE_string("repo_root", REPO_ROOT, "Checkout whose data_prep code is measured.")
flags.DEFINE_integer("blank_lines", 1, "Blank lines between two sample contexts.")
flags.DEFINE_float("memory_cap_gb", 8.0, "Address-space limit of each measuring process.")
flags.DEFINE_integer("child_chars", None, "Internal: the length one child process measures.")


def synthetic_squad(num_chars: int, blank_lines: int = 1) -> dict:
    """One paragraph of ``num_chars`` characters (the sample contexts in turn, ``blank_lines``
    blank lines between two) and one question whose answer is its last word."""
    separator = "\n" * (blank_lines + 1)
    contexts = []
    for path in SAMPLES:
        with open(path, encoding="utf-8") as handle:
            contexts.extend(paragraph["context"] for article in json.load(handle)["data"]
                            for paragraph in article["paragraphs"])
    parts, length = [], 0
    while length < num_chars:
        parts.append(contexts[len(parts) % len(contexts)])
        length += len(parts[-1]) + len(separator)
    context = separator.join(parts)[:num_chars].rstrip()
    answer = context.split()[-1]
    qa = {"id": "long-context-1", "question": "What is the last word?",
          "answers": [{"text": answer, "answer_start": len(context) - len(answer)}]}
    return {"version": "synthetic", "data": [{"title": "long", "paragraphs": [
        {"context": context, "qas": [qa]}]}]}


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports ru_maxrss in KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_in_this_process(num_chars: int) -> dict:
    """Converts the synthetic file of ``num_chars`` characters; the figures as a dict."""
    import time

    sys.path.insert(0, FLAGS.repo_root)
    from albert_tf.tokenization.full_tokenizer import FullTokenizer
    from albert_tf.tokenization.normalization import preprocess_text
    from albert_tf.tokenization.sentencepiece import encode_pieces
    from data_prep.question_answering.feature_file import write_squad_feature_file
    from data_prep.question_answering.features import SquadFeatureSettings

    tokenizer = FullTokenizer(spm_model_file=SPM_MODEL, do_lower_case=True)
    dataset = synthetic_squad(num_chars, FLAGS.blank_lines)
    context = dataset["data"][0]["paragraphs"][0]["context"]
    piece_chars = len("".join(encode_pieces(tokenizer.sp_model, preprocess_text(context))))
    figures = {"chars": len(context), "piece_chars": piece_chars, "baseline_mb": peak_rss_mb()}
    with tempfile.TemporaryDirectory() as work_dir:
        input_file = os.path.join(work_dir, "squad.json")
        with open(input_file, "w", encoding="utf-8") as handle:
            json.dump(dataset, handle)
        start = time.perf_counter()
        try:
            written = write_squad_feature_file(input_file, os.path.join(work_dir, "f.tf_record"),
                                               tokenizer, SquadFeatureSettings(is_training=True),
                                               num_workers=1)
            figures["features"] = written.num_records
        except MemoryError:
            figures["features"] = None
        figures["seconds"] = time.perf_counter() - start
    figures["peak_mb"] = peak_rss_mb()
    return figures


def measure_in_child(num_chars: int) -> dict:
    """``measure_in_this_process`` in a fresh process limited to ``--memory_cap_gb``."""
    cap = int(FLAGS.memory_cap_gb * 2 ** 30)

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), f"--child_chars={num_chars}",
         f"--repo_root={FLAGS.repo_root}", f"--blank_lines={FLAGS.blank_lines}"],
        capture_output=True, text=True, preexec_fn=limit_memory, cwd=FLAGS.repo_root)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        return {"chars": num_chars, "error": (result.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(lines[-1])


def main(argv: list[str]) -> None:
    del argv
    if FLAGS.child_chars is not None:
        print(json.dumps(measure_in_this_process(FLAGS.child_chars)))
        return
    commit = subprocess.run(["git", "-C", FLAGS.repo_root, "log", "-1", "--format=%h %s"],
                            capture_output=True, text=True).stdout.strip()
    print(f"code: {FLAGS.repo_root} ({commit[:70]})")
    print(f"one question, training mode, S=384, one worker, {FLAGS.blank_lines} blank line(s) "
          f"between contexts; limit {FLAGS.memory_cap_gb:g} GB of address space per run")
    for num_chars in map(int, FLAGS.chars):
        figures = measure_in_child(num_chars)
        if "error" in figures:
            print(f"{num_chars:>8} chars: failed: {figures['error']}")
            continue
        outcome = (f"{figures['features']} features" if figures["features"] is not None
                   else f"MemoryError: over the {FLAGS.memory_cap_gb:g} GB cap")
        print(f"{figures['chars']:>8} chars (pieces' text {figures['piece_chars']}): peak "
              f"{figures['peak_mb']:7.0f} MB, baseline {figures['baseline_mb']:5.0f} MB, "
              f"conversion {figures['peak_mb'] - figures['baseline_mb']:7.0f} MB; {outcome}, "
              f"{figures['seconds']:.1f} s")


if __name__ == "__main__":
    app.run(main)
