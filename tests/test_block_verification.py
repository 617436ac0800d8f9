"""Block verification (Sun et al., ICLR 2025): the paper's example by hand, exactness by exact
enumeration (and a broken rule caught by the same check), never fewer tokens per round than
specmini's token-by-token test, and the sampled output against the target by chi-square."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

import specmini
from course import block_verification as bv
from course.exact import bigram_joint, chained_outcomes, round_outcomes
from course.toys import (
    DRAFT_ABC,
    TARGET_ABC,
    TableModel,
    bigram_pair,
    constant_model,
    total_variation,
)

# The paper's example: tokens a (0) and b (1), models that ignore the context, K = 2.
BINARY_TARGET = np.tile([1 / 3, 2 / 3], (2, 1))  # row c: the next token's distribution after c
BINARY_DRAFT = np.tile([2 / 3, 1 / 3], (2, 1))
ABC_TARGET, ABC_DRAFT = np.tile(TARGET_ABC, (3, 1)), np.tile(DRAFT_ABC, (3, 1))
PAIRS = {"binary": (BINARY_TARGET, BINARY_DRAFT), "A/B/C": (ABC_TARGET, ABC_DRAFT)}


def random_tables(rng, vocab):
    """A bigram target and draft over `vocab` tokens, with zeros so that supports differ."""
    tables = rng.dirichlet(np.full(vocab, 0.5), size=(2, vocab))
    tables[rng.random(tables.shape) < 0.2] = 0.0
    tables[..., 0] += tables.sum(-1) == 0  # a row left empty puts its mass on token 0
    return tables / tables.sum(-1, keepdims=True)


def rows_of(block, target_table, draft_table, last=0):
    """The K + 1 target rows and K draft rows of a block drafted after `last`."""
    contexts = [last, *block]
    return target_table[contexts], draft_table[contexts[:-1]]


def tokens_per_round(outcomes):
    return sum(len(tokens) * prob for tokens, prob in outcomes.items())


def chained(target_table, draft_table, k, length, **rule):
    """Block-verified rounds chained from token 0, as specmini.generate chains its rounds."""
    return chained_outcomes(bv.block_rounds(target_table, draft_table, k, **rule), 0, length)


# --- The paper's example, by hand.

# block: weights p_0..p_2, acceptance h_0..h_2, drafts kept on average (token by token, block)
HAND = {
    (0, 0): ([1, "1/2", "1/4"], [1, 0, "1/4"], "3/4", "1/2"),
    (0, 1): ([1, "1/2", 1], [1, 0, 1], 1, 2),
    (1, 0): ([1, 1, "1/2"], [1, 1, "1/2"], "3/2", "3/2"),
    (1, 1): ([1, 1, 1], [1, 1, 1], 2, 2),
}


def fractions(values):
    return np.array([float(Fraction(v)) for v in values])


@pytest.mark.parametrize("block", HAND)
def test_the_paper_example_by_hand(block):
    weights, h, token_kept, block_kept = HAND[block]
    rows = rows_of(block, BINARY_TARGET, BINARY_DRAFT)
    np.testing.assert_allclose(bv.prefix_weights(block, *rows), fractions(weights), atol=1e-15)
    np.testing.assert_allclose(bv.acceptance_probabilities(block, *rows), fractions(h), atol=1e-15)
    lengths = bv.accepted_length_distribution(bv.acceptance_probabilities(block, *rows))
    assert lengths @ np.arange(3) == pytest.approx(float(Fraction(block_kept)), abs=1e-12)
    ratios = np.minimum(1, rows[0][range(2), block] / rows[1][range(2), block])
    assert np.cumprod(ratios).sum() == pytest.approx(float(Fraction(token_kept)), abs=1e-12)


def test_the_paper_example_keeps_11_9_drafts_against_10_9():
    token = tokens_per_round(round_outcomes(BINARY_TARGET, BINARY_DRAFT, 0, 2))
    block = tokens_per_round(bv.block_round_outcomes(BINARY_TARGET, BINARY_DRAFT, 0, 2))
    # the paper counts drafts kept; a round adds one token of the target's to them
    assert token - 1 == pytest.approx(10 / 9, abs=1e-12)
    assert block - 1 == pytest.approx(11 / 9, abs=1e-12)


# --- Exactness, by exact enumeration.


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("pair", PAIRS)
def test_rounds_chained_give_the_target_joint(pair, k):
    target_table, draft_table = PAIRS[pair]
    exact = chained(target_table, draft_table, k, 4)
    assert sum(exact.values()) == pytest.approx(1.0, abs=1e-12)
    assert total_variation(exact, bigram_joint(target_table, 0, 4)) < 1e-12


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("vocab, seed", [(2, 0), (3, 1), (3, 2), (4, 3)])
def test_rounds_chained_give_the_target_joint_on_random_bigram_pairs(vocab, seed, k):
    target_table, draft_table = random_tables(np.random.default_rng(seed), vocab)
    exact = chained(target_table, draft_table, k, 4)
    for seq in itertools.product(range(vocab), repeat=4):
        want = np.prod([target_table[a, b] for a, b in zip((0, *seq[:-1]), seq, strict=True)])
        assert exact.get(seq, 0.0) == pytest.approx(want, abs=1e-12)


def unweighted_residual(tau, drafts, target_rows, draft_rows):
    """Broken: after a rejection, notebook 03's residual, forgetting the prefix's weight."""
    if tau == len(drafts):
        return np.asarray(target_rows)[tau]
    return specmini.residual(target_rows[tau], draft_rows[tau])


def test_the_check_can_fail():
    # Keeping each prefix with its weight alone (h_i = p_i) keeps more, and is biased.
    for pair, (target_table, draft_table) in PAIRS.items():
        broken = chained(target_table, draft_table, 2, 4, acceptance=bv.prefix_weights)
        assert total_variation(broken, bigram_joint(target_table, 0, 4)) > 0.05, pair
    # A residual without the weight: wrong only where the weight is below 1 at a prefix that
    # can be kept and its weighted residual differs in shape: on some pairs only (this one).
    target_table, draft_table = random_tables(np.random.default_rng(4), 3)
    broken = chained(target_table, draft_table, 2, 4, last_token=unweighted_residual)
    assert total_variation(broken, bigram_joint(target_table, 0, 4)) > 1e-3


def test_one_draft_is_specmini_round():
    rng = np.random.default_rng(4)
    for vocab in (2, 3, 5):
        target_table, draft_table = random_tables(rng, vocab)
        for last in range(vocab):
            token = round_outcomes(target_table, draft_table, last, 1)
            block = bv.block_round_outcomes(target_table, draft_table, last, 1)
            assert total_variation(token, block) < 1e-12


def test_the_walk_back_stops_as_its_distribution_says():
    # eta_i below or above h_i is all that matters: one uniform on each side, each weighted
    h = np.array([1.0, 0.3, 0.0, 0.6, 1.0, 0.25])
    got = np.zeros(len(h))
    for sides in itertools.product([True, False], repeat=len(h) - 1):
        prob = np.prod([hi if below else 1 - hi for hi, below in zip(h[1:], sides, strict=True)])
        uniforms = [
            hi / 2 if below else (1 + hi) / 2 for hi, below in zip(h[1:], sides, strict=True)
        ]
        got[bv.accepted_length(h, uniforms)] += prob
    np.testing.assert_allclose(got, bv.accepted_length_distribution(h), atol=1e-15)
    assert bv.accepted_length_distribution(h).sum() == pytest.approx(1.0, abs=1e-15)


# --- Never fewer tokens per round than the token-by-token test.


def test_gain_on_abc():
    gains = []
    for k in range(1, 6):
        token = tokens_per_round(round_outcomes(ABC_TARGET, ABC_DRAFT, 0, k))
        block = tokens_per_round(bv.block_round_outcomes(ABC_TARGET, ABC_DRAFT, 0, k))
        assert token == pytest.approx(specmini.expected_tokens(0.8, k), abs=1e-12)
        gains.append(block - token)
    assert gains[0] == pytest.approx(0.0, abs=1e-12)  # one draft: the same test
    assert min(gains[1:]) > 0.05  # 2.44 against 2.50 at K = 2, 3.36 against 3.68 at K = 4


@pytest.mark.parametrize("vocab", [2, 3, 5, 8])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_never_fewer_tokens_on_random_pairs(vocab, k):
    if vocab**k > 1000:
        k = int(np.log(1000) / np.log(vocab))  # keep the enumeration of blocks small
    rng = np.random.default_rng(100 * vocab + k)
    for _ in range(2):
        target_table, draft_table = random_tables(rng, vocab)
        for last in range(min(vocab, 3)):
            token = tokens_per_round(round_outcomes(target_table, draft_table, last, k))
            block = tokens_per_round(bv.block_round_outcomes(target_table, draft_table, last, k))
            assert block >= token - 1e-12


# --- Sampled, against a chi-square test (fixed seeds).


def chi_square_p(counts, probs):
    """Pearson's test of outcome counts against exact probabilities, both {outcome: value}.
    Outcomes of probability 0 must never occur; those expected fewer than 5 times are pooled,
    as the test's approximation asks."""
    assert all(probs.get(key, 0.0) > 0 for key, n in counts.items() if n), "impossible outcome"
    n, keys = sum(counts.values()), [key for key, p in probs.items() if p > 0]
    observed = np.array([counts.get(key, 0) for key in keys], dtype=float)
    expected = np.array([probs[key] for key in keys]) * n
    rare = expected < 5
    if rare.any():  # pooled into one cell
        observed = np.append(observed[~rare], observed[rare].sum())
        expected = np.append(expected[~rare], expected[rare].sum())
    return chisquare(observed, expected).pvalue


