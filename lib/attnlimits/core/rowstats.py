"""Per-row statistics of one attention layer, vectorised over heads and query rows (the experiments' kernels).

A layer is given as causal weights ``alpha`` of shape ``(H, L, L)`` (row ``t`` holds query ``t``'s weights; entries
``n > t`` are masked and exactly 0) and token vectors ``x`` of shape ``(H, L, d)``. Row ``t``'s tokens are the
*visible* ones, ``n <= t``: masked future positions are not tokens of the row. Every function returns one value per
head and row, shape ``(H, L)``, equal to what :mod:`attnlimits.core.selection` and :mod:`attnlimits.core.bounds` give
for the
row's visible prefix ``alpha[h, t, :t+1]``, ``x[h, :t+1]`` (the tests check this row by row).

``positions`` generalises the rows: weights ``(H, R, L)`` whose row r is the query at position ``positions[r]``
(it sees the tokens ``n <= positions[r]``); the default ``arange(R)`` is the causal layer above. A block of R query
rows that each see all L tokens (the heads of :mod:`attnlimits.studies.alternatives`) is ``positions = full(R, L - 1)``.

How it stays fast: no tensor of shape ``(H, L, L, d)`` is ever built. Per N, the context vectors of every row are one
matmul ``s = (alpha masked to its top N) @ x``, and every distance follows from a second one through
``||alpha_i x_i - s||^2 = alpha_i^2 ||x_i||^2 - 2 alpha_i x_i.s + ||s||^2``. Rows are processed in blocks, and a block
of rows ``[r0, r1)`` only reads columns ``[0, r1)`` (the causal triangle), which halves the work.

``first`` (0 or 1) is the first token that counts: ``first=1`` drops token 0 (the attention sink) from selection and
comparison, after the caller has renormalised the remaining weights. ``window`` (None or w >= 1) is a layer's
sliding window: row ``t``'s tokens are then the last w positions ``t - w < n <= t`` (Gemma 3's local layers), the
only ones its softmax sees; None is the plain causal mask.

Algorithm 5's measurement :func:`finite_difference_g` (the sensitivity g(T, eps) of a normaliser on logits of any
heads and rows) is the one kernel here that reads logits rather than weights.

One concept, one module (over 600 lines): the per-row kernels, which share the blocked causal-triangle
machinery above; split, each kernel would need it from another module.
"""

from __future__ import annotations

import numpy as np
import torch

from attnlimits.core import validation

__all__ = [
    "jacobian_spectral_norm",
    "row_means",
    "COUNTINGS",
    "ROW_BLOCK",
    "distances",
    "expectation",
    "farthest_tokens",
    "finite_difference_g",
    "output_norms",
    "permuted_distance",
    "random_expectation",
    "row_blocks",
    "row_lengths",
    "separability",
]

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


def _check_positions(alpha: torch.Tensor, x: torch.Tensor, positions) -> torch.Tensor | None:
    """``positions`` as an int64 tensor on alpha's device (None stays None: row r is the query at position r)."""
    rows, columns = alpha.shape[-2], alpha.shape[-1]
    if positions is None:
        if rows > columns:
            raise ValueError(f"positions: needed when alpha has more rows ({rows}) than columns ({columns})")
        return None
    p = torch.as_tensor(positions, device=alpha.device)
    if p.shape != (rows,) or p.dtype.is_floating_point or p.dtype == torch.bool:
        raise ValueError(f"positions: expected {rows} integers (one per row of alpha), got {tuple(p.shape)} {p.dtype}")
    p = p.long()
    top = min(columns, x.shape[-2])
    if rows and not (0 <= int(p.min()) and int(p.max()) < top):
        raise ValueError(f"positions: must lie in [0, {top - 1}] (the tokens of alpha and x), got {p.tolist()}")
    return p


def _blocks(rows: int, positions: torch.Tensor | None, device, columns: int | None = None):
    """Row blocks ``(r0, r1, t, c)``: the block's query positions t ``(r1 - r0,)`` and the columns ``[0, c)`` it
    reads, c = max(t) + 1 (the causal triangle: ``c = r1`` for the default positions), or every one of
    ``columns`` when given (the ``row`` counting reads the whole row)."""
    for r0, r1 in row_blocks(rows):
        t = torch.arange(r0, r1, device=device) if positions is None else positions[r0:r1]
        yield r0, r1, t, (int(t.max()) + 1 if columns is None else columns)


