"""course/going_further.py (notebook 07): the exactness claims, each against a broken variant.

Numpy only, except the numpy twin's tests, which read the offline pair's weights with
checkpoints.load.
"""

import pathlib

import numpy as np
import pytest

import specmini
from course import checkpoints, exact
from course import going_further as gf
from course.numpy_gpt2 import NumpyGPT2
from course.toys import TableModel, bigram_pair, total_variation

ROOT = pathlib.Path(__file__).resolve().parent.parent


def trust(drafted, target_rows, draft_rows, uniforms):
    return drafted  # broken: no accept test


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_decode_with_a_draft_model_is_specmini_generate(k, temperature):
    target, draft = bigram_pair(5, quality=0.5, seed=1, spread=1.5)
    for seed in range(4):
        want = specmini.generate(target, draft, [0], 50, k=k, temperature=temperature, seed=seed)
        got = gf.decode(target, gf.model_drafts(draft), [0], 50, k, temperature, seed=seed)
        assert got.tokens == want.tokens and got.rounds == want.rounds


def test_lookup_follows_hugging_face_rule():
    assert gf.lookup([1, 2, 3, 9, 1, 2, 3, 7, 1, 2, 3], 2) == [9, 1]  # first occurrence wins
    assert gf.lookup([5, 6, 7, 5, 6], 3, max_ngram=3) == [7, 5, 6]  # longest n-gram first
    assert gf.lookup([4, 5, 4], 3, max_ngram=1) == [5, 4]
    assert gf.lookup([1, 2, 3], 4) == []  # nothing earlier: no draft
    assert gf.lookup([7], 4) == []


def test_prompt_lookup_keeps_the_target_and_trusting_it_does_not():
    target, _ = bigram_pair(vocab_size=4, quality=0.3, seed=3, spread=1.0)
    propose = gf.lookup_drafts(4, max_ngram=2)
    good = gf.decode(target, propose, [0], 3000, 3, 1.0, seed=0)
    bad = gf.decode(target, propose, [0], 3000, 3, 1.0, seed=0, test=trust)
    assert gf.transition_z(good.tokens, 0, target) < 4.5
    assert gf.transition_z(bad.tokens, 0, target) > 8
    assert sum(r.accepted for r in good.rounds) > 0  # it did draft and keep tokens


def test_greedy_lookup_is_target_greedy():
    target, _ = bigram_pair(6, quality=0.5, seed=2, spread=1.5)
    plain = specmini.autoregressive(target, [0], 60, temperature=0)
    looked_up = gf.decode(target, gf.lookup_drafts(6), [0], 60, 4, temperature=0)
    assert looked_up.tokens == plain.tokens


def toy_tree_pair():
    rng = np.random.default_rng(0)
    target = rng.normal(0, 1.5, (3, 3))
    draft = 0.5 * target + 0.5 * rng.normal(0, 1.5, (3, 3))
    draft[np.arange(3), rng.integers(0, 3, 3)] = -1e4  # zeros: fewer branches to enumerate
    return TableModel(target), TableModel(draft)


@pytest.mark.parametrize("width, depth", [(1, 2), (2, 1), (2, 2), (3, 1)])
def test_specinfer_rule_is_exact_by_enumeration(width, depth):
    target, draft = toy_tree_pair()
    rounds = gf.tree_round_outcomes(target, draft, width, depth)
    chained = exact.chained_outcomes(rounds, 0, 3)
    assert total_variation(chained, exact.bigram_joint(target, 0, 3)) < 1e-12


def test_without_the_residual_update_it_is_not():
    target, draft = toy_tree_pair()
    rounds = gf.tree_round_outcomes(target, draft, 2, 2, update=False)
    chained = exact.chained_outcomes(rounds, 0, 3)
    assert total_variation(chained, exact.bigram_joint(target, 0, 3)) > 0.05


def test_enumeration_is_exact_on_a_small_program():
    def program(chance):
        first = chance.draw([0.25, 0.75])
        return (first, chance.coin(0.5)) if first else (first, None)

    out = exact.enumerate_outcomes(program)
    assert out == pytest.approx({(0, None): 0.25, (1, True): 0.375, (1, False): 0.375})


def test_positional_draws_follow_the_distribution():
    probs = np.array([0.1, 0.0, 0.6, 0.3])
    chance = gf.Positional(seed=0, size=20000)
    draws = [chance.draw(probs, i, "draft") for i in range(20000)]
    freq = np.bincount(draws, minlength=4) / len(draws)
    assert freq[1] == 0 and np.allclose(freq, probs, atol=0.015)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_ssd_gives_the_tokens_of_speculative_decoding(temperature):
    target, draft = bigram_pair(vocab_size=5, quality=0.6, seed=1)
    for seed in range(3):
        chance = gf.Positional(seed=seed, size=400)
        plain = gf.decode(target, gf.model_drafts(draft), [0], 150, 3, temperature, chance=chance)
        cache = gf.SpeculationCache(draft, [1, 1, 1, 2])
        chance = gf.Positional(seed=seed, size=400)
        ssd = gf.decode(target, cache, [0], 150, 3, temperature, chance=chance)
        assert ssd.tokens == plain.tokens and any(cache.hits)


