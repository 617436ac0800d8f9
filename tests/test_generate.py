"""The decoding loops: exact in distribution (Monte Carlo), exact greedy, budget, bad input."""

import inspect
import itertools
import re

import numpy as np
import pytest
from scipy import stats

import specmini
from course.toys import TableModel, bigram_pair, constant_model

VOCAB = 3


def target_joint(table, first, temperature, positions):
    """Exact probability of every token triple at `positions` of the target's own sampling."""
    transition = specmini.probabilities(table, temperature)
    state = np.eye(len(table))[first]
    marginals = [state := state @ transition for _ in range(positions[0] + 1)]
    start = marginals[-1]
    joint = {}
    for seq in itertools.product(range(len(table)), repeat=len(positions)):
        p = start[seq[0]]
        for a, b in itertools.pairwise(seq):
            p *= transition[a, b]
        joint[seq] = p
    return joint


def chi_square_pvalue(samples, joint):
    """Pearson's chi-square of observed tuples against `joint`, pooling cells expected below 5."""
    n = len(samples)
    observed = {seq: 0 for seq in joint}
    for seq in samples:
        observed[tuple(seq)] += 1
    big = [seq for seq in joint if joint[seq] * n >= 5]
    small = [seq for seq in joint if joint[seq] * n < 5]
    f_obs = [observed[s] for s in big] + ([sum(observed[s] for s in small)] if small else [])
    f_exp = [joint[s] * n for s in big] + ([sum(joint[s] for s in small) * n] if small else [])
    return stats.chisquare(f_obs, f_exp).pvalue


def sample_windows(target, draft, k, temperature, n, seed):
    """n runs of generate, each k + 3 tokens long: the first round can use all k drafts."""
    length = k + 3
    runs = [
        specmini.generate(
            target, draft, [0], length, k, temperature, seed=seed * 100_000 + i
        ).tokens
        for i in range(n)
    ]
    return np.array(runs), length


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("k", [1, 4, 8])
def test_generate_reproduces_the_target_joint_distribution(k, temperature):
    target, draft = bigram_pair(VOCAB, quality=0.5, seed=7, spread=1.5)
    runs, length = sample_windows(target, draft, k, temperature, n=2000, seed=k)
    # The first three tokens, and the last three, which straddle a round boundary.
    for positions in [(0, 1, 2), (length - 3, length - 2, length - 1)]:
        joint = target_joint(target.table, 0, temperature, positions)
        pvalue = chi_square_pvalue(runs[:, list(positions)], joint)
        assert pvalue > 1e-3, f"tokens at {positions} do not follow the target (p = {pvalue:.2g})"


def test_the_statistical_test_can_fail():
    # Same test, same seeds, but a broken sampler: the roles swapped, so output follows the draft.
    target, draft = bigram_pair(VOCAB, quality=0.5, seed=7, spread=1.5)
    runs, _ = sample_windows(draft, target, 4, 1.0, n=2000, seed=4)
    pvalue = chi_square_pvalue(runs[:, :3], target_joint(target.table, 0, 1.0, (0, 1, 2)))
    assert pvalue < 1e-6


def test_known_bug_greedy_draft_scored_with_softmax_probabilities():
    # Target (0.6, 0.4), draft (0.8, 0.2). A draft that always proposes its argmax but is scored
    # with its softmax probability accepts token 0 with 0.75 and else falls back to the residual
    # (0, 1): (0.75, 0.25). Drafting from the very distribution in the ratio gives (0.6, 0.4).
    target, draft = constant_model([0.6, 0.4]), constant_model([0.8, 0.2])
    firsts = [
        specmini.generate(target, draft, [0], 1 + 1, k=1, seed=s).tokens[0] for s in range(4000)
    ]
    share = np.mean(np.array(firsts) == 0)
    assert share == pytest.approx(0.6, abs=0.03)
    assert abs(share - 0.75) > 0.1
    buggy = min(1, 0.6 / 0.8) * 1.0  # the greedy draft proposes token 0 every time
    assert buggy == pytest.approx(0.75)


