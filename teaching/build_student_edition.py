"""Build the student edition: the course without its solutions, ready to hand out.

    python teaching/build_student_edition.py                # into student-edition/ (git-ignored)
    python teaching/build_student_edition.py --out DIR

nbgrader (requirements-teach.txt) does the work with its own `generate_assignment`, set up by
teaching/nbgrader_config.py: in a temporary nbgrader course directory whose source/specmini/
holds the notebooks, it drops the cells tagged `self-study`, replaces
each answer between `### BEGIN SOLUTION` and `### END SOLUTION` by a stub, locks the graded
check cells and clears the outputs. The edition then gets what the notebooks need beside them:

    student-edition/
        README.md          how to install and open it (for the students)
        notebooks/         the released notebooks
        specmini/ course/  the algorithm, and the course's code the notebooks import
        models/ figures/ requirements.txt pyproject.toml LICENSE

tests/test_student_edition.py builds it, searches it for solutions and autogrades it.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONFIG = Path(__file__).resolve().with_name("nbgrader_config.py")
ASSIGNMENT = "specmini"  # nbgrader's assignment: the whole course is one, one notebook per lesson
MARKER = ".specmini-student-edition"  # only a folder holding it is ever replaced by a new build

STUDENT_README = """\
# specmini: speculative decoding, student edition

A hands-on Jupyter course on speculative decoding, from a three-token toy vocabulary to GPT-2
in tinygrad. This edition is for a class: every exercise has a cell for your answer (`# YOUR
CODE HERE`) and a check cell after it that your teacher's autograder runs; you can run it
yourself too. Each notebook ends with a short quiz.

Set up (Python 3.11 or 3.12; on Linux, tinygrad's CPU backend needs clang) and open the course:

```bash
python3 -m venv .venv && .venv/bin/pip install -r requirements.txt -e .
.venv/bin/jupyter lab notebooks/
```

Work through the notebooks in order, 01 to the last (02b, block verification, reads best after
04). Write each answer in place of the `raise NotImplementedError()` line of its cell (for a
quiz, fill in `quiz = {...}`), then run the check cell after it: it tells you what is wrong
without giving the answer away. Do not edit the check cells or the course's code in `course/`
(`course/exercises/`, ...): the autograder uses its own copies.

No GPU and no internet are needed: notebooks 06, 06b and 07 run two small models trained for
the course (`models/`); real GPT-2 is opt-in (`MODELS` in 06's first code cell) and downloads once.
"""


def make_course(course, repo=REPO):
    """An nbgrader course directory at `course`: source/specmini/ holds every notebook of the
    course's notebooks/, and nbgrader_config.py lies at its root. (The notebooks import the
    course's code from the installed package `course`, as they import specmini.)"""
    source = course / "source" / ASSIGNMENT
    source.mkdir(parents=True)
    for path in sorted((repo / "notebooks").glob("*.ipynb")):
        shutil.copy2(path, source / path.name)
    shutil.copy2(CONFIG, course / "nbgrader_config.py")
    return source


def tool_path():
    """PATH with this Python's scripts first: nbgrader's gradebook runs the `alembic` command,
    which a virtual environment that was not activated leaves off PATH."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def start_nbgrader(course, *args):
    """Start an nbgrader command in the course directory `course`, its output in a pipe."""
    cmd = [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={course.resolve()}"]
    env = dict(os.environ, PATH=tool_path())
    return subprocess.Popen(
        cmd, cwd=course, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(process):
    """Wait for an nbgrader command; its log, or an error with the log if it failed."""
    log, _ = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(process.args[2:])} failed:\n{log}")
    return log


def nbgrader(course, *args):
    """Run an nbgrader command in the course directory `course`; raise with its log if it fails."""
    return finish(start_nbgrader(course, *args))


def generate(course):
    """nbgrader's generate_assignment: release/specmini/ (and the assignment in the gradebook)."""
    nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    return course / "release" / ASSIGNMENT


def assemble(release, out, repo=REPO):
    """The edition in `out`: the released notebooks in notebooks/, and the rest of what they
    need beside them (specmini/ and course/, installed by its README's `pip install -e .`).
    Replaces an earlier edition; refuses any other non-empty folder."""
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise SystemExit(f"{out} exists and is not a student edition: choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    shutil.copytree(release, out / "notebooks", ignore=ignore)
    for package in ["specmini", "course"]:
        shutil.copytree(repo / package, out / package, ignore=ignore)
    shutil.copytree(repo / "models", out / "models", ignore=ignore)
    (out / "figures").mkdir()  # the notebooks write their figures here
    (out / "figures" / ".gitkeep").touch()
    for name in ["requirements.txt", "pyproject.toml", "LICENSE"]:
        shutil.copy2(repo / name, out / name)
    (out / "README.md").write_text(STUDENT_README)
    (out / MARKER).write_text("built by teaching/build_student_edition.py\n")
    return out


def build(out, repo=REPO):
    """Build the student edition of the checkout `repo` into `out`."""
    with tempfile.TemporaryDirectory(prefix="specmini-nbgrader-") as tmp:
        course = Path(tmp) / "course"
        make_course(course, repo)
        return assemble(generate(course), out, repo)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "student-edition", help="%(default)s")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to build from")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = build(args.out.resolve(), args.repo.resolve())
    notebooks = sorted(p.name for p in (out / "notebooks").glob("*.ipynb"))
    print(
        f"student edition: {out} ({len(notebooks)} notebooks, {time.perf_counter() - start:.1f} s)"
    )


if __name__ == "__main__":
    main()
