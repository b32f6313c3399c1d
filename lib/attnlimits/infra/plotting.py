"""One look for every figure: a seaborn theme, each normaliser's colour and label, one helper to finish a figure."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns
import torch

__all__ = [
    "NORMALIZER_COLORS",
    "draw_selection",
    "finish",
    "normalizer_colors",
    "normalizer_labels",
    "plot_attention",
    "set_theme",
]

_PALETTE = sns.color_palette("colorblind", 8)
#: Colours for normalisers registered without one: the rest of the colour-blind palette, then matplotlib's cycle.
_SPARE = [*sns.color_palette("colorblind", 10), *sns.color_palette("tab10")]


def normalizer_colors(names=None) -> dict:
    """A colour (RGB tuple) for every normaliser in ``names`` (default: every registered one).

    A registered normaliser keeps the colour its :class:`attnlimits.core.normalizers.Normalizer` entry names; any
    other name (a normaliser registered without a colour, or not registered at all) gets the first spare palette
    colour that no other normaliser uses, in registry order, so that a figure never drops a normaliser and the
    same normaliser gets the same colour in every figure.
    """
    from matplotlib.colors import to_rgb

    from attnlimits.core.normalizers import NORMALIZERS

    names = list(NORMALIZERS) if names is None else list(dict.fromkeys(names))
    fixed = {n: to_rgb(c) for n, e in NORMALIZERS.items() if (c := getattr(e, "color", None)) is not None}
    spare = [c for c in map(to_rgb, _SPARE) if c not in fixed.values()]
    colors = dict(fixed)
    for name in [*NORMALIZERS, *names]:
        if name not in colors:
            colors[name] = spare[(len(colors) - len(fixed)) % len(spare)]
    return {n: colors[n] for n in names}


def normalizer_labels(names=None) -> dict[str, str]:
    """The label legends show for each normaliser in ``names`` (default: every registered one): its registry
    entry's label, else the name itself."""
    from attnlimits.core.normalizers import NORMALIZERS

    names = list(NORMALIZERS) if names is None else list(dict.fromkeys(names))
    return {n: getattr(NORMALIZERS.get(n), "label", n) for n in names}


#: The same normaliser has the same colour in every chapter (the registered normalisers; for any list of names,
#: :func:`normalizer_colors` also colours those registered without a colour).
NORMALIZER_COLORS = normalizer_colors()


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
    distinguishable ones (:func:`attnlimits.core.selection.distinguishable_fraction`).
    """
    from matplotlib.patches import Circle

    from attnlimits.core import selection

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


def plot_attention(cap, heads: Sequence[tuple[int, int]], first: int = 64, tokens=None, batch: int = 0):
    """Heat maps of a few heads' attention weights (query rows × key columns) over the first ``first`` tokens.

    ``heads``: ``(layer, head)`` pairs, drawn in one row. ``tokens``: optional labels for the axes (strings).
    Colour is log10 of the weight, so that both the sharp and the diffuse heads are readable; masked entries blank.
    ``cap``: an :class:`attnlimits.models.Capture`. Returns the matplotlib figure.
    """
    import numpy as np

    for layer, head in heads:
        if layer not in cap or not 0 <= head < cap[layer].q.shape[1]:
            raise ValueError(f"(layer, head) = ({layer}, {head}) is not in this capture")
    n = min(int(first), cap.seq_len)
    ratios = [1.0] * len(heads) + [0.06]  # a narrow last column holds the colour bar
    fig, axes = plt.subplots(
        1, len(heads) + 1, figsize=(3.2 * len(heads) + 0.8, 3.4), squeeze=False, gridspec_kw={"width_ratios": ratios}
    )
    image = None
    for ax, (layer, head) in zip(axes[0][:-1], heads, strict=True):
        w = cap[layer].weights[batch, head, :n, :n].double().numpy()
        w = np.where(np.tril(np.ones((n, n), dtype=bool)), np.log10(np.maximum(w, 1e-6)), np.nan)
        image = ax.imshow(w, cmap="magma", vmin=-6, vmax=0, interpolation="nearest")
        ax.set_title(f"layer {layer}, head {head}", fontsize=10)
        ax.set_xlabel("key position")
        ax.grid(False)
        if tokens is not None:
            ticks = list(range(0, n, max(1, n // 8)))
            ax.set_xticks(ticks, [str(tokens[t])[:8] for t in ticks], rotation=90, fontsize=7)
            ax.set_yticks(ticks, [str(tokens[t])[:8] for t in ticks], fontsize=7)
    axes[0][0].set_ylabel("query position")
    fig.colorbar(image, cax=axes[0][-1], label="log10 attention weight")
    return fig
