"""Imported before any test module: tinygrad started as course.gpt2 starts it (on a CPU, its
HCQ2 runtime: course/speed/runtime.py), since tinygrad reads its runtime once, when imported."""

import os
from pathlib import Path

# One BLAS thread per process: pytest-xdist runs one worker per core, and numpy's matrix products
# on two threads beside a busy core ran about 2 times slower than on one (notebook 07's numpy
# twins: a cell of 7 s alone took 102 s in a test run). Set before numpy starts its threads here
# and in every notebook kernel, autograder and browser session the tests start (they inherit it).
for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(name, "1")

from course.speed import runtime  # noqa: E402

runtime.start()

ROOT = Path(__file__).resolve().parent.parent

# The files that take longest (seconds, one at a time on the 2-core AMD EPYC, warm cache): under
# pytest-xdist a worker takes the next file as it runs out of work, so these go first and the short
# ones fill in around them (longest processing time first). Paths from the repository root, where
# pytest is run from or not (tests/test_course_helpers.py checks that each still exists).
LONGEST_FIRST = (
    "tests/test_student_edition.py",  # 150: nbgrader runs the graded notebooks up to 06
    "notebooks/06b_where_it_pays.ipynb",  # 89
    "notebooks/07_going_further.ipynb",  # 77
    "notebooks/06_gpt2_tinygrad.ipynb",  # 39
    "tests/test_benchmark.py",  # 75
    "tests/test_gpt2.py",  # 75
    "tests/test_gpu_path.py",  # 60
    "tests/test_browser.py",  # 35
    "tests/test_runtime.py",  # 25
)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        path = Path(item.path).resolve()
        path = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else None
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file keeps its own order
