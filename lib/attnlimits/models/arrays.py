"""Algorithms 1-5 on attention computed elsewhere: per-layer weights, values and (optionally) logits as arrays.

For attention patterns that come from other code (TransformerLens, nnsight, JAX, a custom kernel): every layer
gives its weights ``(windows, heads, L, L)`` and values ``(windows, heads, L, d)``, as torch tensors or numpy
arrays. :func:`captures` checks them and wraps each window as an :class:`ArrayCapture`, which every algorithm of
:mod:`attnlimits.experiments` reads exactly as it reads a model's capture; :func:`attnlimits.experiments.run_arrays`
runs them all.

With the logits (the scores the softmax reads), the weights are recomputed from them as for a model, so the tables
are those of the model path on the same logits, bit for bit; Algorithm 5 and the other normalisers need them.
Without logits the given weights are used as they are (in float32 for Algorithms 1-3, float64 for 4) and the
gradient table is absent.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnlimits.models.capturing import Capture, dtype_of, query_rows

__all__ = ["NO_LOGITS", "ArrayCapture", "ArrayLayer", "arrays_sha256", "captures", "fit_preset"]

#: Why a table that reads the attention logits cannot be computed from weights alone.
NO_LOGITS = "Algorithm 5 and the other normalisers read the attention logits, and none were given"


@dataclass
class ArrayLayer:
    """One given layer of one window, shaped as :class:`attnlimits.models.LayerCapture` is (``(1, heads, L, ·)``).

    ``masked``: True where a query may not read a key, ``(1, 1, L, L)``; ``logits``: masked entries -inf, or None
    (then ``weights`` are read as they are); ``scaling``: the factor the logits carry over the raw q.k (Algorithm 5
    reads both)."""

    layer: int
    v: torch.Tensor
    masked: torch.Tensor
    scaling: float
    given_weights: torch.Tensor | None = None
    given_logits: torch.Tensor | None = None

    @property
    def seq_len(self) -> int:
        return self.v.shape[-2]


class ArrayCapture(Capture):
    """A :class:`attnlimits.models.Capture` of :class:`ArrayLayer` records (``cap[layer]``): the weights are the
    softmax of the given logits (in the precision asked for, as for a model), or the given weights when there are
    none."""

    def heads(self, layer: int) -> int:
        return self[layer].v.shape[1]

    @property
    def device(self) -> torch.device:
        return self.layers[0].v.device

    @property
    def has_logits(self) -> bool:
        """Whether every layer came with its logits (Algorithm 5 and the other normalisers need them)."""
        return all(lc.given_logits is not None for lc in self.layers)

    def logits(self, layer: int, L: int, first_row: int = 0, rows: torch.Tensor | None = None) -> torch.Tensor:
        lc = self[layer]
        if lc.given_logits is None:
            raise ValueError(f"logits: {NO_LOGITS}; pass logits= (e.g. TransformerLens's hook_attn_scores)")
        return lc.given_logits[0, :, query_rows(L, first_row, rows, lc.v.device), :L].clone()

    def weights(
        self,
        layer: int,
        L: int,
        *,
        precision: str = "float64",
        normalizer: str | None = None,
        first_row: int = 0,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        lc = self[layer]
        if lc.given_logits is not None:
            return super().weights(layer, L, precision=precision, normalizer=normalizer, first_row=first_row, rows=rows)
        if normalizer is not None:
            raise ValueError(f"normalizer: {NO_LOGITS}; pass logits=")
        picked = lc.given_weights[0, :, query_rows(L, first_row, rows, lc.v.device), :L]
        return picked.to(dtype_of(precision), copy=True)


# ----------------------------------------------------------------------------------------------------------------
# checking and wrapping the arrays
# ----------------------------------------------------------------------------------------------------------------
def _tensor(x, name: str, layer) -> torch.Tensor:
    """``x`` as a floating torch tensor (numpy arrays shared, half precision widened to float32)."""
    where = f"{name}" if layer is None else f"{name}[{layer}]"
    if isinstance(x, np.ndarray):
        if not np.issubdtype(x.dtype, np.floating):
            raise ValueError(f"{where}: expected floating-point numbers, got a numpy array of {x.dtype}")
        x = torch.from_numpy(np.ascontiguousarray(x))
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{where}: expected a torch tensor or a numpy array, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{where}: expected floating-point numbers, got a tensor of {x.dtype}")
    x = x.detach()
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def _per_layer(arrays, name: str, ndim: int) -> dict[int, torch.Tensor]:
    """``{layer: tensor}`` from a mapping of layer numbers, a sequence (layer i at place i), one array with a
    leading layer axis (``ndim + 1`` dimensions) or one array of a single layer (``ndim``: layer 0)."""
    if isinstance(arrays, Mapping):
        bad = [k for k in arrays if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0]
        if bad or not arrays:
            raise ValueError(f"{name}: a mapping must take layer numbers (integers >= 0) to arrays, got keys {bad}")
        return {int(k): _tensor(v, name, int(k)) for k, v in sorted(arrays.items())}
    if isinstance(arrays, torch.Tensor | np.ndarray):
        if arrays.ndim == ndim + 1:
            return {i: _tensor(a, name, i) for i, a in enumerate(arrays)}
        if arrays.ndim == ndim:
            return {0: _tensor(arrays, name, 0)}
        raise ValueError(
            f"{name}: one array must have {ndim} dimensions (one layer) or {ndim + 1} (layers first), "
            f"got shape {tuple(arrays.shape)}"
        )
    if isinstance(arrays, Sequence) and not isinstance(arrays, str) and len(arrays):
        return {i: _tensor(a, name, i) for i, a in enumerate(arrays)}
    raise ValueError(
        f"{name}: expected per-layer arrays (a list, a dict of layer numbers, or one array), "
        f"got {type(arrays).__name__}"
    )


def _first(bad: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in bad.nonzero()[0])


def _where(layer: int, index: tuple[int, ...]) -> str:
    names = ("window", "head", "query", "key")
    return f"layer {layer}, " + ", ".join(f"{n} {i}" for n, i in zip(names, index, strict=False))


def _hidden(spec, layer: int, L: int, device, weights, logits) -> torch.Tensor:
    """The layer's mask ``(L, L)``, True where a query may not read a key: given by ``spec`` ("causal", a sliding
    window w, or a boolean array of the visible keys), else inferred from the weights (a key never read in any
    head or window, beyond the widest span any query reads: a sliding window when that span is below L) or from
    the logits (-inf entries)."""
    t = torch.arange(L, device=device).unsqueeze(-1)
    n = torch.arange(L, device=device)
    future = n > t
    if spec is None:
        if weights is not None:
            unread = (weights == 0).all(0).all(0)
            if not bool(unread[future].all()):
                w, h, q, k = _first(weights * future > 0)
                raise ValueError(
                    f"weights: mass on future positions under a causal mask ({_where(layer, (w, h, q, k))} holds "
                    f"{float(weights[w, h, q, k]):.3g}); the experiments read causal attention"
                )
            read = ~unread & ~future
            first_read = torch.where(read, n, L).amin(-1)  # each query's earliest key read
            span = int((torch.arange(L, device=device) - first_read + 1).max())
            return future | ((n <= t - span) if span < L else torch.zeros_like(future))
        hidden = (logits == -math.inf).all(0).all(0)
        if not bool(hidden[future].all()):
            raise ValueError(
                f"logits: finite on future positions of layer {layer} (query {_first(~hidden & future)[0]}); the "
                "experiments read causal attention: give -inf there, or mask='causal'"
            )
        return hidden
    if isinstance(spec, str):
        if spec != "causal":
            raise ValueError(
                f"mask[{layer}]: must be 'causal', a window (integer >= 1) or a boolean array, got {spec!r}"
            )
        return future
    if isinstance(spec, int | np.integer) and not isinstance(spec, bool):
        if spec < 1:
            raise ValueError(f"mask[{layer}]: a sliding window must be an integer >= 1, got {spec}")
        return future | (n <= t - int(spec))
    visible = torch.as_tensor(spec, device=device)
    if visible.dtype != torch.bool or tuple(visible.shape) != (L, L):
        raise ValueError(
            f"mask[{layer}]: a boolean array (L, L) = ({L}, {L}), True where a query may read a key, "
            f"got {visible.dtype} of shape {tuple(visible.shape)}"
        )
    return ~visible


def _tolerance(tolerance: float | None, dtype: torch.dtype) -> float:
    if tolerance is None:
        return 1e-4 if dtype == torch.float32 else 1e-10
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 < tolerance < 1:
        raise ValueError(f"tolerance: must be a number in (0, 1), got {tolerance!r}")
    return float(tolerance)


def _masks(mask, layer_ids: list[int]) -> dict:
    if (
        mask is None
        or isinstance(mask, str | int | np.integer)
        or (isinstance(mask, torch.Tensor | np.ndarray) and mask.ndim == 2)
    ):
        return dict.fromkeys(layer_ids, mask)
    if isinstance(mask, Mapping):
        return {layer: mask.get(layer) for layer in layer_ids}
    if isinstance(mask, Sequence) and len(mask) == len(layer_ids):
        return dict(zip(layer_ids, mask, strict=True))
    raise ValueError(
        f"mask: expected None, 'causal', a window, a boolean (L, L) array, or one of these per layer "
        f"({len(layer_ids)} layers), got {type(mask).__name__}"
    )


def _given(weights, values, logits) -> dict[str, dict[int, torch.Tensor]]:
    """The given arrays per layer, each checked to hold the values' layers (every later check reads one layer)."""
    if weights is None and logits is None:
        raise ValueError("weights: give the attention weights, the logits, or both")
    if values is None:
        raise ValueError("values: the value vectors (W, H, L, d) of every layer are needed")
    given = {"values": _per_layer(values, "values", 4)}
    if weights is not None:
        given["weights"] = _per_layer(weights, "weights", 4)
    if logits is not None:
        given["logits"] = _per_layer(logits, "logits", 4)
    layer_ids = sorted(given["values"])
    for name, per in given.items():
        if sorted(per) != layer_ids:
            raise ValueError(f"{name}: holds layers {sorted(per)}, the values hold layers {layer_ids}")
    return given


