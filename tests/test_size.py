"""The course promises a library that reads in one sitting: under 100 lines, formatted."""

import subprocess
import sys

from loc import PACKAGE, count

# A promise, not a budget with room: README.md says "under 100 lines of code", so the number is
# the README's, and raising it means changing what the course promises (specmini: 99 lines).
PROMISED_LINES = 100


def test_specmini_is_under_100_lines_of_code():
    counts = count()
    assert {"__init__.py", "decode.py", "sampling.py"} <= set(counts), counts  # found, and read
    total = sum(counts.values())
    assert total < PROMISED_LINES, f"specmini has {total} lines: {counts}"


def test_the_counter_skips_comments_docstrings_and_blank_lines():
    from loc import code_lines

    source = (
        '"""Module doc."""\n\n# a comment\ndef f():\n    """Doc\n    string."""\n    return 1\n'
    )
    assert code_lines(source) == 2


def test_specmini_is_formatted_at_line_length_100():
    cmd = [sys.executable, "-m", "ruff", "format", "--check", "--line-length", "100", str(PACKAGE)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
