"""Plotting helper of notebook 03 (the residual distribution), kept out of the notebook so that
it shows the call and the picture. No exercise solutions here."""

import matplotlib.pyplot as plt
import numpy as np

from course.figures import save

COLOURS = {"target": "black", "draft": "#bbbbbb", "exact": "#2a9d8f", "bug": "#e76f51"}


def grouped_bars(ax, bars, labels, title):
    """One group of bars per token, one bar per distribution: `bars` maps a legend label to
    (kind, probabilities), where kind is a key of COLOURS."""
    width = 0.8 / len(bars)
    for i, (label, (kind, probs)) in enumerate(bars.items()):
        offset = (i - (len(bars) - 1) / 2) * width
        ax.bar(np.arange(len(labels)) + offset, probs, width, label=label, color=COLOURS[kind])
    ax.set(xticks=range(len(labels)), xticklabels=labels, ylim=(0, 1))
    ax.set(xlabel="token", ylabel="probability", title=title)
    ax.legend(fontsize=8)


def plot_panels(panels, suptitle, path, widths=(3, 2)):
    """Side-by-side grouped bar charts, one per (bars, token labels, title) in `panels`; saves
    the figure to `path` and returns it."""
    fig, axes = plt.subplots(
        1, len(panels), figsize=(11, 4), gridspec_kw={"width_ratios": widths[: len(panels)]}
    )
    for ax, (bars, labels, title) in zip(np.atleast_1d(axes), panels, strict=True):
        grouped_bars(ax, bars, labels, title)
    fig.suptitle(suptitle)
    fig.tight_layout()
    return save(fig, path)
