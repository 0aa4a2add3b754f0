"""cli: what the command lines share: the absl flags (defined once, checked before TensorFlow
loads, read once into frozen settings), the error boundary every command runs behind, and the one
driver of the training scripts.

This folder and the commands themselves (the top-level modules of albert_tf/ and data_prep/, and
the run_*.py scripts) are the only code that touches absl flags: only command_line.py,
flag_definitions.py, flag_checks.py and settings.py here may import ``absl.flags`` or read
``FLAGS``; the driver and every library module take settings and plain arguments.
"""
