"""cli: what the command lines share: the error boundary every command runs behind, and the absl
flags.

This folder and the commands themselves (the top-level modules of albert_tf/ and data_prep/, and
the run_*.py scripts) are the only code that touches absl flags: only command_line.py,
flag_definitions.py and run_flags.py here may import ``absl.flags`` or read ``FLAGS``; library
modules take plain arguments. What does not belong here: a command's own flags and wiring (in the
command), and any library code a command calls.
"""
