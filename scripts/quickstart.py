"""The end-to-end example: the same commands a user runs, on the bundled data, in a few minutes.

1. data_prep/train_sentencepiece.py   -> a 1,000-piece SentencePiece model of the corpus
2. data_prep/create_pretraining_data.py -> MLM + SOP TFRecords (seq 64)
3. run_pretraining.py --do_train --do_eval -> a tiny ALBERT pretrained with LAMB, every
   checkpoint evaluated, the best kept as model.ckpt-best
4. run_classifier.py --train_file ... -> that checkpoint fine-tuned on the bundled labelled
   sentences (scripts/quickstart_labelled/: cooking, sport, weather), every checkpoint evaluated
   on the dev file, the test file predicted, the best exported as a SavedModel
5. plain TensorFlow (tf.saved_model.load) serves one sentence from that SavedModel

Everything goes under --output_dir. The quickstart marks that directory as its own
(.albert_tf-quickstart, which records its step counts and the steps finished) and refuses a
directory that holds anything else. Run again, it continues: finished steps are skipped, a step
that was stopped runs again (pretraining and fine-tuning resume from their last checkpoint) and
step 5 serves the sentence again. --fresh deletes what it wrote there and starts over (needed to
change the step counts).

Usage: python scripts/quickstart.py [--output_dir=quickstart_output] [--num_train_steps=300]
           [--num_finetune_steps=300] [--sentence="A sentence to classify."] [--fresh]
"""

import argparse
import csv
import json
import os
import shlex
import shutil
import string
import subprocess
import sys
import time
from typing import NoReturn

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "scripts", "quickstart_corpus.txt")
CONFIG = os.path.join(REPO_ROOT, "scripts", "quickstart_albert_config.json")
LABELLED = os.path.join(REPO_ROOT, "scripts", "quickstart_labelled")
# What the quickstart writes in --output_dir: the marker file (JSON: the step counts and the
# finished steps), and one sub-directory per training step (--fresh deletes them).
MARKER = ".albert_tf-quickstart"
MARKER_TEMPORARY = MARKER + ".tmp"  # the marker's next version, renamed over it once written
OUTPUTS = ("spm", "data", "model", "classifier")
DEFAULT_SENTENCE = "Light rain will turn to snow on the hills tonight."


def fail(message: str) -> NoReturn:
    sys.exit(f"quickstart: error: {message}")


