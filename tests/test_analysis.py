"""The speed-up analysis, checked against the published numbers."""

import numpy as np
import pytest

import specmini


def published_speedup(rate, k, t_target, t_draft):
    """speedup = r'(K+1) t_target / (K t_draft + t_target), with r'(K+1) the tokens per round."""
    return specmini.speedup_from_tokens(rate * (k + 1), k, t_draft / t_target)


@pytest.mark.parametrize(
    "rate, t_target, t_draft, want",
    [
        (0.8, 14.1, 1.8, 2.65),  # Chinchilla 70B with a 7B draft, HumanEval (Chen et al.)
        (0.62, 14.1, 1.8, 2.05),  # the same models on XSum
        (0.8125, 73.3, 11.9, 2.46),  # GPT-2 XL with GPT-2 small as the draft (toyllm)
    ],
)
def test_published_analysis(rate, t_target, t_draft, want):
    assert round(published_speedup(rate, 4, t_target, t_draft), 2) == want


def test_expected_tokens():
    assert specmini.expected_tokens(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2)
    assert specmini.expected_tokens(1.0, 4) == 5.0  # every draft accepted, plus the bonus
    assert specmini.expected_tokens(0.0, 4) == 1.0  # nothing accepted: still one token per call
    assert specmini.expected_tokens(0.5, 1) == pytest.approx(1.5)


def test_speedup_is_leviathan_formula():
    alpha, k, c = 0.7, 3, 0.05
    want = (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + 1))
    assert specmini.speedup(alpha, k, c) == pytest.approx(want)
    assert specmini.speedup(1.0, 4, 0.0) == 5.0
    assert specmini.speedup(0.0, 4, 0.1) == pytest.approx(1 / 1.4)  # slower than no drafting


def test_speedup_from_tokens_accepts_the_whole_range():
    # One token per call (every draft rejected) up to k + 1 (every draft accepted, plus the bonus).
    assert specmini.speedup_from_tokens(1, 4, 0.0) == 1.0
    assert specmini.speedup_from_tokens(5, 4, 0.25) == 2.5
    assert specmini.speedup(0.8, np.int64(4), 0.1) == pytest.approx(specmini.speedup(0.8, 4, 0.1))


def test_acceptance_rate_is_one_minus_total_variation():
    target, draft = [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]
    tv = 0.5 * sum(abs(a - b) for a, b in zip(target, draft, strict=True))
    assert specmini.acceptance_rate(target, draft) == pytest.approx(1 - tv)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: specmini.expected_tokens(1.2, 4), "alpha"),
        (lambda: specmini.expected_tokens(-0.1, 4), "alpha"),
        (lambda: specmini.expected_tokens(0.5, 0), "k must be"),
        (lambda: specmini.speedup(0.5, 4, -1), "cost_ratio"),
        (lambda: specmini.expected_tokens(float("nan"), 4), "alpha"),
        (lambda: specmini.expected_tokens(0.5, 2.0), "k must be an integer"),
        (lambda: specmini.speedup(0.5, 2.5, 0.1), "k must be an integer"),
        (lambda: specmini.speedup_from_tokens(2.0, 0, 0.1), "k must be"),
        (lambda: specmini.speedup_from_tokens(2.0, -1, 0.1), "k must be"),
        (lambda: specmini.speedup_from_tokens(2.0, 2.5, 0.1), "k must be an integer"),
        (lambda: specmini.speedup_from_tokens(-2.0, 4, 0.1), "tokens_per_call"),
        (lambda: specmini.speedup_from_tokens(float("nan"), 4, 0.1), "tokens_per_call"),
        (lambda: specmini.speedup_from_tokens(0.5, 4, 0.1), "tokens_per_call"),  # below 1
        (lambda: specmini.speedup_from_tokens(5.5, 4, 0.1), "tokens_per_call"),  # above k + 1
        (lambda: specmini.speedup_from_tokens(2.0, 4, float("nan")), "cost_ratio"),
    ],
)
def test_analysis_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
