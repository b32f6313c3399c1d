"""Attention normalisers with one calling convention: ``(logits, dim=-1, **params) -> weights``.

Every function takes logits of any shape (a tensor, array or nested list), normalises along ``dim`` and returns a
tensor of the same shape whose slices along ``dim`` are non-negative and sum to one. ``-inf`` entries are
masked positions (weight exactly 0); NaN and ``+inf`` logits are rejected. Temperatures divide the logits.

- :func:`softmax`              exp(l/T) / sum exp(l/T), stable for any T > 0.
- :func:`general`              F(l, theta) / sum F(l, theta) for a user-supplied positive F (the paper's general form).
- :func:`sparsemax`            Euclidean projection onto the simplex (Martins & Astudillo 2016), exact zeros.
- :func:`entmax15`             1.5-entmax (Peters et al. 2019), exact zeros, between softmax and sparsemax.
- :func:`scalable_softmax`     softmax(s * log(L) * l / T) (Nakanishi 2025), L = number of unmasked entries.
- :func:`adaptive_temperature` softmax with an entropy-dependent inverse temperature (Velickovic et al. 2024).

:data:`NORMALIZERS` registers them by name, each as a :class:`Normalizer` carrying its display label and colour.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import entmax as _entmax
import torch

from attnlimits.core import validation

__all__ = [
    "ADAPTIVE_TEMPERATURE_COEFFS",
    "NORMALIZERS",
    "Normalizer",
    "adaptive_temperature",
    "entmax15",
    "general",
    "scalable_softmax",
    "softmax",
    "softmax_of_checked",
    "sparsemax",
]

#: Degree-4 fit of the inverse temperature against entropy, highest degree first (Velickovic et al. 2024, Fig. 5).
ADAPTIVE_TEMPERATURE_COEFFS = (-0.037, 0.481, -2.3, 4.917, -1.791)


def _as_logits(logits, dim: int) -> tuple[torch.Tensor, int]:
    """Validate logits and return them as a floating tensor with ``dim`` made non-negative."""
    x = torch.as_tensor(logits)
    if not torch.is_floating_point(x):
        x = x.to(torch.get_default_dtype())
    if x.dim() == 0:
        raise ValueError("logits: expected at least one dimension, got a scalar")
    if not -x.dim() <= dim < x.dim():
        allowed = f"[{-x.dim()}, {x.dim() - 1}]"
        raise ValueError(f"dim: must lie in {allowed} for logits of shape {tuple(x.shape)}, got {dim}")
    dim = dim % x.dim()
    if x.shape[dim] == 0:
        raise ValueError(f"logits: dimension {dim} is empty (shape {tuple(x.shape)}); need at least one entry")
    if torch.isnan(x).any():
        raise ValueError("logits: contain NaN; allowed are finite values and -inf (masked positions)")
    if torch.isposinf(x).any():
        raise ValueError("logits: contain +inf; allowed are finite values and -inf (masked positions)")
    if torch.isneginf(x).all(dim=dim).any():
        raise ValueError(f"logits: some slice along dim {dim} is entirely -inf (fully masked); nothing to normalise")
    return x, dim


def _centred(x: torch.Tensor, dim: int, T: float) -> torch.Tensor:
    """(l - max l) / T: subtracting the max first keeps exp() finite for any T > 0 (masked entries stay -inf)."""
    return (x - x.amax(dim=dim, keepdim=True)) / T


def softmax_of_checked(logits: torch.Tensor, *, T: float) -> torch.Tensor:
    """:func:`softmax` along the last dim of logits that were already checked (a floating tensor, no NaN or +inf,
    no fully masked row) and a T > 0: the same arithmetic without the checks, for loops that call it thousands
    of times on the same logits (Algorithm 5)."""
    return torch.softmax(_centred(logits, -1, T), dim=-1)


def softmax(logits, dim: int = -1, *, T: float = 1.0) -> torch.Tensor:
    """Softmax with temperature: alpha_n = exp(l_n / T) / sum_j exp(l_j / T).

    Stable for every T > 0 (1e-4 and 1e4 included): the max is subtracted before dividing by T.
    """
    x, dim = _as_logits(logits, dim)
    T = validation.positive_number("T", T)
    return torch.softmax(_centred(x, dim, T), dim=dim)


def general(logits, dim: int = -1, *, F: Callable, theta=None) -> torch.Tensor:
    """The paper's general normaliser alpha_n = F(l_n, theta) / sum_j F(l_j, theta).

    ``F`` maps a tensor of logits (and ``theta`` when given) elementwise to positive values; masked (-inf)
    positions get weight 0 whatever F returns there. F = exp recovers softmax at T = 1.
    """
    x, dim = _as_logits(logits, dim)
    if not callable(F):
        raise ValueError(f"F: must be callable (a positive function of the logits), got {type(F).__name__}")
    masked = torch.isneginf(x)
    safe = torch.where(masked, torch.zeros_like(x), x)
    values = torch.as_tensor(F(safe) if theta is None else F(safe, theta), dtype=x.dtype)
    if values.shape != x.shape:
        raise ValueError(f"F: must return the logits' shape {tuple(x.shape)}, returned {tuple(values.shape)}")
    values = torch.where(masked, torch.zeros_like(values), values)
    bad = ~masked & ~(torch.isfinite(values) & (values > 0))
    if bad.any():
        raise ValueError("F: must be finite and > 0 at every unmasked logit; got a non-positive or non-finite value")
    return values / values.sum(dim=dim, keepdim=True)


def _sparse_map(fn, logits, dim: int, T: float) -> torch.Tensor:
    """Apply an entmax-family map to l / T. Masked entries become a finite value far below the threshold,
    because the sort-based algorithms of the ``entmax`` package do not accept -inf."""
    x, dim = _as_logits(logits, dim)
    T = validation.positive_number("T", T)
    z = _centred(x, dim, T)  # row max is 0; every threshold lies above -1 for these maps
    z = torch.clamp(z, min=-1e4)  # also maps -inf to -1e4
    return fn(z, dim=dim)


def sparsemax(logits, dim: int = -1, *, T: float = 1.0) -> torch.Tensor:
    """Sparsemax of l / T: the Euclidean projection onto the probability simplex; small entries get exactly 0."""
    return _sparse_map(_entmax.sparsemax, logits, dim, T)


def entmax15(logits, dim: int = -1, *, T: float = 1.0) -> torch.Tensor:
    """1.5-entmax of l / T (Peters et al. 2019): sparse like sparsemax, smoother near the threshold."""
    return _sparse_map(_entmax.entmax15, logits, dim, T)


def scalable_softmax(logits, dim: int = -1, *, s: float = 1.0, T: float = 1.0) -> torch.Tensor:
    """Scalable-Softmax (Nakanishi 2025): softmax(s * log(L) * l / T), L = number of unmasked entries per slice.

    The log L factor sharpens the distribution as the context grows, so a fixed logit gap keeps the top weight
    from vanishing like 1/L. ``s`` is the learnable scale of the paper (here a fixed number > 0).
    """
    x, dim = _as_logits(logits, dim)
    s = validation.positive_number("s", s)
    T = validation.positive_number("T", T)
    masked = torch.isneginf(x)
    length = (~masked).sum(dim=dim, keepdim=True).to(x.dtype)
    # a row of one token has log L = 0: its masked entries must stay -inf (-inf * 0 would be NaN)
    scaled = torch.where(masked, -torch.inf, _centred(x, dim, T) * (s * torch.log(length)))
    return torch.softmax(scaled, dim=dim)


def adaptive_temperature(
    logits,
    dim: int = -1,
    *,
    T: float = 1.0,
    coeffs=ADAPTIVE_TEMPERATURE_COEFFS,
    entropy_threshold: float = 0.5,
) -> torch.Tensor:
    """Adaptive-temperature softmax (Velickovic et al. 2024, "softmax is not enough").

    Computes p = softmax(l / T) and its Shannon entropy H (nats); where H > ``entropy_threshold`` the logits are
    multiplied by beta = max(poly(H), 1), poly the degree-4 fit ``coeffs`` (highest degree first). beta >= 1 means
    the correction only ever sharpens, never raises the entropy.
    """
    x, dim = _as_logits(logits, dim)
    T = validation.positive_number("T", T)
    if not math.isfinite(entropy_threshold) or entropy_threshold < 0:
        raise ValueError(f"entropy_threshold: must be a finite number >= 0, got {entropy_threshold}")
    z = _centred(x, dim, T)
    p = torch.softmax(z, dim=dim)
    entropy = -(p * torch.log(p.clamp_min(torch.finfo(p.dtype).tiny))).sum(dim=dim, keepdim=True)
    poly = torch.zeros_like(entropy)
    for c in coeffs:  # Horner's rule, highest degree first (numpy.polyval order)
        poly = poly * entropy + c
    beta = torch.where(entropy > entropy_threshold, poly.clamp_min(1.0), torch.ones_like(entropy))
    return torch.softmax(z * beta, dim=dim)


@dataclass(frozen=True)
class Normalizer:
    """A registered normaliser: the function, the label legends show, and the colour every figure draws it in.

    Calling the entry calls the function, so ``NORMALIZERS[name](logits, dim=-1, **params)`` works as for the
    bare function. ``color`` is any matplotlib colour; ``None`` lets :func:`attnlimits.infra.plotting.normalizer_colors`
    give it a palette colour no other normaliser uses, so a new normaliser is always drawn.
    """

    fn: Callable[..., torch.Tensor]
    label: str
    color: str | None = None

    def __post_init__(self):
        if not callable(self.fn):
            raise ValueError(f"fn: must be callable as (logits, dim=-1, **params), got {type(self.fn).__name__}")
        if not isinstance(self.label, str) or not self.label:
            raise ValueError(f"label: must be a non-empty string, got {self.label!r}")

    def __call__(self, logits, dim: int = -1, **params) -> torch.Tensor:
        return self.fn(logits, dim=dim, **params)


#: Name -> registered normaliser, in the order the book shows them. To add one, add an entry here: every study
#: (training, the alternatives, the sweeps) and every figure and table of chapters 32-33 then includes it. The
#: colours are the first five of seaborn's colour-blind palette.
NORMALIZERS: dict[str, Normalizer] = {
    "softmax": Normalizer(softmax, "softmax", "#0173b2"),
    "sparsemax": Normalizer(sparsemax, "sparsemax", "#de8f05"),
    "1.5-entmax": Normalizer(entmax15, "1.5-entmax", "#029e73"),
    "scalable-softmax": Normalizer(scalable_softmax, "scalable-softmax", "#d55e00"),
    "adaptive-temperature": Normalizer(adaptive_temperature, "adaptive-temperature", "#cc78bc"),
}