def test_disjoint_supports_still_give_the_target():
    target, draft = constant_model([0.5, 0.5, 0.0]), constant_model([0.0, 0.0, 1.0])
    out = specmini.generate(target, draft, [0], 2000, k=4, seed=0)
    assert all(r.accepted == 0 for r in out.rounds)
    counts = np.bincount(out.tokens, minlength=3)
    assert counts[2] == 0 and stats.chisquare(counts[:2]).pvalue > 1e-3


@pytest.mark.parametrize("temperature", [0, 0.3, 1.0, 2.5])
def test_equal_models_accept_every_draft_at_every_temperature(temperature):
    # Temperature reaches both models the same way: a draft equal to the target never misses.
    target, draft = bigram_pair(VOCAB, quality=1.0, seed=1, spread=1.5)
    out = specmini.generate(target, draft, [0], 50, k=4, temperature=temperature, seed=0)
    assert [r.ended_with for r in out.rounds] == ["bonus"] * 10
    assert len(out.tokens) == 50


def greedy_chain(table, first, n):
    tokens, token = [], first
    for _ in range(n):
        token = int(np.argmax(table[token]))
        tokens.append(token)
    return tokens


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("seed", range(5))
def test_temperature_zero_is_exact_greedy_whatever_the_draft(k, seed):
    target, draft = bigram_pair(8, quality=0.3, seed=seed, spread=1.5)
    want = greedy_chain(target.table, 0, 40)
    assert specmini.autoregressive(target, [0], 40, temperature=0, seed=seed).tokens == want
    out = specmini.generate(target, draft, [0], 40, k=k, temperature=0, seed=seed)
    assert out.tokens == want
    adversary = TableModel(-target.table)  # always drafts the target's least likely token
    assert specmini.generate(target, adversary, [0], 40, k=k, temperature=0).tokens == want


def test_temperature_zero_scales_to_gpt2_vocabularies():
    # One-hot rows over 50,257 tokens, without a vocab x vocab identity matrix (20 GB).
    logits = np.random.default_rng(0).normal(size=(3, 50257))
    probs = specmini.probabilities(logits, 0)
    assert probs.shape == logits.shape and np.array_equal(probs.sum(-1), np.ones(3))
    assert np.array_equal(probs.argmax(-1), logits.argmax(-1))
    assert specmini.probabilities([1.0, 3.0, 3.0], 0).tolist() == [0, 1, 0]  # ties: lowest id


@pytest.mark.parametrize("alpha_target", [0.3, 0.6, 0.9])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_mean_tokens_per_round_matches_expected_tokens(alpha_target, k):
    # Constant models: every position has the same alpha, as Leviathan et al.'s analysis assumes.
    target_probs = np.array([0.5, 0.3, 0.2])
    draft_probs = alpha_target * target_probs + (1 - alpha_target) * np.array([0.0, 0.0, 1.0])
    alpha = specmini.acceptance_rate(target_probs, draft_probs)
    out = specmini.generate(
        constant_model(target_probs), constant_model(draft_probs), [0], 5000, k, seed=k
    )
    per_round = np.array([r.accepted + 1 for r in out.rounds if r.drafted == k])
    standard_error = per_round.std() / np.sqrt(len(per_round))
    expected = specmini.expected_tokens(alpha, k)
    assert abs(per_round.mean() - expected) < 4 * standard_error


def test_exactly_max_new_tokens_and_reproducible():
    target, draft = bigram_pair(5, quality=0.5, seed=2, spread=1.5)
    for n in [0, 1, 2, 5, 17]:
        for k in [1, 4, 8]:
            out = specmini.generate(target, draft, [1, 2], n, k=k, seed=3)
            assert len(out.tokens) == n
            assert sum(r.accepted + 1 for r in out.rounds) == n
            assert all(r.drafted <= k for r in out.rounds)
            assert out.tokens == specmini.generate(target, draft, [1, 2], n, k=k, seed=3).tokens
        assert len(specmini.autoregressive(target, [1], n, seed=0).tokens) == n
    a = specmini.generate(target, draft, [0], 30, seed=1).tokens
    assert a != specmini.generate(target, draft, [0], 30, seed=2).tokens


