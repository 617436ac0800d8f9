"""Block verification: Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro, Suresh, "Block
Verification Accelerates Speculative Decoding", ICLR 2025, arXiv:2403.10444, Algorithm 2.

specmini tests the K drafts one by one: draft i stays with probability min(1, target/draft)
and the first rejection ends the round. Each test is the best an exact test of one token can do
(a maximal coupling, notebook 02), but the round is not the best use of K drafts: a draft the
target under-weights ends the round even when the next draft, which the target over-weights,
would make up for it. Block verification weighs the drafted block as a whole. It stays exact,
and it keeps at least as many drafts on average (the paper's Theorems 1 and 2). Notebook 02b
teaches it.

The paper's letters in the course's names: `target` is M_b, `draft` is M_s, K is gamma.
`target_rows[i]` and `draft_rows[i]` are the two models' distributions of the token after the
first i drafts (M_b(. | X^i), M_s(. | X^i)); x_i = drafts[i - 1] was drawn from draft_rows[i - 1];
`uniforms[i - 1]` is eta_i, uniform in [0, 1]. With target_i = target_rows[i], and so on:

    weight         p_0 = 1,  p_i = min(1, p_{i-1} target_{i-1}(x_i) / draft_{i-1}(x_i))
    residual mass  m_i = sum_x max(0, p_i target_i(x) - draft_i(x))
    acceptance     h_i = m_i / (m_i + 1 - p_i) for 0 < i < K  (1 where p_i = 1),  h_K = p_K
    kept drafts    tau: for i = K, K - 1, ..., 1 the first i with eta_i <= h_i; none: tau = 0
    last token     tau = K: one token of target_K (the bonus); tau < K: one token of the
                   residual norm(max(0, p_tau target_tau - draft_tau))

With one draft (K = 1) this is specmini's round: h_1 = p_1 = min(1, target / draft), and the
residual at the empty prefix (p_0 = 1) is notebook 03's norm(max(0, target - draft)).
"""

import functools

import numpy as np

from specmini.decode import decode, speculate
from specmini.sampling import as_int, as_pair, require


def as_block(drafts, target_rows, draft_rows):
    """The drafts as ints, with K + 1 target rows and the K draft rows they were drawn from."""
    target_rows = np.asarray(target_rows, dtype=np.float64)
    draft_rows = np.asarray(draft_rows, dtype=np.float64).reshape(-1, target_rows.shape[-1])
    drafts = [as_int(t, "each draft token id", 0, target_rows.shape[-1] - 1) for t in drafts]
    k = len(drafts)
    require(target_rows.shape[:-1] == (k + 1,), "need K + 1 target rows for K drafts")
    require(draft_rows.shape[0] == k, "need one draft row per draft")
    if k:
        as_pair(target_rows[:k], draft_rows)
        # A draft only draws tokens it gives mass, so each ratio target / draft is defined.
        require(draft_rows[range(k), drafts].all(), "draft token with draft probability 0")
    return drafts, target_rows, draft_rows


def prefix_weights(drafts, target_rows, draft_rows):
    """p_0 .. p_K: target / draft multiplied along the block, capped at 1 at every step."""
    drafts, target_rows, draft_rows = as_block(drafts, target_rows, draft_rows)
    weights = [1.0]
    for i, x in enumerate(drafts):
        weights.append(min(1.0, weights[-1] * target_rows[i, x] / draft_rows[i, x]))
    return np.array(weights)  # (K + 1,)


def weighted_excess(weight, target, draft):
    """max(0, weight * target - draft), token by token: the residual before normalising."""
    return np.maximum(weight * np.asarray(target) - np.asarray(draft), 0.0)


def acceptance_probabilities(drafts, target_rows, draft_rows):
    """h_0 .. h_K: the probability that the walk back from the whole block stops at each
    prefix once it gets there. h_0 = 1: the walk always stops at the empty prefix."""
    drafts, target_rows, draft_rows = as_block(drafts, target_rows, draft_rows)
    weights, k = prefix_weights(drafts, target_rows, draft_rows), len(drafts)
    h = np.ones(k + 1)
    for i in range(1, k):
        mass = weighted_excess(weights[i], target_rows[i], draft_rows[i]).sum()
        # p_i = 1: the prefix is as likely under the target as the draft makes it, keep it
        h[i] = 1.0 if weights[i] == 1 else mass / (mass + 1 - weights[i])
    if k:
        h[k] = weights[k]  # no draft follows the whole block: its weight decides alone
    return h  # (K + 1,)


