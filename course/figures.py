"""The course's one way to write a figure. Every plot helper in course.lessons builds its figure
and returns it; the notebook shows it (`plt.show()`), and `save` writes it to figures/."""

from pathlib import Path


def save(fig, path, dpi=120, bbox_inches="tight"):
    """Write `fig` to `path` (its folder made if need be, as in a fresh copy of the course)."""
    path = Path(path)
    path.parent.mkdir(exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches=bbox_inches)
    return fig
