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

import json
import tomllib

import pytest
from imports import ROOT, distributions, requirement_names, third_party_imports

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# IPython lines this check lets through, unread. Any other % or ! line fails: `!pip install x`
# would hide a missing requirement, and a magic may run code this check cannot read.
ALLOWED_MAGICS = ("%matplotlib",)


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
    """A notebook's code cells as Python; a % or ! line outside ALLOWED_MAGICS is an error."""
    cells = json.loads(path.read_text())["cells"]
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            lines = "".join(cell["source"]).splitlines()
            for line in lines:
                if line.lstrip().startswith(("%", "!")) and not line.lstrip().startswith(
                    ALLOWED_MAGICS
                ):
                    raise ValueError(f"{path.name} cell {i}: {line.strip()!r} is not read")
            yield "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))


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


def test_a_line_the_check_cannot_read_fails(tmp_path):
    """A shell line or an unknown magic in a notebook, and a relative import, are errors, not
    skipped: `!pip install scipy` in a cell would otherwise hide scipy's absence."""
    notebook = tmp_path / "nb.ipynb"
    cell = {"cell_type": "code", "source": ["!pip install scipy\n", "import scipy"]}
    notebook.write_text(json.dumps({"cells": [cell]}))
    with pytest.raises(ValueError, match="pip install scipy"):
        list(code_cells(notebook))
    with pytest.raises(ValueError, match="relative import"):
        missing(["from . import toys"], learner_installs())


def test_the_check_reads_every_notebook_and_the_course():
    """Not vacuous: the notebooks are found from the repository root, and the modules they use
    bring the course's third-party imports (tinygrad through course.gpt2, ipywidgets through
    course.display)."""
    assert len(NOTEBOOKS) == 9, NOTEBOOKS  # 01 to 07, with 02b and 06b
    modules = third_party_imports([s for nb in NOTEBOOKS for s in code_cells(nb)])
    assert {"numpy", "matplotlib", "scipy", "tinygrad", "ipywidgets", "IPython"} <= modules
