"""End-to-end tests of data_prep/create_pretraining_data.py: statistics against the reference's own
output on the same corpus, determinism, sharded output, and bad input.

The comparison with the reference uses the shared test data (its corpus, en8k.model and its
records); the other tests run on the bundled corpus with a tiny SentencePiece model trained from it
(tests/spm_fixtures.py)."""

from __future__ import annotations

import concurrent.futures
import gzip
import itertools
import json
import os
import re
import shutil

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf
from absl import flags
from absl.testing import flagsaver

from albert_tf.tasks.pretraining.records import parse_pretraining_example
from albert_tf.tokenization.full_tokenizer import FullTokenizer
from data_prep import create_pretraining_data
from data_prep.pretraining.chunks import ChunkProcessor, GenerationConfig
from data_prep.pretraining.instances import InstanceConfig
from data_prep.pretraining.pipeline import generate_pretraining_data
from tests import spm_fixtures
from tests.command_runner import SHOW_INFO, run_command, run_subprocess
from tests.shared_setup import EN8K_MODEL, PRETRAINING_DIR, REFERENCE_RECORDS

FLAGS = flags.FLAGS
RTE_DOCS = os.path.join(PRETRAINING_DIR, "rte_docs.txt")
MASK_ID = 4  # [MASK] in en8k.model and in every ALBERT-recipe model


@pytest.fixture(autouse=True, scope="module")
def parsed_flags():
    if not FLAGS.is_parsed():
        FLAGS.mark_as_parsed()


def run_cli(arguments=(), **flag_values):
    """Runs the script's main() in-process with the given flags (others at their defaults) and the
    ``arguments`` the flag parser left over (Beam pipeline options)."""
    with flagsaver.flagsaver(**flag_values):
        create_pretraining_data.main(["create_pretraining_data", *arguments])


def read_records(path):
    return [record.numpy() for record in tf.data.TFRecordDataset(path)]


def parse_file(path, max_seq_length, max_predictions):
    """All records of ``path`` as numpy arrays, stacked along a leading instance axis."""
    batches = list(tf.data.TFRecordDataset(path).map(
        lambda record: parse_pretraining_example(record, max_seq_length, max_predictions)).batch(100_000))
    return {name: np.concatenate([batch[name].numpy() for batch in batches]) for name in batches[0]}


def file_statistics(parsed):
    """The reference fixture's statistic definitions (its README), computed from the records only."""
    real = parsed["input_mask"].sum()
    predicted = parsed["masked_lm_weights"] > 0
    written = np.take_along_axis(parsed["input_ids"], parsed["masked_lm_positions"], axis=1)[predicted]
    return {
        "instances": len(parsed["input_ids"]),
        "mean_tokens": real / len(parsed["input_ids"]),
        "masked_fraction": predicted.sum() / real,
        "mask_token_fraction": (written == MASK_ID).mean(),
        "kept_fraction": (written == parsed["masked_lm_ids"][predicted]).mean(),
        "sop_label1_fraction": parsed["next_sentence_labels"].mean(),
    }


def masked_run_word_counts(parsed):
    """Distribution of the number of words (by token_boundary) in each run of consecutive predicted
    positions, as fractions for 1, 2, 3 and >= 4 words: whole-word grouping and n-gram lengths as
    they show in a file, whoever wrote it."""
    num, length = parsed["input_ids"].shape
    masked = np.zeros((num, length + 1), bool)  # one spare column so runs never join across rows
    weights = parsed["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(num)[:, None], weights.shape)
    masked[rows[weights], parsed["masked_lm_positions"][weights]] = True
    boundary = np.zeros((num, length + 1), int)
    boundary[:, :length] = parsed["token_boundary"]
    masked, boundary = masked.ravel(), boundary.ravel()
    starts = masked & ~np.concatenate([[False], masked[:-1]])
    run_index = np.cumsum(starts) - 1
    # A run starting inside a word (no boundary) counts that word too.
    words = np.bincount(run_index[masked], weights=boundary[masked]) + (boundary[starts] == 0)
    return np.bincount(np.minimum(words.astype(int), 4), minlength=5)[1:] / len(words)


def write_corpus(path, documents):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n\n".join("\n".join(sentences) for sentences in documents) + "\n")
    return str(path)


def bundled_documents(count):
    """``count`` documents of three sentences (as the reference's RTE corpus has on average) from the
    bundled corpus, starting over at its end."""
    lines = spm_fixtures.fixture_corpus_lines()
    documents = [lines[start:start + 3] for start in range(0, len(lines) - 2, 3)]
    return list(itertools.islice(itertools.cycle(documents), count))


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "docs.txt", bundled_documents(300))