def test_stop_token_ends_generation_early_and_is_kept():
    target = constant_model([0.1, 0.1, 0.8])
    out = specmini.generate(target, constant_model([1 / 3] * 3), [0], 100, k=4, seed=0, stop=1)
    assert out.tokens[-1] == 1 and 1 not in out.tokens[:-1] and len(out.tokens) < 100
    auto = specmini.autoregressive(target, [0], 100, seed=0, stop=1)
    assert auto.tokens[-1] == 1 and 1 not in auto.tokens[:-1]


def test_one_target_call_per_round_with_k_plus_one_rows():
    target, draft = bigram_pair(4, quality=0.5, seed=5, spread=1.5)
    out = specmini.generate(target, draft, [0, 1, 2], 12, k=4, seed=0)
    assert len(target.log) == len(out.rounds)
    for (length, start), r in zip(target.log, out.rounds, strict=True):
        assert length - start == r.drafted + 1  # prefix + drafts in, drafts + 1 rows out
    assert len(draft.log) == sum(r.drafted for r in out.rounds)


def test_token_ids_stay_in_the_vocabulary():
    rng = np.random.default_rng(0)
    for seed in range(20):
        vocab = int(rng.integers(2, 7))
        target, draft = bigram_pair(
            vocab, quality=0.5, seed=seed, spread=6.0
        )  # peaked, with tiny masses
        for temperature in [0, 0.1, 1, 5]:
            tokens = specmini.generate(target, draft, [0], 30, 3, temperature, seed=seed).tokens
            assert all(0 <= t < vocab for t in tokens)


# --- Bad input: a ValueError that names the problem, never a NaN or a crash deep in numpy.

GOOD = np.array([[0.5, 0.5]])


@pytest.mark.parametrize(
    "target, draft, uniforms, message",
    [
        ([[1.5, -0.5]], GOOD, [0.5], "negative"),
        ([[np.nan, 1.0]], GOOD, [0.5], "NaN"),
        ([[0.5, 0.6]], GOOD, [0.5], "sum to 1"),
        (GOOD, [[0.2, 0.3, 0.5]], [0.5], "shape"),
        (GOOD, GOOD, [1.5], "uniforms"),
        (GOOD, GOOD, [-0.1], "uniforms"),
        (GOOD, GOOD, [np.nan], "uniforms"),
        (GOOD, GOOD, [0.5, 0.5], "one row per token"),
    ],
)
def test_speculative_accept_rejects_bad_input(target, draft, uniforms, message):
    with pytest.raises(ValueError, match=message):
        specmini.speculative_accept([0] * len(uniforms), target, draft, uniforms)


def test_out_of_vocabulary_and_impossible_draft_tokens():
    with pytest.raises(ValueError, match="token id must be an integer in \\[0, 1\\], got 2"):
        specmini.speculative_accept([2], GOOD, GOOD, [0.5])
    with pytest.raises(ValueError, match="token id must be an integer in \\[0, 1\\], got -1"):
        specmini.speculative_accept([-1], GOOD, GOOD, [0.5])
    with pytest.raises(ValueError, match="probability 0"):
        specmini.speculative_accept([1], GOOD, [[1.0, 0.0]], [0.5])


def test_residual_and_alpha_reject_bad_input():
    with pytest.raises(ValueError, match="shape"):
        specmini.residual([0.5, 0.5], [1.0])
    with pytest.raises(ValueError, match="negative"):
        specmini.acceptance_rate([1.2, -0.2], [0.5, 0.5])
    with pytest.raises(ValueError, match="vocabulary"):
        specmini.residual([], [])


