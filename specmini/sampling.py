"""One step of speculative sampling: logits to probabilities, the accept test, the residual.

Names follow the course: `target` is the large model we want samples from, `draft` the small
model that guesses. (Leviathan et al. call them p and q; Chen et al. call them q and p.)
"""

import numpy as np


def require(ok, message):
    """Bad input stops here, with a message that names the problem."""
    if not ok:
        raise ValueError(message)


def as_int(x, name, least, most=np.inf):
    """`x` as an int, if it is an integer in [least, most]: 3.0, 1.7, "3" and True are refused."""
    ok = isinstance(x, int | np.integer) and not isinstance(x, bool) and least <= x <= most
    require(ok, f"{name} must be an integer in [{least}, {most}], got {x!r}")
    return int(x)


def as_pair(target_probs, draft_probs):
    """Both as float arrays of distributions over the same vocabulary, at the same positions."""
    target_probs, draft_probs = np.asarray(target_probs, float), np.asarray(draft_probs, float)
    for name, probs in [("target_probs", target_probs), ("draft_probs", draft_probs)]:
        require(probs.ndim > 0 and probs.shape[-1] > 0, f"{name} has no vocabulary: {probs.shape}")
        require(((probs >= 0) & (probs <= 1)).all(), f"{name} has NaN, negative or > 1 entries")
        # rows from float32 logits sum to 1 within about 1e-6; a wrong row is off by far more
        require((np.abs(probs.sum(-1) - 1) <= 1e-5).all(), f"{name} rows must sum to 1")
    require(target_probs.shape == draft_probs.shape, "target_probs and draft_probs differ in shape")
    return target_probs, draft_probs


def probabilities(logits, temperature=1.0):
    """softmax(logits / temperature) per row; temperature 0 puts all mass on the argmax.

    Logits must be finite: NaN has no order and +inf no softmax. To forbid a token give it a
    large negative logit such as -1e4: exp(-1e4 / temperature) is exactly 0.0 in float64 while
    1e4 / temperature > 745, that is for temperatures up to about 13; above that it is tiny but
    positive, and a still larger gap keeps it at zero.
    """
    logits = np.asarray(logits, dtype=np.float64)
    require(np.isfinite(logits).all(), "logits must be finite: NaN or infinite values found")
    require(temperature >= 0, f"temperature must be >= 0, got {temperature}")
    if temperature == 0:  # greedy, exactly; ties go to the lowest token id, as in np.argmax
        return (np.arange(logits.shape[-1]) == logits.argmax(-1)[..., None]).astype(np.float64)
    z = np.exp((logits - logits.max(-1, keepdims=True)) / temperature)  # shifted: no overflow
    return z / z.sum(-1, keepdims=True)


def sample(probs, rng):
    """Draw one token id from one distribution."""
    return int(rng.choice(len(probs), p=probs))


def residual(target_probs, draft_probs):
    """norm(max(0, target - draft)): where to resample after a rejection.

    If target == draft the residual has no mass, but then no draft is ever rejected; we return
    the target itself rather than divide by zero.
    """
    target_probs, draft_probs = as_pair(target_probs, draft_probs)
    excess = np.maximum(target_probs - draft_probs, 0.0)
    mass = excess.sum(-1, keepdims=True)
    return np.where(mass > 0, excess / np.where(mass > 0, mass, 1.0), target_probs)


def speculative_accept(draft_tokens, target_probs, draft_probs, uniforms):
    """The accepted prefix of `draft_tokens`: token i stays iff u_i <= min(1, target/draft).

    Row i of `target_probs` and `draft_probs` is the distribution token i was drafted from.
    """
    target_probs, draft_probs = as_pair(target_probs, draft_probs)
    uniforms = np.asarray(uniforms, dtype=np.float64)
    tokens = [as_int(t, "each draft token id", 0, target_probs.shape[-1] - 1) for t in draft_tokens]
    require(target_probs.shape[:-1] == uniforms.shape == (len(tokens),), "need one row per token")
    require(((uniforms >= 0) & (uniforms <= 1)).all(), "uniforms must lie in [0, 1]")
    # A draft only draws tokens it gives mass: each must be nonzero (so > 0, as none is negative).
    require(draft_probs[range(len(tokens)), tokens].all(), "draft token with draft probability 0")
    ratios = target_probs[range(len(tokens)), tokens] / draft_probs[range(len(tokens)), tokens]
    # The test itself, Algorithm 1's n = min({i - 1 | r_i > p_i(x_i) / q_i(x_i)} ∪ {gamma}) (i
    # counted from 0 here, the paper's i - 1 is i): the drafts before the first rejection stay.
    # (u_i <= 1, so the ratio decides as min(1, ratio) would.)
    return tokens[: min((i for i, r in enumerate(ratios) if uniforms[i] > r), default=len(tokens))]
