"""The plots of notebook 07 (going further), kept out of the notebook so that it shows the call
and the picture. Each returns its figure; the notebook shows it. The methods themselves are in
course.going_further."""

import matplotlib.pyplot as plt

from course.figures import save


def plot_per_token(bars, machine, tokens, path=None):
    """Milliseconds per token of each method, measured bars solid, simulated ones hatched."""
    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    names = list(bars)
    values = [bars[n][0] for n in names]
    colours = ["#888888", "#4c72b0", "#55a868", "#c44e52", "#8172b2", "#dd8452", "#937860"]
    for i, name in enumerate(names):
        simulated = bars[name][1] == "simulated"
        ax.barh(
            i,
            values[i],
            color=colours[i % len(colours)],
            hatch="//" if simulated else None,
            edgecolor="white",
            label="simulated: event clock (hatched)" if simulated else None,
        )
        ax.text(values[i], i, f" {values[i]:.2f} ms", va="center", fontsize=9)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(0, max(values) * 1.25)
    ax.set(xlabel="wall-clock per token (ms), lower is faster")
    ax.set_title(f"Offline pair, {tokens} greedy tokens after held-out code\n{machine}")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    unique = {"measured (solid)": plt.Rectangle((0, 0), 1, 1, color="#4c72b0"), **unique}
    ax.legend(unique.values(), unique.keys(), loc="lower right", fontsize=8)
    fig.tight_layout()
    if path:
        save(fig, path, dpi=110, bbox_inches=None)
    return fig


def plot_drift(curves, exact_per_call, path=None):
    """Total variation from the target against tokens per target call, one curve per rule."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for (label, points), marker in zip(curves.items(), "os", strict=False):
        per_call, tv, params = zip(*points, strict=True)
        ax.plot(per_call, tv, marker=marker, label=label)
        for x, y, p in zip(per_call, tv, params, strict=True):
            ax.annotate(f"{p:g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.plot([exact_per_call], [0], "k*", markersize=12, label="exact test (b = 1)")
    ax.set(
        xlabel="tokens per target call (measured)",
        ylabel="total variation from the target",
        title="Lossy acceptance on the offline pair, K = 4, temperature 1",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    if path:
        save(fig, path, dpi=110, bbox_inches=None)
    return fig
