"""Packaging as users expect: the installed metadata declares what `specmini` and `course`
import, learners' requirements.txt holds only what the notebooks need, and the tinygrad pin is
the version whose internals course/runtime.py reads."""

import ast
import re
import sys
from importlib.metadata import packages_distributions, requires
from pathlib import Path

from course import runtime

ROOT = Path(__file__).resolve().parent.parent
TEST_TOOLS = {"pytest", "nbval", "playwright", "ruff", "nbgrader", "torch", "transformers"}


def third_party_imports(*folders):
    found = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.add(node.module.split(".")[0])
    first_party = {"course", "specmini"}
    return {m for m in found if m not in sys.stdlib_module_names and m not in first_party}


def names(lines):
    return {re.split(r"[<>=!~\[; ]", line.strip(), maxsplit=1)[0].lower() for line in lines}


def test_the_installed_metadata_declares_every_import():
    declared = names(r for r in requires("specmini") if "extra ==" not in r)
    by_module = packages_distributions()
    for module in sorted(third_party_imports("specmini", "course")):
        distributions = {d.lower() for d in by_module.get(module, [module])}
        assert distributions & declared, f"{module} is imported but not declared in pyproject.toml"


def test_learners_install_only_what_the_notebooks_need():
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    packages = names(line for line in lines if line.strip() and not line.startswith(("#", "-r")))
    assert not packages & TEST_TOOLS, packages & TEST_TOOLS
    assert "-r requirements.txt" in (ROOT / "requirements-test.txt").read_text()


def test_tinygrad_is_pinned_where_its_internals_were_read():
    pinned = f"tinygrad=={runtime.TINYGRAD_VERSION}"
    assert pinned in (ROOT / "requirements.txt").read_text()
    assert f'"{pinned}"' in (ROOT / "pyproject.toml").read_text()
