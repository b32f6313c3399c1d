"""Attention normalisers with one calling convention: ``(logits, dim=-1, **params) -> weights``.

Every function takes logits of any shape (a tensor, array or nested list), normalises along ``dim`` and returns a
tensor of the same shape whose slices along ``dim`` are non-negative and, for the paper's family, sum to one.
``-inf`` entries are masked positions (weight exactly 0); NaN and ``+inf`` logits are rejected. Temperatures divide
the logits.

The paper's family (chapter 33: softmax and the alternatives the paper recommends):

- :func:`softmax`              exp(l/T) / sum exp(l/T), stable for any T > 0.
- :func:`general`              F(l, theta) / sum F(l, theta) for a user-supplied positive F (the paper's general form).
- :func:`sparsemax`            Euclidean projection onto the simplex (Martins & Astudillo 2016), exact zeros.
- :func:`entmax15`             1.5-entmax (Peters et al. 2019), exact zeros, between softmax and sparsemax.
- :func:`scalable_softmax`     softmax(s * log(L) * l / T) (Nakanishi 2025), L = number of unmasked entries.
- :func:`adaptive_temperature` softmax with an entropy-dependent inverse temperature (Velickovic et al. 2024).

Variants proposed after the paper against vanishing weights and attention sinks (chapter 36); the first three give
rows that need not sum to one (:attr:`Normalizer.sums_to_one`):

- :func:`softpick`             ReLU(e^l - 1) / (sum |e^l - 1| + eps) (Zuhri et al. 2025): exact zeros, rows sum to < 1.
- :func:`softmax_with_sink`    e^l / (e^s + sum e^l): softmax with a sink logit s (softmax-1 at s = 0; gpt-oss learns
                               one per head), rows sum to < 1.
- :func:`sigmoid`              sigma(l - log n) (Ramapuram et al. 2025), n = number of unmasked entries; independent
                               per entry, rows sum to about 1 only when the logits are near 0.
- :func:`log_length`           softmax(l * max(1, log n / log n0)) (Chiang & Cholak 2022; Qwen's log-n scaling, Llama
                               4's attention temperature): the logits sharpen once the row is longer than n0.

The critical attention scaling of arXiv:2510.05554 (2025), softmax(gamma * log n * l), is :func:`scalable_softmax` with
s = gamma; :func:`attnlimits.studies.alternatives.critical_gamma` sweeps it.

:data:`NORMALIZERS` registers them by name, each as a :class:`Normalizer` carrying its display label, colour, family,
fixed parameters and whether its rows sum to one; :func:`names` lists a family.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import entmax as _entmax
import torch

from attnlimits.core import validation

__all__ = [
    "ADAPTIVE_TEMPERATURE_COEFFS",
    "FAMILIES",
    "NORMALIZERS",
    "Normalizer",
    "adaptive_temperature",
    "check_normalizer",
    "entmax15",
    "general",
    "log_length",
    "names",
    "resolve",
    "scalable_softmax",
    "sigmoid",
    "softmax",
    "softmax_of_checked",
    "softmax_with_sink",
    "softpick",
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


def _unmasked_count(masked: torch.Tensor, dim: int, dtype) -> torch.Tensor:
    """n, the number of unmasked entries of each slice along ``dim`` (kept as a dimension of size 1)."""
    return (~masked).sum(dim=dim, keepdim=True).to(dtype)


def softpick(logits, dim: int = -1, *, T: float = 1.0, eps: float = 1e-6) -> torch.Tensor:
    """Softpick (Zuhri et al. 2025, "Softpick: no attention sink, no massive activations with rectified softmax"):
    alpha_i = ReLU(e^{l_i} - 1) / (sum_j |e^{l_j} - 1| + eps), of l / T.

    A logit <= 0 gets weight exactly 0, and the negative logits still count in the denominator, so a row sums to
    less than one (to 0 when every logit is <= 0): a head may attend to nothing instead of to a sink. Computed as the
    paper's code does, with numerator and denominator scaled by e^{-max l} so that nothing overflows; masked
    entries count in neither.
    """
    x, dim = _as_logits(logits, dim)
    T = validation.positive_number("T", T)
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps: must be a finite number >= 0, got {eps}")
    z = x / T
    masked = torch.isneginf(z)
    top = z.amax(dim=dim, keepdim=True)
    shift = torch.exp(-top)  # e^{-max}: the 1 of e^l - 1, on the scale of e^{l - max}
    excess = torch.where(masked, torch.zeros_like(z), torch.exp(z - top) - shift)
    return torch.relu(excess) / (excess.abs().sum(dim=dim, keepdim=True) + eps * shift)


def softmax_with_sink(logits, dim: int = -1, *, T: float = 1.0, sink: float = 0.0) -> torch.Tensor:
    """Softmax with a sink logit: alpha_i = e^{l_i} / (e^{sink} + sum_j e^{l_j}), of l / T.

    The extra logit ``sink`` takes part of every row's mass and gives it to no token, so a row sums to less than
    one and a head can put its surplus there instead of on the first token. ``sink = 0`` is Miller's softmax-1
    ("off-by-one"); gpt-oss and Kaul et al. (2025) learn one per head. Here it is a fixed number, in the units of
    l / T.
    """
    x, dim = _as_logits(logits, dim)
    T = validation.positive_number("T", T)
    if not math.isfinite(sink):
        raise ValueError(f"sink: must be a finite number, got {sink}")
    z = x / T
    top = torch.clamp(z.amax(dim=dim, keepdim=True), min=sink)
    e = torch.exp(z - top)
    return e / (e.sum(dim=dim, keepdim=True) + math.exp(sink) * torch.exp(-top))


def sigmoid(logits, dim: int = -1, *, T: float = 1.0, bias: float | None = None) -> torch.Tensor:
    """Sigmoid attention (Ramapuram et al. 2025, "Theory, analysis, and best practices for sigmoid self-attention"):
    alpha_i = sigma(l_i / T + b), each entry on its own, with the paper's bias b = -log n (n the number of unmasked
    entries of the slice) unless ``bias`` fixes it.

    Nothing couples the entries, so a row sums to anything in (0, n); with b = -log n and bounded logits every
    weight is about e^{l_i} / n: the Theta(1/n) of Lemma 1 without a normalisation.
    """
    x, dim = _as_logits(logits, dim)
    T = validation.positive_number("T", T)
    if bias is not None and not math.isfinite(bias):
        raise ValueError(f"bias: must be None (-log n) or a finite number, got {bias}")
    masked = torch.isneginf(x)
    b = -torch.log(_unmasked_count(masked, dim, x.dtype)) if bias is None else bias
    return torch.where(masked, torch.zeros_like(x), torch.sigmoid(x / T + b))


def log_length(logits, dim: int = -1, *, T: float = 1.0, n0: int = 32) -> torch.Tensor:
    """Log-length scaling: softmax(l * max(1, log n / log n0) / T), n the number of unmasked entries of the slice.

    Chiang & Cholak (2022) multiply the logits by log n; Qwen's "log-n attention" and Llama 4's attention
    temperature do so only beyond the training length n0, so rows up to n0 long are plain softmax. (With no floor,
    softmax(s log n * l) is :func:`scalable_softmax`.)
    """
    x, dim = _as_logits(logits, dim)
    T = validation.positive_number("T", T)
    if isinstance(n0, bool) or not isinstance(n0, int) or n0 < 2:
        raise ValueError(f"n0: must be an integer >= 2 (the length up to which rows are plain softmax), got {n0!r}")
    masked = torch.isneginf(x)
    factor = (torch.log(_unmasked_count(masked, dim, x.dtype)) / math.log(n0)).clamp_min(1.0)
    return torch.softmax(torch.where(masked, -torch.inf, _centred(x, dim, T) * factor), dim=dim)


@dataclass(frozen=True)
class Normalizer:
    """A registered normaliser: the function, the label legends show, the colour every figure draws it in, its
    family, the parameters the registry fixes, and whether its rows sum to one.

    Calling the entry calls the function with ``params`` (overridden by the call's own), so
    ``NORMALIZERS[name](logits, dim=-1, **params)`` works as for the bare function. ``color`` is any matplotlib
    colour; ``None`` lets :func:`attnlimits.infra.plotting.normalizer_colors` give it a palette colour no other
    normaliser uses, so a new normaliser is always drawn. ``family``: one of :data:`FAMILIES`, which chapter shows
    it. ``sums_to_one``: False for a map whose rows need not sum to one; every diagnostic then reads the weights as
    they are (what the layer mixes), and the checks that need a distribution
    (:func:`attnlimits.core.validation.weights`) are told so.
    """

    fn: Callable[..., torch.Tensor]
    label: str
    color: str | None = None
    family: str = "paper"
    sums_to_one: bool = True
    params: Mapping[str, float] = field(default_factory=dict, hash=False)  # a dict: equal entries hash alike

    def __post_init__(self):
        if not callable(self.fn):
            raise ValueError(f"fn: must be callable as (logits, dim=-1, **params), got {type(self.fn).__name__}")
        if not isinstance(self.label, str) or not self.label:
            raise ValueError(f"label: must be a non-empty string, got {self.label!r}")
        if self.family not in FAMILIES:
            raise ValueError(f"family: must be one of {list(FAMILIES)}, got {self.family!r}")
        if not isinstance(self.sums_to_one, bool):
            raise ValueError(f"sums_to_one: must be True or False, got {self.sums_to_one!r}")

    def __call__(self, logits, dim: int = -1, **params) -> torch.Tensor:
        return self.fn(logits, dim=dim, **{**self.params, **params})


#: The families of the registry: ``"paper"``, softmax and the alternatives the paper names (chapter 33, and the
#: studies of chapters 32 and 35); ``"recent"``, the variants proposed after it (chapter 36).
FAMILIES = {"paper": "the paper's normalisers", "recent": "normalisers proposed after the paper"}


#: Name -> registered normaliser, in the order the book shows them. To add one, add an entry here: every study of
#: its family (training, the alternatives, the sweeps, the long context for ``"paper"``; the alternatives and the
#: sink rates for ``"recent"``) and every figure and table of its chapter then includes it. The colours are
#: seaborn's colour-blind palette.
NORMALIZERS: dict[str, Normalizer] = {
    "softmax": Normalizer(softmax, "softmax", "#0173b2"),
    "sparsemax": Normalizer(sparsemax, "sparsemax", "#de8f05"),
    "1.5-entmax": Normalizer(entmax15, "1.5-entmax", "#029e73"),
    "scalable-softmax": Normalizer(scalable_softmax, "scalable-softmax", "#d55e00"),
    "adaptive-temperature": Normalizer(adaptive_temperature, "adaptive-temperature", "#cc78bc"),
    "softpick": Normalizer(softpick, "softpick", "#ca9161", family="recent", sums_to_one=False),
    "softmax-with-sink": Normalizer(softmax_with_sink, "softmax with a sink", "#949494", "recent", False),
    "sigmoid": Normalizer(sigmoid, "sigmoid", "#fbafe4", family="recent", sums_to_one=False),
    "log-length": Normalizer(log_length, "log-length (n0 = 32)", "#56b4e9", family="recent"),
}


def names(*families: str) -> list[str]:
    """The registered normalisers of ``families`` (every one when none is given), in registry order."""
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"families: unknown {unknown}; allowed: {list(FAMILIES)}")
    return [n for n, e in NORMALIZERS.items() if not families or e.family in families]


def check_normalizer(name: str | None) -> str | None:
    """``name`` when it is None (the model's own softmax, where a model's weights are read) or a registered
    normaliser; a ValueError naming the argument and the allowed names otherwise."""
    if name is not None and name not in NORMALIZERS:
        raise ValueError(f"normalizer: must be None (softmax) or one of {list(NORMALIZERS)}, got {name!r}")
    return name


def resolve(chosen=None, *families: str) -> list[str]:
    """The normalisers a study runs: ``chosen`` (names) checked against the registry, or when it is None the
    registered ones of ``families`` (:func:`names`). A ValueError names the unknown ones and what is allowed."""
    chosen = names(*families) if chosen is None else list(chosen)
    unknown = [n for n in chosen if n not in NORMALIZERS]
    if unknown or not chosen:
        raise ValueError(f"names: unknown normaliser(s) {unknown}; allowed: {list(NORMALIZERS)}")
    return chosen