@pytest.fixture(scope="module")
def spm_model():
    return spm_fixtures.cached_tiny_spm()


def small_run(corpus, output, **overrides):
    values = dict(input_file=corpus, output_file=str(output), spm_model_file=spm_fixtures.cached_tiny_spm(),
                  max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2, chunk_documents=60)
    values.update(overrides)
    run_cli(**values)


# --- agreement with the reference -----------------------------------------------------------------

@pytest.mark.requires_shared_data
def test_statistics_match_the_reference_output(tmp_path):
    output = tmp_path / "rte.tfrecord"
    # The flags the reference fixture was made with (shared/data/pretraining/README.md).
    run_cli(input_file=RTE_DOCS, output_file=str(output), spm_model_file=EN8K_MODEL, max_seq_length=128,
            max_predictions_per_seq=20, dupe_factor=2, masked_lm_prob=0.15, random_seed=12345,
            do_lower_case=True, num_workers=2)
    with open(os.path.join(PRETRAINING_DIR, "reference_output.stats.json")) as handle:
        reference = json.load(handle)
    parsed = parse_file(str(output), 128, 20)
    ours = file_statistics(parsed)

    assert ours["instances"] == pytest.approx(reference["instances"], rel=0.03)
    assert ours["mean_tokens"] == pytest.approx(reference["mean_tokens"], rel=0.015)
    for name in ("masked_fraction", "mask_token_fraction", "kept_fraction", "sop_label1_fraction"):
        assert ours[name] == pytest.approx(reference[name], abs=0.015), name

    reference_runs = masked_run_word_counts(parse_file(REFERENCE_RECORDS, 128, 20))
    np.testing.assert_allclose(masked_run_word_counts(parsed), reference_runs, atol=0.015)

    # Our statistics file reports what the records hold.
    with open(str(output) + ".stats.json") as handle:
        summary = json.load(handle)
    for name, value in ours.items():
        assert summary[name] == pytest.approx(value, rel=1e-9), name
    assert sum(summary["sentence_pairs"].values()) == ours["instances"]
    label1 = summary["sentence_pairs"]["swapped"] + summary["sentence_pairs"]["random_document"]
    assert label1 == round(ours["sop_label1_fraction"] * ours["instances"])
    assert summary["documents"] == 2628 and summary["sentences"] == 7885  # the README's counts
    histogram = {int(n): count for n, count in summary["ngram_length_histogram"].items()}
    assert set(histogram) == {1, 2, 3} and histogram[1] > histogram[2] > histogram[3]


# --- determinism and sharding ---------------------------------------------------------------------

def test_same_seed_same_bytes_whatever_the_workers(small_corpus, tmp_path):
    small_run(small_corpus, tmp_path / "a.tfrecord", num_workers=1)
    small_run(small_corpus, tmp_path / "b.tfrecord", num_workers=2)
    small_run(small_corpus, tmp_path / "c.tfrecord", num_workers=1, random_seed=7)
    a, b, c = (open(tmp_path / f"{name}.tfrecord", "rb").read() for name in "abc")
    assert a == b
    assert a != c
    assert len(read_records(str(tmp_path / "a.tfrecord"))) > 300


def test_two_runs_give_identical_bytes(small_corpus, tmp_path):
    small_run(small_corpus, tmp_path / "a.tfrecord", num_workers=2)
    small_run(small_corpus, tmp_path / "b.tfrecord", num_workers=2)
    assert open(tmp_path / "a.tfrecord", "rb").read() == open(tmp_path / "b.tfrecord", "rb").read()


def test_instances_are_written_round_robin(small_corpus, tmp_path):
    single = tmp_path / "all.tfrecord"
    shards = [tmp_path / "s0.tfrecord", tmp_path / "s1.tfrecord"]
    small_run(small_corpus, single)
    small_run(small_corpus, ",".join(map(str, shards)))
    records = read_records(str(single))
    assert read_records(str(shards[0])) == records[0::2]
    assert read_records(str(shards[1])) == records[1::2]
    assert os.path.exists(str(shards[0]) + ".stats.json")
    assert not os.path.exists(str(shards[1]) + ".stats.json")


