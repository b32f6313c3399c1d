"""Which query rows the algorithms read: every row, or a stratified sample of them, and a head's mean over them.

A row at position t of a causal window sees t + 1 tokens, so it costs about t columns: a long window's rows are
mostly expensive ones. A preset with a ``row_stride`` has every algorithm read a stratified sample instead
(:func:`sample_rows`: every row below :data:`SAMPLE_FROM`, then one seeded row per block of the stride, each standing
for the rows of its block; :func:`row_samples` names the block each reading reads), each head's value the weighted
mean over the sampled rows with its standard error (:func:`sampled_means`). A sample of a long window is computed in
bins of positions, each bin on the columns its rows see (:func:`position_bins`, :func:`by_bins`).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "COARSER",
    "CRITICAL_STRIDE",
    "GRADIENT_FROM",
    "GRADIENT_STRIDE",
    "SAMPLE_FROM",
    "SAMPLE_STRIDE",
    "by_bins",
    "check_stride",
    "on_rows",
    "position_bins",
    "row_samples",
    "sample_rows",
    "sampled_means",
]

#: The rows the sampled readings (``E_mc``, ``E_perm``) average: every row t < SAMPLE_FROM, then one seeded random
#: row in each block of SAMPLE_STRIDE rows (a stratified sample; a fourth of the rows of a long window). A preset
#: with a ``row_stride`` has every algorithm read such a sample (blocks of ``row_stride`` rows) instead of every row.
SAMPLE_FROM, SAMPLE_STRIDE = 128, 4
#: The block of the row sample that Algorithm 3's ``E_full`` and ``E_perm`` searches read (a sixteenth of the rows
#: beyond SAMPLE_FROM: each search evaluates a dozen N per length, most of them on nearly every row); with a
#: preset's ``row_stride``, blocks COARSER times as long (at least CRITICAL_STRIDE).
CRITICAL_STRIDE = 16
#: How much coarser than a preset's ``row_stride`` the costliest readings' row samples are: Algorithm 3's
#: ``E_full`` and ``E_perm`` searches and Algorithm 4 on the input embeddings (d_model dimensions, nine times a
#: SmolLM2 head's). Every window reads its own sample, so the noise a coarse sample adds to a head's mean over
#: the run's windows shrinks with their number.
COARSER = 4
#: Algorithm 5's row sample when a preset samples rows (its window is short, L = 256, and a row's cost grows with
#: t there as everywhere): every row t < GRADIENT_FROM, then one row per block of GRADIENT_STRIDE rows (or of the
#: preset's ``row_stride`` where that is finer), about an eighth of the rows.
GRADIENT_FROM, GRADIENT_STRIDE = 16, 8


def sample_rows(
    top: int, seed: int, stride: int = SAMPLE_STRIDE, *, every_below: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sampled rows of a window of ``top`` rows and how many rows each stands for: ``(positions, weights)``
    (every row below ``every_below``, :data:`SAMPLE_FROM` by default, then one seeded random row per block of
    ``stride``; a block cut short by ``top`` stands for its rows). A head's weighted mean over the sampled rows
    is the stratified estimate of its mean over every row (:func:`sampled_means`)."""
    below = SAMPLE_FROM if every_below is None else every_below
    gen = torch.Generator().manual_seed(int(seed))
    head = torch.arange(min(top, below))
    starts = torch.arange(below, max(top, below), stride)
    sizes = (top - starts).clamp_max(stride)
    picks = starts + (torch.rand(len(starts), generator=gen) * sizes).long()
    return torch.cat([head, picks]), torch.cat([torch.ones(len(head)), sizes.double()]).double()


def row_samples(row_stride: int | None) -> dict[str, int | None]:
    """The block length of each row sample a run with a preset's ``row_stride`` reads (None: every row): ``rows``
    (Algorithms 1-2, Algorithm 3's ``E``, Algorithm 4 on the values, the sink), ``critical`` (Algorithm 3's
    ``E_full`` and ``E_perm``), ``embedding`` (Algorithm 4 on the input embeddings) and ``gradient`` (Algorithm 5,
    always every row). Every sample holds every row below :data:`SAMPLE_FROM` (:func:`sample_rows`)."""
    stride = check_stride("row_stride", row_stride)
    return {
        "rows": stride,
        "critical": max(CRITICAL_STRIDE, COARSER * (stride or 0)),
        "embedding": max(SAMPLE_STRIDE, COARSER * (stride or 0)),
        "gradient": None,
    }


