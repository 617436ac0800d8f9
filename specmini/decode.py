"""Speculative decoding as in Leviathan et al. 2023, Algorithm 1, round after round; plain
decoding is its k = 0 case. (Chen et al. 2023, Algorithm 2, is the same method.)

A model is any callable `model(tokens, start) -> logits` of shape (len(tokens) - start, vocab):
row j scores the token that follows tokens[:start + j + 1]. A model with a KV cache keeps what it
has for tokens[:start] and recomputes the rest. Its logits must be finite: specmini refuses NaN
and infinities. To forbid a token, give it a large negative logit such as -1e4 rather than -inf:
its probability is then exactly 0 for temperatures up to about 13 (see `probabilities`).

`speculate` is one round, the paper's algorithm; `decode` is the loop around it, which
`generate` and `autoregressive` run. `token_verify` is the paper's accept rule, the one part of
the round that the course's variants (a lossy test, block verification) swap. The course's other
decoders (prompt lookup, token trees) pass a round of their own to the same loop.
"""

from collections import namedtuple

import numpy as np

from specmini.sampling import as_int, probabilities, require, residual, sample, speculative_accept

# One target call: tokens drafted, how many the target accepted, and how the round ended:
# "correction" (resampled from the residual after a rejection), "bonus" (all drafts accepted,
# one more token from the same target call) or "plain" (nothing drafted: a plain decoding step).
Round = namedtuple("Round", "drafted accepted ended_with")
# What generate and autoregressive return: the new tokens only, and one Round per target call.
Generation = namedtuple("Generation", "tokens rounds")


def next_probs(model, tokens, start, temperature):
    """Call the model on tokens[start:] and check its logits before trusting them."""
    logits, rows = np.asarray(model(tokens, start), dtype=np.float64), len(tokens) - start
    ok_shape = logits.ndim == 2 and logits.shape[0] == rows and logits.shape[1] > 0
    require(ok_shape, f"model returned logits of shape {logits.shape}, expected ({rows}, vocab)")
    return probabilities(logits, temperature)  # which refuses NaN or infinite logits


def generate(target, draft, prompt, max_new_tokens, k=4, temperature=1.0, seed=None, stop=None):
    """Speculative decoding: the draft guesses up to k tokens, one target call checks them all.

    `stop` is one token id or a collection of them (list, tuple, set, array): generation ends
    after the first one sampled, which is kept.
    """
    return decode(target, draft, prompt, max_new_tokens, as_int(k, "k", 1), temperature, seed, stop)


def autoregressive(model, prompt, max_new_tokens, temperature=1.0, seed=None, stop=None):
    """Plain decoding, one model call per token: speculative decoding with nothing drafted.

    Every round ends "plain". `stop` works as in `generate`.
    """
    return decode(model, None, prompt, max_new_tokens, 0, temperature, seed, stop)


def token_verify(drafted, target_rows, draft_rows, u, test=speculative_accept, fix=residual):
    """The paper's accept rule, token by token: the accepted guesses, and p', the distribution of
    the target's own token. `test` and `fix` are there for the course's variants to swap."""
    # Not in the paper, where gamma >= 1: with nothing drafted there is nothing to test.
    accepted = test(drafted, target_rows[:-1], draft_rows, u) if drafted else []
    # p' is the target's row after the n accepted guesses (the paper's n) if all of them passed,
    # else norm(max(0, target - draft)) where the first rejection happened.
    n = len(accepted)
    return accepted, target_rows[n] if n == len(drafted) else fix(target_rows[n], draft_rows[n])


def speculate(target, draft, prefix, n_drafts, temperature, rng, rule=token_verify):
    """One round: Leviathan et al.'s Algorithm 1 (p = target, q = draft, gamma = n_drafts).

    Returns the round's new tokens and its Round. `rule` counts the accepted guesses and gives p'
    (steps 3 and 4): the paper's token_verify, above, or a course variant's (a lossy test, block
    verification), which takes and returns the same things.
    """
    drafted, draft_rows = [], []
    for i in range(n_drafts):  # 1. sample gamma guesses from the draft, one after the other
        draft_rows.append(next_probs(draft, prefix + drafted, len(prefix) + i - 1, temperature)[0])
        drafted.append(sample(draft_rows[-1], rng))  # scored below by this very row
    # 2. Run the target once over prefix + drafts: n_drafts + 1 next-token distributions.
    target_rows = next_probs(target, prefix + drafted, len(prefix) - 1, temperature)
    # 3. Draw u_1 .. u_gamma (not in the paper: in (0, 1], so target 0 never passes); the rule
    # counts the accepted guesses (the paper's n) and gives
    # 4. p': the target's row after them if all passed, else the residual at the first rejection.
    accepted, last = rule(drafted, target_rows, draft_rows, 1 - rng.random(n_drafts))
    ending = "plain" if not n_drafts else "bonus" if len(accepted) == n_drafts else "correction"
    # 5. Return the n accepted guesses and one token from the target. (`ending`, how the
    # round ended, is not in the paper: it goes into the round's record.)
    return accepted + [sample(last, rng)], Round(n_drafts, len(accepted), ending)


def decode(target, draft, prompt, max_new_tokens, k, temperature, seed, stop, one_round=speculate):
    """The decoding loop: rounds of Algorithm 1 (`one_round`, by default `speculate`) until the
    text has max_new_tokens new tokens or ends with a stop token.

    The inputs are checked first. Lines marked "not in the paper" are what a decoder adds to the
    paper's one round: a token budget, stop tokens, uniforms in (0, 1] instead of numpy's [0, 1),
    k = 0, and a record of each round. This is the course's one decoding loop: its variants pass
    their own `one_round`, which takes and returns what `speculate` does (course.going_further's
    rounds with prompt lookup or token trees), or `speculate` with another `rule` (lesson_05's
    lossy test, course.block_verification).
    """
    prompt = [as_int(t, "each prompt token id", 0) for t in prompt]
    # Not in the paper: a model that says how many tokens it reads (`max_context`) must read the
    # prompt (one token at least) and every new token but the last (sampled, never read):
    # checked before any call.
    most = min(getattr(model, "max_context", np.inf) for model in (target, draft))
    need = as_int(len(prompt), "prompt length", 1) + as_int(max_new_tokens, "max_new_tokens", 0) - 1
    require(need <= most, f"prompt + max_new_tokens - 1 = {need} tokens, but max_context is {most}")
    stop = [] if stop is None else stop if hasattr(stop, "__iter__") else [stop]
    stops = {as_int(t, "each stop token id", 0) for t in stop}
    rng, out = np.random.default_rng(seed), Generation([], [])
    while len(out.tokens) < max_new_tokens and not stops.intersection(out.tokens[-1:]):
        # Not in the paper: the round ends with one token from the target, so draft no more
        # than the token budget has room for (0 drafts near the end, and always for k = 0).
        n_drafts = min(k, max_new_tokens - len(out.tokens) - 1)
        new, record = one_round(target, draft, prompt + out.tokens, n_drafts, temperature, rng)
        out.rounds.append(record)  # not in the paper: a record of each round
        # Not in the paper: a stop token ends the text; it is kept, what follows it is dropped.
        out.tokens.extend(new[: next((i + 1 for i, t in enumerate(new) if t in stops), None)])
    return out
