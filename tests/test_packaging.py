"""Packaging as users expect: the installed metadata declares what `specmini` and `course`
import, learners' requirements.txt holds only what the notebooks need, and the tinygrad pin is
the version whose internals course/speed/ reads."""

from importlib.metadata import requires

from imports import ROOT, distributions, requirement_names, third_party_imports

from course.speed import TINYGRAD_VERSION

TEST_TOOLS = {"pytest", "nbval", "playwright", "ruff", "nbgrader", "torch", "transformers"}


def test_the_installed_metadata_declares_every_import():
    declared = requirement_names(r for r in requires("specmini") if "extra ==" not in r)
    sources = [p.read_text() for f in ("specmini", "course") for p in (ROOT / f).rglob("*.py")]
    imported = third_party_imports(sources)
    assert {"numpy", "tinygrad", "ipywidgets"} <= imported, imported  # the files were read
    for module in sorted(imported):
        assert distributions(module) & declared, f"{module} is imported, not declared in pyproject"


def test_learners_install_only_what_the_notebooks_need():
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    packages = requirement_names(lines)
    assert not packages & TEST_TOOLS, packages & TEST_TOOLS
    assert "-r requirements.txt" in (ROOT / "requirements-test.txt").read_text()


def test_tinygrad_is_pinned_where_its_internals_were_read():
    pinned = f"tinygrad=={TINYGRAD_VERSION}"
    assert pinned in (ROOT / "requirements.txt").read_text()
    assert f'"{pinned}"' in (ROOT / "pyproject.toml").read_text()
