"""The plots of notebook 01, kept out of the notebook so that it shows the call and the picture.

Each function draws one figure from numbers the notebook computed, and returns it; none of
this is part of specmini, and none of it solves an exercise.
"""

import matplotlib.pyplot as plt
import numpy as np

import specmini
from course.figures import save

ROLE = {"target": "the large model we sample from", "draft": "the small model that guesses"}


def plot_pair(target, draft, vocab, path=None):
    """The target's and the draft's next-token distributions, side by side, as bars."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    models = [("target", target, "tab:blue"), ("draft", draft, "tab:orange")]
    for ax, (name, probs, colour) in zip(axes, models, strict=True):
        bars = ax.bar(vocab, probs, color=colour, label=f"{name} probability")
        ax.bar_label(bars, fmt="%.1f")
        ax.set(title=f"{name}: {ROLE[name]}", xlabel="next token", ylim=(0, 0.75))
        ax.legend(loc="upper right")
    axes[0].set_ylabel("probability")
    fig.suptitle("The running example: next-token distributions over A, B, C")
    fig.tight_layout()
    if path is not None:
        save(fig, path)
    return fig


def plot_running_frequencies(draws, probs, vocab):
    """How often each token has come out so far, against the number of draws (log scale)."""
    n = np.arange(1, len(draws) + 1)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    colours = ["tab:blue", "tab:green", "tab:red"]
    for i, (v, colour) in enumerate(zip(vocab, colours, strict=True)):
        ax.plot(n, np.cumsum(draws == i) / n, color=colour, label=f"frequency of {v}")
        label = f"target({v}) = {probs[i]}"
        ax.axhline(probs[i], color=colour, linestyle="--", linewidth=1, label=label)
    ax.set(
        xscale="log",
        xlabel="number of samples drawn from the target",
        ylabel="running frequency",
        title="Sampling the target: frequencies converge to the probabilities",
    )
    ax.legend(ncol=3, fontsize=8, loc="upper right")
    return fig


def plot_temperatures(logits, temperatures, vocab, path=None):
    """One model's distribution, softmax(logits / T), at several temperatures T (grouped bars)."""
    fig, ax = plt.subplots(figsize=(8, 3.6))
    x, width = np.arange(len(vocab)), 0.8 / len(temperatures)
    colours = plt.cm.viridis(np.linspace(0, 0.9, len(temperatures)))
    for j, (t, colour) in enumerate(zip(temperatures, colours, strict=True)):
        probs = specmini.probabilities(logits, t)
        label = f"T = {t}" + {0: " (greedy)", 1: " (the model itself)"}.get(t, "")
        offset = (j - (len(temperatures) - 1) / 2) * width
        ax.bar(x + offset, probs, width, color=colour, label=label)
    ax.axhline(1 / len(vocab), color="grey", linestyle=":", label="uniform (T very large)")
    ax.set_xticks(x, vocab)
    ax.set(
        xlabel="next token",
        ylabel="probability",
        ylim=(0, 1.05),
        title="One distribution (the target) at several temperatures: softmax(logits / T)",
    )
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    if path is not None:
        save(fig, path)
    return fig
