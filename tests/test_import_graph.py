"""The layering of albert_tf/ and data_prep/, checked on the source (parsed with ast, not imported).

The folders are the architecture: each package has core capability folders, task folders and, at its
top, its commands (``python -m albert_tf.<command>``, ``python -m data_prep.<command>``). Rules:

- no import cycle between project modules (module-level and function-level imports alike), nor
  between capability folders (the picture of the tree is a DAG);
- core folders never import ``albert_tf/tasks/``; a task never imports another task (in either
  package); a ``data_prep`` task folder may use the ``albert_tf`` task of its own name; the folders
  above the tasks (``reproduction/``) are used by commands only;
- albert_tf never imports data_prep; nothing imports a command;
- every top-level module is a command (it has a ``__main__`` block) and every folder is a package;
- library modules never touch absl flags: only the flag modules of ``albert_tf/cli/`` and the
  commands may import ``absl.flags`` or read ``FLAGS``;
- data_prep imports from albert_tf only Keras-free modules: ``errors``, ``files``, ``tokenization``,
  the error boundary's module, and the named Keras-free modules (``records``, ...) of the albert_tf
  task of its own name (the commands also the command-line modules of ``albert_tf/cli/``); never
  ``albert_tf.training``, ``albert_tf.models``, ``albert_tf.cli.run_flags`` or Keras, not even
  through what it imports; a task's ``records.py`` is Keras-free too.
"""

from __future__ import annotations

import ast
import pathlib
import textwrap

import pytest

from tests import shared_setup

REPO_ROOT = pathlib.Path(shared_setup.REPO_ROOT)
PACKAGES = ("albert_tf", "data_prep", "task_specs")
# The packages whose top-level modules are commands; task_specs/ holds the tasks' specs, which join
# albert_tf's tasks with data_prep's feature builders (the run_*.py scripts use them).
COMMAND_PACKAGES = ("albert_tf", "data_prep")
SPECS = "task_specs"

# The capability folders that hold no task and that tasks build on.
ALBERT_TF_CORE = ("errors", "files", "models", "tokenization", "checkpoints", "training",
                  "evaluation", "serving", "cli")
# Folders built on the tasks (they read every task's results); only commands use them.
ALBERT_TF_ABOVE_TASKS = ("reproduction",)
DATA_PREP_CORE = ("common",)
# The only library modules allowed to import absl.flags or read FLAGS (besides the commands).
FLAG_MODULES = {"albert_tf.cli.command_line", "albert_tf.cli.flag_definitions",
                "albert_tf.cli.flag_checks", "albert_tf.cli.settings",
                "albert_tf.cli.early_exit_flags", "albert_tf.cli.own_data_flags"}
# What data_prep may import from albert_tf (a module, or everything under a folder): Keras-free.
DATA_PREP_USES = ("albert_tf.errors", "albert_tf.files", "albert_tf.tokenization",
                  "albert_tf.cli.error_boundary", "albert_tf.training.recipe")
# Per task folder of data_prep, the Keras-free modules of the albert_tf task of its own name it
# may import: its record schema (records), and what its data shares with the task.
DATA_PREP_TASK_USES = {
    "classification": ("records", "recipes", "metrics"),
    "question_answering": ("records",),
    "multiple_choice": ("records",),
    "token_classification": ("records", "file_formats", "schemes"),
}
# The commands of data_prep also use the command-line modules (and data_prep.glue GLUE's recipes,
# for --print_recipe).
DATA_PREP_COMMAND_USES = ("albert_tf.cli.command_line", "albert_tf.cli.flag_definitions",
                          "albert_tf.cli.flag_checks", "albert_tf.tasks.classification.recipes")
# Never imported by data_prep, nor by anything data_prep imports from albert_tf (Keras, models,
# the training stack), except the Keras-free modules DATA_PREP_USES names.
KERAS_FOLDERS = ("albert_tf.models", "albert_tf.training", "albert_tf.cli.training_run",
                 "albert_tf.cli.driver", "albert_tf.cli.task_spec")