def _visible(t: torch.Tensor, c: int, first: int, window: int | None = None, counting: str = "visible"):
    """(len(t), c) boolean: column n is a token of the query at position t (first <= n <= t, and t - window < n);
    with ``counting="row"`` every column n >= first is (the whole row, masked positions included)."""
    t = t.unsqueeze(-1)
    n = torch.arange(c, device=t.device)
    if counting == "row":
        return (n >= first).expand(t.shape[0], c)
    visible = (n <= t) & (n >= first)
    return visible if window is None else visible & (n > t - window)


COUNTINGS = ("visible", "row")


def _check_counting(counting: str) -> str:
    if counting not in COUNTINGS:
        raise ValueError(f"counting: must be one of {COUNTINGS}, got {counting!r}")
    return counting


def _top(a: torch.Tensor, visible: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Values and indices of the n largest weights among each row's tokens, largest first (non-tokens can never be
    chosen; a row with fewer than n tokens gets -1 weights at non-token indices, which callers mask out)."""
    k = min(n, a.shape[-1])
    return torch.topk(a.masked_fill(~visible, -1.0), k, dim=-1, sorted=True)


def _complement_masks(a: torch.Tensor, visible: torch.Tensor, ns):
    """Masks of each row's n largest weights for every n in ``ns``, found as the complement of its (tokens - n)
    smallest: for n close to the row length this asks top-k for a few hundred entries instead of nearly all of
    them, and one top-k of the smallest serves every n."""
    count = visible.sum(-1)  # tokens per row (B,)
    k = int((count - min(ns)).clamp_min(0).max())
    idx = None
    if k:
        idx = torch.topk(a.masked_fill(~visible, torch.inf), k, dim=-1, largest=False, sorted=True).indices
    for n in ns:
        selected = visible.expand_as(a).clone()
        if idx is not None:
            drop = torch.arange(k, device=a.device) < (count - n).clamp_min(0).unsqueeze(-1)  # first (count - n)
            selected.scatter_(-1, idx, ~drop.expand_as(idx))
        yield selected & visible


def _pair_norms(a, xx, g, ss, tokens) -> torch.Tensor:
    """||alpha_i x_i - s_t|| for every row t of the block and column i from g = x_i . s_t, 0 where column i is not
    a token (``tokens`` 0/1)."""
    d2 = a * xx.unsqueeze(1)
    d2.sub_(g, alpha=2).mul_(a).add_(ss.unsqueeze(-1))
    return d2.clamp_min_(0).sqrt_().mul_(tokens)


def _ranks(idx: torch.Tensor, c: int) -> torch.Tensor:
    """(H, B, c) int32: each column's place among the row's top-k columns ``idx`` (0 = the largest weight), k for
    the columns outside them; ``rank < n`` is then the row's top n, for every n <= k, from one scatter."""
    H, B, k = idx.shape
    rank = torch.full((H, B, c), k, dtype=torch.int32, device=idx.device)
    return rank.scatter_(-1, idx, torch.arange(k, dtype=torch.int32, device=idx.device).expand(H, B, k).contiguous())


