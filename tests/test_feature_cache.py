"""data_prep/common/feature_cache.py: feature files with JSON sidecars and the cache keyed by their inputs.

Builders here write real ``tf.train.Example`` records of token ids from a SentencePiece model (a
tiny one trained on the bundled corpus, tests/spm_fixtures.py), so the records depend on the input
text, the tokenizer and the sequence length exactly as a task's features do.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import uuid

import pytest
import tensorflow as tf

from albert_tf.tokenization.full_tokenizer import FullTokenizer
from albert_tf.tokenization.normalization import preprocess_text
from data_prep.common import feature_cache
from data_prep.common.feature_cache import (FeatureCacheError, FeatureFile, cached_feature_file,
                                            file_fingerprints, read_feature_file, sidecar_path,
                                            write_feature_file)
from tests import spm_fixtures


def ids_example(ids: list[int]) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature={
        "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids))})).SerializeToString()


def stored_ids(path: str) -> list[list[int]]:
    return [list(tf.train.Example.FromString(record).features.feature["input_ids"].int64_list.value)
            for record in tf.data.TFRecordDataset(path).as_numpy_iterator()]


class LineFeatures:
    """A task stand-in: one record per line of the input file, ids truncated/padded to a length.

    ``calls`` counts builds; ``fail_after`` makes a build raise ``error`` after that many records.
    """

    def __init__(self, input_path: str, tokenizer: FullTokenizer, max_seq_length: int):
        self.input_path = input_path
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.calls = 0
        self.fail_after: int | None = None
        self.error: BaseException = RuntimeError("build interrupted")

    def expected_ids(self) -> list[list[int]]:
        with open(self.input_path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        rows = []
        for line in lines:
            text = preprocess_text(line, lower=self.tokenizer.do_lower_case)  # as a GLUE processor
            ids = self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(text))
            ids = ids[:self.max_seq_length]
            rows.append(ids + [0] * (self.max_seq_length - len(ids)))
        return rows

    def build(self, sink) -> dict:
        self.calls += 1
        rows = self.expected_ids()
        for index, ids in enumerate(rows):
            if self.fail_after is not None and index == self.fail_after:
                raise self.error
            sink.write(ids_example(ids))
        return {"lines": len(rows)}

    def cached(self, cache_dir: str) -> FeatureFile:
        return cached_feature_file(cache_dir, "lines", "dev", {"max_seq_length": self.max_seq_length},
                                   self.tokenizer.fingerprint, [self.input_path], self.build)


@pytest.fixture
def task(tmp_path):
    input_path = tmp_path / "input.txt"
    input_path.write_text("The Cat sat on the mat.\nA Dog barked twice at the postman.\n",
                          encoding="utf-8")
    tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(), do_lower_case=True)
    return LineFeatures(str(input_path), tokenizer, max_seq_length=8)


def test_identical_call_reuses_without_building(tmp_path, task):
    cache_dir = str(tmp_path / "cache")
    first = task.cached(cache_dir)
    assert task.calls == 1
    assert first.num_records == 2 and first.metadata == {"lines": 2}
    assert stored_ids(first.path) == task.expected_ids()
    assert os.path.basename(first.path).startswith("lines_dev_") and first.path.endswith(".tf_record")
    assert task.cached(cache_dir) == first
    assert task.calls == 1


def test_edited_input_rebuilds_the_same_entry(tmp_path, task):
    cache_dir = str(tmp_path / "cache")
    first = task.cached(cache_dir)
    with open(task.input_path, "a", encoding="utf-8") as handle:
        handle.write("Rain fell on Tuesday.\n")
    second = task.cached(cache_dir)
    assert task.calls == 2
    assert second.path == first.path and second.num_records == 3
    assert stored_ids(second.path) == task.expected_ids()
    # Same size, other content: the sha256 still tells them apart.
    with open(task.input_path, "r+", encoding="utf-8") as handle:
        text = handle.read()
        handle.seek(0)
        handle.write(text.replace("Rain", "Snow"))
    task.cached(cache_dir)
    assert task.calls == 3
    assert sorted(os.listdir(cache_dir)) == sorted([os.path.basename(first.path),
                                                    os.path.basename(sidecar_path(first.path))])


def test_another_input_file_with_the_same_name_rebuilds(tmp_path, task):
    cache_dir = str(tmp_path / "cache")
    task.cached(cache_dir)
    other = tmp_path / "other" / "input.txt"
    other.parent.mkdir()
    other.write_text("Completely different words here.\n", encoding="utf-8")
    task.input_path = str(other)
    assert task.cached(cache_dir).num_records == 1 and task.calls == 2


def test_tokenizer_casing_and_sequence_length_rebuild(tmp_path, task):
    cache_dir = str(tmp_path / "cache")
    lowercase = task.cached(cache_dir)
    cased_tokenizer = FullTokenizer(spm_model_file=spm_fixtures.cached_tiny_spm(), do_lower_case=False)
    assert cased_tokenizer.fingerprint != task.tokenizer.fingerprint
    task.tokenizer = cased_tokenizer
    cased = task.cached(cache_dir)
    assert task.calls == 2 and cased.path != lowercase.path
    assert stored_ids(cased.path) == task.expected_ids() != stored_ids(lowercase.path)
    task.max_seq_length = 5
    shorter = task.cached(cache_dir)
    assert task.calls == 3 and shorter.path not in (lowercase.path, cased.path)
    assert [len(ids) for ids in stored_ids(shorter.path)] == [5, 5]
    # Each entry keeps its own file: going back reuses the first one.
    task.tokenizer, task.max_seq_length = FullTokenizer(
        spm_model_file=spm_fixtures.cached_tiny_spm(), do_lower_case=True), 8
    assert task.cached(cache_dir) == lowercase and task.calls == 3


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_interrupted_build_leaves_nothing_readable(tmp_path, task, error):
    cache_dir = str(tmp_path / "cache")
    complete = task.cached(cache_dir)
    with open(task.input_path, "a", encoding="utf-8") as handle:
        handle.write("A third line.\n")
    task.fail_after, task.error = 1, error
    with pytest.raises(type(error)):
        task.cached(cache_dir)
    # Neither the stale entry nor a partial one (nor a temporary file) is left.
    assert os.listdir(cache_dir) == []
    with pytest.raises(FeatureCacheError, match="sidecar not found"):
        read_feature_file(complete.path)
    task.fail_after = None
    rebuilt = task.cached(cache_dir)
    assert task.calls == 3 and rebuilt.num_records == 3
    assert stored_ids(rebuilt.path) == task.expected_ids()


@pytest.mark.parametrize("error", [RuntimeError("bad line 3"), KeyboardInterrupt()])
def test_failed_rewrite_keeps_the_previous_feature_file(tmp_path, error):
    # A rerun of data_prep.race / data_prep.squad onto its earlier --output_file that fails while
    # building must leave the earlier output (records and sidecar) as it was.
    path = str(tmp_path / "dev.tf_record")
    first = write_feature_file(path, lambda sink: [sink.write(ids_example([i])) for i in range(3)]
                               and {"run": 1})
    before = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}

    def failing(sink):
        sink.write(ids_example([9]))
        raise error

    with pytest.raises(type(error)):
        write_feature_file(path, failing)
    assert {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)} == before
    assert read_feature_file(path) == first and stored_ids(path) == [[0], [1], [2]]
    second = write_feature_file(path, lambda sink: sink.write(ids_example([7])) or {"run": 2})
    assert read_feature_file(path) == second and stored_ids(path) == [[7]]
    assert sorted(os.listdir(tmp_path)) == ["dev.tf_record", "dev.tf_record.json"]


def test_failed_sidecar_write_removes_the_record_file(tmp_path, monkeypatch):
    def failing_write(path, text):
        raise OSError("no space left")

    monkeypatch.setattr(feature_cache, "atomic_write_text", failing_write)
    path = str(tmp_path / "f.tf_record")
    with pytest.raises(OSError, match="no space left"):
        write_feature_file(path, lambda sink: sink.write(ids_example([1])) or {})
    assert os.listdir(tmp_path) == []


def test_sidecar_round_trips_nested_metadata(tmp_path):
    metadata = {"guids": ["a-1", "b-2"], "maps": [{"0": 3, "1": [4, 5]}, {}],
                "nested": {"flags": [True, False, None], "score": 0.25}, "tuple": (1, 2)}
    path = str(tmp_path / "sub" / "f.tf_record")
    written = write_feature_file(path, lambda sink: [sink.write(ids_example([i, i + 1]))
                                                     for i in range(3)] and metadata,
                                 key={"task": "t"})
    expected = json.loads(json.dumps(metadata))  # tuples come back as lists
    assert written == FeatureFile(path, 3, expected)
    assert read_feature_file(path) == written
    assert stored_ids(path) == [[0, 1], [1, 2], [2, 3]]
    with open(sidecar_path(path), encoding="utf-8") as handle:
        sidecar = json.load(handle)
    assert sidecar == {"format_version": feature_cache.SIDECAR_VERSION, "key": {"task": "t"},
                       "num_records": 3, "record_bytes": os.path.getsize(path), "metadata": expected}
    assert sorted(os.listdir(tmp_path / "sub")) == ["f.tf_record", "f.tf_record.json"]


def test_metadata_must_be_json(tmp_path):
    path = str(tmp_path / "f.tf_record")
    with pytest.raises(TypeError, match="metadata of .*f.tf_record must be JSON-serialisable"):
        write_feature_file(path, lambda sink: {"bad": {1, 2}})
    assert os.listdir(tmp_path) == []


def test_truncated_record_file_is_detected_and_rebuilt(tmp_path, task):
    cache_dir = str(tmp_path / "cache")
    first = task.cached(cache_dir)
    size = os.path.getsize(first.path)
    with open(first.path, "r+b") as handle:
        handle.truncate(size - 7)
    with pytest.raises(FeatureCacheError, match=rf"{first.path}: {size - 7} bytes, but its sidecar"):
        read_feature_file(first.path)
    assert task.cached(cache_dir) == first and task.calls == 2
    assert os.path.getsize(first.path) == size


def test_read_errors_name_the_file(tmp_path):
    path = str(tmp_path / "f.tf_record")
    with pytest.raises(FeatureCacheError, match=rf"{path}.json: sidecar not found"):
        read_feature_file(path)
    write_feature_file(path, lambda sink: {"n": 0})
    sidecar = sidecar_path(path)
    with open(sidecar, encoding="utf-8") as handle:
        valid = json.load(handle)
    for contents, message in [("{not json", "not a valid JSON sidecar"),
                              (json.dumps([1]), "expected a JSON object with the fields"),
                              (json.dumps({**valid, "format_version": 99}), "format_version 99"),
                              (json.dumps({**valid, "num_records": -1}), "num_records must be"),
                              (json.dumps({**valid, "metadata": [1]}), "metadata must be")]:
        with open(sidecar, "w", encoding="utf-8") as handle:
            handle.write(contents)
        with pytest.raises(FeatureCacheError, match=rf"{sidecar}: {message}"):
            read_feature_file(path)
    with open(sidecar, "w", encoding="utf-8") as handle:
        json.dump(valid, handle)
    os.remove(path)
    with pytest.raises(FeatureCacheError, match=rf"{path}: record file not found"):
        read_feature_file(path)


def test_file_fingerprints(tmp_path):
    data = b"line one\r\nline two\n" * 1000
    path = tmp_path / "data.tsv"
    path.write_bytes(data)
    assert file_fingerprints([str(path)]) == [
        {"path": str(path), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}]
    with pytest.raises(FeatureCacheError, match=r"input file not found: .*absent.tsv"):
        file_fingerprints([str(path), str(tmp_path / "absent.tsv")])


@dataclasses.dataclass(frozen=True)
class _Columns:
    text: str
    label: str | None = None


@dataclasses.dataclass(frozen=True)
class _Settings:
    max_seq_length: int
    columns: _Columns
    tags: tuple[str, ...]
    version: int = dataclasses.field(default=3, init=False)


def test_a_settings_dataclass_is_keyed_as_its_asdict(tmp_path):
    """A builder's settings dataclass keys the cache as the dict of its fields would (nested
    dataclasses as dicts, tuples as lists): a builder moved from a dict to a dataclass of the same
    fields keeps its cache entries."""
    settings = _Settings(64, _Columns("text"), ("O", "B-X"))
    as_dict = {"max_seq_length": 64, "columns": {"text": "text", "label": None},
               "tags": ["O", "B-X"], "version": 3}
    assert feature_cache.settings_key(settings) == {**as_dict, "tags": ("O", "B-X")}
    assert (feature_cache.feature_file_path(str(tmp_path), "t", "dev", settings, "fp")
            == feature_cache.feature_file_path(str(tmp_path), "t", "dev", as_dict, "fp"))
    built = cached_feature_file(str(tmp_path), "t", "dev", settings, "fp", [], lambda sink: {})
    reused = cached_feature_file(str(tmp_path), "t", "dev", as_dict, "fp", [],
                                 lambda sink: pytest.fail("rebuilt"))
    assert reused == built
    with open(built.path + ".json", encoding="utf-8") as handle:
        assert json.load(handle)["key"]["settings"] == as_dict
    other = cached_feature_file(str(tmp_path), "t", "dev", dataclasses.replace(settings, tags=()),
                                "fp", [], lambda sink: {})
    assert other.path != built.path


def test_file_names_are_checked(tmp_path):
    with pytest.raises(ValueError, match=r"task '\.\./x' must be letters"):
        cached_feature_file(str(tmp_path), "../x", "dev", {}, "fp", [], lambda sink: {})


def test_everything_goes_through_gfile():
    """A ram:// filesystem (like gs://, only reachable through tf.io.gfile) for inputs and cache."""
    root = f"ram://feature_cache_test_{uuid.uuid4().hex}"
    input_path = f"{root}/data/input.txt"
    with tf.io.gfile.GFile(input_path, "w") as handle:
        handle.write("one two\nthree\n")
    calls = []

    def build(sink):
        calls.append(1)
        with tf.io.gfile.GFile(input_path) as handle:
            for line in handle.read().splitlines():
                sink.write(ids_example([len(word) for word in line.split()]))
        return {"source": input_path}

    def cached():
        return cached_feature_file(f"{root}/cache", "lines", "train", {"n": 1}, "fp", [input_path],
                                   build)

    first = cached()
    assert first.path.startswith(f"{root}/cache/lines_train_") and first.num_records == 2
    assert stored_ids(first.path) == [[3, 3], [5]]
    assert cached() == first and len(calls) == 1
    assert read_feature_file(first.path) == first
    tf.io.gfile.remove(input_path)  # GFile "w" on ram:// overwrites without truncating
    with tf.io.gfile.GFile(input_path, "w") as handle:
        handle.write("four\n")
    assert cached().num_records == 1 and len(calls) == 2
    tf.io.gfile.rmtree(root)
