"""How much faster speculative sampling should be (Leviathan et al. 2023, section 3)."""

import numpy as np

from specmini.sampling import as_int, as_pair, require


def acceptance_rate(target_probs, draft_probs):
    """alpha = sum over tokens of min(target, draft) = 1 - total variation distance."""
    return np.minimum(*as_pair(target_probs, draft_probs)).sum(-1)


def expected_tokens(alpha, k):
    """Expected tokens per target call with k drafts: (1 - alpha^(k+1)) / (1 - alpha)."""
    require(0 <= alpha <= 1, f"alpha must lie in [0, 1], got {alpha}")
    as_int(k, "k", 1)
    return k + 1.0 if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def speedup_from_tokens(tokens_per_call, k, cost_ratio):
    """Speed-up when each target call yields `tokens_per_call` tokens and k drafts cost k*c."""
    as_int(k, "k", 1)
    # A round keeps 0 to k drafts and adds one token of the target's: 1 to k + 1 tokens per call.
    require(1 <= tokens_per_call <= k + 1, f"tokens_per_call {tokens_per_call} not in [1, k + 1]")
    require(cost_ratio >= 0, f"cost_ratio (draft cost / target cost) must be >= 0: {cost_ratio}")
    return tokens_per_call / (k * cost_ratio + 1)  # a round costs k*c + 1 target calls of time


def speedup(alpha, k, cost_ratio):
    """Expected improvement factor (1 - alpha^(k+1)) / ((1 - alpha)(k*c + 1))."""
    return speedup_from_tokens(expected_tokens(alpha, k), k, cost_ratio)