def run(step: str, command: list[str]) -> None:
    """Prints and runs one command; its output streams to the console."""
    print(f"\n=== {step}\n$ {' '.join(shlex.quote(c) for c in command)}", flush=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    result = subprocess.run(command, cwd=REPO_ROOT, env=env)
    if result.returncode != 0:
        fail(f"step '{step}' failed with exit code {result.returncode}.")


def run_python(step: str, python: str, code: str) -> None:
    """Prints a Python snippet as a command a user can paste into a shell, and runs it. Its output
    streams to the console; what TensorFlow's C++ libraries print while loading (stderr) is shown
    only if the snippet fails."""
    print(f"\n=== {step}\n$ {shlex.quote(python)} - <<'EOF'\n{code}EOF", flush=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    result = subprocess.run([python, "-"], input=code, text=True, cwd=REPO_ROOT, env=env,
                            stderr=subprocess.PIPE)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        fail(f"step '{step}' failed with exit code {result.returncode}.")


def prepare_output_dir(out: str, counts: dict[str, int], fresh: bool) -> list[str]:
    """Makes ``out`` the quickstart's output directory and returns the steps an earlier run of the
    same ``counts`` finished there. Refuses a directory holding anything the quickstart did not
    write, and a run of other ``counts`` (their checkpoints would not fit) unless ``fresh``, which
    deletes only what the quickstart wrote there."""
    if os.path.lexists(out) and not os.path.isdir(out):
        fail(f"--output_dir {out} is a file, not a directory.")
    entries = sorted(os.listdir(out)) if os.path.isdir(out) else []
    ours = MARKER in entries and os.path.isfile(os.path.join(out, MARKER))
    foreign = [name for name in entries
               if not (ours and (name in (MARKER, MARKER_TEMPORARY)
                                 or (name in OUTPUTS and _is_plain_dir(out, name))))]
    if foreign:
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        shown = ", ".join(foreign[:5]) + more
        hint = ("; if it is the output of an earlier quickstart (which left no marker), delete it "
                "yourself" if not ours and set(foreign) <= set(OUTPUTS) else "")
        fail(f"--output_dir {out} holds files the quickstart did not write ({shown}); it deletes "
             f"only its own outputs: give a new or empty directory{hint}.")
    recorded = _read_marker(out) if ours and not fresh else {"counts": counts, "finished": []}
    if ours and not fresh and recorded["counts"] != counts:
        fail(f"--output_dir {out} holds a quickstart run of {_describe(recorded['counts'])}; this "
             f"one asks for {_describe(counts)}. Give those, another --output_dir, or --fresh "
             "to delete that run and start over.")
    if fresh:
        for name in OUTPUTS:
            if name in entries:
                shutil.rmtree(os.path.join(out, name))
    os.makedirs(out, exist_ok=True)
    _write_marker(out, recorded)
    return recorded["finished"]


def _read_marker(out: str) -> dict:
    """The marker's record; an earlier version's marker (plain text) asks for --fresh."""
    path = os.path.join(out, MARKER)
    try:
        with open(path, encoding="utf-8") as f:
            recorded = json.load(f)
        if isinstance(recorded, dict) and {"counts", "finished"} <= set(recorded):
            return recorded
    except (ValueError, UnicodeDecodeError):
        pass
    fail(f"{path} is the marker of an earlier version of the quickstart, which kept no record of "
         "its steps: run with --fresh to delete its outputs and start over.")


def _write_marker(out: str, recorded: dict) -> None:
    """Writes the marker whole (a temporary file renamed over it)."""
    temporary = os.path.join(out, MARKER_TEMPORARY)
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump({"written_by": "scripts/quickstart.py", **recorded}, f, indent=1)
    os.replace(temporary, os.path.join(out, MARKER))


def _describe(counts: dict[str, int]) -> str:
    return " ".join(f"--{name}={value}" for name, value in sorted(counts.items()))


class Steps:
    """The quickstart's steps in ``out``: a finished one is skipped and said so; a step that is not
    finished starts with its output sub-directory as the stopped run left it, deleted for the data
    steps (their commands write whole files) and kept for the training steps (they resume)."""

    def __init__(self, out: str, finished: list[str]):
        self.out = out
        self.finished = list(finished)

    def run(self, step: str, output: str, command: list[str], resumes: bool = False) -> None:
        if step in self.finished:
            print(f"\n=== {step}\nfinished by an earlier run: {os.path.join(self.out, output)}",
                  flush=True)
            return
        path = os.path.join(self.out, output)
        if not resumes and os.path.isdir(path):
            shutil.rmtree(path)  # what a stopped run of this step left
        run(step, command)
        self.finished.append(step)
        recorded = _read_marker(self.out)
        _write_marker(self.out, dict(recorded, finished=self.finished))


def _is_plain_dir(out: str, name: str) -> bool:
    path = os.path.join(out, name)
    return os.path.isdir(path) and not os.path.islink(path)


# Step 5: plain TensorFlow (+ tensorflow_text for the in-graph SentencePiece tokenizer) loads the
# exported SavedModel and classifies one sentence; the quickstart prints it to copy.
SERVING_CODE = string.Template("""\
import tensorflow as tf
import tensorflow_text  # registers the SentencePiece op that the with_text export holds

export = $export
sentence = $sentence
model = tf.saved_model.load(export)
outputs = model.signatures["serve_text"](text_a=tf.constant([sentence]),
                                         text_b=tf.constant([""]))  # "": a single sentence
with open(f"{export}/assets.extra/labels.txt", encoding="utf-8") as f:
    labels = f.read().splitlines()  # line i: the name of class i
probabilities = outputs["probabilities"][0].numpy()
print("sentence:       ", sentence)
print("predicted label:", outputs["labels"][0].numpy().decode())
print("probabilities:  ", ", ".join(f"{l} {p:.3f}" for l, p in zip(labels, probabilities)))
""")


def dev_summary(classifier_dir: str, dev_file: str) -> str:
    """``dev accuracy A, majority class M``: the fine-tuned best checkpoint against the share of
    the dev file's most frequent label."""
    with open(os.path.join(classifier_dir, "best_results.json"), encoding="utf-8") as f:
        accuracy = json.load(f)["metrics"]["eval_accuracy"]
    with open(dev_file, encoding="utf-8", newline="") as f:
        labels = [row["label"] for row in csv.DictReader(f)]
    majority = max(labels.count(label) for label in set(labels)) / len(labels)
    return f"dev accuracy {accuracy:.3f}, majority class {majority:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default=os.path.join(REPO_ROOT, "quickstart_output"))
    parser.add_argument("--num_train_steps", type=int, default=300, help="pretraining steps")
    parser.add_argument("--num_finetune_steps", type=int, default=300, help="fine-tuning steps")
    parser.add_argument("--sentence", default=DEFAULT_SENTENCE,
                        help="the sentence the last step classifies with the exported SavedModel")
    parser.add_argument("--fresh", action="store_true",
                        help="delete what an earlier quickstart wrote in --output_dir and start "
                             "over (else a rerun continues it)")
    args = parser.parse_args()
    out = os.path.abspath(args.output_dir)
    counts = {"num_train_steps": args.num_train_steps,
              "num_finetune_steps": args.num_finetune_steps}
    steps = Steps(out, prepare_output_dir(out, counts, args.fresh))
    started = time.time()
    python = sys.executable
    spm_prefix = os.path.join(out, "spm", "quickstart")
    records = os.path.join(out, "data", "pretraining.tfrecord")
    model_dir = os.path.join(out, "model")
    classifier_dir = os.path.join(out, "classifier")
    export = os.path.join(classifier_dir, "saved_model")
    train_file, dev_file, test_file = (os.path.join(LABELLED, f"{split}.csv")
                                       for split in ("train", "dev", "test"))
    steps.run("1/5 train a SentencePiece model (reference recipe)", "spm",
        [python, "data_prep/train_sentencepiece.py", f"--input_file={CORPUS}",
         f"--model_prefix={spm_prefix}", "--vocab_size=1000"])
    steps.run("2/5 create MLM + SOP pretraining data", "data",
        [python, "data_prep/create_pretraining_data.py", f"--input_file={CORPUS}",
         f"--output_file={records}", f"--spm_model_file={spm_prefix}.model",
         "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=5",
         "--num_workers=2"])
    steps.run("3/5 pretrain a tiny ALBERT with LAMB, then evaluate every checkpoint", "model",
        [python, "run_pretraining.py", f"--albert_config_file={CONFIG}",
         f"--input_file={records}", f"--output_dir={model_dir}", "--max_seq_length=64",
         "--max_predictions_per_seq=10", "--train_batch_size=32", "--optimizer=lamb",
         "--learning_rate=0.005", f"--num_train_steps={args.num_train_steps}",
         "--num_warmup_steps=30", "--save_checkpoints_steps=100", "--iterations_per_loop=20",
         "--do_train", "--do_eval", "--eval_batch_size=64", "--max_eval_steps=10", "--seed=1"],
        resumes=True)
    finetune_steps = args.num_finetune_steps
    steps.run("4/5 fine-tune it on your own labelled files (CSV), evaluate every checkpoint on "
              "the dev file, predict the test file, export a SavedModel", "classifier",
        [python, "run_classifier.py", f"--train_file={train_file}", f"--dev_file={dev_file}",
         f"--test_file={test_file}", "--id_column=id",
         f"--init_checkpoint={model_dir}/model.ckpt-best", f"--albert_config_file={CONFIG}",
         f"--spm_model_file={spm_prefix}.model", f"--output_dir={classifier_dir}",
         "--max_seq_length=64", "--train_batch_size=32", "--learning_rate=1e-4",
         f"--train_step={finetune_steps}", f"--warmup_step={finetune_steps // 10}",
         f"--save_checkpoints_steps={min(50, finetune_steps)}", "--iterations_per_loop=20",
         "--eval_batch_size=32", "--predict_batch_size=32", "--seed=1",
         "--do_train", "--do_eval", "--do_predict", f"--export_dir={export}"], resumes=True)
    run_python("5/5 classify a sentence with the SavedModel, in plain TensorFlow",
               python, SERVING_CODE.substitute(export=repr(os.path.join(export, "with_text")),
                                               sentence=repr(args.sentence)))
    print(f"\nQuickstart finished in {time.time() - started:.0f} s (run it again: it continues; "
          "--fresh starts over).\n"
          f"  SentencePiece model: {spm_prefix}.model\n"
          f"  pretraining data:    {records} (+ .stats.json)\n"
          f"  checkpoints:         {model_dir}/model.ckpt-* and model.ckpt-best\n"
          f"  eval results:        {model_dir}/eval_results.txt\n"
          f"  labelled data:       {LABELLED}/{{train,dev,test}}.csv\n"
          f"  fine-tuned model:    {classifier_dir}/model.ckpt-best "
          f"({dev_summary(classifier_dir, dev_file)})\n"
          f"  dev results:         {classifier_dir}/eval_results.txt, best_results.json\n"
          f"  test predictions:    {classifier_dir}/test_results.tsv (probabilities), "
          "submit_results.tsv (labels)\n"
          f"  SavedModel:          {export}/with_text (raw text; import tensorflow_text), "
          "ids_only (token ids)\n"
          f"  TensorBoard:         .venv/bin/python -m tensorboard.main --logdir {out}")


if __name__ == "__main__":
    main()