def discover_modules(root: pathlib.Path, packages: tuple[str, ...]) -> dict[str, pathlib.Path]:
    """{dotted module name: source file} of every .py file under the packages (``pkg/__init__.py``
    is the module ``pkg``)."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules: dict[str, pathlib.Path]) -> str | None:
    """The project module that importing ``name`` runs: the longest prefix that is a module."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def imports_of(module: str, path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """Project modules that ``module`` imports anywhere in its source (functions included)."""
    is_package = path.name == "__init__.py"
    package_parts = module.split(".") if is_package else module.split(".")[:-1]
    targets: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets.update(_resolve(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package_parts[:len(package_parts) - node.level + 1]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                # `from pkg import sub` imports the module pkg.sub when there is one.
                targets.add(_resolve(f"{base}.{alias.name}", modules) or _resolve(base, modules))
    return {target for target in targets if target is not None and target != module}


def import_graph(root: pathlib.Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """{module: project modules it imports} for every module of the packages."""
    modules = discover_modules(root, packages)
    return {module: imports_of(module, path, modules) for module, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles as module paths whose last element repeats the first (one per back edge found
    by a depth-first search in sorted order)."""
    state: dict[str, str] = {}  # "active" while on the DFS stack, then "done"
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        state[module] = "active"
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "active":
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return cycles


def flag_uses(path: pathlib.Path) -> list[str]:
    """Lines of ``path`` that import absl.flags or read FLAGS, as "file:line: what"."""
    uses = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        what = None
        if isinstance(node, ast.Import):
            if any(alias.name.split(".")[:2] == ["absl", "flags"] for alias in node.names):
                what = "imports absl.flags"
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module == "absl" and any(a.name == "flags" for a in node.names):
                what = "imports absl.flags"
            elif (node.module or "").split(".")[:2] == ["absl", "flags"]:
                what = "imports from absl.flags"
        elif isinstance(node, ast.Name) and node.id == "FLAGS":
            what = "reads FLAGS"
        elif isinstance(node, ast.Attribute) and node.attr == "FLAGS":
            what = "reads FLAGS"
        if what:
            uses.append(f"{path}:{node.lineno}: {what}")
    return uses


