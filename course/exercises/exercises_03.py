"""Automatic checks for the exercises of notebook 03: the residual, and what one step outputs.

Each `check_*` runs a learner's function through a list of cases and prints one line per case
(the `grade` loop of grading.py). A stub that still raises NotImplementedError counts as "not
attempted yet" (under nbgrader it scores zero). The residual's check rejects an answer that calls
`specmini.residual` itself. A failing case says what went wrong, never the expected answer.
"""

import numpy as np

import specmini
from course.exercises.grading import as_array, expect, grade
from course.toys import DRAFT_ABC as DRAFT  # the course's A/B/C pair
from course.toys import TARGET_ABC as TARGET


def random_pairs(seed, n=200, edge_cases=True):
    """(target, draft) pairs of assorted sizes; with edge_cases some are sparse, equal, disjoint."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        vocab = int(rng.integers(2, 12))
        target, draft = rng.dirichlet(np.full(vocab, 0.5), size=2)
        if not edge_cases:
            yield target, draft
            continue
        if i % 5 == 1:  # zeros here and there: supports that only partly overlap
            target[rng.random(vocab) < 0.3] = 0.0
            target = target / target.sum() if target.sum() > 0 else np.eye(vocab)[0]
        if i % 10 == 2:
            draft = target.copy()
        if i % 10 == 3:  # disjoint: the target on the first half, the draft on the second
            half = vocab // 2
            target[half:], draft[:half] = 0.0, 0.0
            target, draft = target / target.sum(), draft / draft.sum()
        yield target, draft


def difference(got, want):
    """How distribution `got` differs from `want`, said without giving `want` away; None if
    it does not."""
    if got.shape != want.shape:
        return f"returned shape {got.shape}, not one probability per token {want.shape}"
    if np.any(np.isnan(got)):
        return f"got {got.round(4)}: NaN (a 0 / 0 somewhere?)"
    if np.any(got < -1e-12) or not np.isclose(got.sum(), 1):
        return f"got {got.round(4)}: not a distribution (sum {got.sum():.4f}, min {got.min():.4f})"
    if np.allclose(got, want, atol=1e-12):
        return None
    over, under = np.flatnonzero(got > want), np.flatnonzero(got < want)
    said = [
        f"too {word} mass on token {', '.join(map(str, ids))}"
        for word, ids in (("much", over), ("little", under))
        if len(ids)
    ]
    return f"got {got.round(4)}: {' and '.join(said)}"


def expect_same(got, want, where):
    """Wrong, saying how `got` differs from the distribution `want`, after `where`."""
    problem = difference(got, want)
    expect(problem is None, f"{where}: {problem}")


def distribution_of(fn, *args):
    """What the learner's function returns for `args`, as a float array of one probability per
    token; Wrong if it is not one."""
    got = as_array(fn(*args))
    want = np.shape(args[0])
    expect(got.shape == want, f"returned shape {got.shape}, not one probability per token {want}")
    return got


# Exercise 1: residual(target, draft) -> norm(max(0, target - draft)), the target if no excess.


def abc_residual(fn):
    got = distribution_of(fn, TARGET.copy(), DRAFT.copy())
    expect_same(got, specmini.residual(TARGET, DRAFT), "A/B/C")


def is_distribution(fn):
    for target, draft in random_pairs(1):
        got = distribution_of(fn, target, draft)
        expect(
            np.allclose(got.sum(), 1) and np.all(got >= 0),
            f"for target {target.round(3)}, draft {draft.round(3)}: got {got.round(4)}",
        )


def only_where_target_exceeds(fn):
    for target, draft in random_pairs(2):
        got = distribution_of(fn, target, draft)
        expect(
            not np.any(target > draft) or not np.any(got[target <= draft] > 0),
            f"mass on tokens where draft >= target: {got.round(4)}",
        )


def equal_pair(fn):
    got = distribution_of(fn, TARGET.copy(), TARGET.copy())
    expect(
        not np.any(np.isnan(got)),
        f"got {got} (0 / 0): with no excess anywhere, return the target itself",
    )
    expect(np.allclose(got, TARGET), f"got {got.round(4)}, not the target itself")


def disjoint_pair(fn):
    target, draft = np.array([0.5, 0.5, 0.0, 0.0]), np.array([0.0, 0.0, 0.3, 0.7])
    got = distribution_of(fn, target, draft)
    expect_same(got, specmini.residual(target, draft), f"target {target}, draft {draft}")


def same_as_specmini_residual(fn):
    for target, draft in random_pairs(3):
        got = distribution_of(fn, target, draft)
        where = f"target {target.round(3)}, draft {draft.round(3)}"
        expect_same(got, specmini.residual(target, draft), where)


RESIDUAL_CASES = [
    ("A/B/C: the residual of the table above", abc_residual),
    ("a distribution (>= 0, sums to 1) on 200 random pairs", is_distribution),
    ("mass only where target > draft", only_where_target_exceeds),
    ("equal distributions: the target, not NaN", equal_pair),
    ("disjoint supports: the target", disjoint_pair),
    ("agrees with specmini.residual to 1e-12 on 200 random pairs", same_as_specmini_residual),
]


def check_residual(fn, strict=True):
    return grade(
        "residual", fn, RESIDUAL_CASES, strict, forbid=("residual", "specmini.decode.token_verify")
    )


# Exercise 2: step_distribution(target, proposal, scored_as) -> the exact output distribution of
# one step whose draft token is drawn from `proposal` but tested (and the residual computed) as if
# it came from `scored_as`. Correct code has proposal == scored_as. No specmini function computes
# it, so nothing is forbidden. The checks never write the answer out: they pin it down by what it
# must satisfy. A draft that always proposes one token x is accepted with probability
# min(1, target(x) / scored_as(x)) (the statement), else resampled from the residual; and a
# proposal that mixes tokens outputs the same mix of those one-token steps' outputs.


def one_token_step(target, scored_as, token):
    """The output of one step whose draft always proposes `token`: kept, or else the residual."""
    keep = min(1.0, target[token] / scored_as[token])
    return keep * np.eye(len(target))[token] + (1 - keep) * specmini.residual(target, scored_as)


def random_triples(seed, n=200):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        vocab = int(rng.integers(2, 8))
        yield rng.dirichlet(np.ones(vocab), size=3)


def correct_step_is_exact(fn):
    for target, draft in random_pairs(4, edge_cases=False):
        got = distribution_of(fn, target, draft, draft)
        expect_same(
            got, target, f"target {target.round(3)}, proposal = scored_as = {draft.round(3)}"
        )


def one_token_case(target, token, scored_as):
    def case(fn):
        got = distribution_of(fn, target, np.eye(len(target))[token], scored_as)
        expect_same(
            got, one_token_step(target, scored_as, token), f"always proposing token {token}"
        )

    return case


def one_token_random(fn):
    for target, _, scored_as in random_triples(5):
        for token in range(len(target)):
            got = distribution_of(fn, target, np.eye(len(target))[token], scored_as)
            triple = f"target {target.round(3)}, scored_as {scored_as.round(3)}"
            where = f"{triple}, always proposing token {token}"
            expect_same(got, one_token_step(target, scored_as, token), where)


def mixed_proposals(fn):
    for target, proposal, scored_as in random_triples(6):
        alone = [distribution_of(fn, target, e, scored_as) for e in np.eye(len(target))]
        got = distribution_of(fn, target, proposal, scored_as)
        triple = f"{target.round(3)}, {proposal.round(3)}, {scored_as.round(3)}"
        where = f"{triple}: not the proposal's mix of its one-token outputs"
        expect_same(got, proposal @ np.array(alone), where)


def swapped_bug(fn):
    alone = [distribution_of(fn, DRAFT, e, TARGET) for e in np.eye(3)]
    expect(
        not any(difference(a, one_token_step(DRAFT, TARGET, i)) for i, a in enumerate(alone)),
        "wrong for a draft that always proposes one token: see the cases above",
    )
    got = distribution_of(fn, DRAFT, DRAFT, TARGET)
    expect_same(got, DRAFT @ np.array(alone), "not the mix of its one-token outputs")


STEP_CASES = [
    ("proposal == scored_as: exactly the target, 200 random pairs", correct_step_is_exact),
    (
        "bug 2: a greedy draft scored as its softmax",
        one_token_case(np.array([0.6, 0.4]), 0, np.array([0.8, 0.2])),
    ),
    ("bug 2 fixed: scored as the one-hot", one_token_case(np.array([0.6, 0.4]), 0, np.eye(2)[0])),
    ("a draft that always proposes one token, 200 random triples", one_token_random),
    ("a mixed proposal outputs the mix, 200 random triples", mixed_proposals),
    ("bug 1: target and draft swapped in the test and the residual", swapped_bug),
]


def check_step_distribution(fn, strict=True):
    return grade("step_distribution", fn, STEP_CASES, strict)
