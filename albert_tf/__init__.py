"""albert_tf: ALBERT on TensorFlow 2 and Keras 3, faithful to Google's TF1 reference
(google-research/albert) in numbers, tensor names and file formats.

The folders are the architecture. Core capability folders, which know no task:

- errors/: ``UserError``, the base of every error a user's data, flags or paths cause.
- files/: atomic outputs, input patterns, output path checks, TFRecord reading.
- models/: ``AlbertConfig``, the encoder, its layers, the shared heads, the task-model contract.
- tokenization/: text -> pieces -> ids, in Python and in the graph.
- checkpoints/: reference TF1 and albert_tf checkpoints: names, loading, checks, conversion.
- training/: the ``Task`` protocol, the ``Trainer``, optimizers, input pipelines, strategies.
- evaluation/: the checkpoint sweep, the best checkpoint, metrics on arrays.
- serving/: SavedModel layout and writer, in-graph text packing, preprocessing model, TFLite.
- cli/: the error boundary of every command, the shared absl flags and their wiring.

Task folders, one per task family (albert_tf/tasks/: pretraining, classification, multiple_choice,
question_answering): each task's model, ``Task``, metrics and serving.

Commands at the top (``python -m albert_tf.<command>``), flags and wiring only:

- convert_checkpoint.py: reference TF1 checkpoint <-> albert_tf checkpoint.
- export_hub.py: the hub-style encoder SavedModel of a pretrained model, and its preprocessing model.
- model_report.py: the parameter report of a config and a training-memory estimate.
- run_seeds.py: one fine-tuning recipe run with several seeds; each seed's best and the median.

The training scripts (run_pretraining.py, run_classifier.py, run_squad.py, run_race.py) are at the
repository root; the data preparation is the package data_prep.

Layering (tests/test_import_graph.py checks it): no import cycle, between modules or between
folders; core folders never import
albert_tf/tasks/; a task never imports another task; albert_tf never imports data_prep; nothing
imports a command; only cli/flag_definitions.py, cli/run_flags.py and the commands import
``absl.flags`` or read ``FLAGS``. Package ``__init__`` files hold no code (import the modules).
"""
