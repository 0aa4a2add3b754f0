"""albert_tf: ALBERT on TensorFlow 2 and Keras 3, faithful to Google's TF1 reference
(google-research/albert) in numbers, tensor names and file formats.

The folders are the architecture (docs/layout.md maps every module). Core capability folders,
which know no task:

- errors/: ``UserError``, the base class of users' mistakes (their data, flags, paths).
- files/: atomic outputs, input patterns, output path checks, the run lock, TFRecord reading.
- models/: ``AlbertConfig``, the encoder, its layers, the shared heads, the task-model contract.
- tokenization/: text -> pieces -> ids, in Python and in the graph.
- checkpoints/: reference TF1, albert_tf and Hugging Face checkpoints: names, loading, checks,
  conversion.
- training/: the ``Task`` protocol, the ``Trainer``, optimizers, input pipelines, strategies.
- evaluation/: the checkpoint sweep, the best checkpoint, seed results, metrics on arrays.
- serving/: SavedModel layout and writer, in-graph text packing, preprocessing model, TFLite.
- cli/: the error boundary of every command, the shared absl flags and their wiring.

tasks/: one folder per task family (pretraining, GLUE classification, RACE multiple choice, SQuAD
question answering, NER token classification), each with its model, ``Task``, metrics and serving.
reproduction/: the paper's tables from runs, built on the tasks (used by paper_tables only).

Commands at the top (``python -m albert_tf.<command>``), flags and wiring only: convert_checkpoint,
export_hub, model_report, run_seeds, paper_tables. The training scripts (run_pretraining.py,
run_classifier.py, run_squad.py, run_race.py, run_ner.py) are at the repository root; the data
preparation is the package data_prep.

Layering (tests/test_import_graph.py checks it): no import cycle, between modules or between
folders; core folders never import albert_tf/tasks/; a task never imports another task; only
commands use reproduction/; albert_tf never imports data_prep; nothing imports a command; only
cli/command_line.py, cli/flag_definitions.py, cli/flag_checks.py, cli/settings.py and the commands import
``absl.flags`` or read ``FLAGS``. Package ``__init__`` files hold no code (import the modules).
"""
