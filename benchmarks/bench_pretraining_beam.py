"""Throughput of create_pretraining_data on Apache Beam's DirectRunner against the single-machine
command, same corpus, flags and number of worker processes.

    .venv/bin/python benchmarks/bench_pretraining_beam.py [--workers 2] [--dupe_factor 5] [--repeats 2]

The corpus is the shared one (the RTE documents, the Wikipedia sample and the sample text, split
into files of whole documents). Each command runs in a fresh process, best of ``--repeats`` runs;
instances/s counts the whole command (start-up, tokenizer loading, Beam's worker start-up and
stages), as a user waits for it. Also checks that both paths wrote the same bytes. Prints figures
and the ratio (the Beam overhead), never pass/fail.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(REPO_ROOT, "..", "shared", "data")
CORPUS_FILES = [os.path.join(SHARED_DATA, "pretraining", "rte_docs.txt"),
                os.path.join(SHARED_DATA, "corpus", "wiki_00.txt"),
                os.path.join(SHARED_DATA, "corpus", "sample_text.txt")]
MODEL = os.path.join(SHARED_DATA, "pretraining", "en8k.model")
OUTPUT_FILES = 4


def split_corpus(directory: str, parts: int) -> str:
    """The shared corpus as ``parts`` files of consecutive whole documents; returns their glob."""
    documents = []
    for path in CORPUS_FILES:
        with open(path, encoding="utf-8") as handle:
            documents += [block for block in handle.read().split("\n\n") if block.strip()]
    size = -(-len(documents) // parts)
    for part in range(parts):
        with open(os.path.join(directory, f"corpus-{part}.txt"), "w", encoding="utf-8") as handle:
            handle.write("\n\n".join(documents[part * size:(part + 1) * size]) + "\n")
    return os.path.join(directory, "corpus-*.txt")


def run_command(corpus: str, output_dir: str, extra_flags: list[str], args) -> tuple[float, dict, str]:
    """Runs the command once; returns its wall-clock seconds, statistics and outputs' sha256."""
    outputs = [os.path.join(output_dir, f"train-{index}.tfrecord") for index in range(OUTPUT_FILES)]
    command = [sys.executable, "-m", "data_prep.create_pretraining_data", f"--input_file={corpus}",
               f"--output_file={','.join(outputs)}", f"--spm_model_file={MODEL}",
               "--max_seq_length=128", f"--dupe_factor={args.dupe_factor}",
               f"--chunk_documents={args.chunk_documents}", f"--num_workers={args.workers}",
               *extra_flags]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    start = time.perf_counter()
    subprocess.run(command, cwd=REPO_ROOT, env=env, check=True, capture_output=True)
    seconds = time.perf_counter() - start
    digest = hashlib.sha256()
    for path in outputs:
        with open(path, "rb") as handle:
            digest.update(handle.read())
    with open(outputs[0] + ".stats.json", encoding="utf-8") as handle:
        stats = json.load(handle)
    return seconds, stats, digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--chunk_documents", type=int, default=250)
    parser.add_argument("--corpus_parts", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        corpus = split_corpus(directory, args.corpus_parts)
        results = {}
        for name, extra_flags in (("single machine", []), ("Beam DirectRunner", ["--runner=DirectRunner"])):
            runs = [run_command(corpus, directory, extra_flags, args) for _ in range(args.repeats)]
            seconds = min(run[0] for run in runs)
            instances = runs[0][1]["instances"]
            results[name] = (instances / seconds, runs[0][2])
            print(f"{name:>18}: {instances} instances in {seconds:.1f} s = "
                  f"{instances / seconds:,.0f} instances/s ({args.workers} workers, best of "
                  f"{args.repeats})", flush=True)
    (single_rate, single_digest), (beam_rate, beam_digest) = results.values()
    print(f"Beam DirectRunner / single machine: {beam_rate / single_rate:.2f}x the throughput "
          f"({single_rate / beam_rate:.1f}x the time); same bytes: {single_digest == beam_digest}")


if __name__ == "__main__":
    main()