def _check_shapes(layer: int, w, lg, v: torch.Tensor, earlier) -> tuple[int, int, int]:
    """``(W, H, L)`` of one layer, its arrays' shapes checked against each other and the ``earlier`` layer's."""
    for name, t in (("weights", w), ("logits", lg)):
        if t is not None and (t.ndim != 4 or t.shape[-1] != t.shape[-2]):
            raise ValueError(f"{name}[{layer}]: expected (windows, heads, L, L), got shape {tuple(t.shape)}")
    if w is not None and lg is not None and w.shape != lg.shape:
        raise ValueError(f"logits[{layer}]: shape {tuple(lg.shape)} differs from the weights' {tuple(w.shape)}")
    W, H, L, _ = (w if w is not None else lg).shape
    if earlier is not None and (W, L) != earlier[1]:
        first, (W0, L0) = earlier
        raise ValueError(f"layer {layer}: {W} windows of {L} tokens, layer {first} has {W0} of {L0}")
    if v.ndim != 4 or v.shape[0] != W or v.shape[2] != L or H % v.shape[1]:
        raise ValueError(
            f"values[{layer}]: expected (windows, heads, L, d) = ({W}, {H} or a divisor, {L}, d), "
            f"got shape {tuple(v.shape)}"
        )
    return W, H, L


