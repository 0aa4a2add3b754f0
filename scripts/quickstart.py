"""The end-to-end example: the same commands a user runs, on the bundled corpus, in a few minutes.

1. data_prep/train_sentencepiece.py   -> a 1,000-piece SentencePiece model of the corpus
2. data_prep/create_pretraining_data.py -> MLM + SOP TFRecords (seq 64)
3. run_pretraining.py --do_train --do_eval -> a tiny ALBERT pretrained with LAMB, every
   checkpoint evaluated, the best kept as model.ckpt-best

Everything goes under --output_dir. The quickstart marks that directory as its own
(.albert_tf-quickstart) and, when run again, deletes only the sub-directories it writes there;
it refuses a directory that holds anything else.

Usage: python scripts/quickstart.py [--output_dir=quickstart_output] [--num_train_steps=300]
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time
from typing import NoReturn

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "scripts", "quickstart_corpus.txt")
CONFIG = os.path.join(REPO_ROOT, "scripts", "quickstart_albert_config.json")
# What the quickstart writes in --output_dir: the marker file, and these sub-directories (a rerun
# deletes them; run_pretraining would otherwise resume).
MARKER = ".albert_tf-quickstart"
OUTPUTS = ("spm", "data", "model")


def fail(message: str) -> NoReturn:
    sys.exit(f"quickstart: error: {message}")


def run(step: str, command: list[str]) -> None:
    """Prints and runs one command; its output streams to the console."""
    print(f"\n=== {step}\n$ {' '.join(shlex.quote(c) for c in command)}", flush=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    result = subprocess.run(command, cwd=REPO_ROOT, env=env)
    if result.returncode != 0:
        fail(f"step '{step}' failed with exit code {result.returncode}.")


def prepare_output_dir(out: str) -> None:
    """Makes ``out`` an empty quickstart output directory, deleting only what a previous quickstart
    wrote there (its marker says so); refuses a directory that holds anything else."""
    if os.path.lexists(out) and not os.path.isdir(out):
        fail(f"--output_dir {out} is a file, not a directory.")
    entries = sorted(os.listdir(out)) if os.path.isdir(out) else []
    ours = MARKER in entries and os.path.isfile(os.path.join(out, MARKER))
    foreign = [name for name in entries
               if not (ours and (name == MARKER or (name in OUTPUTS and _is_plain_dir(out, name))))]
    if foreign:
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        shown = ", ".join(foreign[:5]) + more
        hint = ("; if it is the output of an earlier quickstart (which left no marker), delete it "
                "yourself" if not ours and set(foreign) <= set(OUTPUTS) else "")
        fail(f"--output_dir {out} holds files the quickstart did not write ({shown}); it deletes "
             f"only its own outputs: give a new or empty directory{hint}.")
    for name in OUTPUTS:
        if name in entries:
            shutil.rmtree(os.path.join(out, name))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, MARKER), "w", encoding="utf-8") as marker:
        marker.write("Written by scripts/quickstart.py. When run again with this --output_dir, it "
                     f"deletes {', '.join(n + '/' for n in OUTPUTS)} here, and nothing else; it "
                     "refuses to run if anything else is here.\n")


def _is_plain_dir(out: str, name: str) -> bool:
    path = os.path.join(out, name)
    return os.path.isdir(path) and not os.path.islink(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default=os.path.join(REPO_ROOT, "quickstart_output"))
    parser.add_argument("--num_train_steps", type=int, default=300)
    args = parser.parse_args()
    out = os.path.abspath(args.output_dir)
    prepare_output_dir(out)  # a fresh run each time (otherwise run_pretraining would resume)
    started = time.time()
    python = sys.executable
    spm_prefix = os.path.join(out, "spm", "quickstart")
    records = os.path.join(out, "data", "pretraining.tfrecord")
    model_dir = os.path.join(out, "model")
    run("1/3 train a SentencePiece model (reference recipe)",
        [python, "data_prep/train_sentencepiece.py", f"--input_file={CORPUS}",
         f"--model_prefix={spm_prefix}", "--vocab_size=1000"])
    run("2/3 create MLM + SOP pretraining data",
        [python, "data_prep/create_pretraining_data.py", f"--input_file={CORPUS}",
         f"--output_file={records}", f"--spm_model_file={spm_prefix}.model",
         "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=5",
         "--num_workers=2"])
    run("3/3 pretrain a tiny ALBERT with LAMB, then evaluate every checkpoint",
        [python, "run_pretraining.py", f"--albert_config_file={CONFIG}",
         f"--input_file={records}", f"--output_dir={model_dir}", "--max_seq_length=64",
         "--max_predictions_per_seq=10", "--train_batch_size=32", "--optimizer=lamb",
         "--learning_rate=0.005", f"--num_train_steps={args.num_train_steps}",
         "--num_warmup_steps=30", "--save_checkpoints_steps=100", "--iterations_per_loop=20",
         "--do_train", "--do_eval", "--eval_batch_size=64", "--max_eval_steps=10", "--seed=1"])
    print(f"\nQuickstart finished in {time.time() - started:.0f} s.\n"
          f"  SentencePiece model: {spm_prefix}.model\n"
          f"  pretraining data:    {records} (+ .stats.json)\n"
          f"  checkpoints:         {model_dir}/model.ckpt-* and model.ckpt-best\n"
          f"  eval results:        {model_dir}/eval_results.txt\n"
          f"  TensorBoard:         .venv/bin/python -m tensorboard.main --logdir {model_dir}")


if __name__ == "__main__":
    main()
