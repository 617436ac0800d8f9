"""Automatic checks for the exercises of notebook 03: the residual, and what one step outputs.

Each `check_*` runs a learner's function through a list of cases and prints one line per case
(the `grade` loop of grading.py). A stub that still raises NotImplementedError counts as "not
attempted yet", not as a failure.
"""

import numpy as np
from grading import as_array, grade
from toys import DRAFT_ABC as DRAFT  # the course's A/B/C pair
from toys import TARGET_ABC as TARGET

import specmini


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


# Exercise 1: residual(target, draft) -> norm(max(0, target - draft)), the target if no excess.


def abc_residual(fn):
    got = as_array(fn(TARGET.copy(), DRAFT.copy()))
    return None if np.allclose(got, [1, 0, 0]) else f"got {got.round(4)}, expected [1. 0. 0.]"


def is_distribution(fn):
    for target, draft in random_pairs(1):
        got = as_array(fn(target, draft))
        if got.shape != target.shape or not np.allclose(got.sum(), 1) or np.any(got < 0):
            return f"for target {target.round(3)}, draft {draft.round(3)}: got {got.round(4)}"
    return None


def only_where_target_exceeds(fn):
    for target, draft in random_pairs(2):
        got = as_array(fn(target, draft))
        if np.any(target > draft) and np.any(got[target <= draft] > 0):
            return f"mass on tokens where draft >= target: {got.round(4)}"
    return None


def equal_pair(fn):
    got = as_array(fn(TARGET.copy(), TARGET.copy()))
    if np.any(np.isnan(got)):
        return f"got {got} (0 / 0): with no excess anywhere, return the target itself"
    return None if np.allclose(got, TARGET) else f"got {got.round(4)}, expected the target"


def disjoint_pair(fn):
    target, draft = np.array([0.5, 0.5, 0.0, 0.0]), np.array([0.0, 0.0, 0.3, 0.7])
    got = as_array(fn(target, draft))
    return None if np.allclose(got, target) else f"got {got.round(4)}, expected the target"


def same_as_specmini_residual(fn):
    for target, draft in random_pairs(3):
        got, want = as_array(fn(target, draft)), specmini.residual(target, draft)
        if got.shape != want.shape or not np.allclose(got, want, atol=1e-12):
            return f"target {target.round(3)}, draft {draft.round(3)}: {got.round(4)} != {want}"
    return None


RESIDUAL_CASES = [
    ("A/B/C: the residual is (1, 0, 0)", abc_residual),
    ("a distribution (>= 0, sums to 1) on 200 random pairs", is_distribution),
    ("mass only where target > draft", only_where_target_exceeds),
    ("equal distributions: the target, not NaN", equal_pair),
    ("disjoint supports: the target", disjoint_pair),
    ("agrees with specmini.residual to 1e-12", same_as_specmini_residual),
]


def check_residual(fn, strict=True):
    return grade("residual", fn, RESIDUAL_CASES, strict)


# Exercise 2: step_distribution(target, proposal, scored_as) -> the exact output distribution of
# one step whose draft token is drawn from `proposal` but tested (and the residual computed) as if
# it came from `scored_as`. Correct code has proposal == scored_as.


def reference_step(target, proposal, scored_as):
    accept = np.minimum(1.0, target / np.where(scored_as > 0, scored_as, 1.0))
    kept = proposal * accept  # a proposal with mass where scored_as has none is not allowed
    return kept + (1 - kept.sum()) * specmini.residual(target, scored_as)


def correct_step_is_exact(fn):
    for target, draft in random_pairs(4, edge_cases=False):
        got = as_array(fn(target, draft, draft))
        if got.shape != target.shape or not np.allclose(got, target, atol=1e-12):
            return f"proposal == scored_as == {draft.round(3)}: {got.round(4)} != {target.round(4)}"
    return None


def greedy_bug(fn):
    got = as_array(fn(np.array([0.6, 0.4]), np.array([1.0, 0.0]), np.array([0.8, 0.2])))
    return None if np.allclose(got, [0.75, 0.25]) else f"got {got.round(4)}, expected [0.75 0.25]"


def greedy_fixed(fn):
    one_hot = np.array([1.0, 0.0])
    got = as_array(fn(np.array([0.6, 0.4]), one_hot, one_hot))
    return None if np.allclose(got, [0.6, 0.4]) else f"got {got.round(4)}, expected [0.6 0.4]"


def swapped_bug(fn):
    got, want = as_array(fn(DRAFT, DRAFT, TARGET)), reference_step(DRAFT, DRAFT, TARGET)
    return None if np.allclose(got, want) else f"got {got.round(4)}, expected {want.round(4)}"


def random_triples(fn):
    rng = np.random.default_rng(5)
    for _ in range(200):
        vocab = int(rng.integers(2, 8))
        target, proposal, scored_as = rng.dirichlet(np.ones(vocab), size=3)
        got, want = (
            as_array(fn(target, proposal, scored_as)),
            reference_step(target, proposal, scored_as),
        )
        if got.shape != want.shape or not np.allclose(got, want, atol=1e-12):
            return f"{target.round(3)}, {proposal.round(3)}, {scored_as.round(3)}: {got.round(4)}"
    return None


STEP_CASES = [
    ("proposal == scored_as: exactly the target, 200 random pairs", correct_step_is_exact),
    ("greedy draft scored as (0.8, 0.2): (0.75, 0.25)", greedy_bug),
    ("greedy draft scored as greedy: (0.6, 0.4)", greedy_fixed),
    ("target and draft swapped in the test and the residual", swapped_bug),
    ("200 random (target, proposal, scored_as) triples", random_triples),
]


def check_step_distribution(fn, strict=True):
    return grade("step_distribution", fn, STEP_CASES, strict)
