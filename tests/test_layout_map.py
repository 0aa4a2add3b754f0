"""docs/layout.md is the one map of the project: its tree names every module and folder that exists
and nothing else, its task table names every task, and every package says what it is.

The tree (the first fenced block after "## The tree") is read as follows. A line names one or more
files or folders (``name.py`` or ``folder/``, several joined by ", ") indented two spaces per level
under its folder's line; the names end at the first run of two or more spaces, and the rest of the
line describes them. A line indented deeper than two spaces below the last naming line continues
that description. Fast: the source is read as text, nothing is imported.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import re
import subprocess

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYOUT = "docs/layout.md"
PACKAGES = ("albert_tf", "data_prep", "task_specs")
TREE_HEADING = "## The tree"
TASK_TABLE_HEADING = "## One framework for every task"
NAME = re.compile(r"[A-Za-z0-9_.-]+/?")


@dataclasses.dataclass
class TreeMap:
    paths: dict[str, int]  # repository path ("albert_tf/files/", "run_ner.py") -> line in LAYOUT
    errors: list[str]  # lines that do not follow the convention


def read_tree(text: str) -> TreeMap:
    """The paths the tree of ``text`` names, with their line numbers, and its unreadable lines."""
    lines = text.splitlines()
    heading = lines.index(TREE_HEADING)
    start = next(i for i in range(heading, len(lines)) if lines[i].startswith("```")) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    tree_map = TreeMap({}, [])
    folders: list[str | None] = []  # the folder path of each level above the current line
    last_indent = None
    for index in range(start, end):
        line, number = lines[index], index + 1
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        if last_indent is not None and indent > last_indent + 2:
            continue  # the description goes on
        names_part = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        names = [name.strip() for name in names_part.split(",")]
        depth, odd = divmod(indent, 2)
        if odd or any(not NAME.fullmatch(name) for name in names):
            tree_map.errors.append(
                f"{LAYOUT}:{number}: cannot read the names {names_part!r}: a tree line is "
                "'<two spaces a level><name>[, <name>...]  <description>'")
            continue
        if depth > len(folders) or (depth and folders[depth - 1] is None):
            tree_map.errors.append(
                f"{LAYOUT}:{number}: {names_part!r} is indented under no folder's line (two "
                "spaces deeper than its folder; a description goes on at the description column)")
            continue
        last_indent = indent
        del folders[depth:]
        parent = f"{folders[-1]}/" if folders else ""
        for name in names:
            tree_map.paths.setdefault(parent + name, number)
        folder_names = [name for name in names if name.endswith("/")]
        if len(names) == 1 and folder_names:
            folders.append(parent + folder_names[0].rstrip("/"))
        else:
            folders.append(None)
    return tree_map


def layout_text() -> str:
    return (REPO_ROOT / LAYOUT).read_text(encoding="utf-8")


def package_folders() -> list[pathlib.Path]:
    """Every package folder of albert_tf/, data_prep/ and task_specs/, the packages included."""
    return sorted(init.parent for package in PACKAGES
                  for init in (REPO_ROOT / package).rglob("__init__.py"))


def relative(path: pathlib.Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def missing_line_message(path: str, tree_paths: dict[str, int]) -> str:
    """What to add to the tree for ``path`` (a file, or a folder ending with "/")."""
    parts = path.rstrip("/").split("/")
    for depth in range(1, len(parts)):
        folder = "/".join(parts[:depth]) + "/"
        if folder not in tree_paths:
            return (f"{path} is not in the tree of {LAYOUT}: its folder {folder} has no line "
                    "there; add the folder's line, then one for each file under it")
    name = parts[-1] + ("/" if path.endswith("/") else "")
    under = f"under the line of {'/'.join(parts[:-1])}/" if len(parts) > 1 else "at the top"
    return (f"{path} is not in the tree of {LAYOUT}: add a line '{name}  <what it is>' {under}, "
            f"indented {2 * (len(parts) - 1)} spaces")


def test_the_tree_follows_its_convention():
    errors = read_tree(layout_text()).errors
    assert not errors, "\n".join(errors)


def test_every_module_and_folder_is_in_the_tree():
    tree_paths = read_tree(layout_text()).paths
    wanted = [relative(path) for package in PACKAGES for path in (REPO_ROOT / package).rglob("*.py")
              if path.name != "__init__.py"]
    wanted += [relative(folder) + "/" for folder in package_folders()]
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    wanted += sorted({path.split("/")[0] + "/" for path in tracked
                      if "/" in path and not path.startswith(".")})
    missing = [missing_line_message(path, tree_paths) for path in sorted(set(wanted))
               if path not in tree_paths]
    assert not missing, "\n".join(missing)


def test_every_name_in_the_tree_exists():
    absent = []
    for path, number in sorted(read_tree(layout_text()).paths.items(), key=lambda item: item[1]):
        exists = ((REPO_ROOT / path).is_dir() if path.endswith("/")
                  else (REPO_ROOT / path).is_file())
        if not exists:
            kind = "folder" if path.endswith("/") else "file"
            absent.append(f"{LAYOUT}:{number}: the tree names the {kind} {path}, which does not "
                          "exist: remove or rename its line")
    assert not absent, "\n".join(absent)


def test_the_task_table_names_every_task_and_script():
    text = layout_text()
    section = text[text.index(TASK_TABLE_HEADING):]
    section = section[:section.find("\n## ", 1)]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    wanted = [f"`{folder.name}/`" for package in ("albert_tf/tasks", "data_prep")
              for folder in sorted((REPO_ROOT / package).iterdir())
              if (folder / "__init__.py").is_file() and folder.name != "common"]
    wanted += [f"`{script.name}`" for script in sorted(REPO_ROOT.glob("run_*.py"))]
    missing = sorted({name for name in wanted if name not in table})
    assert not missing, (f"the task table of {LAYOUT} ({TASK_TABLE_HEADING}) lacks "
                         + ", ".join(missing))


def test_every_package_says_what_it_is():
    undocumented = []
    for folder in package_folders():
        init = folder / "__init__.py"
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"), str(init)))
        if not docstring:
            undocumented.append(f"{relative(init)} has no docstring: say in a line or two what "
                                f"the folder {relative(folder)}/ holds")
    assert not undocumented, "\n".join(undocumented)


def test_a_package_docstring_names_each_of_its_subfolders():
    """The top-level docstrings list their folders (the modules are listed in docs/layout.md)."""
    unnamed = []
    for folder in (REPO_ROOT / "albert_tf", REPO_ROOT / "albert_tf/tasks", REPO_ROOT / "data_prep"):
        init = folder / "__init__.py"
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"), str(init))) or ""
        for sub in sorted(folder.iterdir()):
            if (sub / "__init__.py").is_file() and not re.search(
                    rf"(?<![\w/]){re.escape(sub.name)}/", docstring):
                unnamed.append(f"{relative(init)}: its docstring does not name the folder "
                               f"{sub.name}/ ({relative(sub)}/)")
    assert not unnamed, "\n".join(unnamed)


def test_the_tree_reader_on_a_small_tree():
    text = "\n".join([
        "## The tree", "", "```",
        "pkg/           the package",
        "  a.py, b.py   two modules whose description",
        "               goes on here",
        "  sub/         a folder",
        "    c.py       a module",
        "  d.py",
        "top.txt        a file",
        " odd.py        one space",
        "```"])
    tree_map = read_tree(text)
    assert tree_map.paths == {"pkg/": 4, "pkg/a.py": 5, "pkg/b.py": 5, "pkg/sub/": 7,
                              "pkg/sub/c.py": 8, "pkg/d.py": 9, "top.txt": 10}
    assert len(tree_map.errors) == 1 and "docs/layout.md:11:" in tree_map.errors[0]
    assert missing_line_message("pkg/sub/e.py", tree_map.paths).endswith(
        "add a line 'e.py  <what it is>' under the line of pkg/sub/, indented 4 spaces")
    assert "its folder new/ has no line" in missing_line_message("new/x.py", tree_map.paths)
