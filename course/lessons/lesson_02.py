"""The pictures of notebook 02 (rejection sampling), kept out of the notebook so that it shows
the call and the figure. Each returns its figure; the notebook shows it. No exercise solution
lives here."""

import matplotlib.pyplot as plt
import numpy as np

from course.figures import save


def plot_retry(vocab, target, frequencies, path=None, title=None):
    """Bars per token: the target and the output frequencies of each sampler in `frequencies`
    (a dict name -> one frequency per token)."""
    x = np.arange(len(vocab))
    width = 0.8 / (len(frequencies) + 1)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.bar(x - 0.4 + width / 2, target, width, color="tab:blue", label="target")
    colours = ["tab:green", "tab:orange", "tab:red", "tab:purple"]
    for i, (name, freq) in enumerate(frequencies.items(), start=1):
        ax.bar(x - 0.4 + (i + 0.5) * width, freq, width, label=name, color=colours[i - 1])
    ax.set(
        xticks=x,
        xticklabels=vocab,
        xlabel="token",
        ylabel="probability / frequency",
        title=title
        or "Retry until accepted: exact with an envelope M, biased with the ratio capped at 1",
    )
    ax.legend(fontsize=8)
    if path is not None:
        save(fig, path)
    return fig


def plot_overlap(vocab, target, draft, path=None):
    """Overlay target and draft: the shared mass min(target, draft) is what the test accepts."""
    x = np.arange(len(vocab))
    shared = np.minimum(target, draft)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(x, shared, width=0.6, color="tab:green", alpha=0.6, label="min(target, draft): accepted")
    excess = dict(width=0.6, bottom=shared, color="none")
    rejected = "draft's excess: proposed, then rejected"
    ax.bar(x, draft - shared, **excess, edgecolor="tab:red", hatch="//", label=rejected)
    residual = "target's excess: left to the residual (nb 03)"
    ax.bar(x, target - shared, **excess, edgecolor="tab:blue", hatch="..", label=residual)
    ax.hlines(target, x - 0.3, x + 0.3, color="tab:blue", linewidth=3, label="target")
    ax.hlines(draft, x - 0.3, x + 0.3, color="tab:orange", lw=2.5, ls="--", label="draft")
    ax.set(
        xticks=x,
        xticklabels=vocab,
        xlabel="token",
        ylabel="probability",
        ylim=(0, 0.85),
        title=f"Acceptance rate = shared mass: α = Σ min(target, draft) = {shared.sum():.2f}",
    )
    ax.legend(fontsize=8, loc="upper right")
    if path is not None:
        save(fig, path)
    return fig


def plot_convergence(kept, alpha):
    """The running fraction of kept drafts against alpha, with a band of 2 standard errors."""
    n = np.arange(1, len(kept) + 1)
    band = 2 * np.sqrt(alpha * (1 - alpha) / n)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.plot(n, np.cumsum(kept) / n, color="tab:green", label="simulated pass rate")
    ax.axhline(
        alpha, color="black", linestyle="--", label=f"α = Σ min(target, draft) = {alpha:.1f}"
    )
    label = "α ± 2 standard errors"
    ax.fill_between(n, alpha - band, alpha + band, color="grey", alpha=0.25, label=label)
    ax.set(
        xscale="log",
        ylim=(0.5, 1.05),
        xlabel="number of accept tests",
        ylabel="fraction of drafted tokens kept",
        title=f"{len(kept):,} accept tests converge to α",
    )
    ax.legend(loc="lower right")
    return fig