def has_main_block(path: pathlib.Path) -> bool:
    """True when the module has a top-level ``if __name__ == "__main__":``."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            if (any(isinstance(n, ast.Name) and n.id == "__name__" for n in names)
                    and any(isinstance(n, ast.Constant) and n.value == "__main__" for n in names)):
                return True
    return False


def imports_keras(path: pathlib.Path) -> bool:
    """Whether the module imports Keras (``keras``, ``tf_keras``, ``tensorflow.keras``) or uses
    ``tf.keras``, anywhere in its source."""
    def is_keras(name: str) -> bool:
        parts = name.split(".")
        return parts[0] in ("keras", "tf_keras") or parts[:2] == ["tensorflow", "keras"]

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import) and any(is_keras(alias.name) for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            if is_keras(node.module or "") or (node.module == "tensorflow" and any(
                    alias.name == "keras" for alias in node.names)):
                return True
        if (isinstance(node, ast.Attribute) and node.attr == "keras"
                and isinstance(node.value, ast.Name) and node.value.id == "tf"):
            return True
    return False


def is_under(module: str, prefixes: tuple[str, ...]) -> bool:
    """``module`` is one of ``prefixes`` or lies in one of them (a folder)."""
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def loaded_with(module: str, graph: dict[str, set[str]]) -> set[str]:
    """Every project module that importing ``module`` runs: its imports, transitively, and the
    packages (``__init__``) each of them lies in."""
    seen: set[str] = set()
    pending = [module]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        parts = current.split(".")
        parents = {".".join(parts[:end]) for end in range(1, len(parts))}
        pending.extend((graph.get(current, set()) | parents) & graph.keys())
    return seen


def format_cycles(cycles: list[list[str]]) -> str:
    return "; ".join(" -> ".join(cycle) for cycle in cycles)


# -------------------------------------------------------------------------------------------------
# The project itself.

def folder_of(module: str) -> str:
    """The capability folder a module belongs to: ``albert_tf.models``, ``albert_tf.tasks.squad``
    style for tasks (``albert_tf.tasks.<task>``), ``data_prep.<folder>``; a command is its own."""
    parts = module.split(".")
    depth = 3 if parts[:2] == ["albert_tf", "tasks"] else 2
    return ".".join(parts[:depth])


def task_of(module: str) -> str | None:
    """The task a module belongs to (``question_answering``), or None for core and commands."""
    parts = module.split(".")
    if parts[:2] == ["albert_tf", "tasks"] and len(parts) > 3:
        return parts[2]
    if parts[0] == "data_prep" and len(parts) > 2 and parts[1] not in DATA_PREP_CORE:
        return parts[1]
    return None


def is_command(module: str, path: pathlib.Path) -> bool:
    """A module directly in the folder of albert_tf or data_prep (not ``__init__``)."""
    parts = module.split(".")
    return len(parts) == 2 and parts[0] in COMMAND_PACKAGES and path.name != "__init__.py"


@pytest.fixture(scope="module")
def modules() -> dict[str, pathlib.Path]:
    return discover_modules(REPO_ROOT, PACKAGES)


@pytest.fixture(scope="module")
def project_graph() -> dict[str, set[str]]:
    return import_graph(REPO_ROOT, PACKAGES)


def edges(graph: dict[str, set[str]]):
    return ((module, target) for module, targets in sorted(graph.items())
            for target in sorted(targets))


def test_the_project_has_modules_and_edges(project_graph):
    """Guards the checks below against parsing nothing."""
    assert "albert_tf.models.encoder" in project_graph and "data_prep.glue" in project_graph
    assert "albert_tf.models.config" in project_graph["albert_tf.models.encoder"]
    assert "albert_tf.models.encoder" in project_graph["albert_tf.checkpoints.tf1_names"]
    assert task_of("albert_tf.tasks.question_answering.model") == "question_answering"
    assert task_of("data_prep.question_answering.features") == "question_answering"
    assert task_of("albert_tf.models.heads") is None and task_of("data_prep.common.tf_example") is None


def test_no_import_cycles(project_graph):
    cycles = find_cycles(project_graph)
    assert not cycles, f"import cycle(s): {format_cycles(cycles)}"


def test_no_cycle_between_folders(project_graph):
    folder_graph: dict[str, set[str]] = {}
    for module, target in edges(project_graph):
        if folder_of(module) != folder_of(target):
            folder_graph.setdefault(folder_of(module), set()).add(folder_of(target))
    cycles = find_cycles(folder_graph)
    assert not cycles, f"folder cycle(s): {format_cycles(cycles)}"


def test_albert_tf_never_imports_data_prep(project_graph):
    offending = [f"{module} imports {target}" for module, target in edges(project_graph)
                 if module.split(".")[0] == "albert_tf" and target.split(".")[0] == "data_prep"]
    assert not offending, "; ".join(offending)


def test_core_folders_never_import_tasks(project_graph):
    core = tuple(f"albert_tf.{name}" for name in ALBERT_TF_CORE) + tuple(
        f"data_prep.{name}" for name in DATA_PREP_CORE)
    offending = [f"{module} imports {target}" for module, target in edges(project_graph)
                 if folder_of(module) in core and task_of(target) is not None]
    assert not offending, "; ".join(offending)


def test_only_commands_use_the_folders_above_the_tasks(project_graph, modules):
    above = tuple(f"albert_tf.{name}" for name in ALBERT_TF_ABOVE_TASKS)
    offending = [f"{module} imports {target}" for module, target in edges(project_graph)
                 if folder_of(target) in above and folder_of(module) not in above
                 and not is_command(module, modules[module])]
    assert not offending, "; ".join(offending)


def test_a_task_never_imports_another_task(project_graph):
    offending = [f"{module} imports {target}" for module, target in edges(project_graph)
                 if task_of(module) and task_of(target) and task_of(module) != task_of(target)]
    assert not offending, "; ".join(offending)


def test_nothing_imports_a_command(project_graph, modules):
    offending = [f"{module} imports {target}" for module, target in edges(project_graph)
                 if is_command(target, modules[target])]
    assert not offending, "; ".join(offending)


def test_only_the_scripts_use_the_task_specs_and_a_spec_joins_one_task(project_graph):
    """task_specs/ sits above both packages: neither imports it; each spec module uses the task
    folders (of albert_tf and data_prep) of one task at most."""
    importers = [f"{module} imports {target}" for module, target in edges(project_graph)
                 if target.split(".")[0] == SPECS and module.split(".")[0] != SPECS]
    assert not importers, "; ".join(importers)
    specs = [module for module in project_graph if module.split(".")[0] == SPECS]
    assert "task_specs.classification" in specs
    mixed = {module: sorted(tasks) for module in specs
             if len(tasks := {task_of(target) for target in project_graph[module]} - {None}) > 1}
    assert not mixed, mixed


def test_top_level_modules_are_commands_and_folders_are_packages(modules):
    commands = [module for module, path in modules.items() if is_command(module, path)]
    assert "albert_tf.export_hub" in commands and "data_prep.create_pretraining_data" in commands
    not_commands = [module for module in commands if not has_main_block(modules[module])]
    assert not not_commands, f"top-level modules without a __main__ block: {not_commands}"
    for package in COMMAND_PACKAGES:
        folders = [path for path in (REPO_ROOT / package).rglob("*")
                   if path.is_dir() and path.name != "__pycache__"]
        assert folders and all((folder / "__init__.py").is_file() for folder in folders)


def test_only_flag_modules_and_commands_touch_absl_flags(modules):
    offending = [use for module, path in modules.items()
                 if module not in FLAG_MODULES and not is_command(module, path)
                 for use in flag_uses(path)]
    assert not offending, ("library modules must not import absl.flags or read FLAGS (allowed: "
                           f"{sorted(FLAG_MODULES)} and the commands):\n" + "\n".join(offending))


def test_the_flag_modules_exist(modules):
    assert FLAG_MODULES <= set(modules), sorted(FLAG_MODULES - set(modules))


def data_prep_may_import(module: str, target: str, modules: dict[str, pathlib.Path]) -> bool:
    """Whether the data_prep module ``module`` may import the albert_tf module ``target``."""
    if is_under(target, DATA_PREP_USES):
        return True
    task = task_of(module)
    if task is not None and target in {f"albert_tf.tasks.{task}.{name}"
                                       for name in DATA_PREP_TASK_USES.get(task, ())}:
        return True
    return is_command(module, modules[module]) and target in DATA_PREP_COMMAND_USES


def test_data_prep_imports_only_the_keras_free_albert_tf_modules(project_graph, modules):
    offending = [f"{module} imports {target}" for module, target in edges(project_graph)
                 if module.split(".")[0] == "data_prep" and target.split(".")[0] == "albert_tf"
                 and not data_prep_may_import(module, target, modules)]
    assert not offending, "; ".join(offending)
    keras = [module for module in project_graph
             if module.split(".")[0] == "data_prep" and imports_keras(modules[module])]
    assert not keras, f"data_prep modules importing Keras: {keras}"


def test_what_data_prep_and_the_record_schemas_load_is_keras_free(project_graph, modules):
    """Every albert_tf module a data_prep library module imports, and every task's records.py,
    loads no Keras, no model and no training code (through any import, package ``__init__`` files
    included)."""
    roots = {target for module, target in edges(project_graph)
             if module.split(".")[0] == "data_prep" and not is_command(module, modules[module])
             and target.split(".")[0] == "albert_tf"}
    roots |= {module for module in project_graph
              if module.startswith("albert_tf.tasks.") and module.endswith(".records")}
    assert {"albert_tf.tasks.classification.records",
            "albert_tf.tasks.token_classification.records"} <= roots
    offending = []
    for root in sorted(roots):
        for loaded in sorted(loaded_with(root, project_graph)):
            docstring_package = (modules[loaded].name == "__init__.py"
                                 and not project_graph.get(loaded))
            if ((is_under(loaded, KERAS_FOLDERS) and not is_under(loaded, DATA_PREP_USES)
                 and not docstring_package) or imports_keras(modules[loaded])):
                offending.append(f"{root} loads {loaded}")
    assert not offending, "; ".join(offending)


# -------------------------------------------------------------------------------------------------
# The checker, on small synthetic packages.

def write_package(root: pathlib.Path, files: dict[str, str]) -> None:
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")


def test_checker_finds_a_planted_cycle_through_function_level_and_relative_imports(tmp_path):
    write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/base.py": "import os\nfrom pkg.util import helper\n",
        "pkg/util.py": "def helper():\n    from . import built_on_base\n",
        "pkg/built_on_base.py": "from .base import something\n",
        "pkg/leaf.py": "import pkg.util\n",
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.base"] == {"pkg.util"}
    assert graph["pkg.util"] == {"pkg.built_on_base"}
    assert graph["pkg.built_on_base"] == {"pkg.base"}
    assert graph["pkg.leaf"] == {"pkg.util"}
    assert (format_cycles(find_cycles(graph))
            == "pkg.base -> pkg.util -> pkg.built_on_base -> pkg.base")


def test_checker_accepts_an_acyclic_package_and_resolves_subpackages(tmp_path):
    write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "from . import inner\n",
        "pkg/sub/inner.py": "from ..leaf import x\nimport pkg.leaf as leaf\n",
        "pkg/leaf.py": "import json\nfrom pkg import missing_name\n",
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert graph == {"pkg": set(), "pkg.sub": {"pkg.sub.inner"}, "pkg.sub.inner": {"pkg.leaf"},
                     "pkg.leaf": {"pkg"}}
    assert find_cycles(graph) == []


def test_checker_reports_a_two_module_cycle_once_per_back_edge():
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": set()}
    assert find_cycles(graph) == [["a", "b", "a"]]


@pytest.mark.parametrize("source, expected", [
    ("from absl import flags\n", "imports absl.flags"),
    ("from absl import app, flags as f\n", "imports absl.flags"),
    ("import absl.flags\n", "imports absl.flags"),
    ("from absl.flags import FlagValues\n", "imports from absl.flags"),
    ("def f(values):\n    return values.FLAGS.x\n", "reads FLAGS"),
    ("def f():\n    return FLAGS.x\n", "reads FLAGS"),
])
def test_checker_detects_flag_use(tmp_path, source, expected):
    path = tmp_path / "module.py"
    path.write_text(source, encoding="utf-8")
    uses = flag_uses(path)
    assert uses and expected in uses[0]


def test_checker_ignores_other_absl_use_and_finds_main_blocks(tmp_path):
    library = tmp_path / "library.py"
    library.write_text("from absl import logging\nflags_seen = 1\n", encoding="utf-8")
    command = tmp_path / "command.py"
    command.write_text("def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n",
                       encoding="utf-8")
    assert flag_uses(library) == []
    assert not has_main_block(library) and has_main_block(command)


@pytest.mark.parametrize("source, expected", [
    ("import keras\n", True),
    ("from keras import layers\n", True),
    ("import tensorflow.keras as k\n", True),
    ("from tensorflow import keras\n", True),
    ("import tensorflow as tf\n\ndef f():\n    return tf.keras.layers.Dense(1)\n", True),
    ("import tensorflow as tf\n\ndef f():\n    return tf.io.parse_example\n", False),
    ("from absl import logging\nkeras_like = 1\n", False),
])
def test_checker_detects_keras(tmp_path, source, expected):
    path = tmp_path / "module.py"
    path.write_text(source, encoding="utf-8")
    assert imports_keras(path) is expected


def test_checker_follows_imports_and_packages(tmp_path):
    write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "from pkg import heavy\n",
        "pkg/sub/light.py": "import json\n",
        "pkg/heavy.py": "import keras\n",
        "pkg/leaf.py": "from pkg.sub import light\n",
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert loaded_with("pkg.leaf", graph) == {"pkg.leaf", "pkg.sub.light", "pkg.sub", "pkg",
                                              "pkg.heavy"}
