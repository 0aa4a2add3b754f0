"""reproduction: the paper's tables from this project's runs, and the plan of a full reproduction.

Built on the tasks (it reads their results files and their recipes); only the command
``python -m albert_tf.paper_tables`` uses it.

- published.py, published_numbers.json: the paper's and the released models' published numbers.
- downstream.py: the downstream table (GLUE, SQuAD, RACE, the paper's Avg) of one checkpoint's runs.
- ablation.py: Tables 3, 4 and 5 from pretraining runs.
- plan.py: every command of a full reproduction, with the paper's recipes and seeds.
"""
