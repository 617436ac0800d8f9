"""Automatic checks for the exercises of notebook 02: the accept test, one token and a sequence.

The five classic cases of `speculative_accept` come from the exercise the course was seeded with
(reference example, all accepted, first rejected, ratio capped at 1, halting mid-sequence); then
K = 0, and a comparison with `specmini.speculative_accept` on random cases. The check rejects an
answer that calls `specmini.speculative_accept` itself, and a failing case says what went wrong
without printing the expected answer. `accept_probability` is held to 1e-6, so float32 passes,
and a wrong value gets the hint that fits its mistake (the ratio upside down, not capped, ...).
Block verification's exercise belongs to notebook 02b: exercises_02b.py.
"""

import numpy as np

import specmini
from course.exercises.grading import Wrong, as_number, described, expect, grade
from course.toys import DRAFT_ABC as DRAFT  # the course's A/B/C pair
from course.toys import TARGET_ABC as TARGET
from course.toys import first_difference


def rows(vocab, picks):
    """One distribution per step: `token` gets `prob`, the other tokens share the rest evenly."""
    out = np.empty((len(picks), vocab))
    for i, (token, prob) in enumerate(picks):
        out[i] = (1 - prob) / (vocab - 1)
        out[i, token] = prob
    return out


# Exercise 1: accept_probability(target_probs, draft_probs, token) -> min(1, target / draft), and
# 1 for a token the draft gives probability 0 (never drafted; Leviathan et al. keep x whenever
# draft(x) <= target(x)). Compared to TOLERANCE, so float32 arithmetic passes.
TOLERANCE = 1e-6


def keep_probability(fn, target, draft, token):
    """The learner's keep probability of `token`, as a float; Wrong if it is not a number."""
    pair = f"target {target[token]:.3g}, draft {draft[token]:.3g}"
    return as_number(fn(target, draft, token), pair)


def mistake(got, target, draft):
    """What a wrong keep probability `got` looks like, for a token of these target and draft
    probabilities: a hint that fits the mistake, never the right value."""
    with np.errstate(divide="ignore", invalid="ignore"):
        upside_down = np.float64(draft) / np.float64(target)
    if np.isclose(got, min(1.0, upside_down), atol=TOLERANCE, rtol=0):
        return "that is draft / target, the ratio upside down: the test divides target by draft"
    if got > 1:
        return "a probability cannot exceed 1: cap the ratio"
    if got < 0:
        return "a probability cannot be negative"
    if draft > 0 and np.isclose(got, 1 - min(1.0, target / draft), atol=TOLERANCE, rtol=0):
        return "that is the probability of rejecting it, not of keeping it"
    return "not min(1, target / draft)"


def expect_keep(fn, target, draft, token, where=""):
    got = keep_probability(fn, target, draft, token)
    want = 1.0 if draft[token] == 0 else min(1.0, target[token] / draft[token])
    pair = f"{where}target {target[token]:.3g}, draft {draft[token]:.3g}"
    hint = mistake(got, target[token], draft[token])
    expect(abs(got - want) <= TOLERANCE, f"{pair}: got {got:.4g}; {hint}")


def abc_values(fn):
    for token, name in enumerate("ABC"):
        expect_keep(fn, TARGET, DRAFT, token, f"token {name}, ")


def capped(fn):
    expect_keep(fn, np.array([0.9, 0.1]), np.array([0.1, 0.9]), 0)


def random_pairs(fn):
    rng = np.random.default_rng(2)
    for _ in range(100):
        target, draft = rng.dirichlet(np.ones(5), size=2)
        expect_keep(fn, target, draft, int(rng.integers(5)))


def never_drafted(fn):
    target, draft = np.array([0.5, 0.5, 0.0]), np.array([1.0, 0.0, 0.0])
    with np.errstate(divide="ignore", invalid="ignore"):  # min(1, target / 0) is fair too
        for token in (1, 2):
            got = keep_probability(fn, target, draft, token)
            expect(
                got == 1,
                f"token {token}: draft 0, target {target[token]:g}: got {got:.4g}; a token the"
                " draft gives probability 0 is never drafted: return 1, as the exercise says",
            )


def accepted_by_specmini(target, draft, token, u):
    return specmini.speculative_accept([token], [target], [draft], [u]) == [token]


