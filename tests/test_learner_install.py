"""The learner's install runs every notebook (issue 43).

Every import in a notebook's code cells, and in every module of the course that a notebook
imports (followed through the modules those import), must come from a package that both of a
learner's installs bring: the README's first command (`pip install -r requirements.txt -e .`:
requirements.txt and the package's own dependencies) and `pip install .[notebooks]` (the
dependencies and the `notebooks` extra in pyproject.toml). The test tools (requirements-test.txt)
do not count: a learner never installs them, so a notebook that needs one passes nbval and still
fails in JupyterLab. `.ci/learner-path` proves the same by running every notebook in a fresh
virtual environment made by the README's first command.
"""

import ast
import functools
import json
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
FIRST_PARTY = {"course", "specmini"}


def canonical(name):
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(lines):
    """The distributions that requirement lines name (comments, options and markers left out)."""
    names = set()
    for line in lines:
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            names.add(canonical(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0]))
    return names


def learner_installs(root=ROOT):
    """What each of a learner's two installs brings: install name -> distribution names."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    package = requirement_names(project["dependencies"])
    notebooks = requirement_names(project["optional-dependencies"]["notebooks"])
    readme = requirement_names((root / "requirements.txt").read_text().splitlines())
    return {
        "pip install -r requirements.txt -e .": readme | package,
        "pip install .[notebooks]": package | notebooks,
    }


def code_cells(path):
    """A notebook's code cells as Python (IPython's % and ! lines dropped)."""
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        if cell["cell_type"] == "code":
            lines = "".join(cell["source"]).splitlines()
            yield "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))


def imported(source):
    """The absolute module names that a piece of Python imports, `from a.b import c` as both
    a.b and a.b.c (c may be a module)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def module_file(name, root=ROOT):
    """The file of a first-party module (a.b -> a/b.py or a/b/__init__.py), or None."""
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def third_party_imports(sources, root=ROOT):
    """Top-level names of the third-party modules that `sources` import, with every first-party
    module they import followed, and the packages above it (importing a.b runs a/__init__.py)."""
    found, seen, todo = set(), set(), [name for source in sources for name in imported(source)]
    while todo:
        name = todo.pop()
        top = name.split(".")[0]
        if top in FIRST_PARTY:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                path = module_file(".".join(parts[:i]), root)
                if path and path not in seen:
                    seen.add(path)
                    todo += imported(path.read_text())
        elif top not in sys.stdlib_module_names:
            found.add(top)
    return found


@functools.cache
def installed():
    """Top-level module -> the installed distributions providing it (read once: a full scan)."""
    return packages_distributions()


def distributions(module):
    """The distributions that provide a top-level module (its own name if none installed does)."""
    return {canonical(d) for d in installed().get(module, [module])}


def missing(sources, installs):
    """install -> the modules imported by `sources` that it does not bring."""
    modules = third_party_imports(sources)
    return {
        install: sorted(m for m in modules if not distributions(m) & brings)
        for install, brings in installs.items()
        if any(not distributions(m) & brings for m in modules)
    }


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_import_of_the_notebook_comes_with_the_learners_install(notebook):
    lacking = missing(list(code_cells(notebook)), learner_installs())
    assert not lacking, f"{notebook.name} imports what a learner's install lacks: {lacking}"


def test_the_check_finds_a_package_the_learner_lacks():
    """The check can fail: scipy, dropped from both installs, is caught in a notebook cell, and in
    a course module that a cell imports (course.toys imports numpy: dropped, it is caught too)."""
    installs = {k: v - {"scipy"} for k, v in learner_installs().items()}
    cell = "import numpy as np\nfrom scipy.optimize import linprog"
    assert missing([cell], installs) == {k: ["scipy"] for k in installs}
    assert missing(["import numpy"], installs) == {}
    no_numpy = {k: v - {"numpy"} for k, v in learner_installs().items()}
    assert "numpy" in missing(["from course.toys import check"], no_numpy)[next(iter(no_numpy))]


def test_the_check_reads_every_notebook_and_the_course():
    """Not vacuous: the notebooks are found from the repository root, and the modules they use
    bring the course's third-party imports (tinygrad through course.gpt2, ipywidgets through
    course.display)."""
    assert len(NOTEBOOKS) >= 8
    modules = third_party_imports([s for nb in NOTEBOOKS for s in code_cells(nb)])
    assert {"numpy", "matplotlib", "scipy", "tinygrad", "ipywidgets", "IPython"} <= modules