def distances(
    alpha: torch.Tensor,
    x: torch.Tensor,
    ns,
    *,
    first: int = 0,
    bound: bool = False,
    window: int | None = None,
    positions=None,
    counting: str = "visible",
    kept: bool = False,
    farthest=None,
):
    """Cumulative distance d~ per row for every n in ``ns`` (Theorem 1), and with ``bound=True`` also the
    reconstructed d_max.

    Returns ``(d_tilde, d_max)``, each ``(len(ns), H, R)`` (R rows of alpha); ``d_max`` is None unless asked;
    ``kept=True`` appends ||s||, the norm of the kept aggregate (what each further dropped token of weight 0 adds).
    Values of rows with at most n tokens are meaningless (nothing is dropped) and left as computed; callers skip
    them. One top-k per block serves every n (the top n are its first n); the token distances that d_max needs
    are computed once for every n. ``counting="row"``: every position of the row is a token, a masked one with
    weight 0 (each then adds ||s|| to d~); d_max is only defined for the visible tokens. ``farthest``: what
    d_max reads of the tokens, :func:`farthest_tokens` of ``x`` or of a longer x that begins with it (computed
    here when None; several calls on rows of one window can share it).
    """
    positions = _check_positions(alpha, x, positions)
    if _check_counting(counting) == "row" and bound:
        raise ValueError("bound: d_max is computed for counting='visible' only")
    H, R = alpha.shape[0], alpha.shape[1]
    ns = [int(n) for n in ns]
    xx = (x * x).sum(-1)
    d_tilde = x.new_zeros(len(ns), H, R)
    d_max = x.new_zeros(len(ns), H, R) if bound else None
    s_norm = x.new_zeros(len(ns), H, R) if kept else None
    if bound and farthest is None:
        farthest = farthest_tokens(x)
    pair, farthest = farthest if bound else (None, None)
    columns = alpha.shape[-1] if counting == "row" else None
    for r0, r1, t, c in _blocks(R, positions, x.device, columns):
        a, xb = alpha[:, r0:r1, :c], x[:, :c]
        visible = _visible(t, c, first, window, counting)
        if bound:
            top_val, top_idx = _top(a, visible, max(ns))
            rank = _ranks(top_idx, c)
            rows = slice(r0, r1) if positions is None else t
            d_max[:, :, r0:r1] = _dmax_block(pair, farthest, xx.sqrt(), top_val, top_idx, rank, visible, rows, ns)
            masks = [rank < n for n in ns]
        else:
            masks = _selections(a, visible, ns)
        d_tilde[:, :, r0:r1] = _dtilde_block(a, xb, xx[:, :c], visible, masks, s_norm, (r0, r1))
    return (d_tilde, d_max, s_norm) if kept else (d_tilde, d_max)


def _selections(a: torch.Tensor, visible: torch.Tensor, ns):
    """Masks of each row's n largest weights for every n in ``ns``: one top-k of the largest when every n is at
    most half the block's columns, else the complement of the few smallest (:func:`_complement_masks`)."""
    if max(ns) <= a.shape[-1] // 2:
        rank = _ranks(_top(a, visible, max(ns))[1], a.shape[-1])  # sorted: the first n columns are the top n
        return (rank < n for n in ns)
    return _complement_masks(a, visible, ns)


def _dtilde_block(a, xb, xx, visible, masks, s_norm=None, rows=None) -> torch.Tensor:
    """d~ of every row of a block for each selection mask in ``masks`` (an iterable of (H or 1, B, c) booleans):
    ``(len(masks), H, B)``; ||s|| goes into ``s_norm[j, :, rows]`` when given."""
    out = []
    for j, selected in enumerate(masks):
        s = torch.bmm(torch.where(selected, a, 0.0), xb)
        g = torch.bmm(s, xb.transpose(1, 2))
        ss = (s * s).sum(-1)
        if s_norm is not None:
            s_norm[j, :, rows[0] : rows[1]] = ss.sqrt()
        keep = visible & ~selected
        out.append(_pair_norms(a, xx, g, ss, keep.to(xb.dtype)).sum(-1))
    return torch.stack(out)