def is_specmini_threshold(fn):
    # specmini accepts iff u <= the acceptance probability: probe it just below and just above.
    rng = np.random.default_rng(3)
    for _ in range(50):
        target, draft = rng.dirichlet(np.ones(4), size=2)
        token = int(rng.integers(4))
        prob = keep_probability(fn, target, draft, token)
        expect(0 <= prob <= 1, f"got {prob:.4g}: a probability lies in [0, 1]")
        below = prob <= TOLERANCE or accepted_by_specmini(target, draft, token, prob - TOLERANCE)
        above = prob >= 1 - TOLERANCE or not accepted_by_specmini(
            target, draft, token, prob + TOLERANCE
        )
        expect(
            below and above,
            f"specmini does not switch from accept to reject within 1e-6 of {prob:.4f}",
        )


PROBABILITY_CASES = [
    ("A/B/C: the keep probability of each token", abc_values),
    ("the ratio is capped at 1", capped),
    ("min(1, target / draft) on 100 random pairs, to 1e-6", random_pairs),
    ("a token the draft gives probability 0: 1", never_drafted),
    ("it is where specmini switches from accept to reject, to 1e-6", is_specmini_threshold),
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


def accepted_of(fn, tokens, target, draft, uniforms):
    """The learner's accepted prefix, as a list of ints; Wrong if it is not a list of token ids."""
    got = fn(list(tokens), target, draft, np.asarray(uniforms, dtype=np.float64))
    try:
        return [int(t) for t in got]
    except (TypeError, ValueError):
        raise Wrong(f"returned {described(got)}, not a list of token ids") from None


def expect_prefix(tokens, got, want, where=""):
    """Wrong, saying why `got` is not the accepted prefix `want` of `tokens`, without `want`."""
    if got == want:
        return
    step = first_difference(got, want)
    if step < min(len(got), len(want)):
        raise Wrong(f"{where}got {got}: step {step} holds {got[step]}, not the token drafted there")
    if len(got) > len(want):
        raise Wrong(
            f"{where}got {got}: step {step}'s token fails the test, so nothing from there is kept"
        )
    raise Wrong(f"{where}got {got}: step {step}'s token passes the test, yet it is missing")


def classic_case(vocab, tokens, target_picks, draft_picks, uniforms, expected):
    def case(fn):
        target, draft = rows(vocab, target_picks), rows(vocab, draft_picks)
        expect_prefix(tokens, accepted_of(fn, tokens, target, draft, uniforms), expected)

    return case


def returns_list(fn):
    vocab, tokens, target, draft, uniforms, _ = next(iter(CLASSIC.values()))
    got = fn(tokens, rows(vocab, target), rows(vocab, draft), np.array(uniforms))
    expect(isinstance(got, list), f"returned {described(got)}, not a list")


def nothing_drafted(fn):
    empty = np.empty((0, 5))
    got = accepted_of(fn, [], empty, empty, [])
    expect(got == [], f"K = 0 (no drafted token, rows of shape (0, 5)): got {got}, not []")


def random_cases(fn, n=300):
    rng = np.random.default_rng(4)
    for i in range(n):
        vocab, steps = int(rng.integers(2, 7)), int(rng.integers(1, 6))
        target = rng.dirichlet(np.ones(vocab), size=steps)
        draft = rng.dirichlet(np.ones(vocab), size=steps)
        tokens = [int(rng.choice(vocab, p=row)) for row in draft]  # drafts come from the draft
        uniforms = rng.random(steps)
        want = specmini.speculative_accept(tokens, target, draft, uniforms)
        got = accepted_of(fn, tokens, target, draft, uniforms)
        expect_prefix(
            tokens, got, want, f"case {i}, drafted {tokens}, uniforms {uniforms.round(3)}: "
        )


ACCEPT_CASES = [(title, classic_case(*spec)) for title, spec in CLASSIC.items()] + [
    ("returns a list", returns_list),
    ("K = 0: nothing drafted, nothing accepted", nothing_drafted),
    ("agrees with specmini.speculative_accept on 300 random cases", random_cases),
]


def check_speculative_accept(fn, strict=True):
    return grade(
        "speculative_accept",
        fn,
        ACCEPT_CASES,
        strict,
        forbid=("speculative_accept", "specmini.decode.token_verify"),
    )
