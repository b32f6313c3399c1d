"""Per-row statistics of one attention layer, vectorised over heads and query rows (the experiments' kernels).

A layer is given as causal weights ``alpha`` of shape ``(H, L, L)`` (row ``t`` holds query ``t``'s weights; entries
``n > t`` are masked and exactly 0) and token vectors ``x`` of shape ``(H, L, d)``. Row ``t``'s tokens are the
*visible* ones, ``n <= t``: masked future positions are not tokens of the row. Every function returns one value per
head and row, shape ``(H, L)``, equal to what :mod:`attnlimits.selection` and :mod:`attnlimits.bounds` give for the
row's visible prefix ``alpha[h, t, :t+1]``, ``x[h, :t+1]`` (the tests check this row by row).

How it stays fast: no tensor of shape ``(H, L, L, d)`` is ever built. Per N, the context vectors of every row are one
matmul ``s = (alpha masked to its top N) @ x``, and every distance follows from a second one through
``||alpha_i x_i - s||^2 = alpha_i^2 ||x_i||^2 - 2 alpha_i x_i.s + ||s||^2``. Rows are processed in blocks, and a block
of rows ``[r0, r1)`` only reads columns ``[0, r1)`` (the causal triangle), which halves the work.

``first`` (0 or 1) is the first token that counts: ``first=1`` drops token 0 (the attention sink) from selection and
comparison, after the caller has renormalised the remaining weights. ``window`` (None or w >= 1) is a layer's
sliding window: row ``t``'s tokens are then the last w positions ``t - w < n <= t`` (Gemma 3's local layers), the
only ones its softmax sees; None is the plain causal mask.
"""

from __future__ import annotations

import torch

__all__ = ["ROW_BLOCK", "distances", "expectation", "row_blocks", "row_lengths", "separability"]

#: Rows per block: bounds the (H, block, L) intermediates (9 heads x 256 x 1024 float64 = 19 MB each).
ROW_BLOCK = 256


def row_lengths(L: int, first: int = 0, device=None, window: int | None = None) -> torch.Tensor:
    """Number of tokens of each row, ``t + 1 - max(first, t - window + 1)`` for ``t = 0..L-1`` (int64, ``(L,)``)."""
    t = torch.arange(L, device=device)
    start = torch.full_like(t, first) if window is None else (t - window + 1).clamp_min(first)
    return (t + 1 - start).clamp_min(0)


def row_blocks(L: int):
    """Row blocks ``(r0, r1)`` covering ``0..L-1``, :data:`ROW_BLOCK` rows each (the last may be shorter)."""
    for r0 in range(0, L, ROW_BLOCK):
        yield r0, min(L, r0 + ROW_BLOCK)


def _visible(r0: int, r1: int, first: int, device, window: int | None = None) -> torch.Tensor:
    """(r1 - r0, r1) boolean: column n is a token of row t (first <= n <= t, and t - window < n)."""
    t = torch.arange(r0, r1, device=device).unsqueeze(-1)
    n = torch.arange(r1, device=device)
    visible = (n <= t) & (n >= first)
    return visible if window is None else visible & (n > t - window)