# --- modes -------------------------------------------------------------------------------------------

def test_wordpiece_mode_marks_continuations(tmp_path):
    words = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "##s", "##ing", "run", "."]
    vocab = spm_fixtures.write_wordpiece_vocab(tmp_path, words)
    corpus = write_corpus(tmp_path / "wp.txt", [["The cat sat on the mat.", "A dog runs."],
                                                ["The dogs ran.", "A cat running."]])
    output = tmp_path / "wp.tfrecord"
    run_cli(input_file=corpus, output_file=str(output), vocab_file=vocab, max_seq_length=32,
            max_predictions_per_seq=5, dupe_factor=3)
    parsed = parse_file(str(output), 32, 5)
    continuation_ids = {len(spm_fixtures.WORDPIECE_SPECIALS) + words.index(w) for w in ("##s", "##ing")}
    original = parsed["input_ids"].copy()
    predicted = parsed["masked_lm_weights"] > 0
    for row in range(len(original)):  # undo the masking to see the original pieces
        positions = parsed["masked_lm_positions"][row][predicted[row]]
        original[row, positions] = parsed["masked_lm_ids"][row][predicted[row]]
    is_continuation = np.isin(original, list(continuation_ids))
    assert is_continuation.any()
    np.testing.assert_array_equal(parsed["token_boundary"][is_continuation], 0)
    real_words = (parsed["input_mask"] == 1) & ~is_continuation
    np.testing.assert_array_equal(parsed["token_boundary"][real_words], 1)


def test_sentence_longer_than_max_seq_length_is_truncated(tmp_path, spm_model):
    long_sentence = " ".join(["river"] * 3000)  # one piece, "▁river", rare in the other documents
    corpus = write_corpus(tmp_path / "long.txt", [[long_sentence], *bundled_documents(5)])
    output = tmp_path / "long.tfrecord"
    run_cli(input_file=corpus, output_file=str(output), spm_model_file=spm_model, max_seq_length=32,
            max_predictions_per_seq=5, dupe_factor=2)
    parsed = parse_file(str(output), 32, 5)
    assert parsed["input_mask"].sum(axis=1).max() == 32
    # The long sentence is a single-sentence chunk (B from another document), so it appears in at
    # least its dupe_factor = 2 instances, cut to what B leaves free.
    (word_id,) = spm.SentencePieceProcessor(model_file=spm_model).EncodeAsIds("river")
    assert ((parsed["input_ids"] == word_id).sum(axis=1) >= 5).sum() >= 2


def test_sentences_too_long_for_an_instance_are_counted(tmp_path, spm_model):
    # "river" is one piece, so a sentence of n words has n pieces. At --max_seq_length=64 an
    # instance holds at most 60 pieces of one sentence ([CLS] A [SEP] B [SEP], B at least one
    # piece): the sentences of 61 and 3000 pieces are cut in every instance, not the one of 60.
    assert spm.SentencePieceProcessor(model_file=spm_model).EncodeAsPieces("river river") == [
        "\u2581river", "\u2581river"]
    lengths = [[5, 60, 5], [61, 5], [3000], [5, 5], [61]]
    corpus = write_corpus(tmp_path / "long.txt",
                          [[" ".join(["river"] * n) for n in document] for document in lengths])
    output = tmp_path / "long.tfrecord"
    result = run_command("-m data_prep.create_pretraining_data", SHOW_INFO,
                         f"--input_file={corpus}", f"--output_file={output}",
                         f"--spm_model_file={spm_model}", "--max_seq_length=64",
                         "--max_predictions_per_seq=10", "--dupe_factor=2")
    assert result.returncode == 0, result.stderr
    with open(str(output) + ".stats.json", encoding="utf-8") as handle:
        stats = json.load(handle)
    assert (stats["sentences_too_long"], stats["sentences"]) == (3, 9)
    assert ("3 of 9 sentences longer than 60 pieces, cut in every instance that holds them"
            in result.stderr)


# --- bad input --------------------------------------------------------------------------------------

def test_missing_input_names_the_pattern(tmp_path, spm_model):
    pattern = str(tmp_path / "nothing-*.txt")
    with pytest.raises(SystemExit, match="nothing-\\*.txt.*matches no file"):
        run_cli(input_file=pattern, output_file=str(tmp_path / "o.tfrecord"), spm_model_file=spm_model)


