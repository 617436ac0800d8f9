"""The accept test and the residual: the classic exercise, the A/B/C example, exactness."""

import itertools

import numpy as np
import pytest

import specmini
from course.exact import chained_outcomes, round_outcomes
from course.toys import DRAFT_ABC, TARGET_ABC


def random_distributions(rng, n, vocab):
    """n random distributions over `vocab` tokens, some of them sparse or peaked."""
    probs = rng.dirichlet(np.full(vocab, 0.5), size=n)
    probs[rng.random((n, vocab)) < 0.2] = 0.0  # zeros, so supports differ now and then
    probs[probs.sum(-1) == 0, 0] = 1.0
    return probs / probs.sum(-1, keepdims=True)


# --- The classic exercise: speculative_accept(draft_tokens, p, q, r), p the target, q the draft.


def rows(vocab, values):
    """Uniform rows over `vocab` tokens with the given (step, token) -> probability overrides."""
    probs = np.full((len(values), vocab), 0.0)
    for step, (token, prob) in enumerate(values):
        probs[step, token] = prob
        others = [t for t in range(vocab) if t != token]
        probs[step, others] = (1 - prob) / len(others)
    return probs


def test_reference_example_second_token_rejected():
    target = rows(10, [(5, 0.6), (2, 0.1), (7, 0.5)])
    draft = rows(10, [(5, 0.3), (2, 0.5), (7, 0.5)])
    assert specmini.speculative_accept([5, 2, 7], target, draft, [0.5, 0.5, 0.5]) == [5]


def test_all_accepted_when_target_dominates():
    target = rows(4, [(1, 0.9), (2, 0.8), (3, 0.7)])
    draft = rows(4, [(1, 0.3), (2, 0.4), (3, 0.5)])
    assert specmini.speculative_accept([1, 2, 3], target, draft, [0.99, 0.99, 0.99]) == [1, 2, 3]


def test_first_token_rejected_gives_empty_prefix():
    target = rows(4, [(1, 0.1), (2, 0.9)])
    draft = rows(4, [(1, 0.9), (2, 0.1)])
    assert specmini.speculative_accept([1, 2], target, draft, [0.5, 0.0]) == []


def test_ratio_is_capped_at_one():
    target = rows(3, [(0, 0.9)])
    draft = rows(3, [(0, 0.1)])  # ratio 9, capped to 1: even u = 1 is accepted
    assert specmini.speculative_accept([0], target, draft, [1.0]) == [0]


def test_halts_at_first_rejection_mid_sequence():
    # Token 3 is rejected; token 4 would be accepted on its own, but is never considered.
    target = rows(5, [(1, 0.5), (2, 0.5), (3, 0.1), (4, 0.9)])
    draft = rows(5, [(1, 0.5), (2, 0.5), (3, 0.9), (4, 0.1)])
    uniforms = [0.2, 0.2, 0.5, 0.0]
    assert specmini.speculative_accept([1, 2, 3, 4], target, draft, uniforms) == [1, 2]


# --- The A/B/C example: target (0.6, 0.3, 0.1), draft (0.4, 0.5, 0.1).

A, B, C = 0, 1, 2


def test_abc_token_b_is_accepted_with_probability_0_6():
    accept = lambda u: specmini.speculative_accept([B], [TARGET_ABC], [DRAFT_ABC], [u])  # noqa: E731
    assert accept(0.6) == [B] and accept(0.59) == [B]
    assert accept(0.6 + 1e-9) == [] and accept(0.7) == []  # r = 0.7 rejects B


def test_abc_residual_and_alpha():
    np.testing.assert_allclose(specmini.residual(TARGET_ABC, DRAFT_ABC), [1, 0, 0], atol=1e-15)
    assert specmini.acceptance_rate(TARGET_ABC, DRAFT_ABC) == pytest.approx(0.8, abs=1e-15)
    tv = 0.5 * np.abs(TARGET_ABC - DRAFT_ABC).sum()
    assert specmini.acceptance_rate(TARGET_ABC, DRAFT_ABC) == pytest.approx(1 - tv, abs=1e-15)


