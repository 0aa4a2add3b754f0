"""The pre-flight check of what a command reads and writes (albert_tf/files/run_files.py), on
hand-made declarations: each rule refuses what it must, through links and other spellings, and
lets the rest through. (tests/test_preflight.py runs it through every command.)"""

from __future__ import annotations

import os
import re

import pytest
import tensorflow as tf

from albert_tf.files import created_directories
from albert_tf.files.earlier_layouts import EarlierLayoutError
from albert_tf.files.paths import OutputPathError
from albert_tf.files.run_files import (Input, NewDirectory, Output, RunFiles, WorkDirectory,
                                       check_run_files, fixed_outputs)
from tests.test_checkpoints import save_object_checkpoint
from tests.tf1_fixtures import write_reference_checkpoint
from albert_tf.files.run_manifest import MANIFEST_NAME, RunManifestError, read_manifest


def recorded_names(directory: str) -> frozenset[str] | None:
    """The fixed names the run manifest of ``directory`` says albert_tf wrote there."""
    return read_manifest(directory).owned_names


def spellings(tmp_path, target):
    """Five ways to name the file ``target``: itself, through '..', relative, a symbolic link and a
    hard link."""
    (tmp_path / "sub").mkdir(exist_ok=True)
    os.symlink(target, tmp_path / "link")
    os.link(target, tmp_path / "hard")
    return [str(target), str(tmp_path / "sub" / ".." / target.name), os.path.relpath(target),
            str(tmp_path / "link"), str(tmp_path / "hard")]


