"""One look for every figure: a seaborn theme, fixed colours per normaliser, one helper to finish a figure."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns
import torch

__all__ = ["NORMALIZER_COLORS", "draw_selection", "finish", "set_theme"]

_PALETTE = sns.color_palette("colorblind", 8)

#: The same normaliser has the same colour in every chapter.
NORMALIZER_COLORS = {
    "softmax": _PALETTE[0],
    "sparsemax": _PALETTE[1],
    "1.5-entmax": _PALETTE[2],
    "scalable-softmax": _PALETTE[3],
    "adaptive-temperature": _PALETTE[4],
}


def set_theme() -> None:
    """Apply the book's theme (call once at the top of a chapter)."""
    sns.set_theme(context="notebook", style="whitegrid", palette=_PALETTE, rc={"figure.dpi": 100, "savefig.dpi": 150})


def finish(fig, name: str | None = None) -> None:
    """Lay out, optionally save, and show a figure.

    When the environment variable ``ATTNLIMITS_FIGURES`` names a folder and ``name`` is given, the figure is also
    saved there as ``name.png`` (for papers and slides). The figure is then shown and closed so that memory stays
    flat across a long chapter.
    """
    fig.tight_layout()
    folder = os.environ.get("ATTNLIMITS_FIGURES")
    if folder and name:
        Path(folder).mkdir(parents=True, exist_ok=True)
        fig.savefig(Path(folder) / f"{name}.png", bbox_inches="tight")
    plt.show()
    plt.close(fig)


def draw_selection(ax, x, alpha, n: int, *, title: str | None = None) -> None:
    """Draw the paper's Figure-1 geometry for 2-d tokens: the weighted tokens alpha_i x_i (selected ones filled,
    the rest hollow), the context vector s of the top-``n`` set, and the ball B_r(s) whose radius r is the
    distance from s to the nearest non-selected weighted token. Selected tokens inside the ball are the
    distinguishable ones (:func:`attnlimits.selection.distinguishable_fraction`).
    """
    from matplotlib.patches import Circle

    from attnlimits import selection

    x = torch.as_tensor(x, dtype=torch.float64)
    alpha = torch.as_tensor(alpha, dtype=torch.float64)
    if x.dim() != 2 or x.shape[-1] != 2:
        raise ValueError(f"x: expected shape (L, 2) for a planar drawing, got {tuple(x.shape)}")
    dist, chosen = selection.token_distances(alpha, x, n)
    weighted = alpha[:, None] * x
    s = selection.context_vector(alpha, x, n)
    r = dist[~chosen].min() if (~chosen).any() else torch.tensor(0.0)
    inside = chosen & (dist <= r)
    rest = r"$\alpha_j x_j$, $j \notin I_N$"
    ax.scatter(*weighted[~chosen].T, s=22, facecolors="none", edgecolors="0.45", label=rest)
    ax.scatter(*weighted[chosen & ~inside].T, s=30, color=_PALETTE[3], label="selected, outside $B_r(s)$")
    ax.scatter(*weighted[inside].T, s=30, color=_PALETTE[2], label=r"selected, inside $B_r(s)$")
    ax.scatter(*s, marker="*", s=160, color=_PALETTE[0], zorder=5, label="context vector $s$")
    ax.add_patch(Circle(s.tolist(), float(r), fill=False, ls="--", color=_PALETTE[0]))
    ax.set_aspect("equal", adjustable="datalim")
    if title:
        ax.set_title(title)
