"""No command overwrites its own inputs: an output path that is an input (however spelled or
linked), or an output directory the run rewrites that holds an input, is one line
``<command>: error: ...`` naming both flags and paths, exit status 1, before anything is written.

What each command refuses (albert_tf/files/paths.py does the comparing):
- data_prep.squad / data_prep.race: --output_file or its sidecar <output_file>.json being the
  input JSON, a RACE article file of the split, or the tokenizer;
- data_prep.glue: --cached_dir being a split's TSV or the tokenizer (it may be --data_dir);
- data_prep.train_sentencepiece: <model_prefix>.model / .vocab being an --input_file;
- run_*.py: --output_dir, --cached_dir, --export_dir being an input file, --export_dir being
  --output_dir, --cached_dir, --data_dir or --init_checkpoint, --init_checkpoint lying in
  --output_dir;
- export_hub: an export directory being an input, or the two nested;
- convert_checkpoint: --output_dir being an input or holding the checkpoint converted.

The commands run in the test process (tests/command_runner.py).
"""

import os

import pytest

from tests.command_runner import run_command
from tests.shared_setup import tiny_config

SPM_BYTES = b"a SentencePiece model, as far as the checks know"


def error_line(result, program):
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{program}: error: "), line
    return line[len(f"{program}: error: "):]


def is_also_an_input(output_flag, output, input_flag, input_path):
    return (f"{output_flag} '{output}' is also an input ({input_flag} '{input_path}'): writing it "
            "would replace that input; choose another output path")