def test_a_cache_keyed_without_the_target_token_changes_the_tokens():
    target, draft = bigram_pair(vocab_size=5, quality=0.6, seed=1)
    plain = gf.decode(target, gf.model_drafts(draft), [0], 150, 3, 1.0, chance=gf.Positional(0))
    cache = gf.SpeculationCache(draft, [1, 1, 1, 2], key=len)
    bad = gf.decode(target, cache, [0], 150, 3, 1.0, chance=gf.Positional(0))
    assert bad.tokens != plain.tokens


def test_ssd_with_positional_randomness_samples_the_target():
    target, draft = bigram_pair(vocab_size=4, quality=0.3, seed=3, spread=1.0)
    chance = gf.Positional(seed=0, size=3000)
    g = gf.decode(target, gf.SpeculationCache(draft, [1] * 4), [0], 2500, 3, 1.0, chance=chance)
    assert gf.transition_z(g.tokens, 0, target) < 4.5


def test_dynamic_k_follows_the_schedule_and_stays_exact():
    target, draft = bigram_pair(vocab_size=4, quality=0.3, seed=3, spread=1.0)
    g, ks = gf.dynamic_k_trace(target, draft, [0], 3000, 4, gf.hf_schedule(), 1.0, 0)
    for (k, r), k_next in zip(zip(ks, g.rounds, strict=True), ks[1:], strict=False):
        assert k_next == (k + 2 if r.accepted == k else max(1, k - 1))
    assert gf.transition_z(g.tokens, 0, target) < 4.5
    broken = gf.decode(target, gf.model_drafts(draft), [0], 3000, 4, 1.0, seed=0,
                       schedule=gf.hf_schedule(), fallback=gf.target_fallback)  # fmt: skip
    assert gf.transition_z(broken.tokens, 0, target) > 4.5
    capped = gf.dynamic_k_trace(target, draft, [0], 500, 4, gf.hf_schedule(3), 1.0, 0)[1]
    assert max(capped[1:]) <= 3 and capped[0] == 4  # the first round uses the starting K


def test_event_clock_by_hand():
    rounds = [specmini.Round(4, 4, "bonus")] * 3
    verify = lambda n: 10.0  # noqa: E731
    assert gf.event_clock(rounds, None, 1.0, verify) == 3 * (4 + 10)
    assert gf.event_clock(rounds, None, 1.0, verify, host=2.0) == 3 * (4 + 10 + 2)
    # every round a hit, preparation (5 steps) shorter than verification: drafting vanishes
    assert gf.event_clock(rounds, [False, True, True], 1.0, verify, [5] * 3) == 4 + 3 * 10
    # a miss drafts after the verification; preparing longer than verifying delays the next
    assert gf.event_clock(rounds, [False, False, True], 1.0, verify, [5] * 3) == 4 + 10 + 4 + 20
    assert gf.event_clock(rounds, [False, True, True], 1.0, verify, [12] * 3) == 4 + 12 + 12 + 10


def test_typical_acceptance_is_a_distribution_and_drifts():
    rng = np.random.default_rng(0)
    for t, d in rng.dirichlet(np.ones(6), size=(50, 2)):
        for eps in (0.3, 0.01):
            out = gf.typical_step(t, d, eps)
            assert np.isclose(out.sum(), 1) and np.all(out >= 0)
    t, d = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
    assert gf.drift_along([t], [d], lambda a, b: gf.typical_step(a, b, 0.1)) > 0.05


@pytest.fixture(scope="module")
def twin():
    return NumpyGPT2(checkpoints.load(ROOT / "models" / "pytarget"))


def test_twin_tree_pass_equals_one_pass_per_branch(twin):
    prefix = list(b"def f(x):\n    return")
    tree = gf.TokenTree()
    for token, parent in [(32, -1), (120, -1), (120, 0), (40, 0), (41, 1), (32, 2), (49, 2)]:
        tree.add(token, parent)
    rows = twin.tree_logits(prefix, tree, tree.attention())
    for branch in tree.branches():
        alone = twin(prefix + [tree.tokens[i] for i in branch], len(prefix) - 1)
        np.testing.assert_allclose(rows[[0] + [i + 1 for i in branch]], alone, atol=1e-10)
    causal = np.tril(np.ones((len(tree.tokens),) * 2, bool))
    flat = twin.tree_logits(prefix, tree, causal)
    assert np.abs(flat[3:] - rows[3:]).max() > 1e-3  # the broken mask mixes branches


def test_twin_cache_and_exits(twin):
    text, blocks = list(b"import os\nimport sys\n"), twin.config.n_layer
    full = twin.exit_logits(text, [2, blocks])  # an exit after every block is the model itself
    np.testing.assert_allclose(twin(text, 5), full[1][5:], atol=1e-10)
    other = text[:12] + [65]  # the cache keeps the common prefix and recomputes the rest
    exit_all = twin.exit_logits(other, [blocks])[0][12:]
    np.testing.assert_allclose(twin(other, 12), exit_all, atol=1e-10)
    assert not np.allclose(full[0], full[1])
