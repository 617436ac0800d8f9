"""Helpers of notebook 04 (K drafts and the bonus token): its plot and its simulation, kept out
of the notebook so that it shows the call and the result. No exercise solution lives here."""

import matplotlib.pyplot as plt
import numpy as np

import specmini
from course.figures import save


def plot_expected_tokens(path=None, alphas=(0.9, 0.8, 0.7, 0.6, 0.5), max_k=12):
    """Expected tokens per target call against K, one curve per alpha, with the limit
    1 / (1 - alpha) dashed and K + 1 (alpha = 1) dotted. Saved to `path` if given."""
    ks = np.arange(1, max_k + 1)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(ks, ks + 1, color="black", linestyle=":", label="alpha = 1: K + 1")
    colours = plt.cm.viridis(np.linspace(0, 0.85, len(alphas)))
    for alpha, colour in zip(alphas, colours, strict=True):
        tokens = [specmini.expected_tokens(alpha, k) for k in ks]
        ax.plot(ks, tokens, "o-", color=colour, label=f"alpha = {alpha}")
        ax.axhline(1 / (1 - alpha), color=colour, linestyle="--", linewidth=0.8)
    ax.set(xlabel="K, tokens drafted per round", ylabel="expected tokens per target call")
    ax.set_title("Expected tokens per target call (dashed: the limit 1 / (1 - alpha))")
    ax.set_ylim(0, 11)
    ax.legend()
    if path is not None:
        save(fig, path)
    return fig


def tokens_per_full_round(target, draft, k, rounds=1000, temperature=1.0):
    """Tokens yielded by `rounds` full rounds of specmini.generate (rounds that drafted all k:
    the last round of a run may draft fewer, to stay within max_new_tokens)."""
    sizes, seed = [], 0
    while len(sizes) < rounds:
        g = specmini.generate(target, draft, [0], 200, k=k, temperature=temperature, seed=seed)
        sizes += [r.accepted + 1 for r in g.rounds if r.drafted == k]
        seed += 1
    return np.array(sizes[:rounds])
