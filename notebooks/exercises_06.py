"""Automatic checks for the exercises of notebook 06: the verification mask, a greedy round.

Each `check_*` runs a learner's function through a list of cases with `grading.grade`: one
line per case, and a stub that still raises NotImplementedError counts as "not attempted yet".
"""

import numpy as np
from grading import grade
from toys import bigram_pair

import specmini

# Exercise 1: verification_mask(start, new) -> bool array (new, start + new), True where new
# token i (at position start + i) may attend to key j.

SIZES = [(0, 1), (0, 5), (3, 1), (7, 4), (10, 9)]


def as_mask(fn, start, new):
    return np.asarray(fn(start, new)).astype(bool)


def right_shape(fn):
    for start, new in SIZES:
        got = np.shape(fn(start, new))
        if got != (new, start + new):
            return f"start {start}, new {new}: shape {got}, expected {(new, start + new)}"
    return None


def no_cache_is_causal(fn):
    got = as_mask(fn, 0, 5)
    want = np.tril(np.ones((5, 5), dtype=bool))
    return None if np.array_equal(got, want) else f"start 0, new 5: got\n{got.astype(int)}"


def sees_the_cache(fn):
    for start, new in SIZES:
        if start and not as_mask(fn, start, new)[:, :start].all():
            return f"start {start}, new {new}: some new token cannot see a cached position"
    return None


def new_tokens_causal(fn):
    for start, new in SIZES:
        got = as_mask(fn, start, new)[:, start:]
        if not np.array_equal(got, np.tril(np.ones((new, new), dtype=bool))):
            return f"start {start}, new {new}: among the new tokens, got\n{got.astype(int)}"
    return None


MASK_CASES = [
    ("shape (new, start + new)", right_shape),
    ("nothing cached: the causal mask of training", no_cache_is_causal),
    ("every new token sees every cached position", sees_the_cache),
    ("new token i sees new tokens 0 .. i, nothing later", new_tokens_causal),
]


def check_verification_mask(fn, strict=True):
    return grade("verification_mask", fn, MASK_CASES, strict)


# Exercise 2: greedy_round(target, tokens, drafted) -> the new tokens of one greedy round: the
# drafts up to the first one the target disagrees with, then the target's own token.


class CountingModel:
    """Wraps a model and counts its calls."""

    def __init__(self, model):
        self.model, self.calls = model, 0

    def __call__(self, tokens, start):
        self.calls += 1
        return self.model(tokens, start)


def greedy_drafts(draft, tokens, k):
    drafted = []
    for _ in range(k):
        context = tokens + drafted
        drafted.append(int(np.argmax(draft(context, len(context) - 1)[0])))
    return drafted


def one_round(fn, target, draft, tokens, k):
    """fn's new tokens from `tokens`, and None if they equal specmini.generate's first round."""
    calls = CountingModel(target)
    got = [int(t) for t in fn(calls, list(tokens), greedy_drafts(draft, list(tokens), k))]
    if calls.calls != 1:
        return got, f"after {len(tokens)} tokens: {calls.calls} target calls, expected 1"
    expected = specmini.generate(target, draft, tokens, k + 1, k=k, temperature=0)
    want = expected.tokens[: expected.rounds[0].accepted + 1]
    return got, None if got == want else f"from {tokens[-3:]}, K = {k}: got {got}, want {want}"


def toy_rounds(fn):
    # greedy bigram text soon cycles, so start a round from every token, with several K
    target, draft = bigram_pair(vocab_size=6, quality=0.5, seed=0)
    for start in range(6):
        for k in (1, 2, 3):
            problem = one_round(fn, target, draft, [start], k)[1]
            if problem:
                return problem
    return None


def rounds_in_a_row(target, draft, prompt, k, rounds):
    def case(fn):
        tokens = list(prompt)
        for _ in range(rounds):
            got, problem = one_round(fn, target, draft, tokens, k)
            if problem:
                return problem
            tokens += got
        return None

    return case


def check_greedy_round(fn, target, draft, prompt, k=4, strict=True):
    cases = [
        ("toy bigram models: a round from each token, K = 1, 2, 3", toy_rounds),
        (f"the notebook's models: 6 rounds in a row, K = {k}",
         rounds_in_a_row(target, draft, prompt, k, 6)),
    ]  # fmt: skip
    return grade("greedy_round", fn, cases, strict)
