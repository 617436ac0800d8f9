"""Automatic checks for notebook 05: the exercise (alpha from r') and the concept quiz.

`check_alpha_from_tokens` runs a learner's function through a list of cases and prints one line
per case (the `grade` loop of grading.py). A failing case says what went wrong, never the
expected alpha. `QUIZ` holds the quiz's answers as `grading.answer_key` hashes only.
"""

import numpy as np

import specmini
from course.exercises.grading import expect, grade

# Exercise: alpha_from_tokens(tokens_per_round, k) -> the alpha in [0, 1] with
# expected_tokens(alpha, k) equal to tokens_per_round. specmini has no such function, so there is
# nothing to forbid: calling specmini.expected_tokens is the intended way.


def published(fn):
    alpha = float(fn(0.8 * 5, 4))  # r' = 0.8 with K = 4: 4 tokens per round
    expect(0 <= alpha <= 1, "the answer is not in [0, 1], so it cannot be an acceptance rate")
    got = specmini.expected_tokens(alpha, 4)
    if np.isclose(got, 4.0, atol=1e-9):
        return None
    return f"your alpha gives {got:.4f} tokens per round with K = 4, not 4: " + (
        "is it r' itself?" if np.isclose(alpha, 0.8) else "too few" if got < 4 else "too many"
    )


def round_trip(fn):
    for alpha in np.linspace(0, 0.995, 37):
        for k in (1, 2, 3, 5, 8):
            tokens = specmini.expected_tokens(alpha, k)
            got = float(fn(tokens, k))
            if not abs(got - alpha) < 1e-9:
                side = "low" if got < alpha else "high"
                return f"k = {k}, {tokens:.4f} tokens per round: your alpha is too {side}"
    return None


def ends(fn):
    low, high = float(fn(1.0, 4)), float(fn(5.0, 4))
    # near alpha = 1, (1 - alpha^(k+1)) / (1 - alpha) loses digits to cancellation: 1e-6 is fair
    problems = []
    if not abs(low) < 1e-9:
        problems.append("1 token per round (every first draft rejected) is off")
    if not abs(high - 1) < 1e-6:
        problems.append("k + 1 tokens per round (every draft accepted) is off")
    return "; ".join(problems) or None


ALPHA_CASES = [
    ("r' = 0.8, K = 4 (4 tokens per round): expected_tokens(alpha, 4) gives the 4 back", published),
    ("round trip on 185 (alpha, k) pairs to 1e-9", round_trip),
    ("the two ends: no draft ever accepted, every draft accepted", ends),
]


def check_alpha_from_tokens(fn, strict=True):
    return grade("alpha_from_tokens", fn, ALPHA_CASES, strict)


# The concept quiz: question number -> grading.answer_key(answer). Never the answers in clear.
QUIZ = {
    1: "69d17372441edece",
    2: "56b7f2209eb5a905",
    3: "8df3a99e0be789e2",
    4: "973169d6928aa9e1",
    5: "8c3b0dfb7693637f",
}