def test_decoding_rejects_bad_arguments():
    target, draft = bigram_pair(3, quality=0.5, seed=0, spread=1.5)
    with pytest.raises(ValueError, match="k must be"):
        specmini.generate(target, draft, [0], 5, k=0)
    with pytest.raises(ValueError, match="temperature"):
        specmini.generate(target, draft, [0], 5, temperature=-0.5)
    with pytest.raises(ValueError, match="temperature"):
        specmini.autoregressive(target, [0], 5, temperature=-1)
    with pytest.raises(ValueError, match="prompt"):
        specmini.generate(target, draft, [], 5)
    with pytest.raises(ValueError, match="max_new_tokens"):
        specmini.autoregressive(target, [0], -1)


@pytest.mark.parametrize(
    "bad_model, message",
    [
        (lambda tokens, start: np.zeros((len(tokens) - start + 1, 3)), "shape"),
        (lambda tokens, start: np.zeros(3), "shape"),
        (lambda tokens, start: np.zeros((len(tokens) - start, 0)), "shape"),
        (lambda tokens, start: np.full((len(tokens) - start, 3), np.nan), "NaN"),
        (lambda tokens, start: np.full((len(tokens) - start, 3), np.inf), "infinite"),
    ],
)
def test_models_that_misbehave_are_caught(bad_model, message):
    good, _ = bigram_pair(3, quality=0.5, seed=0, spread=1.5)
    with pytest.raises(ValueError, match=message):
        specmini.generate(bad_model, good, [0], 5)
    with pytest.raises(ValueError, match=message):
        specmini.generate(good, bad_model, [0], 5)
    with pytest.raises(ValueError, match=message):
        specmini.autoregressive(bad_model, [0], 5)


def test_target_and_draft_with_different_vocabularies():
    target = lambda tokens, start: np.zeros((len(tokens) - start, 3))  # noqa: E731, any token id
    _, draft = bigram_pair(4, quality=0.5, seed=0, spread=1.5)
    with pytest.raises(ValueError, match="differ in shape"):
        specmini.generate(target, draft, [0], 5)


# --- Token ids, counts and stop tokens (issue 11): integers only, refused rather than truncated.

NOT_TOKEN_IDS = [-1, 1.7, 1.0, "1", True, None]


@pytest.mark.parametrize("bad", NOT_TOKEN_IDS)
def test_prompts_must_hold_token_ids(bad):
    target, draft = bigram_pair(3, quality=0.5, seed=0, spread=1.5)
    with pytest.raises(ValueError, match="prompt"):
        specmini.generate(target, draft, [0, bad], 5)
    with pytest.raises(ValueError, match="prompt"):
        specmini.autoregressive(target, [bad], 5)
    assert target.calls == 0 and draft.calls == 0  # refused before any model call


def test_prompts_may_be_numpy_arrays_or_numpy_integers():
    target, draft = bigram_pair(3, quality=0.5, seed=0, spread=1.5)
    want = specmini.generate(target, draft, [0, 2], 6, seed=1).tokens
    assert specmini.generate(target, draft, np.array([0, 2]), 6, seed=1).tokens == want
    assert specmini.generate(target, draft, [np.int64(0), np.int32(2)], 6, seed=1).tokens == want


@pytest.mark.parametrize("bad", [3.0, 2.5, True, "3", None])
def test_max_new_tokens_and_k_must_be_integers(bad):
    target, draft = bigram_pair(3, quality=0.5, seed=0, spread=1.5)
    with pytest.raises(ValueError, match="max_new_tokens must be an integer"):
        specmini.generate(target, draft, [0], bad)
    with pytest.raises(ValueError, match="max_new_tokens must be an integer"):
        specmini.autoregressive(target, [0], bad)
    with pytest.raises(ValueError, match="k must be an integer"):
        specmini.generate(target, draft, [0], 5, k=bad)
    out = specmini.generate(target, draft, [0], np.int64(5), k=np.int64(2), seed=0)
    assert out.tokens == specmini.generate(target, draft, [0], 5, k=2, seed=0).tokens


def first_stop(tokens, stops):
    return next(i for i, token in enumerate(tokens) if token in stops)