def test_an_output_that_is_an_input_is_refused_however_spelled(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("text\n")
    read = (Input("--input_file", str(corpus)),)
    for spelling in spellings(tmp_path, corpus):
        with pytest.raises(OutputPathError, match=r"--output_file '.*' is also an input "
                                                  r"\(--input_file '.*corpus.txt'\)"):
            check_run_files(RunFiles(read, (Output("--output_file", spelling),)))
    check_run_files(RunFiles(read, (Output("--output_file", str(tmp_path / "new")),)))


def test_two_outputs_on_one_path_are_refused(tmp_path):
    new = str(tmp_path / "new.tfrecord")
    for second in (new, str(tmp_path / "sub" / ".." / "new.tfrecord")):
        with pytest.raises(OutputPathError, match="are the same file"):
            check_run_files(RunFiles(outputs=(Output("--output_file", new),
                                              Output("--output_file", second))))
    check_run_files(RunFiles(outputs=(Output("--output_file", new),
                                      Output("--output_file", new + "2"))))


def test_a_flag_output_on_a_fixed_name_of_the_run_is_refused_before_it_exists(tmp_path):
    run = WorkDirectory("--output_dir", str(tmp_path / "run"))
    owned = fixed_outputs(run, ["checkpoint", "model.ckpt-*"])
    with pytest.raises(OutputPathError, match=r"--tflite_file '.*run/checkpoint' and checkpoint "
                                              r"\(written in --output_dir\) .* are the same file"):
        check_run_files(RunFiles(outputs=owned + (Output("--tflite_file",
                                                          f"{run.path}/checkpoint"),),
                                 work_directories=(run,)))
    with pytest.raises(OutputPathError, match=r"is one of the files model\.ckpt-\* \(written in "
                                              r"--output_dir\)"):
        check_run_files(RunFiles(outputs=owned + (Output("--tflite_file",
                                                          f"{run.path}/model.ckpt-best.index"),),
                                 work_directories=(run,)))
    check_run_files(RunFiles(outputs=owned + (Output("--tflite_file", f"{run.path}/m.tflite"),),
                             work_directories=(run,)))


def test_an_output_inside_a_fixed_name_of_the_run_is_refused(tmp_path):
    """--tflite_file=<output_dir>/eval/events.out... used to replace the run's TensorBoard log, and
    --export_dir=<output_dir>/train/x wrote an export into it."""
    run = WorkDirectory("--output_dir", str(tmp_path / "run"))
    owned = (fixed_outputs(run, ["eval", "train"], is_directory=True)
             + fixed_outputs(run, ["checkpoint"]))
    check_run_files(RunFiles(outputs=owned, work_directories=(run,)))  # the run that logged
    (tmp_path / "run" / "eval").mkdir()
    (tmp_path / "run" / "eval" / "events.out.tfevents.1").write_bytes(b"log")
    with pytest.raises(OutputPathError, match=r"--tflite_file '.*run/eval/events.out.tfevents.1' "
                                              r"is inside eval \(written in --output_dir\)"):
        check_run_files(RunFiles(outputs=owned + (Output(
            "--tflite_file", f"{run.path}/eval/events.out.tfevents.1"),), work_directories=(run,)))
    with pytest.raises(OutputPathError, match=r"--export_dir '.*run/train/x' is inside train"):
        check_run_files(RunFiles(outputs=owned, work_directories=(run,),
                                 new_directories=(NewDirectory("--export_dir",
                                                               f"{run.path}/train/x"),)))
    assert (tmp_path / "run" / "eval" / "events.out.tfevents.1").read_bytes() == b"log"
    check_run_files(RunFiles(outputs=owned + (Output("--tflite_file", f"{run.path}/m.tflite"),),
                             work_directories=(run,),
                             new_directories=(NewDirectory("--export_dir", f"{run.path}/x"),)))


def test_a_file_where_the_run_writes_a_directory_and_the_reverse_are_refused(tmp_path):
    """A user's file named ``train`` in --output_dir stopped run_classifier after its features
    were built, with TensorFlow's "Not a directory" reported as a bug of albert_tf; a directory
    named ``label_list.json`` likewise."""
    run = WorkDirectory("--output_dir", str(tmp_path / "run"))
    owned = (fixed_outputs(run, ["train", "eval"], is_directory=True)
             + fixed_outputs(run, ["label_list.json"]))
    (tmp_path / "run").mkdir()
    check_run_files(RunFiles(outputs=owned, work_directories=(run,)))
    (tmp_path / "run" / "train").write_text("my notes")
    with pytest.raises(OutputPathError, match=r"--output_dir '.*run' holds a file 'train' where "
                                              r"the run writes its directory train/"):
        check_run_files(RunFiles(outputs=owned, work_directories=(run,)))
    assert (tmp_path / "run" / "train").read_text() == "my notes"
    (tmp_path / "run" / "train").unlink()
    (tmp_path / "run" / "train").mkdir()  # the run's own logs: fine
    (tmp_path / "run" / "label_list.json").mkdir()
    with pytest.raises(OutputPathError, match=r"holds a directory 'label_list.json' where the run "
                                              r"writes its file label_list.json"):
        check_run_files(RunFiles(outputs=owned, work_directories=(run,)))


def test_an_input_among_a_family_the_run_writes_is_refused(tmp_path):
    (tmp_path / "data").mkdir()
    os.symlink(tmp_path / "data", tmp_path / "alias")
    run = WorkDirectory("--output_dir", str(tmp_path / "alias"))
    checkpoints = fixed_outputs(run, ["model.ckpt-*"], consequence="it would be deleted")
    with pytest.raises(OutputPathError, match=r"--output_dir '.*alias' holds the input "
                                              r"--init_checkpoint '.*model.ckpt-1': it would be "
                                              "deleted"):
        check_run_files(RunFiles((Input("--init_checkpoint", f"{tmp_path}/data/model.ckpt-1"),),
                                 checkpoints, (run,)))
    elsewhere = fixed_outputs(WorkDirectory("--output_dir", str(tmp_path)), ["model.ckpt-*"])
    check_run_files(RunFiles((Input("--init_checkpoint", f"{tmp_path}/data/model.ckpt-1"),),
                             elsewhere))  # a subdirectory: fine


def test_a_flag_output_never_replaces_a_checkpoint_file_of_another_run(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-3"\n')
    (tmp_path / "old" / "model.ckpt-3.index").write_bytes(b"index")
    for name in ("checkpoint", "model.ckpt-3.index"):
        with pytest.raises(OutputPathError, match="is a file of a checkpoint"):
            check_run_files(RunFiles(outputs=(Output("--tflite_file",
                                                     str(tmp_path / "old" / name)),)))
    (tmp_path / "checkpoint").write_text("my notes, not a checkpoint state file\n")
    check_run_files(RunFiles(outputs=(Output("--tflite_file", str(tmp_path / "checkpoint")),)))


def test_directories_written_whole(tmp_path):
    (tmp_path / "data").mkdir()
    os.symlink(tmp_path / "data", tmp_path / "alias")
    with pytest.raises(OutputPathError, match="--export_dir '.*alias/' is also an input "
                                              r"\(--data_dir '.*data'\)"):
        check_run_files(RunFiles((Input("--data_dir", str(tmp_path / "data")),),
                                 new_directories=(NewDirectory("--export_dir",
                                                               f"{tmp_path}/alias/"),)))
    (tmp_path / "data" / "config.json").write_text("{}")
    with pytest.raises(OutputPathError, match="holds the input --albert_config_file"):
        check_run_files(RunFiles((Input("--albert_config_file", f"{tmp_path}/data/config.json"),),
                                 new_directories=(NewDirectory("--export_dir",
                                                               str(tmp_path / "data")),)))
    export = str(tmp_path / "exports" / "encoder")
    with pytest.raises(OutputPathError, match="is inside --export_path"):
        check_run_files(RunFiles(new_directories=(
            NewDirectory("--export_path", export),
            NewDirectory("--preprocessing_export_path", f"{export}/preprocessing"))))
    with pytest.raises(OutputPathError, match="are the same directory"):
        check_run_files(RunFiles(new_directories=(
            NewDirectory("--export_path", export),
            NewDirectory("--preprocessing_export_path", f"{export}/"))))
    check_run_files(RunFiles(new_directories=(
        NewDirectory("--export_path", export),
        NewDirectory("--preprocessing_export_path", f"{export}_preprocessing"))))


def test_a_directory_is_replaced_only_when_asked_and_only_with_what_the_command_wrote(tmp_path):
    target = tmp_path / "hf"
    target.mkdir()
    (target / "config.json").write_text("{}")
    written = ("config.json", "model.safetensors")
    with pytest.raises(OutputPathError, match="exists and is not an empty directory"):
        check_run_files(RunFiles(new_directories=(NewDirectory("--output_dir", str(target),
                                                               written),)))
    check_run_files(RunFiles(new_directories=(NewDirectory("--output_dir", str(target), written,
                                                           replace=True),)))
    (target / "README.md").write_text("the user's own")
    with pytest.raises(OutputPathError, match="holds README.md, which this command did not "
                                              "write"):
        check_run_files(RunFiles(new_directories=(NewDirectory("--output_dir", str(target),
                                                               written, replace=True),)))


def test_outputs_that_cannot_be_written_are_refused(tmp_path):
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(OutputPathError, match="is a directory"):
        check_run_files(RunFiles(outputs=(Output("--output_file", str(tmp_path)),)))
    with pytest.raises(OutputPathError, match="a_file' is a file, not a directory"):
        check_run_files(RunFiles(outputs=(Output("--output_file",
                                                 str(tmp_path / "a_file" / "deeper" / "o")),)))
    with pytest.raises(OutputPathError, match="--output_dir: .*a_file is a file, not a "
                                              "directory"):
        check_run_files(RunFiles(work_directories=(WorkDirectory("--output_dir",
                                                                 str(tmp_path / "a_file")),)))
    check_run_files(RunFiles(outputs=(Output("--output_file",
                                             str(tmp_path / "new_dir" / "deeper" / "o")),)))


@pytest.mark.parametrize("name", ["new_dir/", "new_dir/.", "new_dir/sub/..", "existing/"])
def test_an_output_file_spelled_as_a_directory_is_refused_before_anything_exists(tmp_path, name):
    # --output_file=new_dir/ used to run the whole conversion, then fail renaming its temporary
    # file onto the directory name, as a bug of albert_tf.
    (tmp_path / "existing").mkdir()
    path = str(tmp_path / "x")[:-1] + name
    with pytest.raises(OutputPathError, match=re.escape(f"--output_file {path!r} ") +
                       "(names a directory|is a directory)"):
        check_run_files(RunFiles(outputs=(Output("--output_file", path),)))
    assert sorted(os.listdir(tmp_path)) == ["existing"]


def test_declared_finds_the_outputs_of_a_declaration(tmp_path):
    run = WorkDirectory("--output_dir", str(tmp_path))
    files = RunFiles(outputs=fixed_outputs(run, ["predictions.json", "test_results*.tsv"]))
    assert files.declared(str(tmp_path / "predictions.json")) == str(tmp_path / "predictions.json")
    assert files.declared(str(tmp_path / "test_results_m.tsv"))
    with pytest.raises(KeyError, match="not among the declared outputs"):
        files.declared(str(tmp_path / "other.json"))


def test_fixed_names_are_the_runs_once_its_directory_records_them(tmp_path):
    """The first run that finds a fixed name free records it (run_manifest.json); later runs
    then take what is there under that name for an earlier run's output. A user's file under a
    name no run recorded is refused, by name for one file, with the family's consequence for a
    family."""
    run = WorkDirectory("--output_dir", str(tmp_path / "run"))
    owned = fixed_outputs(run, ["eval_results.txt", "model.ckpt-*"])
    files = RunFiles(outputs=owned, work_directories=(run,))
    check_run_files(files)
    assert recorded_names(run.path) == {"eval_results.txt", "model.ckpt-*"}
    (tmp_path / "run" / "eval_results.txt").write_text("an earlier run's\n")
    (tmp_path / "run" / "model.ckpt-3.index").write_text("an earlier run's\n")
    check_run_files(files)

    mine = WorkDirectory("--output_dir", str(tmp_path / "albert_base"))
    (tmp_path / "albert_base").mkdir()
    for name in ("model.ckpt-best.index", "model.ckpt-best.data-00000-of-00001"):
        (tmp_path / "albert_base" / name).write_text("a released model\n")
    with pytest.raises(OutputPathError, match=(
            r"^--output_dir '.*albert_base' holds 'model.ckpt-best.data-00000-of-00001' \(and 1 "
            r"more of model.ckpt-\*\), which albert_tf did not write there .*: the run writes, "
            r"replaces and deletes files of that name there. Move it elsewhere")):
        check_run_files(RunFiles(outputs=fixed_outputs(mine, ["model.ckpt-*"]),
                                 work_directories=(mine,)))
    (tmp_path / "albert_base" / "eval_results.txt").write_text("my notes\n")
    with pytest.raises(OutputPathError, match=r"holds 'eval_results.txt', which albert_tf did not "
                                              r"write there .*: the run writes its "
                                              r"eval_results.txt there, replacing what is there"):
        check_run_files(RunFiles(outputs=fixed_outputs(mine, ["eval_results.txt"]),
                                 work_directories=(mine,)))
    assert sorted(os.listdir(tmp_path / "albert_base")) == [
        "eval_results.txt", "model.ckpt-best.data-00000-of-00001", "model.ckpt-best.index"]
    # A name no user's file bears (a digest-named cache file) need not be listed as owned.
    (tmp_path / "albert_base" / "rte_dev_0123abcd.tf_record").write_text("cache\n")
    check_run_files(RunFiles(outputs=fixed_outputs(mine, ["rte_*_????????.tf_record*"],
                                                   listed_as_owned=False),
                             work_directories=(mine,)))
    assert recorded_names(mine.path) is None  # nothing to list, no manifest written
    assert not (tmp_path / "albert_base" / MANIFEST_NAME).exists()


def earlier_runs_checkpoint(directory, step: int = 3) -> str:
    """What every training run of albert_tf leaves in its directory: an object-based
    model.ckpt-<step> and the 'checkpoint' state file naming it; returns its prefix."""
    return save_object_checkpoint(tf.Variable(1.0), str(directory), step)


def test_a_run_directory_of_an_earlier_version_is_taken_as_the_runs(tmp_path):
    """Versions before the record left no record, but every training run left its 'checkpoint'
    state file naming its own checkpoint there: a directory holding one is an earlier run's, and
    its names are recorded now."""
    run = WorkDirectory("--output_dir", str(tmp_path / "run"))
    earlier_runs_checkpoint(tmp_path / "run")
    (tmp_path / "run" / "eval_results.txt").write_text("an earlier run's\n")
    files = RunFiles(outputs=fixed_outputs(run, ["checkpoint", "eval_results.txt",
                                                 "model.ckpt-*"]),
                     work_directories=(run,))
    check_run_files(files)
    assert recorded_names(run.path) == {"checkpoint", "eval_results.txt", "model.ckpt-*"}
    # A run that only predicts there touches no checkpoint, but its checkpoints still name it.
    predicting = WorkDirectory("--output_dir", str(tmp_path / "predicting"))
    earlier_runs_checkpoint(tmp_path / "predicting")
    (tmp_path / "predicting" / "predictions.json").write_text("an earlier run's\n")
    check_run_files(RunFiles(outputs=fixed_outputs(predicting, ["model.ckpt-*"], touched=False)
                             + fixed_outputs(predicting, ["predictions.json"]),
                             work_directories=(predicting,)))
    assert recorded_names(predicting.path) == {"predictions.json"}
    # A file called 'checkpoint' that is no checkpoint state file proves nothing.
    other = WorkDirectory("--output_dir", str(tmp_path / "other"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "checkpoint").write_text("my notes on checkpoints\n")
    with pytest.raises(OutputPathError, match=r"holds 'checkpoint', which albert_tf did not"):
        check_run_files(RunFiles(outputs=fixed_outputs(other, ["checkpoint"]),
                                 work_directories=(other,)))


def users_checkpoint(directory, kind: str) -> None:
    """A 'checkpoint' state file of the user's in ``directory`` and what it names: ``kind``
    "reference" (a TF1 run's, the reference's or an Estimator's: model.ckpt-123, name-based),
    "other program" (object-based, but CheckpointManager's own name ckpt-<n>) or "absent" (a
    checkpoint that is not there)."""
    os.makedirs(directory, exist_ok=True)
    if kind == "reference":
        write_reference_checkpoint(os.path.join(directory, "model.ckpt"), {"w": (2,)})
    elif kind == "other program":
        tf.train.CheckpointManager(tf.train.Checkpoint(w=tf.Variable(1.0)), str(directory),
                                   max_to_keep=None).save(checkpoint_number=1)
    else:
        with open(os.path.join(directory, "checkpoint"), "w", encoding="utf-8") as handle:
            handle.write('model_checkpoint_path: "model.ckpt-3"\n')


@pytest.mark.parametrize("kind", ["reference", "other program", "absent"])
def test_a_users_checkpoint_does_not_make_a_directory_an_earlier_runs(tmp_path, kind):
    """A directory of the user's holding a 'checkpoint' state file of its own and notes called
    eval_results.txt was taken for an earlier version's run directory: every fixed name there was
    the run's, and run_pretraining --do_train --do_eval replaced both. Only a state file naming
    an albert_tf checkpoint of the run's names there marks a run directory."""
    run = WorkDirectory("--output_dir", str(tmp_path / "mine"))
    users_checkpoint(run.path, kind)
    (tmp_path / "mine" / "eval_results.txt").write_text("my notes\n")
    before = sorted(os.listdir(run.path))
    with pytest.raises(OutputPathError, match=r"holds 'eval_results.txt', which albert_tf did "
                                              r"not write there"):
        check_run_files(RunFiles(outputs=fixed_outputs(run, ["eval_results.txt", "checkpoint",
                                                             "model.ckpt-*"]),
                                 work_directories=(run,)))
    assert sorted(os.listdir(run.path)) == before  # no record either


@pytest.mark.parametrize("kind", ["reference", "absent"])
def test_a_users_checkpoint_in_a_seed_folder_does_not_make_an_earlier_run_seeds_directory(
        tmp_path, kind):
    """A folder seed_<S> of the user's holding a TF1 checkpoint, or a state file alone, is no
    seed's run (the folder bearing the run's name, an albert_tf checkpoint of any name is)."""
    seeds = WorkDirectory("--output_dir", str(tmp_path / "seeds"))
    users_checkpoint(os.path.join(seeds.path, "seed_1"), kind)
    with pytest.raises(OutputPathError, match=r"holds 'seed_1', which albert_tf did not"):
        check_run_files(RunFiles(outputs=fixed_outputs(seeds, ["seed_[-0-9]*"]),
                                 work_directories=(seeds,)))


def test_a_run_seeds_directory_of_an_earlier_version_is_taken_as_the_runs(tmp_path):
    """run_seeds' --output_dir holds no checkpoint itself, its seed_<S> run directories do: a rerun
    resuming an earlier version's seeds was refused ('holds seed_1, which albert_tf did not
    write'), and the message told the user to move the finished seeds away."""
    seeds = WorkDirectory("--output_dir", str(tmp_path / "rte"))
    earlier_runs_checkpoint(tmp_path / "rte" / "seed_1", step=4)
    (tmp_path / "rte" / "seed_2").mkdir()  # a seed that failed before its first checkpoint
    files = RunFiles(outputs=fixed_outputs(seeds, ["seed_results.json", "seed_[-0-9]*"]),
                     work_directories=(seeds,))
    check_run_files(files)
    assert recorded_names(seeds.path) == {"seed_results.json", "seed_[-0-9]*"}
    # A user's folder of that name holding no run proves nothing.
    mine = WorkDirectory("--output_dir", str(tmp_path / "mine"))
    (tmp_path / "mine" / "seed_1").mkdir(parents=True)
    (tmp_path / "mine" / "seed_1" / "notes.txt").write_text("mine\n")
    with pytest.raises(OutputPathError, match=r"holds 'seed_1', which albert_tf did not"):
        check_run_files(RunFiles(outputs=fixed_outputs(mine, ["seed_[-0-9]*"]),
                                 work_directories=(mine,)))


def test_an_unreadable_record_of_owned_names_is_named(tmp_path):
    run = WorkDirectory("--output_dir", str(tmp_path))
    (tmp_path / MANIFEST_NAME).write_text('{"format": 1, "owned_names": "checkpoint"}')
    with pytest.raises(RunManifestError, match=rf"^.*{MANIFEST_NAME}: \"owned_names\" must be a "
                                               r"JSON list"):
        check_run_files(RunFiles(outputs=fixed_outputs(run, ["checkpoint"]),
                                 work_directories=(run,)))
    # An earlier version's output record, likewise.
    earlier = WorkDirectory("--output_dir", str(tmp_path / "earlier"))
    (tmp_path / "earlier").mkdir()
    (tmp_path / "earlier" / ".albert_tf_outputs.json").write_text('{"fixed_names": "checkpoint"}')
    with pytest.raises(EarlierLayoutError, match=r"^.*\.albert_tf_outputs\.json: expected "
                                                 r"\{\"fixed_names\": \[\.\.\.\]\}"):
        check_run_files(RunFiles(outputs=fixed_outputs(earlier, ["checkpoint"]),
                                 work_directories=(earlier,)))


def test_the_output_record_of_an_earlier_version_is_read(tmp_path):
    """A directory whose names an earlier version recorded in .albert_tf_outputs.json: those files
    are the run's; its next run records them (and its own) in the run manifest."""
    run = WorkDirectory("--output_dir", str(tmp_path))
    (tmp_path / ".albert_tf_outputs.json").write_text('{"fixed_names": ["eval_results.txt"]}')
    (tmp_path / "eval_results.txt").write_text("an earlier run's\n")
    check_run_files(RunFiles(outputs=fixed_outputs(run, ["eval_results.txt", "predictions.json"]),
                             work_directories=(run,)))
    assert read_manifest(str(tmp_path)).exists
    assert recorded_names(str(tmp_path)) == {"eval_results.txt", "predictions.json"}
    other = WorkDirectory("--output_dir", str(tmp_path / "other"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / ".albert_tf_outputs.json").write_text('{"fixed_names": []}')
    (tmp_path / "other" / "eval_results.txt").write_text("my notes\n")
    with pytest.raises(OutputPathError, match=r"holds 'eval_results.txt', which albert_tf did not"):
        check_run_files(RunFiles(outputs=fixed_outputs(other, ["eval_results.txt"]),
                                 work_directories=(other,)))


def test_a_directory_the_check_created_is_removed_with_its_record_when_the_command_fails(
        tmp_path):
    run = WorkDirectory("--output_dir", str(tmp_path / "new" / "run"))
    created_directories.forget()
    check_run_files(RunFiles(outputs=fixed_outputs(run, ["checkpoint"]), work_directories=(run,)))
    assert os.listdir(run.path) == [MANIFEST_NAME]
    created_directories.remove_those_left_empty()  # what the error boundary does on an error
    assert os.listdir(tmp_path) == []


def test_a_fixed_name_the_run_does_not_touch_may_hold_the_users_file_and_is_not_recorded(tmp_path):
    """A run that only predicts or exports reads the model.ckpt-best the user put in its
    --output_dir: the checkpoints, which it neither writes nor deletes, are declared untouched.
    Their files are not refused, and the name is not recorded, so a later training run there is
    still refused."""
    run = WorkDirectory("--output_dir", str(tmp_path))
    (tmp_path / "model.ckpt-best.index").write_text("a colleague's best\n")
    predicting = RunFiles(outputs=fixed_outputs(run, ["model.ckpt-*"], touched=False)
                          + fixed_outputs(run, ["predictions.json"]), work_directories=(run,))
    check_run_files(predicting)
    assert recorded_names(run.path) == {"predictions.json"}
    with pytest.raises(OutputPathError, match=r"holds 'model.ckpt-best.index'"):
        check_run_files(RunFiles(outputs=fixed_outputs(run, ["model.ckpt-*"]),
                                 work_directories=(run,)))