# --- Exactness, analytically.


def acceptance_probability(token, target, draft):
    """P(accept) for `token`, read off specmini's own accept test: the largest accepted u."""
    ratio = min(1.0, target[token] / draft[token])
    assert specmini.speculative_accept([token], [target], [draft], [ratio]) == [token]
    if ratio < 1:
        assert specmini.speculative_accept([token], [target], [draft], [ratio + 1e-12]) == []
    return ratio


def one_step_distribution(target, draft):
    """Exact output of one step: P(x) = draft(x) P(accept x) + P(reject) residual(x)."""
    accepted = np.array(
        [
            d * acceptance_probability(x, target, draft) if d > 0 else 0.0
            for x, d in enumerate(draft)
        ]
    )
    return accepted + (1 - accepted.sum()) * specmini.residual(target, draft)


def test_one_step_output_distribution_is_the_target():
    rng = np.random.default_rng(0)
    targets, drafts = random_distributions(rng, 300, 6), random_distributions(rng, 300, 6)
    for target, draft in zip(targets, drafts, strict=True):
        np.testing.assert_allclose(one_step_distribution(target, draft), target, atol=1e-12)


def test_the_analytic_check_can_fail():
    # Swapping the roles of target and draft gives back the draft, not the target.
    out = one_step_distribution(DRAFT_ABC, TARGET_ABC)
    assert np.abs(out - TARGET_ABC).max() > 0.1


def sequence_distribution(target_rows, draft_rows, first, k, length):
    """Exact distribution of the first `length` tokens, rounds chained as specmini.generate does:
    course.exact's round, its accept test read off specmini's own (acceptance_probability)."""

    def rounds(text, remaining):
        drafts = min(k, remaining - 1)  # the budget rule of specmini.generate
        return round_outcomes(target_rows, draft_rows, text[-1], drafts, acceptance_probability)

    return chained_outcomes(rounds, first, length)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rounds_with_bonus_and_correction_paths_reproduce_the_target_joint(k, seed):
    rng = np.random.default_rng(seed)
    target_table, draft_table = random_distributions(rng, 3, 3), random_distributions(rng, 3, 3)
    draft_table[:, :] = 0.5 * draft_table + 0.5 * target_table  # close enough to reach bonuses
    exact = sequence_distribution(target_table, draft_table, 0, k, 4)
    for seq in itertools.product(range(3), repeat=4):
        want = np.prod([target_table[a, b] for a, b in zip((0,) + seq[:-1], seq, strict=True)])
        assert exact.get(seq, 0.0) == pytest.approx(want, abs=1e-12)
    assert sum(exact.values()) == pytest.approx(1.0, abs=1e-12)


# --- Degenerate cases.


def test_equal_distributions_accept_everything_and_residual_is_defined():
    target = np.array([0.2, 0.3, 0.5])
    assert specmini.acceptance_rate(target, target) == pytest.approx(1.0)
    np.testing.assert_array_equal(specmini.residual(target, target), target)  # no NaN
    assert specmini.speculative_accept([0, 1, 2], [target] * 3, [target] * 3, [1, 1, 1]) == [
        0,
        1,
        2,
    ]


def test_near_one_hot_rows():
    target = np.array([1 - 2e-12, 1e-12, 1e-12])
    draft = np.array([1e-12, 1 - 2e-12, 1e-12])
    np.testing.assert_allclose(one_step_distribution(target, draft), target, atol=1e-12)
    residual = specmini.residual(target, draft)
    assert np.all(np.isfinite(residual)) and residual.argmax() == 0


