"""Automatic checks for the exercises of notebook 04: tokens per round, and the whole round.

Each `check_*` runs a learner's function through a list of cases and prints one line per case
(the `grade` loop of grading.py). A stub that still raises NotImplementedError counts as "not
attempted yet", not as a failure. A failing case says what went wrong, never the expected answer.

Exercise 2's check computes the exact output distribution of the learner's round: it hands the
function a scripted stand-in for numpy's random generator and follows every path once (every
draft token, every interval a uniform can fall in, every last token), each with its probability.
"""

import numpy as np

import specmini
from course.exact import (
    Script,
    TooManyPaths,
    bigram_joint,
    chained_outcomes,
    enumerate_outcomes,
    round_outcomes,
)
from course.exercises.grading import Wrong, as_array, described, expect, grade
from course.toys import (
    DRAFT_ABC,
    TARGET_ABC,
    TableModel,
    bigram_pair,
    constant_model,
    first_difference,
    total_variation,
)

GRID = [(alpha, k) for alpha in (0.0, 0.1, 0.35, 0.5, 0.8, 0.95, 0.999, 1.0) for k in (1, 2, 4, 8)]


# Exercise 1: tokens_per_round_distribution(alpha, k) -> P(a round yields n tokens), n = 1..k+1.


def off_entries(got, want):
    """Which entries are off, and which way: never the values they should have."""
    bad = [
        f"n = {n} is too {'high' if g > w else 'low'}"
        for n, (g, w) in enumerate(zip(got, want, strict=True), 1)
        if not np.isclose(g, w)
    ]
    return ", ".join(bad)


def round_sizes(alpha, k):
    """P(n tokens), n = 1..k+1, computed the long way: one outcome of the k tests at a time."""
    probs = np.zeros(k + 1)
    for tests in range(2**k):  # bit i set: draft i passes
        passed = [(tests >> i) & 1 for i in range(k)]
        kept = passed.index(0) if 0 in passed else k
        probs[kept] += np.prod([alpha if p else 1 - alpha for p in passed])
    return probs


def sizes_of(fn, alpha, k):
    """The learner's P(n tokens), n = 1..k+1, as a float array; Wrong if it has another length."""
    got = as_array(fn(alpha, k))
    entries = f"{got.shape[0]} entries" if got.ndim == 1 else f"shape {got.shape}"
    expect(
        got.shape == (k + 1,),
        f"alpha {alpha:g}, k {k}: got {entries}, expected k + 1 entries, for n = 1..k+1",
    )
    return got


def expect_sizes(got, alpha, k, where=None):
    off = off_entries(got, round_sizes(alpha, k))
    expect(not off, f"{where}: {off}" if where else off)


def worked_example(fn):
    expect_sizes(sizes_of(fn, 0.8, 2), 0.8, 2)  # the case's title names alpha and k


def length_k_plus_one(fn):
    for a, k in GRID:
        sizes_of(fn, a, k)


def sums_to_one(fn):
    for alpha, k in GRID:
        got = sizes_of(fn, alpha, k)
        expect(
            np.isclose(got.sum(), 1) and np.all(got >= 0),
            f"alpha {alpha}, k {k}: yours sums to {got.sum():.4f}, or has a negative entry",
        )


def mean_is_expected_tokens(fn):
    for alpha, k in GRID:
        got = sizes_of(fn, alpha, k)
        mean = float(got @ np.arange(1, len(got) + 1))
        expect(
            np.isclose(mean, specmini.expected_tokens(alpha, k)),
            f"alpha {alpha}, k {k}: your mean, {mean:.4f}, is not expected_tokens(alpha, k)",
        )


def extremes(fn):
    for alpha, what in [(0.0, "every draft rejected"), (1.0, "every draft accepted")]:
        where = f"alpha = {alpha:g}, k = 3 ({what})"
        expect_sizes(sizes_of(fn, alpha, 3), alpha, 3, where)


def nothing_drafted(fn):
    for alpha in (0.0, 0.5, 1.0):
        expect_sizes(sizes_of(fn, alpha, 0), alpha, 0, f"alpha {alpha:g}, k = 0 (no draft)")


def matches_generate(fn):
    # A/B/C models ignore their context, so every round is an independent draw of alpha = 0.8.
    target, draft, k = constant_model(TARGET_ABC), constant_model(DRAFT_ABC), 3
    sizes = []
    for seed in range(12):
        rounds = specmini.generate(target, draft, [0], 300, k=k, seed=seed).rounds
        sizes += [r.accepted + 1 for r in rounds if r.drafted == k]  # full rounds only
    freq = np.bincount(sizes, minlength=k + 2)[1:] / len(sizes)
    got = sizes_of(fn, 0.8, k)
    error = np.sqrt(got.clip(0, 1) * (1 - got.clip(0, 1)) / len(sizes)) + 1e-9
    z = (got - freq) / error
    worst = int(np.argmax(np.abs(z)))
    way = "high" if z[worst] > 0 else "low"
    expect(
        abs(z[worst]) <= 4,
        f"{len(sizes)} rounds of generate: your n = {worst + 1} is too {way} (off by > 4 s.e.)",
    )


