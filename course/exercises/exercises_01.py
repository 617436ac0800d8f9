"""Automatic checks for the exercises of notebook 01: sampling with one uniform, one target pass.

Each `check_*` runs a learner's function through a list of cases and prints one line per case.
A stub that still raises NotImplementedError counts as "not attempted yet", not as a failure
(under nbgrader it scores zero). A failing case says what went wrong, never the expected answer.
"""

import numpy as np

import specmini
from course.exercises.grading import as_array, described, expect, grade
from course.toys import TARGET_ABC as ABC  # the course's target over A/B/C

# Exercise 1: sample_with_uniform(probs, u) -> token id, by inverting the cumulative distribution.


def grid(n):
    """n evenly spaced uniforms, each in the middle of its cell: never on a bucket boundary."""
    return (np.arange(n) + 0.5) / n


def token_of(fn, probs, u):
    """The learner's token for `u`, if it is a token id of `probs`; Wrong otherwise."""
    token = fn(probs, u)
    ok = isinstance(token, int | np.integer) and not isinstance(token, bool)
    expect(ok, f"u = {u}: returned {described(token)}, not an int token id")
    expect(0 <= token < len(probs), f"u = {u}: token {token} is not in 0..{len(probs) - 1}")
    return int(token)


def counts(fn, probs, n):
    return np.bincount([token_of(fn, probs, u) for u in grid(n)], minlength=len(probs))


def abc_points(fn):
    expected = {0.0: 0, 0.3: 0, 0.59: 0, 0.61: 1, 0.85: 1, 0.91: 2, 0.999: 2}
    wrong = [u for u in expected if token_of(fn, ABC, u) != expected[u]]
    expect(not wrong, f"the token is wrong for u = {', '.join(map(str, wrong))}")


def returns_int(fn):
    token_of(fn, ABC, 0.5)


def abc_grid(fn):
    got = counts(fn, ABC, 1000)
    expect(got.tolist() == [600, 300, 100], f"counted {got.tolist()} for A, B, C")


def zero_never_drawn(fn):
    got = counts(fn, np.array([0.5, 0.0, 0.5]), 1000)
    expect(got[1] == 0, f"drew the probability-0 token {got[1]} times in 1000")


def past_the_last_edge(fn):
    # ten times 0.1 adds up to 0.9999999999999999, the largest float below 1: that u passes
    # every edge. The last token that can be drawn is the answer, never one of probability 0.
    u = float(np.nextafter(1.0, 0.0))
    for probs in (np.full(10, 0.1), np.append(np.full(10, 0.1), 0.0)):
        token = token_of(fn, probs, u)
        last = " (the last of probability 0)" if probs[-1] == 0 else ""
        expect(
            token == 9,
            f"{len(probs)} tokens{last}, u = {u!r}, past the running total's last edge: got"
            f" token {token}, not the last token of nonzero probability",
        )


def random_grids(fn):
    rng = np.random.default_rng(1)
    for _ in range(20):
        probs = rng.dirichlet(np.ones(rng.integers(2, 9)))
        freq = counts(fn, probs, 10_000) / 10_000
        off = np.abs(freq - probs).max()
        expect(off <= 2e-4, f"a token's frequency is off by {off:.4f} on {len(probs)} tokens")


def same_as_specmini(fn):
    # numpy's choice inverts the cumulative distribution with one uniform, just like this
    # exercise, so with the same seed both must draw the very same tokens.
    theirs, ours = np.random.default_rng(7), np.random.default_rng(7)
    mine = [token_of(fn, ABC, theirs.random()) for _ in range(2000)]
    reference = [specmini.sample(ABC, ours) for _ in range(2000)]
    diff = sum(a != b for a, b in zip(mine, reference, strict=True))
    expect(diff == 0, f"{diff} of 2000 draws differ from specmini.sample")


