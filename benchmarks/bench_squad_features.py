"""SQuAD feature conversion speed: questions/s with 1 and 2 worker processes.

What it measures: ``write_squad_feature_file`` (data_prep/question_answering/feature_file.py) end
to end (read the JSON, tokenize, align, window, serialize, write records and sidecar) on the shared samples
../shared/data/squad/dev-v1.1-sample.json and dev-v2.0-sample.json (8 + 14 questions), repeated
``--repeat`` times under fresh question ids to get a measurable size, with the shared SentencePiece
model en8k.model. Default geometry and mode are those of the reference figure it compares with:
training mode, S=384, doc_stride 128, max_query_length 64.

Printed per worker count: questions/s (wall clock), features, the ratio to the reference's 85
questions/s (its ``convert_examples_to_features`` on one core of this machine, training mode, S=384,
real SQuAD dev questions), and questions per CPU second of this process and its workers together
(the figure that other jobs on a shared machine do not move); whether the outputs of all worker
counts are byte-identical; the load average. It prints figures, never pass/fail.

Run from the repository root:

    .venv/bin/python benchmarks/bench_squad_features.py [--repeat=100 --workers=1,2 --nois_training]
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time

from absl import app, flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from albert_tf.tokenization.full_tokenizer import FullTokenizer  # noqa: E402
from data_prep.question_answering.feature_file import write_squad_feature_file  # noqa: E402
from data_prep.question_answering.features import SquadFeatureSettings  # noqa: E402
from tests.shared_setup import write_repeated_squad  # noqa: E402

SQUAD_DIR = os.path.join(REPO_ROOT, "..", "shared", "data", "squad")
SPM_MODEL = os.path.join(REPO_ROOT, "..", "shared", "data", "pretraining", "en8k.model")
SAMPLES = ("dev-v1.1-sample.json", "dev-v2.0-sample.json")
REFERENCE_QUESTIONS_PER_SECOND = 85.0

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeat", 100, "Copies of the samples in the benchmark file.")
flags.DEFINE_list("workers", ["1", "2"], "Worker counts to time.")
flags.DEFINE_bool("is_training", True, "Training features (the reference figure's mode).")
flags.DEFINE_integer("max_seq_length", 384, "S.")
flags.DEFINE_integer("doc_stride", 128, "Window stride.")
flags.DEFINE_integer("max_query_length", 64, "Question pieces kept.")


def _cpu_seconds() -> float:
    """CPU time of this process plus its finished child processes (the workers), user + system."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def main(argv: list[str]) -> None:
    del argv
    tokenizer = FullTokenizer(spm_model_file=SPM_MODEL, do_lower_case=True)
    with tempfile.TemporaryDirectory() as work_dir:
        input_file = os.path.join(work_dir, "squad.json")
        num_questions = write_repeated_squad([os.path.join(SQUAD_DIR, name) for name in SAMPLES],
                                             input_file, FLAGS.repeat)
        print(f"{num_questions} questions ({FLAGS.repeat} x the two samples), "
              f"{'training' if FLAGS.is_training else 'eval'} mode, S={FLAGS.max_seq_length}, "
              f"doc_stride={FLAGS.doc_stride}, max_query_length={FLAGS.max_query_length}")
        outputs = []
        for workers in (int(w) for w in FLAGS.workers):
            output_file = os.path.join(work_dir, f"features_{workers}.tf_record")
            start, start_cpu = time.perf_counter(), _cpu_seconds()
            features = write_squad_feature_file(
                input_file, output_file, tokenizer,
                SquadFeatureSettings(FLAGS.max_seq_length, FLAGS.doc_stride,
                                     FLAGS.max_query_length, FLAGS.is_training),
                num_workers=workers)
            seconds = time.perf_counter() - start
            cpu_seconds = _cpu_seconds() - start_cpu
            rate = num_questions / seconds
            print(f"workers={workers}: {rate:7.0f} questions/s  ({features.num_records} features, "
                  f"{seconds:.2f} s)  = {rate / REFERENCE_QUESTIONS_PER_SECOND:5.1f} x the "
                  f"reference's {REFERENCE_QUESTIONS_PER_SECOND:.0f}/s;  "
                  f"{num_questions / cpu_seconds:.0f} questions per CPU second")
            outputs.append(_read_bytes(output_file) + _read_bytes(output_file + ".json"))
        print(f"outputs identical across worker counts: {all(o == outputs[0] for o in outputs)}")
        print(f"load average (1, 5, 15 min): {os.getloadavg()}  cores: {os.cpu_count()}")


if __name__ == "__main__":
    app.run(main)