def test_command_line_reports_bad_input_without_traceback(tmp_path, spm_model):
    pattern = str(tmp_path / "missing.txt")
    completed = run_command("-m data_prep.create_pretraining_data", f"--input_file={pattern}",
                            f"--output_file={tmp_path / 'o.tfrecord'}",
                            f"--spm_model_file={spm_model}")
    assert completed.returncode == 1
    assert f"error: input pattern '{pattern}' matches no file" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_empty_corpus_is_an_error_and_writes_nothing(tmp_path, spm_model):
    corpus = tmp_path / "empty.txt"
    corpus.write_text("\n   \n\t\n\n", encoding="utf-8")
    out_dir = tmp_path / "out"
    with pytest.raises(SystemExit, match="no documents"):
        run_cli(input_file=str(corpus), output_file=str(out_dir / "o.tfrecord"), spm_model_file=spm_model)
    assert os.listdir(out_dir) == []  # no output and no temporary file left behind


def test_invalid_utf8_line_is_an_error_naming_file_and_line(tmp_path, spm_model):
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"A first sentence.\nAnother one.\nbroken \xff\xfe bytes\n\nSecond document.\n")
    with pytest.raises(SystemExit, match=r"bad\.txt, line 3: not valid UTF-8"):
        run_cli(input_file=str(corpus), output_file=str(tmp_path / "o.tfrecord"), spm_model_file=spm_model)
    output = tmp_path / "skipped.tfrecord"
    run_cli(input_file=str(corpus), output_file=str(output), spm_model_file=spm_model,
            skip_invalid_lines=True, max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1)
    with open(str(output) + ".stats.json") as handle:
        summary = json.load(handle)
    assert summary["invalid_lines_skipped"] == 1
    assert summary["documents"] == 2 and summary["sentences"] == 3
    assert len(read_records(str(output))) == summary["instances"] > 0


@pytest.mark.subprocess  # whether TensorFlow was imported: a fresh process
@pytest.mark.parametrize("overrides, message", [
    (["--do_permutation"], "do_permutation is not supported"),
    (["--spm_model_file="], "give --spm_model_file"),
    (["--max_seq_length=4"], "max_seq_length must be at least 5"),
    (["--input_file_mode=w"], "input_file_mode"),
])
def test_invalid_flags_are_rejected_before_tensorflow_loads(tmp_path, spm_model, overrides,
                                                            message):
    result = run_subprocess("-m data_prep.create_pretraining_data",
                            f"--input_file={spm_fixtures.FIXTURE_CORPUS}",
                            f"--output_file={tmp_path / 'o.tfrecord'}",
                            f"--spm_model_file={spm_model}", *overrides, timeout=120,
                            report_tensorflow=True)
    assert result.returncode == 1
    error, tensorflow_imported = result.stderr.strip().splitlines()
    assert error.startswith("create_pretraining_data: error: ") and message in error
    assert tensorflow_imported == "tensorflow imported: False"
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("layout, random_next_sentence, warned", [
    ("one paragraph per line", False, True),
    ("one paragraph per line", True, False),   # NSP: random pairs are half the task by design
    ("one sentence per line", False, False),
])
def test_a_corpus_that_makes_sentence_order_degenerate_is_warned_about(
        tmp_path, spm_model, layout, random_next_sentence, warned):
    # A Wikipedia extractor's output (a paragraph per line, blank lines between) used to give
    # ~100% random-document pairs in SOP mode without a word: the run looked fine.
    documents = bundled_documents(60)
    if layout == "one paragraph per line":
        documents = [[" ".join(document)] for document in documents]
    corpus = write_corpus(tmp_path / "corpus.txt", documents)
    result = run_command("-m data_prep.create_pretraining_data", f"--input_file={corpus}",
                         f"--output_file={tmp_path / 'o.tfrecord'}",
                         f"--spm_model_file={spm_model}",
                         "--max_seq_length=64", "--dupe_factor=1",
                         f"--random_next_sentence={random_next_sentence}")
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "o.tfrecord.stats.json", encoding="utf-8") as handle:
        stats = json.load(handle)
    pairs, instances = stats["sentence_pairs"]["random_document"], stats["instances"]
    warning = re.search(r"(\d+) of (\d+) instances \((\d+)%\) take segment B from another "
                        r"document instead of testing sentence order.*one sentence per line, a "
                        r"blank line between documents", result.stderr)
    assert (warning is not None) == warned
    if warned:
        assert (int(warning[1]), int(warning[2])) == (pairs, instances) and pairs > instances / 2
        assert "the 60 documents hold 1.0 lines on average" in result.stderr