ROUND_CASES = [
    ("alpha 0.8, k 2", worked_example),
    ("k + 1 entries: a round yields 1 to k + 1 tokens", length_k_plus_one),
    ("a distribution: sums to 1", sums_to_one),
    ("its mean is specmini.expected_tokens", mean_is_expected_tokens),
    ("alpha 0 and alpha 1", extremes),
    ("k = 0: nothing drafted, so one token, always", nothing_drafted),
    ("matches the rounds of specmini.generate on A/B/C", matches_generate),
]


def check_tokens_per_round(fn, strict=True):
    return grade("tokens_per_round_distribution", fn, ROUND_CASES, strict)


# Exercise 2: speculative_round(target, draft, prefix, k, rng) -> the new tokens of one round.

# Three tokens; row c is the next-token distribution after token c (context matters). Every
# ratio target/draft below 1 is 1/4, 1/2 or 3/4, and some tokens are never drafted.
ROUND_TARGET = np.array([[0.5, 0.25, 0.25], [0.375, 0.375, 0.25], [0.2, 0.2, 0.6]])
ROUND_DRAFT = np.array([[0.25, 0.5, 0.25], [0.5, 0.5, 0.0], [0.8, 0.0, 0.2]])
ROUND_K, ROUND_LENGTH = 2, 3  # drafts per round; tokens compared with the target's joint
FORBID = (
    "generate",
    "autoregressive",
    "speculative_accept",
    "residual",
    "specmini.decode.decode",
    "specmini.decode.speculate",
    "specmini.decode.token_verify",
)


def table_model(rows):
    """A bigram TableModel whose next-token probabilities are `rows` (0 as a -1e4 logit)."""
    return TableModel(np.stack([constant_model(row).table[0] for row in rows]))


def cuts_of(target_rows, draft_rows):
    """Where a uniform can change the verdict: each ratio below 1, and 1 minus it (for answers
    that test 1 - rng.random()). Between two cuts every correct answer behaves the same."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = (target_rows / draft_rows)[draft_rows > 0]
    ratios = ratios[ratios < 1]
    return np.unique(np.round(np.concatenate([[0.0, 1.0], ratios, 1 - ratios]), 12))


class ScriptedRng(Script):
    """Stands in for np.random.Generator, following a script of branches (course.exact.Script):
    `choice` branches over the tokens of nonzero probability, `random` over the intervals
    between the cuts (it returns the middle of one)."""

    def __init__(self, script, cuts):
        super().__init__(script)
        self.cuts = cuts

    def choice(self, a, size=None, replace=True, p=None, **_):
        if size is not None:
            raise Wrong("draw one token per call (rng.choice without size, or specmini.sample)")
        n = int(a) if np.ndim(a) == 0 else len(a)
        p = np.full(n, 1 / n) if p is None else np.asarray(p, dtype=np.float64)
        if p.shape != (n,) or np.any(p < 0) or abs(p.sum() - 1) > 1e-8:
            raise ValueError("probabilities are negative or do not sum to 1")  # as numpy's
        support = np.flatnonzero(p)
        token = support[self.branch(p[support])]
        return token if np.ndim(a) == 0 else np.asarray(a)[token]

    def uniform_draw(self):
        i = self.branch(np.diff(self.cuts))
        return (self.cuts[i] + self.cuts[i + 1]) / 2

    def random(self, size=None, **_):
        if size is None:
            return self.uniform_draw()
        return np.array([self.uniform_draw() for _ in range(int(np.prod(size)))]).reshape(size)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise Wrong(
            "the check follows rng.random (uniforms) and specmini.sample or rng.choice (tokens)"
            f" only, not rng.{name}"
        )


def new_tokens(fn, target, draft, prefix, k, rng):
    """Run one round of the learner's; its tokens as a tuple of ints, or Wrong if they can't be."""
    got = fn(target, draft, list(prefix), k, rng)
    try:
        tokens = tuple(int(t) for t in got)
    except (TypeError, ValueError):
        raise Wrong(f"returned {described(got)}, not a list of token ids") from None
    vocab = target.vocab_size
    if not 1 <= len(tokens) <= k + 1:
        raise Wrong(f"k = {k}: a round returned {len(tokens)} tokens, not 1 to k + 1")
    if not all(0 <= t < vocab for t in tokens):
        raise Wrong(f"a token id outside the vocabulary 0..{vocab - 1}")
    return tokens


def round_paths(fn, target, draft, prefix, k, cuts, most=20_000):
    """Every path of one round of `fn`, run once each: {new tokens: exact probability}."""
    try:
        out = enumerate_outcomes(
            lambda rng: new_tokens(fn, target, draft, prefix, k, rng),
            lambda script: ScriptedRng(script, cuts),
            most,
        )
    except TooManyPaths:
        raise Wrong(
            "more than 20,000 paths in one round: does it draw more than it needs?"
        ) from None
    if not np.isclose(sum(out.values()), 1):
        raise Wrong("the round's paths do not add up: does it use randomness other than rng?")
    return out


def round_models():
    return table_model(ROUND_TARGET), table_model(ROUND_DRAFT), cuts_of(ROUND_TARGET, ROUND_DRAFT)


def sizes_and_calls(fn):
    for k in (1, 3, 5):
        target, draft = bigram_pair(vocab_size=6, quality=0.7, seed=k)
        rng, seq = np.random.default_rng(k), [0]
        for _ in range(10):
            target.calls = draft.calls = 0
            seq += new_tokens(fn, target, draft, seq, k, rng)
            expect(target.calls == 1, f"k = {k}: {target.calls} target calls in one round, not one")
            expect(draft.calls == k, f"k = {k}: {draft.calls} draft calls in one round, not k")


def chained_is_the_target(fn):
    """Rounds chained from token 0, cut to ROUND_LENGTH tokens, against the target's own joint."""
    target, draft, cuts = round_models()
    cache = {}

    def rounds(text, remaining):  # bigram models: the last token is the context
        key = (len(text) - 1, text[-1])
        if key not in cache:
            cache[key] = round_paths(fn, target, draft, list(text), ROUND_K, cuts)
        return cache[key]

    done = chained_outcomes(rounds, first=0, length=ROUND_LENGTH)
    want = bigram_joint(ROUND_TARGET, first=0, length=ROUND_LENGTH)
    for position in range(ROUND_LENGTH):  # the first position that is off, if one is
        mine, its = {}, {}
        for seq in set(done) | set(want):
            mine[seq[position]] = mine.get(seq[position], 0.0) + done.get(seq, 0.0)
            its[seq[position]] = its.get(seq[position], 0.0) + want.get(seq, 0.0)
        distance = total_variation(mine, its)
        expect(
            distance <= 1e-9,
            f"new token {position + 1} does not follow the target (off by {distance:.3f} TV)",
        )
    distance = total_variation(done, want)
    expect(
        distance <= 1e-9,
        f"each position follows the target, but not the joint (off by {distance:.3f} TV)",
    )


