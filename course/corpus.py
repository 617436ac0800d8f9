"""The offline pair's text: the Python standard library's source, split by whole files.

One home for the split, so that training (`scripts/train_pair.py`), the benchmark and the
notebooks agree on what is held out: every VAL_EVERY-th file in sorted path order, test suites
and site-packages left out. Tokens are the bytes of the text (vocab 256).
"""

import os
import pathlib
import platform
import sysconfig

import numpy as np

VAL_EVERY = 20  # every 20th file is held out for validation
SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}


def stdlib_files():
    """The standard library's .py files, in a fixed order, without test suites or site-packages."""
    stdlib, files = pathlib.Path(sysconfig.get_paths()["stdlib"]), []
    for folder, subfolders, names in os.walk(stdlib):
        subfolders[:] = [d for d in subfolders if d not in SKIP_DIRS]  # never walked: seconds
        files += [pathlib.Path(folder, name) for name in names if name.endswith(".py")]
    return stdlib, sorted(files, key=lambda p: p.relative_to(stdlib).as_posix())


def held_out_files():
    """The validation files: never seen in training."""
    return stdlib_files()[1][::VAL_EVERY]


def load():
    """Train and validation bytes (uint8 arrays; files joined by a blank line), and a record."""
    stdlib, files = stdlib_files()
    train, val = [], []
    for i, p in enumerate(files):
        (val if i % VAL_EVERY == 0 else train).append(p.read_bytes() + b"\n\n")
    info = {
        "source": "the .py files of the Python standard library, test suites excluded",
        "python": platform.python_version(),
        "stdlib": str(stdlib),
        "excluded_dirs": sorted(SKIP_DIRS),
        "files": len(files),
        "validation": f"every {VAL_EVERY}th file in sorted path order (whole files held out)",
        "train_bytes": sum(map(len, train)),
        "val_bytes": sum(map(len, val)),
    }
    as_array = lambda parts: np.frombuffer(b"".join(parts), dtype=np.uint8)  # noqa: E731
    return as_array(train), as_array(val), info


def code_prompts(n, length, seed=0):
    """n prompts of `length` bytes from held-out files, each starting at a line that opens a
    function (`def `, indented or not) whose next lines are code: no docstring or comment in the
    4 * length bytes from there (prose is another task; notebook 06 measures it apart)."""
    rng = np.random.default_rng(seed)
    starts = []
    for path in held_out_files():
        text = path.read_bytes()
        at = 0
        while (at := text.find(b"def ", at + 1)) > 0:
            line = text.rfind(b"\n", 0, at) + 1
            ahead = text[line : line + 4 * length]
            prose = any(mark in ahead for mark in (b'"""', b"'''", b"#"))
            if text[line:at].strip() == b"" and len(ahead) == 4 * length and not prose:
                starts.append((path, line))
    picks = rng.choice(len(starts), size=n, replace=False)
    return [list(starts[i][0].read_bytes()[starts[i][1] : starts[i][1] + length]) for i in picks]