def _top(a: torch.Tensor, visible: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Values and indices of the n largest weights among each row's tokens, largest first (non-tokens can never be
    chosen; a row with fewer than n tokens gets -1 weights at non-token indices, which callers mask out)."""
    k = min(n, a.shape[-1])
    return torch.topk(a.masked_fill(~visible, -1.0), k, dim=-1, sorted=True)


def _selected_by_complement(a: torch.Tensor, visible: torch.Tensor, n: int) -> torch.Tensor:
    """Mask of each row's n largest weights, found as the complement of its (tokens - n) smallest: for n close to
    the row length this asks top-k for a few hundred entries instead of nearly all of them."""
    count = visible.sum(-1)  # tokens per row (B,)
    k = int((count - n).clamp_min(0).max())
    selected = visible.expand_as(a).clone()
    if k == 0:
        return selected
    idx = torch.topk(a.masked_fill(~visible, torch.inf), k, dim=-1, largest=False, sorted=True).indices
    drop = torch.arange(k, device=a.device) < (count - n).clamp_min(0).unsqueeze(-1)  # (B, k): first (count-n)
    return selected.scatter_(-1, idx, ~drop.expand_as(idx)) & visible


def _pair_norms(a, x, xx, s, ss, tokens) -> torch.Tensor:
    """||alpha_i x_i - s_t|| for every row t of the block and column i, 0 where column i is not a token."""
    g = torch.bmm(s, x.transpose(1, 2))  # x_i . s_t
    d2 = a * xx.unsqueeze(1)
    d2.sub_(g, alpha=2).mul_(a).add_(ss.unsqueeze(-1))
    return d2.clamp_min_(0).sqrt_().mul_(tokens)


def distances(
    alpha: torch.Tensor, x: torch.Tensor, ns, *, first: int = 0, bound: bool = False, window: int | None = None
):
    """Cumulative distance d~ per row for every n in ``ns`` (Theorem 1), and with ``bound=True`` also the
    reconstructed d_max.

    Returns ``(d_tilde, d_max)``, each ``(len(ns), H, L)``; ``d_max`` is None unless asked. Values of rows with at
    most n tokens are meaningless (nothing is dropped) and left as computed; callers skip them. The token distances
    that d_max needs are computed once for every n.
    """
    H, L, _ = x.shape
    ns = [int(n) for n in ns]
    xx = (x * x).sum(-1)
    d_tilde = x.new_zeros(len(ns), H, L)
    d_max = x.new_zeros(len(ns), H, L) if bound else None
    pair = torch.cdist(x, x) if bound else None
    farthest = _farthest(pair, _WALK) if bound else None
    for r0, r1 in row_blocks(L):
        a, xb = alpha[:, r0:r1, :r1], x[:, :r1]
        visible = _visible(r0, r1, first, x.device, window)
        by_complement = not bound and max(ns) > r1 // 2
        if not by_complement:
            top_val, top_idx = _top(a, visible, max(ns))  # sorted: the first n columns are the top n
        for j, n in enumerate(ns):
            if by_complement:
                selected = _selected_by_complement(a, visible, n)
            else:
                val, idx = top_val[..., :n], top_idx[..., :n]
                selected = torch.zeros_like(a, dtype=torch.bool).scatter_(-1, idx, True) & visible
            s = torch.bmm(torch.where(selected, a, 0.0), xb)
            keep = (visible & ~selected).to(x.dtype)
            d_tilde[j, :, r0:r1] = _pair_norms(a, xb, xx[:, :r1], s, (s * s).sum(-1), keep).sum(-1)
            if bound:
                d_max[j, :, r0:r1] = _dmax_block(
                    pair, farthest, xx.sqrt(), val.clamp_min(0), idx, selected, visible, r0
                )
    return d_tilde, d_max


def _farthest(pair: torch.Tensor, walk: int):
    """Per token j: the prefix maxima ``P[h, t, j] = max_{i <= t} ||x_i - x_j||`` with their maximisers ``A``, both
    ``(H, L, L)``, and the ``walk`` tokens farthest from j, farthest first ``(H, L, walk)``."""
    values, where = torch.cummax(pair, dim=-1)  # over i, for each j: (H, j, t)
    order = torch.topk(pair, min(walk, pair.shape[-1]), dim=-1).indices
    return values.transpose(1, 2), where.transpose(1, 2), order


#: How many of each token's farthest tokens are tried before an exact masked maximum (see :func:`_dmax_block`).
_WALK = 32
#: Pairs (row, selected token) resolved at once by the exact masked maximum (bounds memory).
_FALLBACK_CHUNK = 8192


def _dmax_block(pair, farthest, norms, val, idx, selected, visible, r0):
    """(1 - abar) d1 + [(1 - abar) + (l - N) abar] max_{j in I} ||x_j|| for a block of rows (Theorem 1, as
    reconstructed), with l the row's token count and d1 the largest distance between a selected and a dropped token.

    d1 is exact, in steps that each handle what the previous one left open. The prefix maximum of ||x_i - x_j|| over
    i <= t is an upper bound for selected j, and the value itself when its maximiser is dropped (most pairs); pairs
    whose bound cannot beat the best exact value are done; the rest take the first dropped token of row t among
    the tokens farthest from j, or else a masked maximum over the whole row.
    """
    H, B, N = idx.shape
    r1 = selected.shape[-1]
    abar = val.sum(-1)
    out_mass = (1 - abar).clamp_min(0)
    m = torch.gather(norms[:, :r1].unsqueeze(1).expand(H, B, r1), -1, idx).amax(-1)
    dropped = visible & ~selected  # (H, B, r1)
    P, A, order = farthest
    per_j = torch.gather(P[:, r0 : r0 + B], -1, idx)  # (H, B, N): max over all i <= t, an upper bound
    arg = torch.gather(A[:, r0 : r0 + B], -1, idx)
    exact = torch.gather(dropped, -1, arg)  # the prefix maximiser is dropped: the bound is the value
    best = torch.where(exact, per_j, 0.0).amax(-1, keepdim=True)
    open_ = (~exact & (per_j > best)).nonzero()  # only pairs that could still beat the best exact value
    per_j = torch.where(exact, per_j, 0.0)
    if len(open_):
        h, b, k = open_.unbind(-1)
        j = idx[h, b, k]
        cand = order[h, j]  # (F, walk) farthest first
        ok = (cand < r1) & dropped[h.unsqueeze(-1), b.unsqueeze(-1), cand.clamp_max(r1 - 1)]
        found = ok.any(-1)
        first_ok = torch.gather(cand, -1, ok.to(torch.int8).argmax(-1, keepdim=True)).squeeze(-1)
        per_j[h[found], b[found], k[found]] = pair[h[found], j[found], first_ok[found]]
        rest = (~found).nonzero().squeeze(-1)
        for c in range(0, len(rest), _FALLBACK_CHUNK):
            sel = rest[c : c + _FALLBACK_CHUNK]
            hh, bb, kk = h[sel], b[sel], k[sel]
            per_j[hh, bb, kk] = (pair[hh, j[sel], :r1] * dropped[hh, bb]).amax(-1)  # distances are >= 0
    d1 = per_j.amax(-1)
    length = visible.sum(-1).to(pair.dtype)
    return out_mass * d1 + (out_mass + (length - N) * (1 - out_mass)) * m


def expectation(alpha: torch.Tensor, x: torch.Tensor, ns, *, first: int = 0, window: int | None = None) -> torch.Tensor:
    """Closed-form random-selection expectation E per row for every n in ``ns``: shape ``(len(ns), H, L)``.

    E = ((l - n) / l) sum_i ||(1 + c) y_i - c Y||, c = n / (l - 1), y_i = alpha_i x_i, Y = sum_i y_i, l the row's
    token count (:func:`attnlimits.selection.random_selection_expectation` on the visible prefix). The matmul
    x_i . Y is shared by every n.
    """
    H, L, _ = x.shape
    ns = [int(n) for n in ns]
    xx = (x * x).sum(-1)
    out = x.new_zeros(len(ns), H, L)
    for r0, r1 in row_blocks(L):
        a, xb = alpha[:, r0:r1, :r1], x[:, :r1]
        visible = _visible(r0, r1, first, x.device, window)
        tokens = visible.to(x.dtype)
        Y = torch.bmm(a, xb)
        g = torch.bmm(Y, xb.transpose(1, 2))
        yy = (Y * Y).sum(-1).unsqueeze(-1)
        ay = a * a * xx[:, :r1].unsqueeze(1)
        length = visible.sum(-1).to(x.dtype)  # (B,)
        for j, n in enumerate(ns):
            c = (n / (length - 1).clamp_min(1)).view(1, -1, 1)
            d2 = ay * (1 + c) ** 2 - 2 * c * (1 + c) * a * g + c * c * yy
            total = d2.clamp_min_(0).sqrt_().mul_(tokens).sum(-1)
            out[j, :, r0:r1] = ((length - n).clamp_min(0) / length.clamp_min(1)) * total
    return out


def separability(alpha: torch.Tensor, x: torch.Tensor, n: int, *, first: int = 0, window: int | None = None):
    """N_s / N per row at the radius R = min over dropped tokens of ||alpha_j x_j - s|| (Theorem 2), with the
    selected weights (largest first) and R that the bounds need.

    Returns ``(ns_frac (H, L), weights (H, L, n), R (H, L))``; ``x`` should already lie on the sphere.
    """
    H, L, _ = x.shape
    xx = (x * x).sum(-1)
    frac, radius, weights = x.new_zeros(H, L), x.new_zeros(H, L), x.new_zeros(H, L, n)
    for r0, r1 in row_blocks(L):
        a, xb = alpha[:, r0:r1, :r1], x[:, :r1]
        visible = _visible(r0, r1, first, x.device, window)
        val, idx = _top(a, visible, n)
        selected = torch.zeros_like(a, dtype=torch.bool).scatter_(-1, idx, True) & visible
        s = torch.bmm(torch.where(selected, a, 0.0), xb)
        dist = _pair_norms(a, xb, xx[:, :r1], s, (s * s).sum(-1), visible.to(x.dtype))
        R = dist.masked_fill(~(visible & ~selected), torch.inf).amin(-1)
        inside = (selected & (dist <= R.unsqueeze(-1))).sum(-1)
        frac[:, r0:r1] = inside.to(x.dtype) / n
        radius[:, r0:r1] = R
        weights[:, r0:r1, : val.shape[-1]] = val.clamp_min(0)
    return frac, weights, radius
