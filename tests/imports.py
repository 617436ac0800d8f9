"""Reading imports and requirements: what a piece of Python imports, and which distributions a
requirement list names. Shared by test_packaging.py and test_learner_install.py.

Only static `import` statements are read. `importlib.import_module` is not followed: the course
uses it once (course/exercises/grading.py), on its own modules. A relative import fails the
check (the course has none; following one would need the importing package)."""

import ast
import functools
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = {"course", "specmini"}


def canonical(name):
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(lines):
    """The distributions that requirement lines name. Comments, pip options (-r, -e) and markers
    are left out: a marker (`; sys_platform == ...`) would make a name platform-dependent, and
    none of the course's requirement files has one."""
    names = set()
    for line in lines:
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            names.add(canonical(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0]))
    return names


def imported(source):
    """The absolute module names that a piece of Python imports, `from a.b import c` as both
    a.b and a.b.c (c may be a module)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise ValueError(f"a relative import (from {'.' * node.level}{node.module or ''}):"
                                 " this check reads absolute imports only")  # fmt: skip
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