def output_norms(alpha: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """||o_t|| = ||sum_n alpha_tn x_n|| per head and row ``(H, R)``: the head's output before the projection (what
    each token of weight 0 adds to E_full under the row counting)."""
    return torch.linalg.vector_norm(torch.matmul(alpha, x[:, : alpha.shape[-1]]), dim=-1)


def _dmax_block(pair, farthest, norms, top_val, top_idx, rank, visible, rows, ns):
    """(1 - abar) d1 + [(1 - abar) + (l - N) abar] max_{j in I} ||x_j|| for a block of rows and every N in ``ns``
    (Theorem 1, as reconstructed), ``(len(ns), H, B)``, with l the row's token count and d1 the largest distance
    between a selected and a dropped token; ``rows`` indexes the block's query positions in ``farthest``.

    d1 is exact, in steps that each handle what the previous one left open. The prefix maximum of ||x_i - x_j|| over
    i <= t is an upper bound for selected j, and the value itself when its maximiser is dropped (most pairs); pairs
    whose bound cannot beat the best exact value are done; the rest take the first dropped token of row t among
    the tokens farthest from j, or else a masked maximum over the whole row. Rows with at most N tokens drop
    nothing and are skipped.
    """
    H, B, _ = top_idx.shape
    r1 = rank.shape[-1]
    P, A, order = farthest
    per_j_all = torch.gather(P[:, rows], -1, top_idx)  # (H, B, K): max over all i <= t, an upper bound
    arg_all = torch.gather(A[:, rows], -1, top_idx)
    arg_rank = torch.gather(rank, -1, arg_all)
    arg_visible = torch.gather(visible.expand(H, B, r1), -1, arg_all)
    norm_max = torch.cummax(torch.gather(norms[:, :r1].unsqueeze(1).expand(H, B, r1), -1, top_idx), -1).values
    mass = torch.cumsum(top_val.clamp_min(0), -1)
    length = visible.sum(-1)
    out = pair.new_zeros(len(ns), H, B)
    for q, n in enumerate(ns):
        k = min(n, top_idx.shape[-1])
        per_j = per_j_all[..., :k]
        exact = arg_visible[..., :k] & (arg_rank[..., :k] >= n)  # the prefix maximiser is dropped: the bound is exact
        best = torch.where(exact, per_j, 0.0).amax(-1, keepdim=True)
        open_ = (~exact & (per_j > best) & (length > n).view(1, B, 1)).nonzero()
        per_j = torch.where(exact, per_j, 0.0)
        if len(open_):
            h, b, i = open_.unbind(-1)
            j = top_idx[h, b, i]
            cand = order[h, j]  # (F, walk) farthest first
            inside = cand.clamp_max(r1 - 1)
            ok = (cand < r1) & visible[b.unsqueeze(-1), inside] & (rank[h.unsqueeze(-1), b.unsqueeze(-1), inside] >= n)
            found = ok.any(-1)
            first_ok = torch.gather(cand, -1, ok.to(torch.int8).argmax(-1, keepdim=True)).squeeze(-1)
            per_j[h[found], b[found], i[found]] = pair[h[found], j[found], first_ok[found]]
            rest = (~found).nonzero().squeeze(-1)
            for c in range(0, len(rest), _FALLBACK_CHUNK):
                sel = rest[c : c + _FALLBACK_CHUNK]
                hh, bb, ii = h[sel], b[sel], i[sel]
                dropped = visible[bb] & (rank[hh, bb] >= n)
                per_j[hh, bb, ii] = (pair[hh, j[sel], :r1] * dropped).amax(-1)  # distances are >= 0
        d1 = per_j.amax(-1)
        out_mass = (1 - mass[..., k - 1]).clamp_min(0)
        out[q] = out_mass * d1 + (out_mass + (length - n).to(pair.dtype) * (1 - out_mass)) * norm_max[..., k - 1]
    return out


def farthest_tokens(x: torch.Tensor):
    """What :func:`distances` reads of the tokens ``x`` ``(H, L, d)`` for d_max: their distances ``(H, L, L)`` and
    the tables of :func:`_farthest`. The tables of a longer x serve every prefix of it."""
    pair = torch.cdist(x, x)
    return pair, _farthest(pair, _WALK)


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


def expectation(
    alpha: torch.Tensor,
    x: torch.Tensor,
    ns,
    *,
    first: int = 0,
    window: int | None = None,
    positions=None,
    counting: str = "visible",
    full: bool = False,
) -> torch.Tensor:
    """Closed-form random-selection expectation E per row for every n in ``ns``: shape ``(len(ns), H, R)``.

    E = ((l - n) / l) sum_i ||(1 + c) y_i - c Y||, c = n / (l - 1), y_i = alpha_i x_i, Y = sum_i y_i, l the row's
    token count (:func:`attnlimits.core.selection.random_selection_expectation` on the visible prefix): the book's
    reconstruction of the paper's Eq. (10). ``full=True`` is the reading with the inner factor n / (l - 1)
    replaced by 1, E_full = ((l - n) / l) sum_i ||2 y_i - Y|| (it grows like l whenever ||Y|| does not vanish).
    ``counting="row"``: every position of the row is a token, a masked one with weight 0 (l = the row's length).
    The matmul x_i . Y is shared by every n.
    """
    positions = _check_positions(alpha, x, positions)
    H, R = alpha.shape[0], alpha.shape[1]
    ns = [int(n) for n in ns]
    xx = (x * x).sum(-1)
    out = x.new_zeros(len(ns), H, R)
    columns = alpha.shape[-1] if _check_counting(counting) == "row" else None
    for r0, r1, t, c in _blocks(R, positions, x.device, columns):
        a, xb = alpha[:, r0:r1, :c], x[:, :c]
        visible = _visible(t, c, first, window, counting)
        tokens = visible.to(x.dtype)
        Y = torch.bmm(a, xb)
        ag = torch.bmm(Y, xb.transpose(1, 2)).mul_(a)  # alpha_i x_i . Y
        yy = (Y * Y).sum(-1).unsqueeze(-1)
        ay = a * a * xx[:, :c].unsqueeze(1)  # ||alpha_i x_i||^2
        length = visible.sum(-1).to(x.dtype)  # (B,)
        for j, n in enumerate(ns):
            k = torch.ones_like(length) if full else n / (length - 1).clamp_min(1)
            k = k.view(1, -1, 1)
            # ||(1 + k) y_i - k Y||^2 = (1 + k)^2 ||y_i||^2 - 2 k (1 + k) y_i . Y + k^2 ||Y||^2, in one buffer
            d2 = (ay * (1 + k) ** 2).addcmul_(ag, -2 * k * (1 + k)).add_(k * k * yy)
            total = d2.clamp_min_(0).sqrt_().mul_(tokens).sum(-1)
            out[j, :, r0:r1] = ((length - n).clamp_min(0) / length.clamp_min(1)) * total
    return out


def _random_order(visible: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """(B, c) int64: each row's tokens in a uniformly random order, then its non-tokens in column order, drawn on
    the CPU from ``gen`` (the same draws on any device)."""
    return _order_by(torch.rand(visible.shape, generator=gen, dtype=torch.float64).to(visible.device), visible)


def _order_by(keys: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """(..., B, c) int64: each row's tokens sorted by their ``keys`` (uniform in [0, 1)), then its non-tokens in
    column order."""
    c = visible.shape[-1]
    keys = torch.where(visible, keys, 2.0 + torch.arange(c, device=visible.device, dtype=torch.float64))
    return keys.argsort(-1)


def _row_orders(visible: torch.Tensor, t: torch.Tensor, seed: int, samples: int, width: int | None) -> torch.Tensor:
    """(samples, B, c) int64: as :func:`_random_order`, but row i (at position ``t[i]``) draws its keys from a
    stream of its own, numpy's ``default_rng([seed, t[i]])``: ``width`` keys per sample (its t + 1 columns under
    the visible counting), so a row's orders are the same in any call that reads it."""
    if seed < 0:
        raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
    B, c = visible.shape
    keys = np.zeros((samples, B, c))
    for i, at in enumerate(t.tolist()):
        drawn = np.random.default_rng([seed, at]).random((samples, width or at + 1))
        keys[:, i, : drawn.shape[-1]] = drawn[:, :c]
    return _order_by(torch.from_numpy(keys).to(visible.device), visible)


def _inverse(order: torch.Tensor) -> torch.Tensor:
    """The ranks of a permutation per row: ``rank[order[k]] = k``."""
    B, c = order.shape
    return torch.empty_like(order).scatter_(-1, order, torch.arange(c, device=order.device).expand(B, c))


def _check_samples(samples) -> int:
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples: must be an integer >= 1, got {samples!r}")
    return samples


def random_expectation(
    alpha: torch.Tensor,
    x: torch.Tensor,
    ns,
    *,
    samples: int = 2,
    seed: int = 0,
    first: int = 0,
    window: int | None = None,
    positions=None,
    counting: str = "visible",
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact expectation of d~ over uniformly random n-subsets of each row's tokens, by Monte Carlo:
    ``(mean, variance)``, each ``(len(ns), H, R)``.

    ``samples`` subsets per row (the same subsets for every head; nested over n: the first n of one random order),
    averaged; ``variance`` is the variance of that average (the sample variance over the draws / samples; 0 with
    one sample), so a head's mean over m rows has the standard error sqrt(sum of variances) / m. Seeded: the same
    call repeats exactly. Unlike :func:`expectation` (the norm of a conditional mean), this is the expectation
    itself; it is bounded by (1 + n) max_i ||x_i|| at every length (the distance-vs-length chapter proves it).
    """
    positions = _check_positions(alpha, x, positions)
    samples = _check_samples(samples)
    H, R = alpha.shape[0], alpha.shape[1]
    ns = [int(n) for n in ns]
    xx = (x * x).sum(-1)
    total, squares = x.new_zeros(len(ns), H, R), x.new_zeros(len(ns), H, R)
    gen = torch.Generator().manual_seed(int(seed))
    columns = alpha.shape[-1] if _check_counting(counting) == "row" else None
    for r0, r1, t, c in _blocks(R, positions, x.device, columns):
        a, xb = alpha[:, r0:r1, :c], x[:, :c]
        visible = _visible(t, c, first, window, counting)
        for _ in range(samples):
            rank = _inverse(_random_order(visible, gen))  # rank < n: a uniform n-subset of the tokens, every n
            d = _dtilde_block(a, xb, xx[:, :c], visible, [(rank < n).unsqueeze(0) & visible for n in ns])
            total[:, :, r0:r1] += d
            squares[:, :, r0:r1] += d * d
    mean = total / samples
    variance = ((squares - samples * mean * mean).clamp_min(0) / max(samples - 1, 1) / samples) * (samples > 1)
    return mean, variance


def permuted_distance(
    alpha: torch.Tensor,
    x: torch.Tensor,
    ns,
    *,
    samples: int = 1,
    seed: int = 0,
    first: int = 0,
    window: int | None = None,
    positions=None,
    counting: str = "visible",
) -> torch.Tensor:
    """A permutation null of d~: d~ of each row after its weights are permuted uniformly over its tokens (the row's
    top n weights land on n random tokens, the rest of the weights on the others), averaged over ``samples``
    permutations per row (the same for every head): ``(len(ns), H, R)``.

    It keeps how concentrated a head's weights are and removes which tokens carry them: d~ against this null
    measures selection by content, not the shape of the weights. Seeded per row (:func:`_row_orders`): a row's
    permutations depend only on ``seed`` and its position, so a row has one value however the rows are split into
    calls, blocks or bins (Algorithm 3 evaluates different rows together depending on its search).
    """
    positions = _check_positions(alpha, x, positions)
    samples = _check_samples(samples)
    H, R = alpha.shape[0], alpha.shape[1]
    ns = [int(n) for n in ns]
    xx = (x * x).sum(-1)
    out = x.new_zeros(len(ns), H, R)
    columns = alpha.shape[-1] if _check_counting(counting) == "row" else None
    for r0, r1, t, c in _blocks(R, positions, x.device, columns):
        a, xb = alpha[:, r0:r1, :c], x[:, :c]
        visible = _visible(t, c, first, window, counting)
        B = visible.shape[0]
        by_column = torch.where(visible, 0, 1).argsort(dim=-1, stable=True)  # tokens in column order, then the rest
        orders = _row_orders(visible, t, int(seed), samples, columns)
        for order in orders:
            # the k-th token in column order takes the weight of the k-th token in a random order; others stay
            sigma = torch.empty_like(by_column).scatter_(-1, by_column, order)
            permuted = a.gather(-1, sigma.expand(H, B, c))
            out[:, :, r0:r1] += _dtilde_block(permuted, xb, xx[:, :c], visible, _selections(permuted, visible, ns))
    return out / samples


def separability(
    alpha: torch.Tensor, x: torch.Tensor, ns, *, first: int = 0, window: int | None = None, positions=None
):
    """N_s / N per row for every N in ``ns``, at the radius R = min over dropped tokens of ||alpha_j x_j - s||
    (Theorem 2 and Algorithm 4; :func:`attnlimits.core.selection.distinguishable_fraction` at its default radius), with
    the selected weights (largest first) and R that the bounds need.

    Returns ``(ns_frac (len(ns), H, R), weights (H, R, max(ns)), radius (len(ns), H, R))``: N's selected weights
    are ``weights[..., :N]``; one top-k per block serves every N. For Theorem 2's bounds ``x`` should already lie
    on the sphere.
    """
    positions = _check_positions(alpha, x, positions)
    H, R = alpha.shape[0], alpha.shape[1]
    ns = [int(n) for n in ns]
    # tokens every head shares (the embeddings, the residual stream: x expanded over heads) in one matrix product
    # for all heads, instead of a batch that copies them once per head
    shared = x.shape[0] > 1 and x.stride(0) == 0
    xx = (x[:1] * x[:1]).sum(-1).expand(H, -1) if shared else (x * x).sum(-1)
    frac, radius = x.new_zeros(len(ns), H, R), x.new_zeros(len(ns), H, R)
    weights = x.new_zeros(H, R, max(ns))
    for r0, r1, t, c in _blocks(R, positions, x.device):
        a, xb = alpha[:, r0:r1, :c], x[0, :c] if shared else x[:, :c]
        visible = _visible(t, c, first, window)
        val, idx = _top(a, visible, max(ns))
        rank = _ranks(idx, c)
        weights[:, r0:r1, : val.shape[-1]] = val.clamp_min(0)
        for j, n in enumerate(ns):
            selected = (rank < n) & visible
            s = torch.matmul(torch.where(selected, a, 0.0), xb)
            g = torch.matmul(s, xb.transpose(-2, -1))
            # ||alpha_i x_i - s||^2 - ||s||^2: the same order of the tokens without adding ||s||^2 (much larger than
            # the differences between tokens), so the comparison with the radius loses no digits to cancellation
            q = (a * xx[:, :c].unsqueeze(1)).sub_(g, alpha=2).mul_(a)
            q_r = q.masked_fill(~(visible & ~selected), torch.inf).amin(-1)
            inside = (selected & (q <= q_r.unsqueeze(-1))).sum(-1)
            frac[j, :, r0:r1] = inside.to(x.dtype) / n
            radius[j, :, r0:r1] = (q_r + (s * s).sum(-1)).clamp_min(0).sqrt()
    return frac, weights, radius


# ----------------------------------------------------------------------------------------------------------------
# Algorithm 5: the finite-difference sensitivity on logits
# ----------------------------------------------------------------------------------------------------------------
#: Rows per block of :func:`finite_difference_g`: a causal block reads only the columns its rows see.
LOGIT_BLOCK = 32


def _logit_blocks(mask: torch.Tensor):
    """Row blocks ``(rows, c)`` of logits whose masked entries are ``mask`` (..., R, L): c is one past the last
    column any row of the block (in any head) sees, so the masked columns beyond it (a causal triangle) are
    never computed on; a normaliser gives them weight 0 either way."""
    seen = (~mask).reshape(-1, *mask.shape[-2:]).any(0)  # (R, L)
    last = torch.where(seen, torch.arange(mask.shape[-1], device=mask.device), -1).amax(-1)  # (R,)
    for r0 in range(0, mask.shape[-2], LOGIT_BLOCK):
        r1 = min(mask.shape[-2], r0 + LOGIT_BLOCK)
        yield slice(r0, r1), int(last[r0:r1].max()) + 1


def finite_difference_g(
    logits, *, T, eps, seed: int = 0, normalizer=None, reduce: bool = True, weights=None
) -> torch.Tensor:
    """Algorithm 5's sensitivity g(T, eps) = max over heads of mean over rows of
    ||normalizer((l + eps v)/T) - normalizer(l/T)||_2 / eps, v a random unit vector per row.

    ``logits`` (..., rows, L): every leading dim counts as a head (layers x heads for a model); -inf entries are
    masked and v is drawn on the unmasked entries only (Gaussian, normalised there), the same v for every T and
    eps (common random numbers: smooth curves). ``T`` and ``eps`` are 1-d grids (or scalars). Returns (nT, neps);
    with ``reduce=False`` the per-head means (..., nT, neps). Seeded: same seed, same v, same result. ``weights``
    (rows,): the mean over rows weighted by them (a stratified sample of rows, each standing for ``weights`` rows);
    None is the plain mean.
    The default normaliser is softmax; any ``(logits, dim, T=...)`` normaliser of :mod:`attnlimits.core.normalizers`
    works.
    """
    from attnlimits.core.normalizers import softmax_of_checked

    normalizer = (lambda x, dim, T: softmax_of_checked(x, T=T)) if normalizer is None else normalizer
    x = torch.as_tensor(logits)
    if not torch.is_floating_point(x):
        x = x.to(torch.float64)
    if x.dim() < 2 or x.shape[-1] == 0 or x.shape[-2] == 0:
        raise ValueError(f"logits: expected shape (..., rows, L) with rows, L >= 1, got {tuple(x.shape)}")
    if torch.isnan(x).any() or torch.isposinf(x).any():
        raise ValueError("logits: contain NaN or +inf; allowed are finite values and -inf (masked positions)")
    mask = torch.isneginf(x)
    if mask.all(dim=-1).any():
        raise ValueError("logits: some row is entirely -inf (fully masked)")
    T = validation.positive("T", T).reshape(-1)
    eps = validation.positive("eps", eps).reshape(-1)
    if weights is not None:
        weights = torch.as_tensor(weights, dtype=x.dtype, device=x.device)
        if weights.shape != (x.shape[-2],) or not bool(torch.isfinite(weights).all() and (weights >= 0).all()):
            raise ValueError(f"weights: expected {x.shape[-2]} finite numbers >= 0 (one per row), got {weights}")
        if not float(weights.sum()) > 0:
            raise ValueError("weights: must not all be 0")
    gen = torch.Generator().manual_seed(int(seed))
    v = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.device).masked_fill(mask, 0.0)  # CPU draws
    v = (v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)).to(x.dtype)
    total = torch.zeros(*x.shape[:-2], len(T), len(eps), dtype=x.dtype, device=x.device)
    for rows, c in _logit_blocks(mask):
        xb, vb = x[..., rows, :c], v[..., rows, :c]
        for i, t in enumerate(T.tolist()):
            base = normalizer(xb, dim=-1, T=t)
            for j, e in enumerate(eps.tolist()):
                moved = normalizer(xb + e * vb, dim=-1, T=t)  # -inf + finite stays -inf: masks are kept
                change = torch.linalg.vector_norm(moved - base, dim=-1)
                total[..., i, j] += change.sum(dim=-1) if weights is None else (change * weights[rows]).sum(dim=-1)
    out = total / (eps.to(total) * (x.shape[-2] if weights is None else weights.sum()))
    if not reduce:
        return out
    return out.reshape(-1, len(T), len(eps)).amax(dim=0)


def row_means(values: torch.Tensor, lengths: torch.Tensor, n: int, L: int) -> tuple[np.ndarray, int]:
    """Per-head mean over rows t < L with more than n tokens; values ``(H, >=L)``. Returns (means (H,), rows)."""
    keep = lengths[:L] > n
    rows = int(keep.sum())
    if rows == 0:
        return np.full(values.shape[0], np.nan), 0
    return values[:, :L][:, keep].double().mean(-1).cpu().numpy(), rows


def jacobian_spectral_norm(fn, logits: torch.Tensor, iters: int = 40, seed: int = 0) -> torch.Tensor:
    """||d fn(l) / d l||_2 per row of ``logits`` (..., L) by power iteration on J^T J, matrix-free.

    J^T u is one backward pass; J u comes from differentiating that backward pass in u (the double-vjp trick), so
    any differentiable normaliser works (sparsemax and entmax included) at L = 10^5 without an L x L matrix.
    """
    x = logits.detach().requires_grad_(True)
    with torch.enable_grad():
        y = fn(x)
        w = torch.zeros_like(y, requires_grad=True)
        (jt_w,) = torch.autograd.grad(y, x, w, create_graph=True)  # J^T w, linear in w
    gen = torch.Generator().manual_seed(seed)
    u = torch.randn(x.shape, generator=gen, dtype=x.dtype)
    sigma = torch.zeros(x.shape[:-1], dtype=x.dtype)
    for _ in range(iters):
        u = u / torch.linalg.vector_norm(u, dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
        (ju,) = torch.autograd.grad(jt_w, w, u, retain_graph=True)  # J u
        sigma = torch.linalg.vector_norm(ju, dim=-1)
        (u,) = torch.autograd.grad(y, x, ju, retain_graph=True)  # J^T J u
    return sigma.detach()