def one_round_outcomes(fn):
    target, draft, cuts = round_models()
    for last in range(len(ROUND_TARGET)):
        mine = round_paths(fn, target, draft, [last], ROUND_K, cuts)
        its = round_outcomes(ROUND_TARGET, ROUND_DRAFT, last, ROUND_K)
        for n in range(ROUND_K + 1, 0, -1):  # the bonus first: its absence is the common bug
            p_mine = sum(p for seq, p in mine.items() if len(seq) == n)
            p_its = sum(p for seq, p in its.items() if len(seq) == n)
            way = "too likely" if p_mine > p_its else "too rare"
            fix = f"{n - 1} kept, then a fix"
            what = "all kept, then the bonus" if n == ROUND_K + 1 else fix
            size = f"{n} token{'s' if n > 1 else ''}"
            expect(
                np.isclose(p_mine, p_its),
                f"after token {last}: rounds of {size} ({what}) are {way}",
            )
        expect(
            total_variation(mine, its) <= 1e-9,
            f"after token {last}: right lengths, but the tokens in them are off",
        )


def same_as_generate(fn):
    for k in (1, 2, 4):
        for seed, prompt in [(0, [0]), (1, [3, 1, 4]), (2, [5])]:
            target, draft = bigram_pair(vocab_size=6, quality=0.7, seed=seed)
            rng, mine = np.random.default_rng(seed), []
            while len(mine) < 30:
                mine += new_tokens(fn, target, draft, prompt + mine, k, rng)
            # A budget of 40: every round that starts before token 30 drafts all k tokens.
            its = specmini.generate(target, draft, prompt, 40, k=k, seed=seed).tokens
            apart = first_difference(mine[:30], its[:30])
            expect(
                apart is None,
                f"k {k}, seed {seed}, prompt {prompt}: yours and specmini.generate part at"
                f" new token {(apart or 0) + 1} (if your round is exact, draw from rng in the"
                " statement's order)",
            )


SPECULATIVE_ROUND_CASES = [
    ("1 to k + 1 token ids, k draft calls and one target call", sizes_and_calls),
    ("exact: rounds chained give the target's joint over 3 tokens", chained_is_the_target),
    ("exact: each outcome of one round as likely as in the algorithm", one_round_outcomes),
    ("same tokens as specmini.generate, same seed", same_as_generate),
]


def check_speculative_round(fn, strict=True):
    return grade("speculative_round", fn, SPECULATIVE_ROUND_CASES, strict, forbid=FORBID)
