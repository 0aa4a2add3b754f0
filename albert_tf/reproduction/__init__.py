"""reproduction: the paper's tables from this project's runs, beside the paper's published numbers,
and the plan of a full reproduction.

Built on the tasks (it reads their results files and their recipes); only the command
``python -m albert_tf.paper_tables`` uses it.
"""
