"""The check runner behind every notebook's exercises: `grade` runs a learner's function through
a list of cases, one printed line per case. Each exercises_0N module holds its cases.
"""

import numpy as np


def grade(name, fn, cases, strict=True):
    """Run each (title, case) on `fn`; a case returns None when it passes, else what went wrong.

    With strict (a learner's check cell) a failure raises AssertionError and nothing is returned;
    otherwise returns True (all pass), False (some fail) or None (not attempted yet). A stub that
    still raises NotImplementedError counts as "not attempted yet", not as a failure.
    """
    failed = 0
    for title, case in cases:
        try:
            problem = case(fn)
        except NotImplementedError:
            print(
                f"… {name}: not attempted yet. Write it in the cell above, then re-run this cell."
            )
            return None
        except Exception as e:  # a crash is a failed case, and says why
            problem = f"raised {type(e).__name__}: {e}"
        print(f"✗ {title}: {problem}" if problem else f"✓ {title}")
        failed += problem is not None
    if failed and strict:
        raise AssertionError(f"{name}: {failed} of {len(cases)} checks failed")
    if not failed:
        print(f"✓ {name}: all {len(cases)} checks pass")
    return None if strict else failed == 0


def as_array(x):
    """What a learner's function returned, as a float array to compare."""
    return np.asarray(x, dtype=np.float64)
