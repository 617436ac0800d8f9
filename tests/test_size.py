"""The course promises a library that reads in one sitting: under 100 lines, formatted."""

import subprocess
import sys

from loc import PACKAGE, count


def test_specmini_is_under_100_lines_of_code():
    counts = count()
    assert sum(counts.values()) < 100, f"specmini has {sum(counts.values())} lines: {counts}"


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
