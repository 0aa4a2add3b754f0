"""Throughput and peak memory of data_prep/create_pretraining_data on the shared RTE corpus.

    .venv/bin/python benchmarks/bench_create_pretraining_data.py [--corpus_repeats 10] [--workers 1 2]

Runs, each in a fresh process: the corpus at max_seq_length 128 and dupe_factor 5 with 1 and 2
workers, then the corpus repeated ``--corpus_repeats`` times (a temporary file) to show that peak
memory depends on the chunk size, not on the corpus size. Throughput counts generation only (after
imports and tokenizer loading), as wall-clock rate and per CPU-second of the run's processes (the
latter barely depends on what else the machine runs); memory is the peak, sampled every 50 ms, of
the run's resident memory plus the private memory of its forked workers. Prints figures and ratios,
never pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRETRAINING_DIR = os.path.join(REPO_ROOT, "..", "shared", "data", "pretraining")
CORPUS = os.path.join(PRETRAINING_DIR, "rte_docs.txt")
MODEL = os.path.join(PRETRAINING_DIR, "en8k.model")
# The reference's throughput (one process) on this corpus and settings on the project's 2-core
# development machine, as reported to this project; it is not re-measured here.
REFERENCE_INSTANCES_PER_S = 1100.0
SAMPLE_INTERVAL_S = 0.05


def run_generation(settings: dict) -> dict:
    """Inside the measured process: generates the records and times the generation itself."""
    sys.path.insert(0, REPO_ROOT)
    from albert_tf.tokenization.full_tokenizer import FullTokenizer
    from data_prep.pretraining.chunks import ChunkProcessor, GenerationConfig
    from data_prep.pretraining.instances import InstanceConfig
    from data_prep.pretraining.pipeline import generate_pretraining_data

    tokenizer = FullTokenizer(spm_model_file=MODEL)
    config = GenerationConfig(InstanceConfig(max_seq_length=128), dupe_factor=settings["dupe_factor"])
    baseline_kib = _smaps_kib(os.getpid())["Rss"]
    cpu_start = _cpu_seconds()
    start = time.perf_counter()
    summary = generate_pretraining_data([settings["corpus"]], [settings["output"]],
                                        ChunkProcessor(tokenizer, config), settings["chunk_documents"],
                                        settings["workers"])
    return {"instances": summary["instances"], "seconds": time.perf_counter() - start,
            "cpu_seconds": _cpu_seconds() - cpu_start, "baseline_mib": baseline_kib / 1024}


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its ended (joined) worker processes."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def _smaps_kib(pid: int) -> dict[str, int]:
    """The kB fields of /proc/PID/smaps_rollup (Rss, Private_Dirty, ...)."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                fields[key] = int(value.split()[0])
    return fields


def _tree_memory_kib(root_pid: int) -> int:
    """RSS of ``root_pid`` plus the private memory (USS) of its descendants, in KiB.

    Forked workers share their parent's pages (libraries, the tokenizer) until they write them; those
    are counted once, in the root's RSS. Unlike PSS, this does not change with the other processes
    that happen to run on the machine.
    """
    total, stack, root = 0, [root_pid], True
    while stack:
        pid = stack.pop()
        try:
            fields = _smaps_kib(pid)
            total += fields["Rss"] if root else fields["Private_Clean"] + fields["Private_Dirty"]
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as handle:
                    stack.extend(int(child) for child in handle.read().split())
        except (FileNotFoundError, ProcessLookupError, KeyError):
            pass  # the process ended between listing and reading
        root = False
    return total


def measure(settings: dict) -> dict:
    """Runs one generation in a fresh process; returns its timing plus peak memory (MiB)."""
    process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--run", json.dumps(settings)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak = 0
    while process.poll() is None:
        peak = max(peak, _tree_memory_kib(process.pid))
        time.sleep(SAMPLE_INTERVAL_S)
    output = process.stdout.read()
    if process.returncode != 0:
        raise RuntimeError(f"benchmark run failed ({process.returncode}): {output}")
    result = json.loads(output.strip().splitlines()[-1])
    result["peak_mib"] = peak / 1024
    return result


def repeated_corpus(directory: str, repeats: int) -> str:
    path = os.path.join(directory, f"rte_docs_x{repeats}.txt")
    with open(CORPUS, encoding="utf-8") as handle:
        text = handle.read().rstrip("\n") + "\n\n"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text * repeats)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--chunk_documents", type=int, default=250)
    parser.add_argument("--corpus_repeats", type=int, default=10)
    parser.add_argument("--run", help=argparse.SUPPRESS)  # internal: one measured generation
    args = parser.parse_args()
    if args.run:
        print(json.dumps(run_generation(json.loads(args.run))))
        return

    with tempfile.TemporaryDirectory() as tmp:
        base = dict(dupe_factor=args.dupe_factor, chunk_documents=args.chunk_documents,
                    output=os.path.join(tmp, "out.tfrecord"))
        print(f"corpus {os.path.basename(CORPUS)}, max_seq_length 128, dupe_factor {args.dupe_factor}, "
              f"chunk_documents {args.chunk_documents}, {os.cpu_count()} CPUs")
        results = {}
        for workers in args.workers:
            results[workers] = measure({**base, "corpus": CORPUS, "workers": workers})
            r = results[workers]
            rate = r["instances"] / r["seconds"]
            print(f"  {workers} worker(s): {r['instances']} instances in {r['seconds']:.2f} s = "
                  f"{rate:.0f} instances/s ({rate / REFERENCE_INSTANCES_PER_S:.2f}x the reference's "
                  f"~{REFERENCE_INSTANCES_PER_S:.0f}/s), {r['instances'] / r['cpu_seconds']:.0f} per "
                  f"CPU-second, peak memory {r['peak_mib']:.0f} MiB "
                  f"({r['peak_mib'] - r['baseline_mib']:.0f} MiB above the {r['baseline_mib']:.0f} MiB "
                  f"after imports)")
        if 1 in results and len(results) > 1:
            one = results[1]["instances"] / results[1]["seconds"]
            for workers, r in results.items():
                if workers != 1:
                    print(f"  speed-up {workers} workers vs 1: {r['instances'] / r['seconds'] / one:.2f}x")

        workers = max(args.workers)
        big = measure({**base, "corpus": repeated_corpus(tmp, args.corpus_repeats), "workers": workers})
        small = results[workers]
        print(f"corpus x{args.corpus_repeats}, {workers} worker(s): {big['instances']} instances in "
              f"{big['seconds']:.2f} s = {big['instances'] / big['seconds']:.0f} instances/s, "
              f"peak memory {big['peak_mib']:.0f} MiB ({big['peak_mib'] - big['baseline_mib']:.0f} MiB "
              f"above imports) = {big['peak_mib'] / small['peak_mib']:.2f}x the x1 run for "
              f"{big['instances'] / small['instances']:.1f}x the instances")


if __name__ == "__main__":
    main()
