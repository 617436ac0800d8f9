"""Automatic checks for the exercises of notebook 02: the accept test, one token and a sequence.

The five classic cases of `speculative_accept` come from the exercise the course was seeded with
(reference example, all accepted, first rejected, ratio capped at 1, halting mid-sequence); a
sixth compares the learner's function with `specmini.speculative_accept` on random cases. The
check rejects an answer that calls `specmini.speculative_accept` itself, and a failing case says
what went wrong without printing the expected answer.
"""

import numpy as np

import specmini
from course.exercises.grading import expect, grade
from course.toys import DRAFT_ABC as DRAFT  # the course's A/B/C pair
from course.toys import TARGET_ABC as TARGET


def rows(vocab, picks):
    """One distribution per step: `token` gets `prob`, the other tokens share the rest evenly."""
    out = np.empty((len(picks), vocab))
    for i, (token, prob) in enumerate(picks):
        out[i] = (1 - prob) / (vocab - 1)
        out[i, token] = prob
    return out


# Exercise 1: accept_probability(target_probs, draft_probs, token) -> min(1, target / draft).


def abc_values(fn):
    got = [float(fn(TARGET, DRAFT, token)) for token in range(3)]
    want = np.minimum(1.0, TARGET / DRAFT)
    off = [name for name, g, w in zip("ABC", got, want, strict=True) if not np.isclose(g, w)]
    expect(not off, f"{' and '.join(off)}: value off (got {np.round(got, 4).tolist()})")


def capped(fn):
    got = float(fn(np.array([0.9, 0.1]), np.array([0.1, 0.9]), 0))
    cap = "but a probability cannot exceed 1: cap the ratio"
    expect(np.isclose(got, 1.0), f"target 0.9, draft 0.1: got {got:.4f}, {cap}")


def random_pairs(fn):
    rng = np.random.default_rng(2)
    for _ in range(100):
        target, draft = rng.dirichlet(np.ones(5), size=2)
        token = int(rng.integers(5))
        want, got = min(1.0, target[token] / draft[token]), float(fn(target, draft, token))
        if not np.isclose(got, want):
            pair = f"target {target[token]:.3f}, draft {draft[token]:.3f}"
            return f"token {token} ({pair}): got {got:.4f}, not min(1, target / draft)"
    return None


def accepted_by_specmini(target, draft, token, u):
    return specmini.speculative_accept([token], [target], [draft], [u]) == [token]


def is_specmini_threshold(fn):
    # specmini accepts iff u <= the acceptance probability: probe it just below and just above.
    rng = np.random.default_rng(3)
    for _ in range(50):
        target, draft = rng.dirichlet(np.ones(4), size=2)
        token = int(rng.integers(4))
        prob = float(fn(target, draft, token))
        below = accepted_by_specmini(target, draft, token, max(0.0, prob - 1e-9))
        above = prob < 1 and accepted_by_specmini(target, draft, token, min(1.0, prob + 1e-9))
        expect(
            below and not above, f"specmini does not switch from accept to reject at u = {prob:.4f}"
        )
    return None


PROBABILITY_CASES = [
    ("A/B/C: the keep probability of each token", abc_values),
    ("the ratio is capped at 1", capped),
    ("min(1, target / draft) on 100 random pairs", random_pairs),
    ("it is exactly where specmini switches from accept to reject", is_specmini_threshold),
]


def check_accept_probability(fn, strict=True):
    return grade("accept_probability", fn, PROBABILITY_CASES, strict)


# Exercise 2: speculative_accept(draft_tokens, target_probs, draft_probs, uniforms) -> prefix.
# Each case: the tokens, the target's and the draft's (token, probability) per step, the
# uniforms, and the accepted prefix it must return.

CLASSIC = {
    "reference example: tokens [5, 2, 7], all uniforms 0.5": (
        8,
        [5, 2, 7],
        [(5, 0.6), (2, 0.1), (7, 0.3)],
        [(5, 0.3), (2, 0.5), (7, 0.2)],
        [0.5, 0.5, 0.5],
        [5],
    ),
    "all tokens accepted when the target dominates the draft": (
        6,
        [1, 3, 0, 4],
        [(1, 0.5), (3, 0.7), (0, 0.4), (4, 0.9)],
        [(1, 0.2), (3, 0.7), (0, 0.1), (4, 0.3)],
        [0.95, 0.99, 0.3, 0.7],
        [1, 3, 0, 4],
    ),
    "first token rejected gives an empty prefix": (
        4,
        [2, 0, 1],
        [(2, 0.05), (0, 0.8), (1, 0.6)],
        [(2, 0.9), (0, 0.2), (1, 0.3)],
        [0.5, 0.1, 0.1],
        [],
    ),
    "ratio capped at 1: target >= draft accepts for every r <= 1": (
        5,
        [3, 1, 4],
        [(3, 0.9), (1, 0.4), (4, 0.25)],
        [(3, 0.1), (1, 0.4), (4, 0.2)],
        [1.0, 1.0, 0.999],
        [3, 1, 4],
    ),
    "acceptance halts at the first rejection mid-sequence": (
        4,
        [0, 1, 2, 3],
        [(0, 0.5), (1, 0.6), (2, 0.1), (3, 0.7)],
        [(0, 0.5), (1, 0.3), (2, 0.6), (3, 0.2)],
        [0.4, 0.8, 0.5, 0.1],
        [0, 1],
    ),
}


def what_is_off(tokens, got, want):
    """Why `got` is not the accepted prefix `want` of `tokens`, without printing `want`."""
    if got == want:
        return None
    step = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w), None)
    if step is not None:
        return f"got {got}: step {step} holds {got[step]}, not the token drafted there"
    step = min(len(got), len(want))
    if len(got) > len(want):
        return f"got {got}: step {step}'s token fails the test, so nothing from there is kept"
    return f"got {got}: step {step}'s token passes the test, yet it is missing"


def classic_case(vocab, tokens, target_picks, draft_picks, uniforms, expected):
    def case(fn):
        target, draft = rows(vocab, target_picks), rows(vocab, draft_picks)
        got = fn(list(tokens), target, draft, np.array(uniforms))
        return what_is_off(tokens, [int(t) for t in got], expected)

    return case


def returns_list(fn):
    vocab, tokens, target, draft, uniforms, _ = next(iter(CLASSIC.values()))
    got = fn(tokens, rows(vocab, target), rows(vocab, draft), np.array(uniforms))
    expect(isinstance(got, list), f"returned a {type(got).__name__}, not a list")


def random_cases(fn, n=300):
    rng = np.random.default_rng(4)
    for i in range(n):
        vocab, steps = int(rng.integers(2, 7)), int(rng.integers(1, 6))
        target = rng.dirichlet(np.ones(vocab), size=steps)
        draft = rng.dirichlet(np.ones(vocab), size=steps)
        tokens = [int(rng.choice(vocab, p=row)) for row in draft]  # drafts come from the draft
        uniforms = rng.random(steps)
        want = specmini.speculative_accept(tokens, target, draft, uniforms)
        got = [int(t) for t in fn(list(tokens), target, draft, uniforms)]
        if got != want:
            return f"case {i}, drafted {tokens}, uniforms {uniforms.round(3)}: " + what_is_off(
                tokens, got, want
            )
    return None


ACCEPT_CASES = [(title, classic_case(*spec)) for title, spec in CLASSIC.items()] + [
    ("returns a list", returns_list),
    ("agrees with specmini.speculative_accept on 300 random cases", random_cases),
]


def check_speculative_accept(fn, strict=True):
    return grade("speculative_accept", fn, ACCEPT_CASES, strict, forbid=("speculative_accept",))