def position_bins(positions: torch.Tensor) -> list[slice]:
    """Slices of increasing query ``positions`` into bins: the rows below :data:`SAMPLE_FROM`, then those in
    ``[SAMPLE_FROM, 2 SAMPLE_FROM)``, ``[2 SAMPLE_FROM, 4 SAMPLE_FROM)``... A row at position t costs about t columns;
    a bin computed alone (:func:`by_bins`) reads the columns its last row sees, at most twice what each row needs,
    where one block of a row sample would read every column for every row."""
    if len(positions) == 0:
        return []
    edges, top = [0, SAMPLE_FROM], int(positions[-1]) + 1
    while edges[-1] < top:
        edges.append(2 * edges[-1])
    cuts = torch.searchsorted(positions.cpu(), torch.tensor(edges)).tolist()
    return [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]


def by_bins(
    fn, alpha: torch.Tensor, x: torch.Tensor, positions: torch.Tensor, *args, seed=None, row_dims=None, **kwargs
):
    """``fn(alpha, x, *args, positions=positions, **kwargs)`` (a kernel of :mod:`attnlimits.core.rowstats` under
    the visible counting) computed bin by bin (:func:`position_bins`), each bin on the columns its rows see, and put
    back together along the rows (the last dimension, or ``row_dims``, one per part of a tuple result; None parts
    stay None). A seeded kernel draws bin k (rows below :data:`SAMPLE_FROM`: k = 0, then k = 1, 2... for each
    doubling; the same k for the same positions whichever bins hold rows) from ``seed + 104729 k``."""
    parts = []
    for rows in position_bins(positions):
        at = positions[rows]
        top = int(at[-1]) + 1
        k = (int(at[0]) // SAMPLE_FROM).bit_length()
        drawn = {} if seed is None else {"seed": seed + 104_729 * k}
        parts.append(fn(alpha[:, rows, :top], x[:, :top], *args, positions=at, **drawn, **kwargs))
    if isinstance(parts[0], tuple):
        dims = row_dims or (-1,) * len(parts[0])
        return tuple(
            None if p[0] is None else torch.cat(p, dim=d) for p, d in zip(zip(*parts, strict=True), dims, strict=True)
        )
    return torch.cat(parts, dim=-1)


def on_rows(fn, alpha, x, positions, *args, binned: bool, **kwargs):
    """A kernel of :mod:`attnlimits.core.rowstats` on the rows at ``positions`` (None: every row): bin by bin
    (:func:`by_bins`) when ``binned``, else in one call."""
    if binned:
        return by_bins(fn, alpha, x, positions, *args, **kwargs)
    return fn(alpha, x, *args, positions=positions, **kwargs)


def sampled_means(
    values, variance, positions, weights, lengths, n: int, L: int, *, successive: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the stratified estimate of the mean over the rows t < L with more than n tokens from the sampled
    rows (``values`` ``(H, R)`` at ``positions`` ``(R,)`` in increasing order, each standing for ``weights`` rows),
    and its standard error: the Monte Carlo ``variance`` of each row (or None) plus the sampling error of the
    strided rows. That error needs the spread of the rows inside a block, which one row per block cannot show:
    by default the spread of the strided rows stands for it (conservative where a head's values drift along the
    window, since the drift counts as spread); ``successive=True`` takes half the mean squared difference of
    successive strided rows instead (neighbouring blocks: a smooth drift cancels), which the tests find
    consistent with the spread of the estimate over seeds."""
    keep = (positions < L) & (lengths[positions] > n)
    if not bool(keep.any()):
        nan = np.full(values.shape[0], np.nan)
        return nan, nan
    v, w = values[:, keep].double(), weights[keep].to(values.device)
    total = w.sum()
    mean = (v * w).sum(-1) / total
    var = torch.zeros_like(mean)
    if variance is not None:
        var = var + (variance[:, keep].double() * w * w).sum(-1) / total**2
    strided = w > 1
    if int(strided.sum()) > 1:
        if successive:
            spread = v[:, strided].diff(dim=-1).square().mean(-1) / 2
        else:
            spread = v[:, strided].var(-1)
        var = var + spread * (w[strided] * (w[strided] - 1)).sum() / total**2
    return mean.cpu().numpy(), var.sqrt().cpu().numpy()


def check_stride(name: str, stride) -> int | None:
    """``stride`` when it is None (every row) or an integer >= 1; else a ValueError naming ``name``."""
    if stride is not None and (isinstance(stride, bool) or not isinstance(stride, int) or stride < 1):
        raise ValueError(f"{name}: must be None (every row) or an integer >= 1, got {stride!r}")
    return stride
