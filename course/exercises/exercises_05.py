"""Automatic checks for notebook 05's exercises: alpha from r', choosing K.

`check_alpha_from_tokens` and `check_choose_k` run a learner's function through a list of cases
and print one line per case (the `grade` loop of grading.py). A failing case says what went
wrong, never the expected alpha or K.
"""

import numpy as np

import specmini
from course import speedup
from course.exercises.grading import Wrong, as_number, expect, grade

# Exercise: alpha_from_tokens(tokens_per_round, k) -> the alpha in [0, 1] with
# expected_tokens(alpha, k) equal to tokens_per_round, to within TOLERANCE (what a bisection that
# stops at an interval of 1e-6 gives). specmini has no such function, so there is nothing to
# forbid: calling specmini.expected_tokens is the intended way.
TOLERANCE = 1e-6


def alpha_of(fn, tokens, k):
    """The learner's alpha for `tokens` per round, as a float in [0, 1]; Wrong otherwise."""
    where = f"k = {k}, {tokens:.4f} tokens per round"
    alpha = as_number(fn(tokens, k), where)
    expect(0 <= alpha <= 1, f"{where}: {alpha:.4g} is not in [0, 1], so not an acceptance rate")
    return alpha


def published(fn):
    alpha = alpha_of(fn, 0.8 * 5, 4)  # r' = 0.8 with K = 4: 4 tokens per round
    got = specmini.expected_tokens(alpha, 4)
    hint = "is it r' itself?" if np.isclose(alpha, 0.8) else "too few" if got < 4 else "too many"
    expect(
        abs(alpha - speedup.alpha_for_tokens(4.0, 4)) <= TOLERANCE,
        f"your alpha gives {got:.6g} tokens per round with K = 4, not 4: {hint}",
    )


def round_trip(fn):
    for alpha in np.linspace(0, 0.995, 37):
        for k in (1, 2, 3, 5, 8):
            tokens = specmini.expected_tokens(alpha, k)
            got = alpha_of(fn, tokens, k)
            side = "low" if got < alpha else "high"
            expect(
                abs(got - alpha) <= TOLERANCE,
                f"k = {k}, {tokens:.4f} tokens per round: your alpha is too {side}"
                " (by more than 1e-6)",
            )


def ends(fn):
    low, high = alpha_of(fn, 1.0, 4), alpha_of(fn, 5.0, 4)
    problems = []
    if not low <= TOLERANCE:
        problems.append("1 token per round (every first draft rejected) is off")
    if not high >= 1 - TOLERANCE:
        problems.append("k + 1 tokens per round (every draft accepted) is off")
    expect(not problems, "; ".join(problems))


ALPHA_CASES = [
    ("r' = 0.8, K = 4 (4 tokens per round): expected_tokens(alpha, 4) gives the 4 back", published),
    ("round trip on 185 (alpha, k) pairs, to 1e-6", round_trip),
    ("the two ends: no draft ever accepted, every draft accepted", ends),
]


def check_alpha_from_tokens(fn, strict=True):
    return grade("alpha_from_tokens", fn, ALPHA_CASES, strict)


# Exercise 2: choose_k(alpha, c, verify_costs) -> the K in 1..len(verify_costs) with the largest
# refined speed-up E[tokens] / (K c + v_K), where verify_costs[K - 1] is v_K; 0 (plain decoding)
# when no K beats 1. Failing cases say what is off, never which K is expected. The reference is
# the course's own `speedup.choose_k` (K -> v_K as a dict, where the exercise takes a list).


def expect_choice(fn, alpha, c, verify_costs):
    got = fn(alpha, c, list(verify_costs))
    whole = isinstance(got, int | np.integer) and not isinstance(got, bool)
    setting = f"alpha {alpha}, c {c}"
    expect(whole, f"{setting}: return a whole number K (0 for plain decoding), got {got!r}")
    expect(0 <= got <= len(verify_costs), f"{setting}: K = {got} is outside 0..{len(verify_costs)}")
    want, _ = speedup.choose_k(alpha, c, dict(enumerate(verify_costs, 1)))
    if got == want:
        return
    expect(got != 0, f"{setting}: you chose plain decoding, but some K beats it")
    mine = speedup.refined_speedup(alpha, got, c, verify_costs[got - 1])
    expect(want != 0, f"{setting}: your K = {got} gives {mine:.4f}: is that faster than plain?")
    raise Wrong(f"{setting}: your K = {got} gives {mine:.4f}; another K gives more")


def cases_for(settings):
    def case(fn):
        for alpha, c, verify_costs in settings:
            expect_choice(fn, alpha, c, verify_costs)

    return case


CHOOSE_CASES = [
    (
        "v_K = 1 for every K (Leviathan et al.'s formula), 4 settings",
        cases_for(
            [(a, c, [1.0] * 20) for a, c in [(0.8, 0.05), (0.8, 0.2), (0.6, 0.1), (0.9, 0.01)]]
        ),
    ),
    (
        "v_K = 1 + slope K, slopes 0.02 to 0.3: a dearer verification",
        cases_for([(0.8, 0.05, [1 + s * k for k in range(1, 21)]) for s in (0.02, 0.1, 0.3)]),
    ),
    (
        "no K pays (alpha 0.3, c 0.5; alpha 0.5, c 0.05 with v_K = 1.8): plain decoding",
        cases_for([(0.3, 0.5, [1.0] * 10), (0.5, 0.05, [1.8] * 10)]),
    ),
    (
        "v_K by buckets of 1, 2, 4, 8 new tokens (not smooth in K)",
        cases_for([(0.85, 0.1, [1.1, 1.3, 1.3, 1.8, 1.8, 1.8, 1.8, 2.9])]),
    ),
    (
        "returns a whole number in 0..len(verify_costs)",
        cases_for([(0.7, 0.1, [1.0, 1.2, 1.4])]),
    ),
]


def check_choose_k(fn, strict=True):
    return grade("choose_k", fn, CHOOSE_CASES, strict)
