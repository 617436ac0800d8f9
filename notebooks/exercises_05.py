"""Automatic checks for the exercise of notebook 05: alpha from r'.

`check_alpha_from_tokens` runs a learner's function through a list of cases and prints one line
per case (the `grade` loop of grading.py).
"""

import numpy as np
from grading import grade

import specmini

# Exercise: alpha_from_tokens(tokens_per_round, k) -> the alpha with expected_tokens(alpha, k)
# equal to tokens_per_round.


def published(fn):
    alpha = float(fn(0.8 * 5, 4))  # r' = 0.8 with K = 4: 4 tokens per round
    got = specmini.expected_tokens(alpha, 4) if 0 <= alpha <= 1 else float("nan")
    return None if np.isclose(got, 4.0, atol=1e-9) else f"alpha {alpha:.4f} gives {got:.4f} tokens"


def round_trip(fn):
    for alpha in np.linspace(0, 0.995, 37):
        for k in (1, 2, 3, 5, 8):
            got = float(fn(specmini.expected_tokens(alpha, k), k))
            if not abs(got - alpha) < 1e-9:
                return f"k {k}: expected_tokens({alpha:.4f}) mapped back to {got:.6f}"
    return None


def ends(fn):
    low, high = float(fn(1.0, 4)), float(fn(5.0, 4))
    # near alpha = 1, (1 - alpha^(k+1)) / (1 - alpha) loses digits to cancellation: 1e-6 is fair
    ok = abs(low) < 1e-9 and abs(high - 1) < 1e-6
    return None if ok else f"1 token per round must give 0, k + 1 tokens 1: got {low}, {high}"


ALPHA_CASES = [
    ("r' = 0.8, K = 4 (4 tokens per round): expected_tokens(alpha, 4) = 4", published),
    ("round trip on 185 (alpha, k) pairs to 1e-9", round_trip),
    ("1 token per round is alpha 0, k + 1 tokens is alpha 1", ends),
]


def check_alpha_from_tokens(fn, strict=True):
    return grade("alpha_from_tokens", fn, ALPHA_CASES, strict)
