"""errors: the one base class of every mistake a user can make (``UserError``), below every other
folder so that each of them can derive its own error classes from it.

- user_error.py: ``UserError`` (one line and exit status 1 at the error boundary; anything else is a
  bug and keeps its traceback) and ``UserFileError`` (an OS error on a path the user gave).
"""
