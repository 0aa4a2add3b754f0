"""errors: the one base class of every mistake a user can make (``UserError``), below every other
folder so that each of them can derive its own error classes from it.

The error boundary of the commands (albert_tf/cli/error_boundary.py) ends a ``UserError`` with one
line and exit status 1; anything else is a bug and keeps its traceback.
"""