def a_file(path, content=b"input data that must survive\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


# -- data_prep -------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["input_file", "spm_model_file through a symlink", "sidecar"])
def test_data_prep_squad_never_writes_over_its_inputs(tmp_path, case):
    squad_json = a_file(tmp_path / "dev.json", b'{"version": "1.1", "data": []}')
    spm = a_file(tmp_path / "30k-clean.model", SPM_BYTES)
    os.symlink(spm, tmp_path / "link.model")
    output, want = {
        "input_file": (squad_json, is_also_an_input("--output_file", squad_json, "--input_file",
                                                    squad_json)),
        "spm_model_file through a symlink": (
            tmp_path / "link.model",
            is_also_an_input("--output_file", tmp_path / "link.model", "--spm_model_file", spm)),
        "sidecar": (tmp_path / "dev", is_also_an_input("its sidecar", f"{tmp_path}/dev.json",
                                                       "--input_file", squad_json)),
    }[case]
    result = run_command("-m data_prep.squad", f"--input_file={squad_json}",
                         f"--output_file={output}", f"--spm_model_file={spm}")
    assert error_line(result, "squad") == want
    assert squad_json.read_bytes() == b'{"version": "1.1", "data": []}'
    assert spm.read_bytes() == SPM_BYTES


def test_data_prep_race_never_writes_over_an_article_file(tmp_path):
    all_txt = a_file(tmp_path / "RACE" / "dev" / "middle" / "all.txt", b'{"article": "x"}\n')
    spelled = f"{tmp_path}/RACE/dev/high/../middle/all.txt"
    (tmp_path / "RACE" / "dev" / "high").mkdir()
    result = run_command("-m data_prep.race", f"--data_dir={tmp_path}", "--split=dev",
                         "--middle_only",
                         f"--spm_model_file={a_file(tmp_path / 'spm.model', SPM_BYTES)}",
                         f"--output_file={spelled}")
    assert error_line(result, "race") == is_also_an_input("--output_file", spelled,
                                                          "a file of --data_dir", all_txt)
    assert all_txt.read_bytes() == b'{"article": "x"}\n'


def test_data_prep_glue_never_caches_over_an_input(tmp_path):
    for split in ("train", "dev"):
        a_file(tmp_path / "glue" / "RTE" / f"{split}.tsv", b"index\tsentence1\tsentence2\tlabel\n")
    spm = a_file(tmp_path / "spm.model", SPM_BYTES)
    os.link(spm, tmp_path / "hard_link")
    result = run_command("-m data_prep.glue", "--task_name=rte", f"--data_dir={tmp_path / 'glue'}",
                         f"--spm_model_file={spm}", f"--cached_dir={tmp_path / 'hard_link'}")
    assert error_line(result, "glue") == is_also_an_input(
        "--cached_dir", tmp_path / "hard_link", "--spm_model_file", spm)
    assert spm.read_bytes() == SPM_BYTES


def test_train_sentencepiece_never_writes_over_its_corpus(tmp_path):
    corpus = a_file(tmp_path / "corpus.model", b"a corpus whose name ends in .model\n")
    result = run_command("-m data_prep.train_sentencepiece", f"--input_file={tmp_path}/*.model",
                         f"--model_prefix={tmp_path / 'corpus'}", "--vocab_size=100")
    assert error_line(result, "train_sentencepiece") == is_also_an_input(
        "--model_prefix", corpus, "--input_file", corpus)
    assert corpus.read_bytes() == b"a corpus whose name ends in .model\n"


# -- the run_* scripts -----------------------------------------------------------------------------

def model_flags(tmp_path):
    """The model's files every fine-tuning script needs (never read: the checks come first)."""
    return [f"--albert_config_file={a_file(tmp_path / 'in' / 'c.json')}",
            f"--spm_model_file={a_file(tmp_path / 'in' / 'spm.model')}"]


def fake_checkpoint(prefix):
    """What the checks see of a checkpoint: its index file (the loaders never get this far)."""
    return a_file(prefix.parent / (prefix.name + ".index"), b"an index that must survive")


def test_run_pretraining_refuses_an_init_checkpoint_in_its_output_dir(tmp_path):
    output_dir = tmp_path / "run"
    index = fake_checkpoint(output_dir / "model.ckpt-best")
    result = run_command("run_pretraining.py",
                         f"--albert_config_file={a_file(tmp_path / 'c.json')}",
                         f"--input_file={a_file(tmp_path / 'data.tfrecord')}",
                         f"--output_dir={output_dir}",
                         f"--init_checkpoint={output_dir}/model.ckpt-best")
    assert error_line(result, "run_pretraining") == (
        f"--output_dir '{output_dir}' holds the input --init_checkpoint "
        f"'{output_dir}/model.ckpt-best': the run writes its checkpoints there, renames its best "
        "to model.ckpt-best and deletes the others. To resume the run in it, leave "
        "--init_checkpoint out; to start from that checkpoint, use another --output_dir")
    assert index.read_bytes() == b"an index that must survive"
    assert sorted(os.listdir(output_dir)) == ["model.ckpt-best.index"]


def test_run_race_refuses_its_own_output_dir_as_init_checkpoint(tmp_path):
    output_dir = tmp_path / "run"
    fake_checkpoint(output_dir / "model.ckpt-3")
    (output_dir / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-3"\n')
    for split in ("train", "dev"):
        for level in ("middle", "high"):
            a_file(tmp_path / "race" / "RACE" / split / level / "1.txt", b"{}")
    result = run_command("run_race.py", *model_flags(tmp_path), f"--data_dir={tmp_path / 'race'}",
                         f"--output_dir={output_dir}", f"--init_checkpoint={output_dir}",
                         "--do_train", "--do_eval")
    assert error_line(result, "run_race").startswith(
        f"--output_dir '{output_dir}' holds the input --init_checkpoint "
        f"'{output_dir}/model.ckpt-3': ")


def test_run_classifier_refuses_its_data_dir_as_export_dir(tmp_path):
    train = a_file(tmp_path / "glue" / "RTE" / "train.tsv")
    result = run_command("run_classifier.py", *model_flags(tmp_path),
                         f"--output_dir={tmp_path / 'out'}", "--task_name=rte", "--do_train",
                         f"--data_dir={tmp_path / 'glue'}", f"--export_dir={tmp_path}/glue/")
    assert error_line(result, "run_classifier") == is_also_an_input(
        "--export_dir", f"{tmp_path}/glue/", "--data_dir", tmp_path / "glue")
    assert train.read_bytes() == b"input data that must survive\n"


def test_run_squad_refuses_an_output_dir_that_is_its_training_file(tmp_path):
    train = a_file(tmp_path / "train-v2.0.json")
    os.symlink(train, tmp_path / "out")
    result = run_command("run_squad.py", *model_flags(tmp_path), f"--output_dir={tmp_path / 'out'}",
                         f"--train_file={train}", "--do_train")
    assert error_line(result, "run_squad") == is_also_an_input(
        "--output_dir", tmp_path / "out", "--train_file", train)
    assert train.read_bytes() == b"input data that must survive\n"


# -- albert_tf commands ----------------------------------------------------------------------------

def test_export_hub_refuses_to_export_over_its_tokenizer(tmp_path):
    spm = a_file(tmp_path / "30k-clean.model", SPM_BYTES)
    result = run_command("-m albert_tf.export_hub", f"--spm_model_file={spm}",
                         f"--preprocessing_export_path={tmp_path}/./30k-clean.model")
    assert error_line(result, "export_hub") == is_also_an_input(
        "--preprocessing_export_path", f"{tmp_path}/./30k-clean.model", "--spm_model_file", spm)
    assert spm.read_bytes() == SPM_BYTES


def test_convert_checkpoint_refuses_to_write_where_its_source_is(tmp_path):
    """A reference checkpoint named model.ckpt-0 converted into its own directory with --overwrite
    would be replaced by its conversion (albert_tf's output is model.ckpt-0)."""
    index = fake_checkpoint(tmp_path / "model.ckpt-0")
    result = run_command("-m albert_tf.convert_checkpoint",
                         f"--albert_config_file={tmp_path}/c.json",
                         f"--tf1_checkpoint={tmp_path}/model.ckpt-0", f"--output_dir={tmp_path}",
                         "--overwrite")
    assert error_line(result, "convert_checkpoint") == (
        f"--output_dir '{tmp_path}' holds the input --tf1_checkpoint '{tmp_path}/model.ckpt-0': "
        "the conversion writes its checkpoint and the directory's 'checkpoint' file there; choose "
        "another --output_dir")
    assert index.read_bytes() == b"an index that must survive"


def test_run_pretraining_resumes_from_the_config_it_recorded(tmp_path, pretraining_records):
    # A run records its config as <output_dir>/albert_config.json, written only where absent: a
    # rerun given that very file as --albert_config_file reads it and writes nothing over it
    # (it was refused as an output over an input).
    config = tmp_path / "first.json"
    config.write_text(tiny_config(max_position_embeddings=128).to_json_string())
    output_dir = tmp_path / "run"
    common = [f"--input_file={pretraining_records}", f"--output_dir={output_dir}",
              "--max_seq_length=128", "--train_batch_size=2", "--save_checkpoints_steps=2",
              "--iterations_per_loop=2", "--nodo_eval"]
    first = run_command("run_pretraining.py", f"--albert_config_file={config}", *common,
                        "--num_train_steps=2")
    assert first.returncode == 0, first.stderr[-2000:]
    recorded = output_dir / "albert_config.json"
    before = recorded.read_bytes()
    again = run_command("run_pretraining.py", f"--albert_config_file={recorded}", *common,
                        "--num_train_steps=4")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Resumed from" in again.stdout + again.stderr
    assert os.path.exists(output_dir / "model.ckpt-4.index")
    assert recorded.read_bytes() == before
