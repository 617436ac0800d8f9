"""Automatic checks for the exercise of notebook 06b: the speed-up of a round, with the time
outside the models.

`check_round_speedup` runs a learner's function through a list of cases with `grading.grade`: one
line per case, and a stub that still raises NotImplementedError counts as "not attempted yet".
A failed case says what went wrong, never the expected answer.
"""

import numpy as np

from course import speedup
from course.exercises.grading import described, expect, grade

# round_speedup(alpha, k, c, v, o_k, o_0) -> the speed-up of the cost model with the
# time outside the models: E[tokens] (1 + o_0) / (K c + v_K + o_K), every cost in target steps.
SPEEDUP_FORBID = ("course.speedup.refined_speedup",)  # expected_tokens (notebook 04) is allowed


def close_to_reference(fn, cases, what):
    for args in cases:
        got = fn(*args)
        expect(isinstance(got, int | float | np.floating), f"{what}: returned {described(got)}")
        want = speedup.refined_speedup(*args)  # the checks may call it; an answer may not
        expect(
            np.isclose(got, want, rtol=1e-6),
            f"alpha {args[0]}, K {args[1]}, c {args[2]}, v_K {args[3]}, o_K {args[4]}, "
            f"o_0 {args[5]}: got {got:.4f}; {what}",
        )


def nothing_outside(fn):
    cases = [(0.8, 4, 0.05, 1.3, 0, 0), (0.6, 2, 0.1, 1.1, 0, 0), (0.9, 1, 0.02, 1.0, 0, 0)]
    close_to_reference(fn, cases, "with o_K = o_0 = 0 it is notebook 05's refined formula")


def time_outside_charged(fn):
    cases = [(0.8, 4, 0.05, 1.3, 0.3, 0.1), (0.75, 3, 0.04, 1.2, 0.25, 0.08)]
    close_to_reference(
        fn, cases, "a round pays o_K beside its calls; the target alone pays o_0 per token"
    )


def extremes(fn):
    cases = [(0.0, 3, 0.1, 1.2, 0.2, 0.1), (1.0, 3, 0.1, 1.2, 0.2, 0.1)]
    close_to_reference(fn, cases, "at alpha 0 a round makes 1 token, at alpha 1 it makes K + 1")


SPEEDUP_CASES = [
    ("no time outside the models: notebook 05's formula", nothing_outside),
    ("the time outside the models, per round and per plain token", time_outside_charged),
    ("alpha = 0 and alpha = 1", extremes),
]


def check_round_speedup(fn, strict=True):
    return grade("round_speedup", fn, SPEEDUP_CASES, strict, forbid=SPEEDUP_FORBID)
