"""The small data generators and tables the Theory chapters call (chapters 11, 14 and 15): what each returns holds
the property its chapter reads from it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from attnlimits.theory import sweeps, synthetic


def test_circle_tokens_lie_on_the_unit_circle_and_are_seeded():
    x = synthetic.circle_tokens(10, seed=3)
    assert x.shape == (10, 2) and x.dtype == torch.float64
    torch.testing.assert_close(torch.linalg.vector_norm(x, dim=-1), torch.ones(10, dtype=torch.float64))
    assert torch.equal(x, synthetic.circle_tokens(10, seed=3))
    assert not torch.equal(x, synthetic.circle_tokens(10, seed=4))


def test_gaussian_softmax_is_a_weight_vector_that_sharpens_with_the_scale():
    flat = synthetic.gaussian_softmax(50, scale=0.1, seed=0)
    sharp = synthetic.gaussian_softmax(50, scale=5.0, seed=0)
    for w in (flat, sharp):
        assert w.shape == (50,) and (w > 0).all() and w.sum().item() == pytest.approx(1.0)
    assert sharp.max() > flat.max()


def test_max_weight_slopes_recovers_a_power_law():
    lengths = np.array([10, 100, 1000, 10000])
    table = pd.DataFrame(
        {
            "normalizer": ["flat"] * 4 + ["vanishing"] * 4,
            "L": np.concatenate([lengths, lengths]),
            "max_weight": np.concatenate([np.full(4, 0.5), 3.0 / lengths]),
        }
    )
    slopes = sweeps.max_weight_slopes({0.0: table, 1.5: table}, min_length=100)
    assert list(slopes.columns) == ["gap 0.0", "gap 1.5"] and list(slopes.index) == ["flat", "vanishing"]
    np.testing.assert_allclose(slopes["gap 0.0"], [0.0, -1.0], atol=1e-12)


def test_jacobian_autograd_errors_are_rounding_only():
    logits = 2 * torch.randn(3, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    errors = sweeps.jacobian_autograd_errors(logits, lambda z: torch.exp(z / 2), T=0.5)
    assert max(errors) < 1e-14


def test_corollary3_counterexample_doubles_the_printed_bound():
    counter = sweeps.corollary3_counterexample([0.1, 1.0])
    assert len(counter) == 4 and set(counter["case"]) == {"L = 2, logits (0, 0)", "L = 6, others 60 T below"}
    np.testing.assert_allclose(counter["spectral norm"], counter["1/(2T)"], rtol=1e-12)
    assert (counter["measured / printed"] > 1.99).all()


def test_jacobian_readings_tied_pair_reaches_each_sharp_bound():
    readings = sweeps.jacobian_readings(rows=200, L=6, scale=3.0, seed=1)
    assert list(readings["reading"]) == ["spectral norm", "gradient of one weight", "largest entry"]
    np.testing.assert_allclose(readings["tied pair"], readings["sharp bound"], rtol=1e-12)
    np.testing.assert_allclose(readings["sharp bound"], [0.5, math.sqrt(2) / 4, 0.25])
    assert (readings["max over random rows"] <= readings["sharp bound"] * (1 + 1e-12)).all()


def test_separability_by_delta_one_row_per_delta():
    alpha = synthetic.two_level_weights(8, 4)
    table = synthetic.separability_by_delta(alpha, 4, 16, 20, seed=0)
    assert list(table["delta"]) == ["empirical", "zero"]
    assert ((table.min_Ns_over_N <= table.E_Ns_over_N) & (table.E_Ns_over_N <= 1)).all()
    assert (table.mean_R > 0).all()
