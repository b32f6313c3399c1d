"""One look for every figure: a seaborn theme, fixed colours per normaliser, one helper to finish a figure."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns

__all__ = ["NORMALIZER_COLORS", "finish", "set_theme"]

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
