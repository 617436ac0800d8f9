"""The course's helpers each have one home: the A/B/C pair and the toy models in toys.py, the
check runner in grading.py. A second copy drifts; these tests fail when one comes back. And
the colours of toys.show_rounds: a plain round is not a bonus."""

import ast
import pathlib
import re

import specmini
from models import random_pair

ROOT = pathlib.Path(__file__).resolve().parent.parent
# every helper module beside the notebooks (checks, lessons, going further) and the tests
MODULES = [
    *sorted(p for p in (ROOT / "notebooks").glob("*.py") if p.name != "gpt2.py"),
    *sorted((ROOT / "tests").glob("*.py")),
]


def top_level_names(path):
    """Names of the functions, classes and variables a module defines at its top level."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(t.id for t in ast.walk(target) if isinstance(t, ast.Name))
    return names


def homes(predicate):
    return [p.name for p in MODULES if p.exists() and any(map(predicate, top_level_names(p)))]


def test_the_check_runner_lives_in_grading():
    assert homes(lambda name: name == "grade") == ["grading.py"]
    assert homes(lambda name: name in ("as_probs", "as_array")) == ["grading.py"]
    for path in sorted((ROOT / "notebooks").glob("exercises_*.py")):
        assert "from exercises_01 import" not in path.read_text(), path.name


def test_one_constant_model():
    assert homes(lambda name: name.startswith("constant")) == ["toys.py"]


def test_the_abc_pair_is_written_down_once():
    pattern = re.compile(r"0\.6,\s*0\.3,\s*0\.1\]|0\.4,\s*0\.5,\s*0\.1\]")
    written = [p.name for p in MODULES if p.exists() and pattern.search(p.read_text())]
    assert written == ["toys.py"]


def test_plain_rounds_are_coloured_plain_not_bonus():
    from toys import show_rounds, token_kinds  # notebooks/ is on sys.path through models

    target, draft = random_pair(3, seed=0)
    plain = specmini.autoregressive(target, [0], 5, seed=0)
    assert token_kinds(plain) == ["plain"] * 5
    html = show_rounds(plain).data
    assert html.count('class="tok-plain"') == 5 and "tok-bonus" not in html
    spec = specmini.generate(target, draft, [0], 6, k=4, seed=0)  # the last round drafts nothing
    assert token_kinds(spec)[-1] == "plain"
    legend = show_rounds(specmini.generate(target, draft, [0], 5, k=4, seed=0)).data.split("<div>")[
        -1
    ]
    assert "plain" not in legend, "the legend shows plain only when a plain token is there"
