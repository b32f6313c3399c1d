"""Argument checks shared by :mod:`attnlimits.core.selection`, :mod:`attnlimits.core.bounds` and
:mod:`attnlimits.core.normalizers`.

Every check raises ``ValueError`` whose message starts with the argument's name (``"alpha: ..."``), so that a
reader sees at once which argument is wrong. Two conversions coexist on purpose: :func:`real_tensor` (selection:
integers become the default dtype, like ``torch.as_tensor(...).float()``) and :func:`float_tensor` (bounds:
Python numbers and lists become float64, never silently rounded to float32).

Attention weights are accepted by one rule, :func:`weights`: finite, non-negative, each slice summing to one
within :data:`SUM_TOL` of their own dtype.
"""

from __future__ import annotations

import math
import numbers

import torch

__all__ = [
    "SUM_TOL",
    "common_dtype",
    "check_finite",
    "float_tensor",
    "lengths",
    "positive",
    "positive_number",
    "promote",
    "real_tensor",
    "selection_size",
    "temperature_shape",
    "weights",
]

#: Tolerance on |sum(alpha) - 1| per dtype (the weights' own precision, before any promotion).
SUM_TOL = {torch.float16: 1e-2, torch.bfloat16: 1e-2, torch.float32: 1e-4, torch.float64: 1e-9}


def real_tensor(name: str, value) -> torch.Tensor:
    """``value`` as a floating tensor (integers become the default dtype); booleans and complex numbers rejected."""
    t = torch.as_tensor(value)
    if not torch.is_floating_point(t):
        if t.dtype == torch.bool or t.is_complex():
            raise ValueError(f"{name}: must hold real numbers, got dtype {t.dtype}")
        t = t.to(torch.get_default_dtype())
    return t


def check_finite(name: str, t: torch.Tensor) -> None:
    """Reject NaN and ±inf entries."""
    if torch.isnan(t).any():
        raise ValueError(f"{name}: contains NaN")
    if torch.isinf(t).any():
        raise ValueError(f"{name}: contains inf; all entries must be finite")


def weights(alpha, x=None, *, sums_to_one: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Validate attention weights ``alpha`` (..., L) (and tokens ``x`` (..., L, d) when given).

    Returns both in one common floating dtype. The weights must be finite, >= 0, and each slice must sum to 1
    within :data:`SUM_TOL` of alpha's own dtype (unless ``sums_to_one=False``: the rows of a normaliser such as
    sigmoid attention or softpick); ``x`` must be finite with leading dims broadcasting against alpha's.
    """
    a = real_tensor("alpha", alpha)
    if a.dim() == 0:
        raise ValueError("alpha: expected shape (..., L), got a scalar")
    if a.shape[-1] == 0:
        raise ValueError("alpha: the last dimension (L) is empty")
    tol = SUM_TOL.get(a.dtype, 1e-4)  # the tolerance of alpha's own precision, before any promotion
    xt = None
    if x is not None:
        xt = real_tensor("x", x)
        if xt.dim() < 2:
            raise ValueError(f"x: expected shape (..., L, d), got shape {tuple(xt.shape)}")
        if xt.shape[-2] != a.shape[-1]:
            raise ValueError(
                f"x: shape {tuple(xt.shape)} does not match alpha {tuple(a.shape)}; "
                f"need x.shape[-2] == L = {a.shape[-1]}"
            )
        try:
            torch.broadcast_shapes(a.shape[:-1], xt.shape[:-2])
        except RuntimeError as err:
            raise ValueError(
                f"x: leading dimensions {tuple(xt.shape[:-2])} do not broadcast with alpha's {tuple(a.shape[:-1])}"
            ) from err
        dtype = torch.promote_types(a.dtype, xt.dtype)
        a, xt = a.to(dtype), xt.to(dtype)
        check_finite("x", xt)
    check_finite("alpha", a)
    if (a < 0).any():
        raise ValueError("alpha: contains negative weights; attention weights must be >= 0")
    total = a.sum(dim=-1)
    if sums_to_one and ((total - 1).abs() > tol).any():
        worst = float((total - 1).abs().max())
        raise ValueError(f"alpha: each row must sum to 1 within {tol:g} ({a.dtype}); worst |sum - 1| = {worst:.3g}")
    return a, xt


def selection_size(n, length: int) -> int:
    """The size ``n`` of the selected set I_N: an integer in [1, length]."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise ValueError(f"n: must be an integer in [1, L={length}], got {n!r}")
    n = int(n)
    if not 1 <= n <= length:
        raise ValueError(f"n: must lie in [1, L={length}], got {n}")
    return n


def float_tensor(name: str, value, dtype=None) -> torch.Tensor:
    """``value`` as a floating tensor: tensors and arrays keep a floating dtype, Python numbers and lists become
    float64 (never silently rounded to float32); NaN and +-inf rejected."""
    if dtype is None and not isinstance(value, torch.Tensor) and not hasattr(value, "dtype"):
        dtype = torch.float64
    x = torch.as_tensor(value, dtype=dtype)
    if not torch.is_floating_point(x):
        x = x.to(torch.float64)
    if not torch.isfinite(x).all():
        raise ValueError(f"{name}: must be finite (no NaN or inf)")
    return x


def positive(name: str, value, dtype=None) -> torch.Tensor:
    """:func:`float_tensor`, > 0 everywhere."""
    x = float_tensor(name, value, dtype)
    if not (x > 0).all():
        raise ValueError(f"{name}: must be > 0 everywhere, got min {x.min().item():g}")
    return x


def lengths(name: str, value, dtype=None) -> torch.Tensor:
    """Sequence lengths: integers >= 1, returned as a floating tensor so they broadcast with the other arguments."""
    x = float_tensor(name, value, dtype)
    if not ((x >= 1).all() and (x == torch.round(x)).all()):
        raise ValueError(f"{name}: must be integers >= 1, got min {x.min().item():g}")
    return x


def positive_number(name: str, value) -> float:
    """A finite Python number > 0 (a temperature, a scale)."""
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}: must be a finite number > 0, got {value}")
    return value


def common_dtype(*xs: torch.Tensor) -> torch.dtype:
    """torch's promotion rule: tensors with dimensions decide; 0-d ones (scalars) only when there are no others,
    so float32 weights with a scalar temperature stay float32."""
    ranked = [x for x in xs if x.dim() > 0] or list(xs)
    dtype = ranked[0].dtype
    for x in ranked[1:]:
        dtype = torch.promote_types(dtype, x.dtype)
    return dtype


def promote(**named) -> list[torch.Tensor]:
    """Cast already validated tensors to their common floating dtype (float32 stays float32); shapes must broadcast."""
    try:
        torch.broadcast_shapes(*(v.shape for v in named.values()))
    except RuntimeError:
        shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in named.items())
        raise ValueError(f"{', '.join(named)}: shapes must broadcast against each other, got {shapes}") from None
    dtype = common_dtype(*named.values())
    return [v.to(dtype) for v in named.values()]


def temperature_shape(T: torch.Tensor, leading: torch.Size) -> None:
    """One temperature per slice: T must broadcast against the leading dims (all but the last) of the logits."""
    try:
        if torch.broadcast_shapes(T.shape, leading) != leading:
            raise RuntimeError
    except RuntimeError:
        raise ValueError(
            f"T: shape {tuple(T.shape)} must broadcast against the leading dims {tuple(leading)} of the logits"
        ) from None