SAMPLE_CASES = [
    ("u < 0.6 gives A, 0.6 < u < 0.9 gives B, u > 0.9 gives C", abc_points),
    ("returns a token id (an int)", returns_int),
    ("1000 evenly spaced u give exactly 600 A, 300 B, 100 C", abc_grid),
    ("a token of probability 0 is never drawn", zero_never_drawn),
    (
        "u past the last edge (float rounding): the last token of nonzero probability",
        past_the_last_edge,
    ),
    ("frequencies match 20 random distributions", random_grids),
    ("same seed, same tokens as specmini.sample", same_as_specmini),
]


def check_sample_with_uniform(fn, strict=True):
    # specmini.sample is the function this exercise writes: an answer must not call it.
    return grade("sample_with_uniform", fn, SAMPLE_CASES, strict, forbid=("sample",))


# Exercise 2: score_drafts(model, prefix, drafts) -> (K + 1, vocab) distributions, one model call.


class MeanContextModel:
    """A causal toy model whose prediction depends on the whole prefix (the mean of its
    embeddings), so a row computed from the wrong context shows. It counts its calls."""

    def __init__(self, vocab_size=5, dim=4, seed=0):
        rng = np.random.default_rng(seed)
        self.embed = rng.normal(size=(vocab_size, dim))
        self.unembed = rng.normal(size=(dim, vocab_size))
        self.calls = 0

    def __call__(self, tokens, start):
        self.calls += 1
        x = self.embed[np.asarray(tokens, dtype=int)]
        means = np.cumsum(x, 0) / np.arange(1, len(x) + 1)[:, None]  # row t sees tokens[:t+1]
        return means[start:] @ self.unembed


PREFIX, DRAFTS = [0, 3, 1], [4, 2, 2]


def reference_rows(prefix, drafts):
    """The slow way, one call per context: what the single pass must reproduce."""
    model = MeanContextModel()
    rows = [model(prefix + drafts[:j], len(prefix) + j - 1)[-1] for j in range(len(drafts) + 1)]
    return specmini.probabilities(np.array(rows))


def scored(fn, prefix=PREFIX, drafts=DRAFTS):
    model = MeanContextModel()
    return as_array(fn(model, list(prefix), list(drafts))), model.calls


def k_plus_one_rows(fn):
    rows, _ = scored(fn)
    ok = rows.shape == (len(DRAFTS) + 1, 5)
    expect(ok, f"shape {rows.shape} for K = {len(DRAFTS)} drafts over 5 tokens")


def rows_are_distributions(fn):
    rows, _ = scored(fn)
    expect(rows.ndim == 2, f"shape {rows.shape}: not one row per context")
    ok = np.all(rows >= 0) and np.allclose(rows.sum(-1), 1)
    expect(ok, "rows must be probabilities (>= 0, summing to 1), not logits")


def rows_match_contexts(fn):
    rows, want = scored(fn)[0], reference_rows(PREFIX, DRAFTS)
    expect(rows.shape == want.shape, f"shape {rows.shape}: not one row per context")
    bad = [j for j in range(len(want)) if not np.allclose(rows[j], want[j])]
    expect(not bad, f"rows {bad} do not match the context prefix + drafts[:j]")


def one_call(fn):
    _, calls = scored(fn)
    expect(calls == 1, f"called the model {calls} times; one pass is enough")


def no_drafts(fn):
    rows, calls = scored(fn, [2, 1], [])
    want = reference_rows([2, 1], [])
    expect(calls == 1, f"with K = 0 called the model {calls} times")
    expect(rows.shape == want.shape, f"with K = 0 returned shape {rows.shape}: not a single row")
    ok = np.allclose(rows, want)
    expect(ok, "with K = 0 the row is not the distribution after the prefix")


SCORE_CASES = [
    ("K drafts give K + 1 rows", k_plus_one_rows),
    ("the rows are probability distributions", rows_are_distributions),
    ("row j is the distribution after prefix + drafts[:j]", rows_match_contexts),
    ("exactly one model call", one_call),
    ("K = 0: one row, the plain next-token distribution", no_drafts),
]


def check_score_drafts(fn, strict=True):
    # No public specmini function does this step alone (it happens inside specmini.generate),
    # so there is nothing to forbid: the one-call case is what an answer cannot fake.
    return grade("score_drafts", fn, SCORE_CASES, strict)