def test_disjoint_supports_have_alpha_zero_and_still_give_the_target():
    target, draft = np.array([0.5, 0.5, 0.0, 0.0]), np.array([0.0, 0.0, 0.3, 0.7])
    assert specmini.acceptance_rate(target, draft) == 0.0
    assert specmini.speculative_accept([2], [target], [draft], [1e-9]) == []
    np.testing.assert_allclose(specmini.residual(target, draft), target)
    np.testing.assert_allclose(one_step_distribution(target, draft), target, atol=1e-15)


def test_residual_works_row_by_row():
    rng = np.random.default_rng(3)
    targets, drafts = random_distributions(rng, 5, 4), random_distributions(rng, 5, 4)
    batch = specmini.residual(targets, drafts)
    for i in range(5):
        np.testing.assert_allclose(batch[i], specmini.residual(targets[i], drafts[i]))


# --- Bad input reaches a clear ValueError, not an IndexError or NaN (issue 11).

PAIR = np.array([[0.5, 0.5]])


@pytest.mark.parametrize("temperature", [0, 0.5, 1.0])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_probabilities_refuse_non_finite_logits(bad, temperature):
    with pytest.raises(ValueError, match="finite"):
        specmini.probabilities([bad, 1.0, 2.0], temperature)
    with pytest.raises(ValueError, match="finite"):
        specmini.probabilities([[0.0, 1.0], [bad, 1.0]], temperature)


def test_a_large_negative_logit_forbids_a_token_up_to_high_temperatures():
    # -1e4 below the others: exp(-1e4 / T) is exactly 0 while 1e4 / T > 745, so for T < ~13.
    assert specmini.probabilities([-1e4, 0.0, 0.0], 10.0)[0] == 0.0
    assert 0 < specmini.probabilities([-1e4, 0.0, 0.0], 20.0)[0] < 1e-200
    assert specmini.probabilities([-1e4, 0.0, 0.0], 0)[0] == 0.0


@pytest.mark.parametrize(
    "tokens, target, draft, uniforms",
    [
        ([0, 1], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]),  # 1-D: no row per token
        ([0], [[0.5, 0.5]], [[0.5, 0.5]], [[0.5]]),  # uniforms of the wrong shape
        ([0], [PAIR], [PAIR], [0.5]),  # 3-D
        ([0, 1], [PAIR, PAIR], [PAIR, PAIR], [0.5, 0.5]),  # 3-D, two rows
    ],
)
def test_speculative_accept_refuses_probabilities_that_are_not_one_row_per_token(
    tokens, target, draft, uniforms
):
    with pytest.raises(ValueError, match="one row per token"):
        specmini.speculative_accept(tokens, target, draft, uniforms)


@pytest.mark.parametrize("token", [0.0, 0.7, 1.7, True, False, "0", None, np.float64(1.0), 2, -1])
def test_speculative_accept_refuses_what_is_not_a_token_id(token):
    with pytest.raises(ValueError, match="token id"):
        specmini.speculative_accept([token], PAIR, PAIR, [0.5])


def test_speculative_accept_takes_numpy_integers_and_returns_ints():
    accepted = specmini.speculative_accept(
        np.array([1, 0]), [[0.5, 0.5]] * 2, [[0.5, 0.5]] * 2, [1, 1]
    )
    assert accepted == [1, 0] and all(type(t) is int for t in accepted)
    assert specmini.speculative_accept([], np.zeros((0, 2)), np.zeros((0, 2)), []) == []


def test_every_draft_token_is_checked_even_after_a_rejection():
    # The first draft is rejected (u = 1 > 0.1 / 0.9); the second is still checked, not skipped.
    target, draft = [[0.1, 0.9], [0.5, 0.5]], [[0.9, 0.1], [1.0, 0.0]]
    assert specmini.speculative_accept([0, 0], target, draft, [1.0, 0.5]) == []
    with pytest.raises(ValueError, match="token id"):
        specmini.speculative_accept([0, 7], target, draft, [1.0, 0.5])
    with pytest.raises(ValueError, match="probability 0"):
        specmini.speculative_accept([0, 1], target, draft, [1.0, 0.5])