def test_sampled_rounds_follow_the_exact_round():
    target_table, draft_table = random_tables(np.random.default_rng(5), 3)
    exact = bv.block_round_outcomes(target_table, draft_table, 0, 2)
    rng, counts = np.random.default_rng(6), dict.fromkeys(exact, 0)
    for _ in range(5_000):
        drafts = [specmini.sample(draft_table[0], rng)]
        drafts.append(specmini.sample(draft_table[drafts[0]], rng))
        rows = rows_of(drafts, target_table, draft_table)
        kept, last = bv.block_verify(drafts, *rows, 1 - rng.random(2))
        counts[(*kept, specmini.sample(last, rng))] += 1
    assert chi_square_p(counts, exact) > 1e-3


def table_model(table):
    """A bigram TableModel whose rows are `table` at temperature 1 (-1e4: probability 0)."""
    return TableModel(np.where(table > 0, np.log(np.where(table > 0, table, 1.0)), -1e4))


def sampled_texts(target_table, draft_table, runs=1500):
    """How often each 3-token text comes out of block-verified decoding (K = 2), one seed a run."""
    target, draft, counts = table_model(target_table), table_model(draft_table), {}
    for seed in range(runs):
        text = tuple(bv.generate(target, draft, [0], 3, k=2, seed=seed).tokens)
        counts[text] = counts.get(text, 0) + 1
    return counts