@pytest.mark.parametrize("stop", [[1, 2], (1, 2), {1, 2}, np.array([1, 2]), range(1, 3)])
def test_stop_may_be_a_collection_of_token_ids(stop):
    # Token 0 is likely, tokens 1 and 2 each have probability 0.1: either one ends the text.
    target, draft = constant_model([0.8, 0.1, 0.1]), constant_model([1 / 3] * 3)
    for seed in range(10):
        spec = specmini.generate(target, draft, [0], 200, k=4, seed=seed, stop=stop).tokens
        auto = specmini.autoregressive(target, [0], 200, seed=seed, stop=stop).tokens
        for tokens in (spec, auto):
            assert tokens[-1] in (1, 2) and first_stop(tokens, {1, 2}) == len(tokens) - 1


def test_stop_may_be_one_numpy_integer_and_an_empty_collection_stops_nothing():
    target, draft = constant_model([0.8, 0.1, 0.1]), constant_model([1 / 3] * 3)
    with_int = specmini.generate(target, draft, [0], 200, k=4, seed=0, stop=1).tokens
    assert specmini.generate(target, draft, [0], 200, k=4, seed=0, stop=np.int64(1)).tokens == (
        with_int
    )
    assert with_int[-1] == 1 and 1 not in with_int[:-1]
    assert len(specmini.generate(target, draft, [0], 200, k=4, seed=0, stop=[]).tokens) == 200


@pytest.mark.parametrize("bad", [1.5, 1.0, "1", True, [1, 2.5], ["1"], -1])
def test_stop_must_be_token_ids(bad):
    target, draft = bigram_pair(3, quality=0.5, seed=0, spread=1.5)
    with pytest.raises(ValueError, match="stop"):
        specmini.generate(target, draft, [0], 5, stop=bad)
    with pytest.raises(ValueError, match="stop"):
        specmini.autoregressive(target, [0], 5, stop=bad)


# --- How each round ended: plain decoding is not a run of free bonus tokens.


def test_rounds_with_nothing_drafted_end_plain():
    target, draft = bigram_pair(3, quality=0.5, seed=0, spread=1.5)
    auto = specmini.autoregressive(target, [0], 6, seed=0)
    assert [r.ended_with for r in auto.rounds] == ["plain"] * 6
    assert all(r.drafted == r.accepted == 0 for r in auto.rounds)
    # The budget leaves no room to draft in the last round of 6 tokens with k = 4: one plain step.
    spec = specmini.generate(target, draft, [0], 6, k=4, seed=0)
    assert spec.rounds[-1].drafted == 0 and spec.rounds[-1].ended_with == "plain"
    assert all(r.ended_with != "plain" for r in spec.rounds if r.drafted > 0)
    assert {
        r.ended_with for r in specmini.generate(target, draft, [0], 60, k=2, seed=0).rounds
    } >= {
        "correction",
        "bonus",
    }


def test_decode_reads_like_leviathan_algorithm_1():
    source = inspect.getsource(specmini.decode)
    assert "Leviathan et al. 2023, Algorithm 1" in specmini.decode.__doc__
    assert specmini.decode.decode.__doc__
    steps = [int(m) for m in re.findall(r"# (\d)\. ", source)]
    assert steps == [1, 2, 3, 4, 5], "the steps of Algorithm 1, numbered in order"
    assert "n_drafts" in source and "the paper's n" in source


class Windowed(TableModel):
    """A bigram model that says how many tokens it reads, as GPT-2 does (`max_context`)."""

    def __init__(self, table, max_context):
        super().__init__(table)
        self.max_context = max_context


@pytest.mark.parametrize("which", ["target", "draft"])
def test_a_text_longer_than_max_context_is_refused_before_any_call(which):
    target, draft = bigram_pair(VOCAB, quality=0.5, seed=3, spread=1.5)
    # The last new token is sampled, never read: 2 prompt tokens + 7 new ones need a context of 8.
    short = Windowed(target.table if which == "target" else draft.table, max_context=7)
    models = (short, draft) if which == "target" else (target, short)
    with pytest.raises(ValueError, match="prompt \\+ max_new_tokens - 1 = 8 tokens.*max_context"):
        specmini.generate(*models, [0, 1], 7, k=4, seed=0)
    assert short.calls == 0 and target.calls == 0 and draft.calls == 0
    with pytest.raises(ValueError, match="max_context is 7"):
        specmini.autoregressive(Windowed(target.table, 7), [0, 1], 7, seed=0)


