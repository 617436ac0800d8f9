"""Speculative decoding (Chen et al. 2023, Algorithm 2), and plain decoding as its k = 0 case.

A model is any callable `model(tokens, start) -> logits` of shape (len(tokens) - start, vocab):
row j scores the token that follows tokens[:start + j + 1]. A model with a KV cache keeps what it
has for tokens[:start] and recomputes the rest.
"""

from collections import namedtuple

import numpy as np

from specmini.sampling import probabilities, require, residual, sample, speculative_accept

# One target call: tokens drafted, how many the target accepted, and whether the round ended
# with a "correction" (resampled from the residual) or a "bonus" token (all drafts accepted).
Round = namedtuple("Round", "drafted accepted ended_with")
# What generate and autoregressive return: the new tokens only, and one Round per target call.
Generation = namedtuple("Generation", "tokens rounds")


def next_probs(model, tokens, start, temperature):
    """Call the model on tokens[start:] and check its logits before trusting them."""
    logits, rows = np.asarray(model(tokens, start), dtype=np.float64), len(tokens) - start
    ok_shape = logits.ndim == 2 and logits.shape[0] == rows and logits.shape[1] > 0
    require(ok_shape, f"model returned logits of shape {logits.shape}, expected ({rows}, vocab)")
    require(np.all(np.isfinite(logits)), "model returned NaN or infinite logits")
    return probabilities(logits, temperature)


def generate(target, draft, prompt, max_new_tokens, k=4, temperature=1.0, seed=None, stop=None):
    """Speculative decoding: the draft guesses up to k tokens, one target call checks them all."""
    require(k >= 1, f"k must be >= 1, got {k}")
    return decode(target, draft, prompt, max_new_tokens, k, temperature, seed, stop)


def autoregressive(model, prompt, max_new_tokens, temperature=1.0, seed=None, stop=None):
    """Plain decoding, one model call per token: speculative decoding with nothing drafted."""
    return decode(model, None, prompt, max_new_tokens, 0, temperature, seed, stop)


def decode(target, draft, prompt, max_new_tokens, k, temperature, seed, stop):
    require(len(prompt) > 0, "prompt must hold at least one token")
    require(max_new_tokens >= 0, f"max_new_tokens must be >= 0, got {max_new_tokens}")
    rng, out = np.random.default_rng(seed), Generation([], [])
    while len(out.tokens) < max_new_tokens and stop not in out.tokens:
        seq = list(prompt) + out.tokens
        drafted, draft_rows = [], []
        # Every round ends with one token from the target: draft no more than the budget allows.
        n = min(k, max_new_tokens - len(out.tokens) - 1)
        for _ in range(n):
            context = seq + drafted
            draft_rows.append(next_probs(draft, context, len(context) - 1, temperature)[0])
            drafted.append(sample(draft_rows[-1], rng))  # scored below by this very row
        # One target pass over prefix + drafts gives len(drafted) + 1 next-token distributions.
        target_rows = next_probs(target, seq + drafted, len(seq) - 1, temperature)
        u = 1 - rng.random(n)  # in (0, 1]: a token the target gives zero mass never passes
        accepted = speculative_accept(drafted, target_rows[:n], draft_rows, u) if n else []
        a = len(accepted)
        # Rejected at a: resample there from the residual. All accepted: a bonus token, free.
        last = residual(target_rows[a], draft_rows[a]) if a < n else target_rows[n]
        new = accepted + [sample(last, rng)]
        out.rounds.append(Round(n, a, "correction" if a < n else "bonus"))
        out.tokens.extend(new[: new.index(stop) + 1] if stop in new else new)
    return out
