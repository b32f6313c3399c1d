"""attnlimits.core.sinks: Gu et al.'s importance score and sink rate on hand-built attention patterns whose rate
is known."""

from __future__ import annotations

import pytest
import torch

from attnlimits.core import sinks


def _heads(*columns: float, L: int = 80) -> torch.Tensor:
    """Causal heads: head h gives token 0 the weight columns[h] in every row but row 0 (which sees only token 0)
    and spreads the rest evenly over the row's other tokens."""
    out = torch.zeros(len(columns), L, L, dtype=torch.float64)
    for h, w in enumerate(columns):
        for i in range(L):
            if i == 0:
                out[h, 0, 0] = 1.0
            else:
                out[h, i, 0] = w
                out[h, i, 1 : i + 1] = (1 - w) / i
    return out


def test_importance_is_the_mean_over_the_first_64_rows():
    heads = _heads(1.0, 0.0, 0.3)
    # row 0 always gives token 0 its whole weight: the mean over 64 rows is (1 + 63 w) / 64
    expected = torch.tensor([1.0, 1 / 64, (1 + 63 * 0.3) / 64], dtype=torch.float64)
    torch.testing.assert_close(sinks.importance(heads), expected, rtol=0, atol=1e-15)
    # token 5 is seen by rows 5..63 (59 rows), each giving it (1 - w) / i
    w = 0.3
    mean = sum((1 - w) / i for i in range(5, 64)) / 59
    assert float(sinks.importance(heads, k=5)[2]) == pytest.approx(mean, rel=1e-14)


def test_sink_rate_counts_the_heads_above_eps():
    # importance (1 + 63 w) / 64: above 0.3 for w = 0.29 (0.301), below for w = 0.288 (0.299)
    layers = [_heads(1.0, 0.29, 0.288, 0.0), _heads(0.5, 0.0)]
    assert sinks.sink_rate(layers) == 3 / 6
    assert sinks.sink_rate(layers, eps=0.9) == 1 / 6
    uniform = torch.ones(2, 64, 64, dtype=torch.float64).tril()
    assert sinks.sink_rate([uniform / uniform.sum(-1, keepdim=True)]) == 0.0  # mean_t 1/(t+1) = 0.074


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sinks.importance(torch.zeros(2, 64)), "weights: expected shape"),
        (lambda: sinks.importance(torch.zeros(2, 10, 10)), "need at least 64"),
        (lambda: sinks.importance(torch.zeros(1, 64, 64), k=64), "k: must be an integer"),
        (lambda: sinks.sink_rate([torch.zeros(1, 64, 64)], eps=1.5), "eps: must lie in"),
        (lambda: sinks.sink_rate([]), "layers: need at least one"),
    ],
)
def test_bad_arguments_raise(call, message):
    with pytest.raises(ValueError, match=message):
        call()