def test_a_text_that_just_fits_max_context_runs():
    target, draft = bigram_pair(VOCAB, quality=0.5, seed=3, spread=1.5)
    fits = Windowed(target.table, max_context=8)
    out = specmini.generate(fits, Windowed(draft.table, 8), [0, 1], 7, k=4, seed=0)
    assert len(out.tokens) == 7
    assert max(n for n, _ in fits.log) <= fits.max_context


# --- One decoding loop (issue 46): the course's decoders are specmini's loop with another round.


def runs_in_specmini_loop(decode):
    """Whether `decode(target, draft, prompt, max_new_tokens)` refuses a text longer than the
    target's max_context before any model call, with specmini's message: only the loop
    (specmini.decode.decode) checks that, so a decoder with a loop of its own does not."""
    target, draft = bigram_pair(VOCAB, quality=0.5, seed=3, spread=1.5)
    short = Windowed(target.table, max_context=7)  # 2 prompt tokens + 7 new ones need 8
    try:
        decode(short, draft, [0, 1], 7)
    except ValueError as error:
        return "max_context is 7" in str(error) and short.calls == draft.calls == 0
    return False


def course_decoders():
    from course import block_verification as bv
    from course import going_further as gf
    from course.lessons import lesson_05

    return {
        "specmini.generate": lambda t, d, p, n: specmini.generate(t, d, p, n, k=3, seed=0),
        "lesson_05.lossy_generate": lambda t, d, p, n: lesson_05.lossy_generate(t, d, p, n, 0.5),
        "block_verification.generate": lambda t, d, p, n: bv.generate(t, d, p, n, k=3, seed=0),
        "going_further.decode, prompt lookup": lambda t, d, p, n: gf.decode(
            t, gf.lookup_drafts(VOCAB), p, n, 3, seed=0
        ),
        "going_further.decode, SSD": lambda t, d, p, n: gf.decode(
            t, gf.SpeculationCache(d, [1] * 4), p, n, 3, chance=gf.Positional(0)
        ),
        "going_further.decode, dynamic K": lambda t, d, p, n: gf.dynamic_k_trace(
            t, d, p, n, 2, gf.hf_schedule(), 1.0, 0
        ),
        "going_further.tree_decode": lambda t, d, p, n: gf.tree_decode(t, d, p, n, 2, 2, seed=0),
    }


@pytest.mark.parametrize("name", list(course_decoders()))
def test_every_decoder_runs_in_specmini_loop(name):
    assert runs_in_specmini_loop(course_decoders()[name]), f"{name} has a loop of its own"


def test_a_decoder_with_a_loop_of_its_own_is_caught():
    def own_loop(target, draft, prompt, max_new_tokens):  # as the course's variants had
        tokens, rng = list(prompt), np.random.default_rng(0)
        while len(tokens) < len(prompt) + max_new_tokens:
            probs = specmini.probabilities(target(tokens, len(tokens) - 1)[-1])
            tokens.append(specmini.sample(probs, rng))
        return tokens

    assert not runs_in_specmini_loop(own_loop)


def test_lossy_generate_with_b_1_is_specmini_generate():
    from course.lessons import lesson_05

    target, draft = bigram_pair(5, quality=0.5, seed=1, spread=1.5)
    for seed in range(4):
        want = specmini.generate(target, draft, [0], 50, k=3, seed=seed)
        got = lesson_05.lossy_generate(target, draft, [0], 50, 1.0, k=3, seed=seed)
        assert got.tokens == want.tokens and got.rounds == want.rounds
        lenient = lesson_05.lossy_generate(target, draft, [0], 50, 0.3, k=3, seed=seed)
        assert sum(r.accepted for r in lenient.rounds) > sum(r.accepted for r in want.rounds)
