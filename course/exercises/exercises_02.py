"""Automatic checks for the exercises of notebook 02: the accept test, one token and a sequence,
and block verification's acceptance probabilities.

The five classic cases of `speculative_accept` come from the exercise the course was seeded with
(reference example, all accepted, first rejected, ratio capped at 1, halting mid-sequence); a
sixth compares the learner's function with `specmini.speculative_accept` on random cases. The
check rejects an answer that calls `specmini.speculative_accept` itself, and a failing case says
what went wrong without printing the expected answer. `block_acceptance` is checked the same way,
against course.block_verification, whose own functions its check keeps out of reach.
"""

import contextlib
import sys
from unittest import mock

import numpy as np

import specmini
from course import block_verification
from course.exact import bigram_joint, chained_outcomes
from course.exercises.grading import Wrong, as_array, expect, grade
from course.toys import DRAFT_ABC as DRAFT  # the course's A/B/C pair
from course.toys import TARGET_ABC as TARGET
from course.toys import total_variation


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


# Exercise 3: block_acceptance(drafts, target_rows, draft_rows) -> h_0 .. h_K, block
# verification's acceptance probabilities (Sun et al. 2025), checked against the paper's example
# by hand, against course.block_verification, and by the exactness of the rounds built on them.

AB_TARGET = np.tile([1 / 3, 2 / 3], (2, 1))  # the paper's example: row c follows token c
AB_DRAFT = np.tile([2 / 3, 1 / 3], (2, 1))
# h_0 .. h_2 of each block of the paper's example (tokens a = 0 and b = 1), worked by hand
AB_BLOCKS = {(0, 0): [1, 0, 1 / 4], (0, 1): [1, 0, 1], (1, 0): [1, 1, 1 / 2], (1, 1): [1, 1, 1]}
OWN = ("acceptance_probabilities", "prefix_weights")  # the course's answer and its first half


def block_rows(block, target_table, draft_table, last=0):
    """The K + 1 target rows and K draft rows of a block drafted after token `last`."""
    contexts = [last, *block]
    return target_table[contexts], draft_table[contexts[:-1]]


def random_block(rng):
    vocab, k = int(rng.integers(2, 7)), int(rng.integers(1, 6))
    target_rows = rng.dirichlet(np.full(vocab, 0.5), size=k + 1)
    draft_rows = rng.dirichlet(np.full(vocab, 0.5), size=k)
    drafts = [int(rng.choice(vocab, p=row)) for row in draft_rows]  # drafts come from the draft
    return drafts, target_rows, draft_rows


@contextlib.contextmanager
def course_traps(fn):
    """course.block_verification's own answer, out of reach of the learner's code only."""
    patches = []
    for name in OWN:
        real = getattr(block_verification, name)

        def trap(*args, _real=real, _name=name, **kwargs):
            if sys._getframe(1).f_globals.get("__name__", "").startswith("course."):
                return _real(*args, **kwargs)
            raise Wrong(f"your answer calls course.block_verification.{_name}: write it yourself")

        patches.append(mock.patch.object(block_verification, name, trap))
        learner = getattr(fn, "__globals__", {})
        for alias, value in list(learner.items()):  # `from course.block_verification import`
            if value is real:
                patches.append(mock.patch.dict(learner, {alias: trap}))
    with contextlib.ExitStack() as stack:
        for p in patches:
            stack.enter_context(p)
        yield


def paper_example(fn):
    for block, want in AB_BLOCKS.items():
        got = as_array(fn(list(block), *block_rows(block, AB_TARGET, AB_DRAFT)))
        expect(got.shape == (3,), f"block {block}: got {got.shape[0]} numbers, want K + 1 = 3")
        off = [f"h_{i}" for i in range(3) if not np.isclose(got[i], want[i])]
        name = "".join("ab"[t] for t in block)
        expect(not off, f"block {name}: {' and '.join(off)} off (got {np.round(got, 4).tolist()})")


def one_draft(fn):
    rng = np.random.default_rng(5)
    for _ in range(50):
        target_rows, draft_rows = rng.dirichlet(np.ones(4), size=2), rng.dirichlet(np.ones(4), 1)
        token = int(rng.choice(4, p=draft_rows[0]))
        got = as_array(fn([token], target_rows, draft_rows))
        want = min(1.0, target_rows[0, token] / draft_rows[0, token])
        expect(got.shape == (2,) and np.isclose(got[0], 1), f"one draft: got {got.round(4)}")
        expect(np.isclose(got[1], want), f"one draft: h_1 = {got[1]:.4f}, not specmini's test")


def random_blocks(fn, n=200):
    rng = np.random.default_rng(6)
    for i in range(n):
        drafts, target_rows, draft_rows = random_block(rng)
        want = block_verification.acceptance_probabilities(drafts, target_rows, draft_rows)
        got = as_array(fn(list(drafts), target_rows, draft_rows))
        if got.shape != want.shape:
            return f"case {i}, {len(drafts)} drafts: got {got.shape[0]} numbers, want K + 1"
        off = [f"h_{j}" for j in range(len(want)) if not np.isclose(got[j], want[j])]
        if off:
            return f"case {i}, drafts {drafts}: {', '.join(off)} off"
    return None


def exact_rounds(fn):
    rng = np.random.default_rng(7)
    for target_table, draft_table in rng.dirichlet(np.full(3, 0.5), size=(3, 2, 3)):
        rounds = block_verification.block_rounds(target_table, draft_table, 2, acceptance=fn)
        chained = chained_outcomes(rounds, 0, 4)
        tv = total_variation(chained, bigram_joint(target_table, 0, 4))
        expect(tv < 1e-9, f"rounds kept with your h are not the target's (off by {tv:.3f} TV)")


BLOCK_CASES = [
    ("the paper's example: h_0, h_1, h_2 of the blocks aa, ab, ba, bb", paper_example),
    ("one draft: h_1 is specmini's min(1, target / draft)", one_draft),
    ("agrees with course.block_verification on 200 random blocks", random_blocks),
    ("exact: rounds kept with your h give the target's joint over 4 tokens", exact_rounds),
]


def check_block_acceptance(fn, strict=True):
    with course_traps(fn):
        return grade("block_acceptance", fn, BLOCK_CASES, strict)
