"""Every task as a ``TaskSpec`` (albert_tf/cli/task_spec.py), the one place that joins albert_tf's
tasks with data_prep's feature builders: a run_<task>.py script reads its flags into the task's
settings and hands ``<task>_spec(run settings, task settings)`` to the driver
(albert_tf/cli/driver.py)."""