@pytest.mark.parametrize("kind, reason", [
    ("gzip", "is gzip-compressed: decompress it first (gunzip)"),
    ("tfrecord", "is a binary file (it holds NUL bytes; a TFRecord, a model?), not text"),
    ("utf-16", "is UTF-16 text: save it as UTF-8"),
])
def test_a_file_that_is_not_text_is_refused_even_when_skipping_invalid_lines(
        tmp_path, spm_model, small_corpus, kind, reason):
    # With --skip_invalid_lines a TFRecord (e.g. an earlier output matched by 'data/*') gave
    # hundreds of "sentences" of binary junk and exit status 0.
    text = open(small_corpus, encoding="utf-8").read()
    stray = tmp_path / "data" / f"z-{kind}.bin"
    stray.parent.mkdir()
    if kind == "gzip":
        stray.write_bytes(gzip.compress(text.encode("utf-8")))
    elif kind == "utf-16":
        stray.write_bytes(text.encode("utf-16"))
    else:
        small_run(small_corpus, tmp_path / "earlier.tfrecord", dupe_factor=1)
        stray.write_bytes((tmp_path / "earlier.tfrecord").read_bytes())
    shutil.copy(small_corpus, tmp_path / "data" / "a.txt")
    output = tmp_path / "out" / "o.tfrecord"
    with pytest.raises(SystemExit) as info:
        run_cli(input_file=str(tmp_path / "data" / "*"), output_file=str(output),
                spm_model_file=spm_model, max_seq_length=64, dupe_factor=1,
                skip_invalid_lines=True)
    assert str(info.value) == (f"create_pretraining_data: error: {stray} {reason}; the corpus is "
                               "UTF-8 text files, one sentence per line")
    # Refused before any work (a.txt comes first): the writer never made the output directory.
    assert not output.parent.exists()


@pytest.mark.parametrize("files", [3, 40])
def test_output_files_left_without_a_record_are_warned_about(tmp_path, spm_model, files):
    # More --output_file paths than instances wrote the last files empty without a word; a
    # run_pretraining over them (a glob) then refuses the empty ones.
    corpus = write_corpus(tmp_path / "corpus.txt", bundled_documents(8))
    outputs = [str(tmp_path / "out" / f"t-{index:02d}.tfrecord") for index in range(files)]
    result = run_command("-m data_prep.create_pretraining_data", f"--input_file={corpus}",
                         f"--output_file={','.join(outputs)}", f"--spm_model_file={spm_model}",
                         "--max_seq_length=64", "--dupe_factor=1")
    assert result.returncode == 0, result.stderr
    empty = [path for path in outputs if os.path.getsize(path) == 0]
    warning = (f"{len(empty)} of the {files} output files hold no record ({', '.join(empty[:3])} "
               f"and {len(empty) - 3} more): the run made {files - len(empty)} instances, fewer "
               "than the files; run_pretraining refuses an empty file")
    assert bool(empty) == (files == 40)  # 8 short documents make fewer than 40 instances
    if empty:
        assert warning in result.stderr
    else:
        assert "hold no record" not in result.stderr


def test_vocab_file_is_not_required_with_a_sentencepiece_model(small_corpus, tmp_path):
    output = tmp_path / "o.tfrecord"
    small_run(small_corpus, output, vocab_file=None)
    assert len(read_records(str(output))) > 0


class DyingProcessor(ChunkProcessor):
    """Its worker process dies on chunk 1, as one killed for memory would."""

    def process(self, chunk):
        if chunk.index == 1:
            os._exit(3)
        return super().process(chunk)


def test_a_dead_worker_stops_the_run_without_output(small_corpus, tmp_path):
    processor = DyingProcessor(FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm()),
                               GenerationConfig(InstanceConfig(max_seq_length=64), dupe_factor=1))
    out_dir = tmp_path / "out"
    with pytest.raises(concurrent.futures.process.BrokenProcessPool):
        generate_pretraining_data([small_corpus], [str(out_dir / "o.tfrecord")], processor,
                                  chunk_documents=50, num_workers=2)
    assert os.listdir(out_dir) == []
