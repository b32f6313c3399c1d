"""Attention sinks, measured as Gu et al. (ICLR 2025, "When Attention Sink Emerges in Language Models: An Empirical
View", the metric of their repository ``sail-sg/Attention-Sink``) measure them.

- :func:`importance` the importance score of token k in each head: the mean of the weights the rows that see it
                     give it, over the first T rows, ``alpha_k = 1/(T - k) sum_{i=k}^{T-1} A[i, k]`` (0-indexed;
                     the paper writes 1/(T - k + 1) with tokens counted from 1).
- :func:`sink_rate`  the share of heads (over every layer) whose importance score of token k exceeds eps: the
                     "sink rate" of token k, with the paper's T = 64 and eps = 0.3 by default.

A weight here is whatever the normaliser gave the token: for a row that does not sum to one (a softmax with a sink
logit, sigmoid attention, softpick) eps is still an absolute weight, so a normaliser that hands part of a row to
nothing lowers every token's score.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["SINK_EPS", "SINK_ROWS", "importance", "sink_rate"]

#: The paper's threshold on the importance score, and how many rows it averages (the first 64 tokens).
SINK_EPS, SINK_ROWS = 0.3, 64


def importance(weights: torch.Tensor, k: int = 0, rows: int = SINK_ROWS) -> torch.Tensor:
    """Token ``k``'s importance score in each head of causal ``weights`` ``(H, R, L)`` (row i the query at position
    i): the mean of ``weights[:, i, k]`` over the rows ``k <= i < rows`` that see it, ``(H,)``. Needs at least
    ``rows`` rows and columns."""
    if weights.dim() != 3:
        raise ValueError(f"weights: expected shape (heads, rows, L), got {tuple(weights.shape)}")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < rows:
        raise ValueError(f"k: must be an integer in [0, rows = {rows}), got {k!r}")
    if min(weights.shape[1], weights.shape[2]) < rows:
        raise ValueError(f"weights: need at least {rows} rows and columns, got {tuple(weights.shape)}")
    return weights[:, k:rows, k].double().mean(-1)


def sink_rate(layers: Iterable[torch.Tensor], k: int = 0, eps: float = SINK_EPS, rows: int = SINK_ROWS) -> float:
    """The share of heads, over every layer of ``layers`` (each causal weights ``(H, R, L)``), whose importance
    score of token ``k`` (:func:`importance`) exceeds ``eps``."""
    if not 0 < eps < 1:
        raise ValueError(f"eps: must lie in (0, 1), got {eps!r}")
    scores = [importance(w, k, rows) for w in layers]
    if not scores:
        raise ValueError("layers: need at least one layer of weights")
    return float((torch.cat(scores) > eps).double().mean())