def _check_one_device(layer: int, w, lg, v: torch.Tensor) -> None:
    """One layer's arrays on one device (the algorithms compute with them together)."""
    devices = {t.device for t in (w, lg, v) if t is not None}
    if len(devices) > 1:
        raise ValueError(f"layer {layer}: the arrays lie on different devices {sorted(map(str, devices))}")


def _check_finite(layer: int, w, lg, v: torch.Tensor) -> None:
    """Finite weights and values and no NaN logits (-inf logits are masked entries)."""
    for name, t in (("weights", w), ("values", v)):
        if t is not None and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name}: not finite at {_where(layer, _first(~torch.isfinite(t)))}")
    if lg is not None and bool(torch.isnan(lg).any()):
        raise ValueError(f"logits: NaN at {_where(layer, _first(torch.isnan(lg)))}")


def _masked_logits(layer: int, lg: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """The logits with -inf where the mask hides a key, refused when a query row is left no finite logit."""
    lg = lg.masked_fill(hidden, -math.inf)
    if not bool(torch.isfinite(lg).any(-1).all()):
        raise ValueError(
            f"logits: a query row reads no finite logit at {_where(layer, _first(~torch.isfinite(lg).any(-1)))}"
        )
    return lg


def _check_nonnegative(layer: int, w: torch.Tensor) -> None:
    """No negative weight (a row of weights is a distribution)."""
    if bool((w < 0).any()):
        raise ValueError(f"weights: negative at {_where(layer, _first(w < 0))}")


def _check_masked_mass(layer: int, w: torch.Tensor, hidden: torch.Tensor) -> None:
    """No weight on a key the mask hides (the algorithms read the visible keys only)."""
    if bool((w * hidden > 0).any()):
        index = _first(w * hidden > 0)
        side = "future" if index[3] > index[2] else "masked"
        raise ValueError(f"weights: mass on {side} positions under the mask at {_where(layer, index)}")


def _check_rows_sum_to_one(layer: int, w: torch.Tensor, tol: float) -> None:
    """Every row's weights sum to 1 within ``tol`` (summed in float64, so the check itself adds no error)."""
    sums = w.sum(-1, dtype=torch.float64)
    off = (sums - 1).abs()
    if bool((off > tol).any()):
        index = _first(off > tol)
        raise ValueError(
            f"weights: rows must sum to 1 (within {tol:g}); {_where(layer, index)} sums to {float(sums[index]):.8g}"
        )


def _check_softmax_of_logits(layer: int, w: torch.Tensor, lg: torch.Tensor, tol: float) -> None:
    """The weights are the softmax of the logits within ``tol`` (the tables read the logits: they must agree)."""
    gap = (torch.softmax(lg.double(), -1) - w.double()).abs()
    if bool((gap > tol).any()):
        index = _first(gap > tol)
        raise ValueError(
            f"logits: their softmax differs from the weights by {float(gap[index]):.3g} (more than "
            f"{tol:g}) at {_where(layer, index)}; the weights must be the softmax of the logits"
        )


def _checked_layer(layer: int, w, lg, v: torch.Tensor, mask, tolerance, earlier) -> tuple:
    """One layer checked in the order of the error messages: ``((W, L), (weights, logits, values, hidden))``."""
    W, H, L = _check_shapes(layer, w, lg, v, earlier)
    _check_one_device(layer, w, lg, v)
    _check_finite(layer, w, lg, v)
    hidden = _hidden(mask, layer, L, (w if w is not None else lg).device, w, lg)
    if lg is not None:
        lg = _masked_logits(layer, lg, hidden)
    if w is not None:
        tol = _tolerance(tolerance, w.dtype)
        _check_nonnegative(layer, w)
        _check_masked_mass(layer, w, hidden)
        _check_rows_sum_to_one(layer, w, tol)
        if lg is not None:
            _check_softmax_of_logits(layer, w, lg, tol)
    v = v.repeat_interleave(H // v.shape[1], dim=1) if v.shape[1] != H else v  # one value head per query head
    return (W, L), (w if lg is None else None, lg, v, hidden)  # with logits, the weights are recomputed from them


def _scaling(scaling, d: int) -> float:
    """The factor the logits carry over the raw q.k: ``scaling``, checked, or 1/sqrt(d) (the transformer's own)."""
    scale = 1 / math.sqrt(d) if scaling is None else scaling
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"scaling: must be a finite number > 0, got {scaling!r}")
    return float(scale)


def _embedding(embeddings, W: int, L: int) -> torch.Tensor | None:
    """The input token embeddings ``(W, L, d_model)``, checked, or None (Algorithm 4's second reading needs them)."""
    if embeddings is None:
        return None
    embedding = _tensor(embeddings, "embeddings", None)
    if embedding.ndim != 3 or tuple(embedding.shape[:2]) != (W, L):
        raise ValueError(f"embeddings: expected (windows, L, d_model) = ({W}, {L}, d), got {tuple(embedding.shape)}")
    if not bool(torch.isfinite(embedding).all()):
        raise ValueError("embeddings: not finite")
    return embedding


def _wrap(layers: dict[int, tuple], W: int, L: int, scale: float, embedding, bos: bool) -> list[ArrayCapture]:
    """One :class:`ArrayCapture` per window, refusing a mask that is neither causal nor a causal sliding window."""
    out = []
    for i in range(W):
        kept = [
            ArrayLayer(
                layer=layer,
                v=v[i : i + 1],
                masked=hidden.view(1, 1, L, L),
                scaling=scale,
                given_weights=None if w is None else w[i : i + 1],
                given_logits=None if lg is None else lg[i : i + 1],
            )
            for layer, (w, lg, v, hidden) in layers.items()
        ]
        cap = ArrayCapture(
            index=i, layers=kept, embedding=None if embedding is None else embedding[i : i + 1], bos=bool(bos)
        )
        for layer in cap.layer_ids:
            cap.window(layer, L)  # refuses a mask that is neither causal nor a causal sliding window
        out.append(cap)
    return out


def captures(
    weights=None,
    values=None,
    logits=None,
    *,
    embeddings=None,
    mask=None,
    scaling: float | None = None,
    tolerance: float | None = None,
    bos: bool = False,
) -> list[ArrayCapture]:
    """Check the given attention and wrap each window as an :class:`ArrayCapture` (windows ``0..W-1``).

    Each of ``weights``, ``values`` and ``logits`` is per layer: a list (layer i at place i), a dict of layer
    numbers, or one array with the layers first. Per layer, ``weights`` and ``logits`` are ``(W, H, L, L)`` (query
    rows, then keys) and ``values`` ``(W, H_v, L, d)``, with ``H_v`` = H or a divisor of it (grouped-query
    attention: head h reads value head ``h // (H / H_v)``, as transformers and TransformerLens group them).
    ``weights`` or ``logits`` may be left out, not both. ``embeddings`` ``(W, L, d_model)``: the input token
    embeddings, for Algorithm 4's second reading. ``mask``: as :func:`_hidden` reads it, the same for every layer
    or one per layer (a list or a dict); None infers it. ``scaling``: the factor the logits carry over the raw
    q.k (default 1/sqrt(d)). ``tolerance``: how far a row's sum may be from 1, and the softmax of the logits from
    the weights (default 1e-4 for float32, 1e-10 for float64). ``bos``: whether token 0 of each window is a BOS.

    Refused, naming the layer, window, head, query and key: NaN or infinite numbers, negative weights, a row whose
    weights do not sum to 1, weight on a masked (future) position, logits whose softmax is not the weights, and
    shapes that do not match.
    """
    given = _given(weights, values, logits)
    layer_ids = sorted(given["values"])
    masks = _masks(mask, layer_ids)
    earlier = None
    layers: dict[int, tuple] = {}
    for layer in layer_ids:
        w, lg, v = (given.get(name, {}).get(layer) for name in ("weights", "logits", "values"))
        shape, layers[layer] = _checked_layer(layer, w, lg, v, masks[layer], tolerance, earlier)
        earlier = earlier or (layer, shape)
    W, L = shape
    scale = _scaling(scaling, layers[layer_ids[0]][2].shape[-1])
    return _wrap(layers, W, L, scale, _embedding(embeddings, W, L), bos)


def arrays_sha256(caps: Sequence[ArrayCapture]) -> str:
    """SHA-256 of what the captures hold (logits or weights, values and embeddings, layer by layer): the given
    attention's identity in a run's provenance."""
    digest = hashlib.sha256()
    for cap in caps:
        for lc in cap.layers:
            for t in (lc.given_logits, lc.given_weights, lc.v):
                if t is not None:
                    digest.update(t.contiguous().cpu().numpy().tobytes())
        if cap.embedding is not None:
            digest.update(cap.embedding.contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()


def fit_preset(preset, length: int):
    """``preset`` with every grid cut to ``length`` tokens (lengths above it dropped, or lowered to it where a grid
    has a single length; every N below its L), named ``<name>@<length>`` when anything was cut."""
    L = length
    lengths = tuple(v for v in preset.alg1_L if v <= L) or (L,)
    changes = {
        "alg1_L": lengths,
        "alg2_L": min(preset.alg2_L, L),
        "alg4_L": min(preset.alg4_L, L),
        "alg5_L": min(preset.alg5_L, L),
    }
    changes["alg1_N"] = min(preset.alg1_N, min(lengths) - 1)
    for grid, at in (("alg2_N", "alg2_L"), ("alg4_N", "alg4_L")):
        changes[grid] = tuple(n for n in getattr(preset, grid) if n < changes[at]) or (changes[at] - 1,)
    if all(changes[k] == getattr(preset, k) for k in changes):
        return preset
    return preset.replace(name=f"{preset.name}@{L}", **changes)