@pytest.mark.parametrize("pair", [*PAIRS, "random"])
def test_generate_samples_the_target(pair):
    tables = PAIRS.get(pair) or random_tables(np.random.default_rng(7), 3)
    assert chi_square_p(sampled_texts(*tables), bigram_joint(tables[0], 0, 3)) > 1e-3


def test_the_chi_square_test_can_fail(monkeypatch):
    monkeypatch.setattr(bv, "acceptance_probabilities", bv.prefix_weights)  # h_i = p_i
    counts = sampled_texts(BINARY_TARGET, BINARY_DRAFT)
    assert chi_square_p(counts, bigram_joint(BINARY_TARGET, 0, 3)) < 1e-6


def test_generate_keeps_more_than_specmini_on_the_paper_example():
    target, draft = constant_model([1 / 3, 2 / 3]), constant_model([2 / 3, 1 / 3])
    per_round = {}
    for name, decode in [("token", specmini.generate), ("block", bv.generate)]:
        rounds = decode(target, draft, [0], 6000, k=2, seed=8).rounds
        full = [r.accepted + 1 for r in rounds if r.drafted == 2]  # not cut by the budget
        per_round[name] = (np.mean(full), np.std(full) / np.sqrt(len(full)))
    for name, want in [("token", 19 / 9), ("block", 20 / 9)]:
        mean, standard_error = per_round[name]
        assert abs(mean - want) < 4 * standard_error, (name, mean)
    assert per_round["block"][0] > per_round["token"][0]


def test_one_draft_is_specmini_token_test_in_specmini_loop():
    # K = 1: h_1 = p_1 = min(1, target / draft) and the residual at p_0 = 1 is notebook 03's, so
    # in the same loop with the same randomness the two rules give the same tokens and rounds.
    for seed in range(4):
        target, draft = bigram_pair(vocab_size=5, quality=0.5, seed=seed, spread=1.5)
        for temperature in (0.5, 1.0):
            block = bv.generate(target, draft, [0], 60, k=1, temperature=temperature, seed=seed)
            token = specmini.generate(target, draft, [0], 60, 1, temperature, seed)
            assert block.tokens == token.tokens and block.rounds == token.rounds


# --- Bad input.


def test_block_verification_refuses_bad_input():
    target_rows, draft_rows = rows_of((0, 1), BINARY_TARGET, BINARY_DRAFT)
    with pytest.raises(ValueError, match="K \\+ 1 target rows"):
        bv.prefix_weights((0, 1), target_rows[:2], draft_rows)
    with pytest.raises(ValueError, match="one draft row per draft"):
        bv.acceptance_probabilities((0, 1), target_rows, draft_rows[:1])
    with pytest.raises(ValueError, match="draft probability 0"):
        bv.prefix_weights((0,), target_rows[:2], [[0.0, 1.0]])
    with pytest.raises(ValueError, match="token id"):
        bv.prefix_weights((2,), target_rows[:2], draft_rows[:1])


def test_temperature_0_gives_the_target_greedy_text_and_specmini_rounds():
    # one-hot rows: a prefix's weight is 1 or 0, so both rules keep the same drafts
    for seed in range(3):
        target, draft = bigram_pair(vocab_size=6, quality=0.5, seed=seed)
        block = bv.generate(target, draft, [0], 40, k=3, temperature=0)
        token = specmini.generate(target, draft, [0], 40, k=3, temperature=0)
        assert block.tokens == specmini.autoregressive(target, [0], 40, temperature=0).tokens
        assert block.rounds == token.rounds
