"""data_prep's errors are users' errors: every class that reports a user's mistake derives from
``UserError`` (albert_tf/errors/user_error.py) and keeps the builtin class callers catch; a file
system error on a user's path is a ``UserFileError`` naming it."""

from __future__ import annotations

import pickle

import pytest
import tensorflow as tf

from albert_tf.errors.user_error import UserError, UserFileError
from data_prep.classification.features import check_max_seq_length
from data_prep.classification.own_data import OwnDataError
from data_prep.classification.processors import GlueDataError, read_tsv
from data_prep.common.feature_cache import FeatureCacheError
from data_prep.common.user_errors import SettingsError, opening_user_file
from data_prep.multiple_choice.features import check_lengths
from data_prep.multiple_choice.reader import RaceDataError
from data_prep.pretraining.corpus import CorpusError
from data_prep.pretraining.vocabulary import TrainSentencePieceError
from data_prep.question_answering.examples import SquadDataError
from data_prep.token_classification.features import check_geometry
from data_prep.token_classification.reader import NerDataError


@pytest.mark.parametrize("error_class, builtin", [
    (GlueDataError, ValueError), (OwnDataError, ValueError), (SquadDataError, ValueError),
    (RaceDataError, ValueError), (NerDataError, ValueError), (CorpusError, ValueError),
    (FeatureCacheError, ValueError), (SettingsError, ValueError),
    (TrainSentencePieceError, RuntimeError),
])
def test_error_classes_are_user_errors_and_keep_their_builtin_class(error_class, builtin):
    assert issubclass(error_class, UserError) and issubclass(error_class, builtin)
    # Errors raised in worker processes come back pickled.
    copy = pickle.loads(pickle.dumps(error_class("a message")))
    assert type(copy) is error_class and str(copy) == "a message"


@pytest.mark.parametrize("check, arguments, match", [
    (check_max_seq_length, (2,), "max_seq_length must be >= 3"),
    (check_lengths, (128, 0), "max_qa_length must be >= 1"),
    (check_geometry, (8, 0), "doc_stride must be >= 1"),
])
def test_sequence_settings_that_cannot_work_are_settings_errors(check, arguments, match):
    with pytest.raises(SettingsError, match=match):
        check(*arguments)


def test_a_file_system_error_on_a_user_path_is_a_user_file_error(tmp_path):
    missing = str(tmp_path / "missing.tsv")
    with pytest.raises(UserFileError, match=f"^--data_dir {missing}: "):
        with opening_user_file(missing, "--data_dir"):
            tf.io.gfile.GFile(missing, "rb").read()
    with pytest.raises(UserFileError, match=f"^{tmp_path}: "):
        with opening_user_file(str(tmp_path)):
            raise OSError("permission denied")
    # A reader's own error passes unchanged, as does anything that is not about the file system.
    with pytest.raises(GlueDataError, match="bad line"):
        with opening_user_file(missing):
            raise GlueDataError("bad line")
    with pytest.raises(KeyError):
        with opening_user_file(missing):
            raise KeyError("a bug")


def test_a_reader_names_the_file_it_cannot_read(tmp_path):
    directory = tmp_path / "train.tsv"
    directory.mkdir()
    with pytest.raises(UserFileError, match=f"^{directory}: "):
        list(read_tsv(str(directory)))
