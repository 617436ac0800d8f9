"""One step of speculative sampling: logits to probabilities, the accept test, the residual.

Names follow the course: `target` is the large model we want samples from, `draft` the small
model that guesses. (Leviathan et al. call them p and q; Chen et al. call them q and p.)
"""

import numpy as np


def require(ok, message):
    """Bad input stops here, with a message that names the problem."""
    if not ok:
        raise ValueError(message)


def check_probs(probs, name):
    """Return `probs` as a float array whose last axis is a distribution."""
    probs = np.asarray(probs, dtype=np.float64)
    require(probs.ndim > 0 and probs.shape[-1] > 0, f"{name} has no vocabulary axis: {probs.shape}")
    require(np.all(np.isfinite(probs)), f"{name} contains NaN or infinite values")
    require(np.all(probs >= 0), f"{name} contains negative probabilities")
    require(np.allclose(probs.sum(-1), 1, atol=1e-6), f"{name} rows must sum to 1")
    return probs


def check_pair(target_probs, draft_probs):
    """Both must be distributions over the same vocabulary, at the same positions."""
    target_probs = check_probs(target_probs, "target_probs")
    draft_probs = check_probs(draft_probs, "draft_probs")
    shapes = f"target {target_probs.shape} and draft {draft_probs.shape} differ in shape"
    require(target_probs.shape == draft_probs.shape, shapes)
    return target_probs, draft_probs


def probabilities(logits, temperature=1.0):
    """softmax(logits / temperature) per row; temperature 0 puts all mass on the argmax."""
    logits = np.asarray(logits, dtype=np.float64)
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
    target_probs, draft_probs = check_pair(target_probs, draft_probs)
    excess = np.maximum(target_probs - draft_probs, 0.0)
    mass = excess.sum(-1, keepdims=True)
    return np.where(mass > 0, excess / np.where(mass > 0, mass, 1.0), target_probs)


def speculative_accept(draft_tokens, target_probs, draft_probs, uniforms):
    """The accepted prefix of `draft_tokens`: token i stays iff u_i <= min(1, target/draft)."""
    target_probs, draft_probs = check_pair(target_probs, draft_probs)
    uniforms = np.asarray(uniforms, dtype=np.float64)
    require(len(draft_tokens) == len(uniforms) == len(target_probs), "need one row per token")
    require(np.all((uniforms >= 0) & (uniforms <= 1)), "uniforms must lie in [0, 1]")
    accepted = []
    for i, token in enumerate(draft_tokens):
        require(0 <= token < target_probs.shape[-1], f"draft token {token} is not in the vocab")
        require(draft_probs[i, token] > 0, f"draft token {token} has draft probability 0")
        if uniforms[i] > min(1.0, target_probs[i, token] / draft_probs[i, token]):
            break  # rejected: this token and every later draft are thrown away
        accepted.append(int(token))
    return accepted
