"""Automatic checks for the exercises of notebook 04: tokens per round.

Each `check_*` runs a learner's function through a list of cases and prints one line per case
(the `grade` loop of grading.py). A stub that still raises NotImplementedError counts as "not
attempted yet", not as a failure.
"""

import numpy as np
from grading import as_array, grade
from toys import DRAFT_ABC, TARGET_ABC, constant_model

import specmini

GRID = [(alpha, k) for alpha in (0.0, 0.1, 0.35, 0.5, 0.8, 0.95, 0.999, 1.0) for k in (1, 2, 4, 8)]


# Exercise 1: tokens_per_round_distribution(alpha, k) -> P(a round yields n tokens), n = 1..k+1.


def worked_example(fn):
    got = as_array(fn(0.8, 2))
    want = [0.2, 0.16, 0.64]
    return None if got.shape == (3,) and np.allclose(got, want) else f"got {got}, expected {want}"


def length_k_plus_one(fn):
    bad = [(a, k) for a, k in GRID if as_array(fn(a, k)).shape != (k + 1,)]
    return None if not bad else f"(alpha, k) = {bad[0]}: expected k + 1 entries, for n = 1..k+1"


def sums_to_one(fn):
    for alpha, k in GRID:
        got = as_array(fn(alpha, k))
        if not np.isclose(got.sum(), 1) or np.any(got < 0):
            return f"alpha {alpha}, k {k}: {got.round(4)} sums to {got.sum():.4f}"
    return None


def mean_is_expected_tokens(fn):
    for alpha, k in GRID:
        got = as_array(fn(alpha, k))
        mean, want = float(got @ np.arange(1, len(got) + 1)), specmini.expected_tokens(alpha, k)
        if not np.isclose(mean, want):
            return f"alpha {alpha}, k {k}: mean {mean:.4f} != specmini.expected_tokens {want:.4f}"
    return None


def extremes(fn):
    never, always = as_array(fn(0.0, 3)), as_array(fn(1.0, 3))
    if not np.allclose(never, [1, 0, 0, 0]):
        return f"alpha = 0 (every draft rejected): got {never}, expected [1 0 0 0]"
    if not np.allclose(always, [0, 0, 0, 1]):
        return f"alpha = 1 (every draft accepted): got {always}, expected [0 0 0 1]"
    return None


def matches_generate(fn):
    # A/B/C models ignore their context, so every round is an independent draw of alpha = 0.8.
    target, draft, k = constant_model(TARGET_ABC), constant_model(DRAFT_ABC), 3
    sizes = []
    for seed in range(12):
        rounds = specmini.generate(target, draft, [0], 300, k=k, seed=seed).rounds
        sizes += [r.accepted + 1 for r in rounds if r.drafted == k]  # full rounds only
    freq = np.bincount(sizes, minlength=k + 2)[1:] / len(sizes)
    got = as_array(fn(0.8, k))
    tolerance = 4 * np.sqrt(got.clip(0, 1) * (1 - got.clip(0, 1)) / len(sizes)) + 1e-9
    ok = got.shape == freq.shape and np.all(np.abs(freq - got) <= tolerance)
    return None if ok else f"{len(sizes)} rounds of generate: {freq.round(3)}, yours {got.round(3)}"


ROUND_CASES = [
    ("alpha 0.8, k 2: (0.2, 0.16, 0.64)", worked_example),
    ("k + 1 entries: a round yields 1 to k + 1 tokens", length_k_plus_one),
    ("a distribution: sums to 1", sums_to_one),
    ("its mean is specmini.expected_tokens", mean_is_expected_tokens),
    ("alpha 0 and alpha 1", extremes),
    ("matches the rounds of specmini.generate on A/B/C", matches_generate),
]


def check_tokens_per_round(fn, strict=True):
    return grade("tokens_per_round_distribution", fn, ROUND_CASES, strict)