def accepted_length(h, uniforms):
    """tau, the number of drafts kept: from i = K down to 1, the first i with eta_i <= h_i."""
    for i in range(len(h) - 1, 0, -1):
        if uniforms[i - 1] <= h[i]:
            return i
    return 0


def accepted_length_distribution(h):
    """P(tau = i) = h_i (1 - h_{i+1}) ... (1 - h_K): the walk went past every longer prefix."""
    h = np.asarray(h, dtype=np.float64)
    went_past = np.append(np.cumprod(1 - h[:0:-1])[::-1], 1.0)  # prod_{j > i} (1 - h_j)
    return h * went_past  # (K + 1,): sums to 1, since h_0 = 1


def last_token_distribution(tau, drafts, target_rows, draft_rows):
    """Where the round's own token comes from, after tau kept drafts: the target's row after
    the whole block (the bonus), or the residual norm(max(0, p_tau target_tau - draft_tau))."""
    drafts, target_rows, draft_rows = as_block(drafts, target_rows, draft_rows)
    if tau == len(drafts):
        return target_rows[tau]
    weight = prefix_weights(drafts, target_rows, draft_rows)[tau]
    excess = weighted_excess(weight, target_rows[tau], draft_rows[tau])
    # No excess only where target and draft agree at the empty prefix; then h_1 = 1 and the
    # walk never stops there: return the target rather than divide by zero (as specmini does).
    return excess / excess.sum() if excess.sum() > 0 else target_rows[tau]


def block_verify(drafts, target_rows, draft_rows, uniforms):
    """The kept prefix of `drafts` and the distribution of the round's last token."""
    h = acceptance_probabilities(drafts, target_rows, draft_rows)
    tau = accepted_length(h, uniforms)
    return list(drafts[:tau]), last_token_distribution(tau, drafts, target_rows, draft_rows)


def generate(target, draft, prompt, max_new_tokens, k=4, temperature=1.0, seed=None):
    """specmini's decoding loop and round with block verification as the accept rule, in place of
    the token-by-token test: the same models, draft calls, one target call per round, token
    budget and randomness (no stop tokens). `block_verify` takes and returns what the round's
    rule does (specmini.decode.token_verify)."""
    one_round = functools.partial(speculate, rule=block_verify)
    return decode(
        target, draft, prompt, max_new_tokens, k, temperature, seed, stop=None, one_round=one_round
    )


def block_round_outcomes(
    target_rows,
    draft_rows,
    last,
    k,
    acceptance=acceptance_probabilities,
    last_token=last_token_distribution,
):
    """Exact distribution of what one block-verified round emits on bigram models, as
    course.exact.round_outcomes gives it for specmini's round: {tokens: probability}.

    `target_rows[c]`, `draft_rows[c]`: next-token distributions after token c. The round drafts
    k tokens after `last`. `acceptance` and `last_token` are the rule's two halves, to swap in
    a broken one. Outcomes of probability 0 are left out.
    """
    target_rows, draft_rows = np.asarray(target_rows), np.asarray(draft_rows)
    blocks = {(): 1.0}  # every block the draft can write, with its probability
    for _ in range(k):
        blocks = {
            (*block, int(x)): prob * draft_rows[(last, *block)[-1], x]
            for block, prob in blocks.items()
            for x in np.flatnonzero(draft_rows[(last, *block)[-1]])
        }
    out = {}
    for block, prob in blocks.items():
        contexts = [last, *block]  # row i of the block follows contexts[i]
        rows = target_rows[contexts], draft_rows[contexts[:-1]]  # (k + 1, vocab), (k, vocab)
        h = acceptance(block, *rows)
        for tau, p_tau in enumerate(accepted_length_distribution(h)):
            if p_tau > 0:
                final = last_token(tau, block, *rows)
                for y in np.flatnonzero(final):
                    key = (*block[:tau], int(y))
                    out[key] = out.get(key, 0.0) + prob * p_tau * final[y]
    return out


def block_rounds(target_rows, draft_rows, k, **rule):
    """Block-verified rounds on bigram models for course.exact.chained_outcomes: `rounds(text,
    remaining)` is what a round emits after `text` with k drafts, or as many as the token budget
    leaves room for, as in specmini.generate. `rule` goes to block_round_outcomes."""
    memo = {}  # a bigram round depends only on the last token and the number of drafts

    def rounds(text, remaining):
        key = text[-1], min(k, remaining - 1)
        if key not in memo:
            memo[key] = block_round_outcomes(target_rows, draft_rows, *key, **rule)
        return memo[key]

    return rounds
