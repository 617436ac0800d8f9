"""Automatic checks for the exercises of notebook 06: the verification mask and a greedy round.

Each `check_*` runs a learner's function through a list of cases with `grading.grade`: one
line per case, and a stub that still raises NotImplementedError counts as "not attempted yet".
A failed case says what went wrong, never the expected answer.
"""

import numpy as np

import specmini
from course.exercises.grading import Wrong, described, expect, grade
from course.toys import bigram_pair, first_difference

# Exercise 1: verification_mask(start, new) -> bool array (new, start + new), True where new
# token i (at position start + i) may attend to key j.

SIZES = [(0, 1), (0, 5), (3, 1), (7, 4), (10, 9)]


def as_mask(fn, start, new):
    """The learner's mask as a bool array; Wrong if its shape is not (new, start + new)."""
    got = np.asarray(fn(start, new))
    shape = (new, start + new)
    expect(got.shape == shape, f"start {start}, new {new}: shape {got.shape}, expected {shape}")
    return got.astype(bool)


def right_shape(fn):
    for start, new in SIZES:
        got = np.shape(fn(start, new))
        want = "want a row per new token, a column per key"
        expect(got == (new, start + new), f"start {start}, new {new}: shape {got}; {want}")


def no_cache_is_causal(fn):
    got = as_mask(fn, 0, 5)
    want = np.tril(np.ones((5, 5), dtype=bool))
    expect(np.array_equal(got, want), f"start 0, new 5: got\n{got.astype(int)}")


def sees_the_cache(fn):
    for start, new in SIZES:
        expect(
            not start or as_mask(fn, start, new)[:, :start].all(),
            f"start {start}, new {new}: some new token cannot see a cached position",
        )


def new_tokens_causal(fn):
    for start, new in SIZES:
        got = as_mask(fn, start, new)[:, start:]
        expect(
            np.array_equal(got, np.tril(np.ones((new, new), dtype=bool))),
            f"start {start}, new {new}: among the new tokens, got\n{got.astype(int)}",
        )


MASK_CASES = [
    ("shape (new, start + new)", right_shape),
    ("nothing cached: the causal mask of training", no_cache_is_causal),
    ("every new token sees every cached position", sees_the_cache),
    ("new token i sees new tokens 0 .. i, nothing later", new_tokens_causal),
]


def check_verification_mask(fn, strict=True):
    return grade("verification_mask", fn, MASK_CASES, strict)  # no specmini function to forbid


# Exercise 2: greedy_round(target, tokens, drafted) -> the new tokens of one greedy round: the
# drafts up to the first one the target disagrees with, then the target's own token.
# write the round yourself: not specmini's, nor its loop, round or accept rule
ROUND_FORBID = (
    "generate",
    "autoregressive",
    "speculative_accept",
    "specmini.decode.decode",
    "specmini.decode.speculate",
    "specmini.decode.token_verify",
)


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


def what_is_wrong(got, want, k):
    """A failed round described without its right answer."""
    if len(got) < len(want) and got == want[: len(got)]:
        if len(got) == k:
            return "the round stops after its K accepted drafts: the target's call gives one more"
        return (
            "the round stops short: it must end with the target's own token after the kept drafts"
        )
    if len(got) > len(want) and got[: len(want)] == want:
        return (
            "too many tokens: a draft the target disagrees with was kept, or tokens came after it"
        )
    i = first_difference(got, want)
    return (
        f"new token {i} is not the target's greedy choice there (a rejected draft kept, or the "
        "wrong row: row j scores the token that follows tokens[:start + j + 1])"
    )


def one_round(fn, target, draft, tokens, k, want):
    """Run fn's round from `tokens`: Wrong, saying what went wrong, unless its new tokens are
    `want` from exactly one target call."""
    calls = CountingModel(target)
    got = fn(calls, list(tokens), greedy_drafts(draft, list(tokens), k))
    try:
        got = [int(t) for t in got]
    except (TypeError, ValueError):
        raise Wrong(f"returned {described(got)}, not a list of token ids") from None
    expect(calls.calls == 1, f"after {len(tokens)} tokens: {calls.calls} target calls, expected 1")
    if got != want:
        raise Wrong(f"after {len(tokens)} tokens, K = {k}: " + what_is_wrong(got, want, k))


def first_round(target, draft, tokens, k):
    """The new tokens of specmini.generate's first greedy round from `tokens`."""
    expected = specmini.generate(target, draft, tokens, k + 1, k=k, temperature=0)
    return expected.tokens[: expected.rounds[0].accepted + 1]


def toy_rounds(fn):
    # greedy bigram text soon cycles, so start a round from every token, with several K
    target, draft = bigram_pair(vocab_size=6, quality=0.5, seed=0)
    for start in range(6):
        for k in (1, 2, 3):
            one_round(fn, target, draft, [start], k, first_round(target, draft, [start], k))


def every_round_of(target, draft, prompt, k, new_tokens):
    """A case: fn replays each round of specmini's greedy generation of `new_tokens` from
    `prompt`, from that round's own start. Greedy, so the rounds are fixed: corrections and bonus
    rounds both (a round without its bonus token fails here, on these models too)."""

    def case(fn):
        reference = specmini.generate(target, draft, prompt, new_tokens, k=k, temperature=0)
        done = 0
        for r in reference.rounds:
            if r.drafted < k:  # the budget's last round drafts fewer
                break
            want = reference.tokens[done : done + r.accepted + 1]
            one_round(fn, target, draft, list(prompt) + reference.tokens[:done], k, want)
            done += len(want)

    return case


def greedy_round_cases(target, draft, prompt, k=4, new_tokens=48):
    return [
        ("toy bigram models: a round from each token, K = 1, 2, 3", toy_rounds),
        (f"the notebook's models: every round of a {new_tokens}-token greedy text, K = {k}",
         every_round_of(target, draft, prompt, k, new_tokens)),
    ]  # fmt: skip


def check_greedy_round(fn, target, draft, prompt, k=4, strict=True):
    cases = greedy_round_cases(target, draft, prompt, k)
    return grade("greedy_round", fn, cases, strict, forbid=ROUND_FORBID)
