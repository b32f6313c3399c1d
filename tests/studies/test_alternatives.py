"""attnlimits.studies.alternatives: each diagnostic per normaliser against a direct computation; its presets; the
synthetic heads of attnlimits.theory.synthetic that feed it; its typed result, read back exactly, and its results
cache."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits.core import normalizers, rowstats, selection, sinks
from attnlimits.infra import presets
from attnlimits.studies.alternatives import study as alt
from attnlimits.theory import synthetic

NAMES = list(normalizers.NORMALIZERS)


@pytest.fixture(scope="module")
def heads():
    logits, x = synthetic.gaussian_heads(24, synthetic.geometric_scales(0.5, 4.0, 3), rows=2, d=4, seed=3)
    return {12: (logits[:, :, :12], x[:, :12]), 24: (logits, x)}


def test_synthetic_heads_are_seeded_with_one_scale_per_head():
    scales = synthetic.geometric_scales(0.5, 4.0, 4)
    torch.testing.assert_close(scales, torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64))
    a, xa = synthetic.gaussian_heads(10, scales, rows=2, d=3, seed=1)
    b, xb = synthetic.gaussian_heads(10, scales, rows=2, d=3, seed=1)
    assert a.shape == (4, 2, 10) and xa.shape == (4, 10, 3)
    assert torch.equal(a, b) and torch.equal(xa, xb) and torch.isfinite(a).all()
    # one draw of N(0, 1), scaled per head: the same draw at unit scales, divided back, is the same numbers
    unit, _ = synthetic.gaussian_heads(10, torch.ones(4, dtype=torch.float64), rows=2, d=3, seed=1)
    torch.testing.assert_close(a, scales[:, None, None] * unit, rtol=0, atol=0)
    causal, none = synthetic.gaussian_heads(6, [1.0, 2.0], seed=1)  # no rows: a causal layer, row t sees 0..t
    assert causal.shape == (2, 6, 6) and none is None
    assert torch.equal(torch.isfinite(causal[0]), torch.ones(6, 6, dtype=torch.bool).tril())
    with pytest.raises(ValueError, match="rows: must be an integer >= 1"):
        synthetic.gaussian_heads(10, scales, rows=0)
    with pytest.raises(ValueError, match="scales: need one finite scale > 0"):
        synthetic.gaussian_heads(10, [1.0, -1.0])
    with pytest.raises(ValueError, match="scales: need 0 < low <= high"):
        synthetic.geometric_scales(2.0, 1.0, 3)


def test_weight_table_matches_direct_computation(heads):
    table = alt.weight_table(heads)
    assert len(table) == len(NAMES) * 2 * 3
    for name in NAMES:
        logits = heads[24][0]
        w = normalizers.NORMALIZERS[name](logits)
        row = table[(table.normalizer == name) & (table.L == 24) & (table["head"] == 1)].iloc[0]
        assert row.max_weight == pytest.approx(float(w[1].amax(-1).mean()), rel=1e-12)
        assert row.support == pytest.approx(float((w[1] > 0).sum(-1).double().mean()), rel=1e-12)
        assert row.L_max_weight == pytest.approx(24 * row.max_weight, rel=1e-12)
    soft = table[table.normalizer == "softmax"]
    assert (soft.support_fraction == 1).all()  # softmax never gives an exact zero here


def test_distance_table_matches_selection(heads):
    """Every head's row means of d~, E and N_s/N (the experiments' kernels, every row seeing all L tokens) equal
    attnlimits.core.selection row by row."""
    table = alt.distance_table(heads, [1, 3, 11])
    logits, x = heads[12]
    for name in NAMES:  # rows that need not sum to one included (sigmoid, softpick): the same formulas
        w = normalizers.NORMALIZERS[name](logits)
        one = {"sums_to_one": normalizers.NORMALIZERS[name].sums_to_one}
        for n in (1, 3, 11):
            row = table[(table.normalizer == name) & (table.L == 12) & (table.N == n) & (table["head"] == 2)].iloc[0]
            xs = x[2][None]
            d = selection.cumulative_distance(w[2], xs, n, **one)
            assert row.d_tilde == pytest.approx(float(d.mean()), rel=1e-12)
            e = selection.random_selection_expectation(w[2], xs, n, **one)
            assert row.E == pytest.approx(float(e.mean()), rel=1e-12)
            ns = float(selection.distinguishable_fraction(w[2], xs, n, **one).mean())
            assert row.ns_frac == pytest.approx(ns, rel=1e-12)
    with pytest.raises(ValueError, match="Ns: every N must satisfy"):
        alt.distance_table(heads, [12])


def test_nonzero_separability_leaves_out_the_zero_weight_tokens(heads):
    logits, x = heads[24]
    seen = torch.full((logits.shape[1],), 23)
    soft = normalizers.softmax(logits)  # every weight positive: Algorithm 4's N_s/N exactly
    torch.testing.assert_close(
        alt.nonzero_separability(soft, x, [1, 4, 9]), rowstats.separability(soft, x, [1, 4, 9], positions=seen)[0]
    )
    # by hand: weights (0.5, 0.3, 0.2, 0, 0) on tokens 0-4, N = 2. Selected 0 and 1 nearly cancel: s = (0.2, 0.06),
    # each selected token at the norm of the other's term (0.5 and 0.306), both beyond ||s|| = 0.209, where the
    # zero-weight tokens put Algorithm 4's radius (N_s/N = 0); the dropped token of positive weight, 2, lies at
    # 0.953, so without the zero-weight tokens both selected are inside (1)
    a = torch.tensor([[[0.5, 0.3, 0.2, 0.0, 0.0]]], dtype=torch.float64)
    xs = torch.tensor([[[1.0, 0.0], [-1.0, 0.2], [4.0, 4.0], [9.0, 9.0], [-9.0, 9.0]]], dtype=torch.float64)
    assert float(rowstats.separability(a, xs, [2], positions=torch.tensor([4]))[0]) == 0.0
    assert float(alt.nonzero_separability(a, xs, [2])) == 1.0
    # N = 3 keeps every token of positive weight: nothing is left to tell apart
    assert math.isnan(float(alt.nonzero_separability(a, xs, [3])))
    table = alt.distance_table({24: heads[24]}, [2, 7], names=["softmax", "sparsemax"])
    assert (table[table.normalizer == "softmax"].compared == 1).all()
    assert table.compared.between(0, 1).all() and (table.ns_frac_nonzero.dropna().between(0, 1)).all()


def test_distance_table_is_the_experiments_kernels_on_every_normaliser(heads):
    """The same rows through attnlimits.core.rowstats with every query seeing all L tokens: the same numbers."""
    logits, x = heads[24]
    table = alt.distance_table({24: heads[24]}, [2, 7])
    seen = torch.full((logits.shape[1],), 23)
    for name in NAMES:
        w = normalizers.NORMALIZERS[name](logits)
        d = rowstats.distances(w, x, [2, 7], positions=seen)[0].mean(-1)
        part = table[table.normalizer == name].sort_values(["N", "head"])
        assert part.d_tilde.to_list() == d.reshape(-1).tolist()


def test_critical_fraction_is_the_first_n_the_test_cannot_reject():
    rows = []
    for n in (1, 2, 4):
        for h in range(10):
            far = 0.0 if n >= 2 else 100.0  # d~ and E differ completely at N = 1, coincide from N = 2
            rows.append({"normalizer": "softmax", "L": 8, "N": n, "head": h, "d_tilde": h + far, "E": float(h)})
    table = pd.DataFrame(rows)
    crit = alt.critical_fraction(table).iloc[0]
    assert crit.critical_N == 2 and crit.critical_fraction == 0.25 and crit.p_value == 1.0
    never = table.assign(d_tilde=table.d_tilde + 1000)
    assert math.isnan(alt.critical_fraction(never).iloc[0].critical_N)
    with pytest.raises(ValueError, match="level: must lie in"):
        alt.critical_fraction(table, level=1.5)
    with pytest.raises(ValueError, match="reading: must be one of"):
        alt.critical_fraction(table, reading="E_mc")
    full = alt.critical_fraction(table.assign(E_full=table.d_tilde + 1000), reading="E_full").iloc[0]
    assert math.isnan(full.critical_N) and full.reading == "E_full"


def test_jacobian_table_matches_the_explicit_jacobian(heads):
    small = {12: heads[12]}
    table = alt.jacobian_table(small, T=0.5, iters=60)
    logits = heads[12][0]
    for name in NAMES:
        fn = normalizers.NORMALIZERS[name]
        norms = []
        for r in range(logits.shape[1]):
            J = torch.autograd.functional.jacobian(lambda z, fn=fn: fn(z, T=0.5), logits[1, r])
            norms.append(torch.linalg.matrix_norm(J, ord=2))
        row = table[(table.normalizer == name) & (table["head"] == 1)].iloc[0]
        assert row.jacobian_max == pytest.approx(float(max(norms)), rel=1e-4)
        assert row.jacobian_mean == pytest.approx(float(sum(norms) / len(norms)), rel=1e-4)


def test_g_table_is_algorithm_5_per_normaliser(heads):
    logits = heads[24][0]
    table = alt.g_table(logits, [0.1, 1.0], [1e-3], seed=2)
    for name in NAMES:
        g = rowstats.finite_difference_g(
            logits, T=[0.1, 1.0], eps=[1e-3], seed=2, normalizer=normalizers.NORMALIZERS[name]
        )
        got = table[table.normalizer == name].sort_values("T").g.to_numpy()
        assert got == pytest.approx(g[:, 0].numpy(), rel=1e-12)


class _FakeWindow:
    """Stands for a Capture: two layers of 2 heads, causal logits, values."""

    def __init__(self, length=10, d=3):
        gen = torch.Generator().manual_seed(0)
        self.seq_len = length
        self.layer_ids = [0, 5]
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        self._z = {
            layer: torch.randn(2, length, length, generator=gen).masked_fill(~causal, -math.inf) for layer in (0, 5)
        }
        self._v = {layer: torch.randn(2, length, d, generator=gen) for layer in (0, 5)}

    def logits(self, layer, L):
        return self._z[layer][:, :L, :L]

    def inputs(self, layer, L, precision="float64"):
        return None, self._v[layer][:, :L].double()


def test_model_heads_take_rows_that_see_every_token():
    w = _FakeWindow()
    inputs = alt.model_heads([w], [4, 6], rows=3)
    z, x = inputs[4]
    assert z.shape == (4, 3, 4) and x.shape == (4, 4, 3)
    assert torch.isfinite(z).all()
    # head 2 is layer 5's first head; row 1 is query t = 4 on tokens 0..3
    assert torch.equal(z[2, 1], w._z[5][0, 4, :4].double())
    assert torch.equal(x[3], w._v[5][1, :4].double())
    with pytest.raises(ValueError, match="windows: need captures of at least"):
        alt.model_heads([w], [9], rows=3)


def test_model_layers_spread_evenly():
    assert alt.model_layers(30, 4) == [0, 10, 19, 29]
    assert alt.model_layers(3, 4) == [0, 1, 2]
    assert alt.model_layers(12, None) == list(range(12))


def test_bad_arguments_raise(heads):
    with pytest.raises(ValueError, match="names: unknown normaliser"):
        alt.weight_table(heads, names=["relu"])
    with pytest.raises(ValueError, match="logits: expected shape"):
        alt.weight_table({4: (torch.zeros(2, 4), None)})
    bad = heads[12][0].clone()
    bad[0, 0, 0] = math.inf
    with pytest.raises(ValueError, match="logits: must be finite"):
        alt.jacobian_table({12: (bad, None)})
    with pytest.raises(ValueError, match="preset: must be one of"):
        alt.get_preset("huge")


def test_presets_are_dataclasses_with_the_chapters_grids():
    reduced, full = alt.get_preset("reduced"), alt.get_preset("full")
    assert isinstance(alt.PRESETS, presets.Registry) and set(alt.PRESETS) == {"reduced", "full", "quick"}
    assert isinstance(reduced, alt.AlternativesPreset) and alt.get_preset(reduced) is reduced
    assert reduced.synthetic_L == (32, 64, 128, 256) and reduced.heads == 24 and reduced.n_points == 10
    assert full.synthetic_L[-1] == 1024 and full.eps == (1e-3, 1e-1)
    assert alt.work("full")["synthetic"] > alt.work("reduced")["synthetic"]
    small = reduced.replace(synthetic_L=(16, 32), heads=3, rows=2, n_points=4, T_grid=(1.0,))
    tables = alt.synthetic_tables(small)
    assert set(tables.distance.L) == {16, 32} and "ns_frac" in tables.distance
    assert set(tables.critical.L) == {32} and tables.layers is None
    assert list(tables.seconds.part) == ["synthetic"]


#: A preset of a second: two lengths, three heads.
SMALL = alt.get_preset("quick").replace(synthetic_L=(16, 32), heads=3, rows=2, n_points=4, T_grid=(0.1, 1.0))


@pytest.mark.parametrize("with_layers", [False, True], ids=["synthetic", "model"])
def test_tables_read_back_exactly_and_save_the_same_bytes(tmp_path, with_layers):
    """Every table of a saved result loads back equal to the last bit, and saving what was loaded writes the same
    file byte for byte (a model's result also holds its layers)."""
    tables = alt.synthetic_tables(SMALL)
    if with_layers:  # a model's result: its layers, sink rates and gamma sweep too
        sink = pd.DataFrame({"normalizer": ["softmax", "sigmoid"], "sink_rate": [0.25, 1 / 3], "window": 0})
        logits = torch.randn(2, 2, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        gamma = alt.gamma_table({16: (logits, None)}, [0.1, 1.0]).assign(window=0)
        tables = dataclasses.replace(tables, layers=pd.DataFrame({"layer": [0, 5, 11]}), sink=sink, gamma=gamma)
    back = alt.AlternativesTables.load(tables.save(tmp_path / "one"))
    for name in alt.AlternativesTables.TABLES:
        if getattr(tables, name) is None:
            assert getattr(back, name) is None, name
        else:
            pd.testing.assert_frame_equal(getattr(back, name), getattr(tables, name), check_exact=True, obj=name)
    back.save(tmp_path / "two")
    files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert files == [alt.AlternativesTables.FILE] == sorted(p.name for p in (tmp_path / "two").iterdir())
    assert (tmp_path / "two" / files[0]).read_bytes() == (tmp_path / "one" / files[0]).read_bytes()


def test_results_computes_once_per_preset_and_reads_back_the_same_tables(tmp_path, monkeypatch):
    calls = []
    compute = alt.synthetic_tables

    def counted(preset, **kwargs):
        calls.append(preset)
        return compute(preset, **kwargs)

    counted.__name__ = compute.__name__  # the function's name is part of the key
    monkeypatch.setattr(alt, "synthetic_tables", counted)
    first = alt.results(preset=SMALL, root=tmp_path)
    again = alt.results(preset=SMALL, root=tmp_path)
    other = alt.results(preset=SMALL.replace(heads=2), root=tmp_path)
    assert len(calls) == 2 and isinstance(again, alt.AlternativesTables)
    for name in ("weights", "distance", "critical", "jacobian", "g", "seconds"):
        pd.testing.assert_frame_equal(getattr(again, name), getattr(first, name), check_exact=True, obj=name)
    assert set(other.weights["head"]) == {0, 1}
    entries = sorted(p.name for p in (tmp_path / "alternatives").iterdir() if p.is_dir())
    assert len(entries) == 2 and all(e.startswith("synthetic-") for e in entries)


def test_results_takes_a_model_and_a_text_together_or_neither():
    with pytest.raises(ValueError, match="model, text: give both"):
        alt.results(object(), preset="quick")
    with pytest.raises(ValueError, match="model, text: give both"):
        alt.results(text="some text", preset="quick")


def test_row_cost_has_a_row_per_normaliser():
    cost = alt.row_cost(16, rows=8, repeats=2)
    assert list(cost.normalizer) == NAMES and (cost.us_per_row > 0).all()


def test_one_logit_apart_is_scalable_softmaxs_figure_1():
    """The registry's softmax and Scalable-Softmax (s = 0.43) on a row of -2s and one +3 give the closed forms of
    the figure's two curves: softmax's largest weight halves at n = 1 + e^5 and keeps falling, Scalable-Softmax's
    stays above 0.8 and rises towards 1."""
    ns = [1, 2, 10, 100, 149, 150, 1000, 100_000]
    table = alt.one_logit_apart(ns)
    for row in table.itertuples():
        assert row.softmax == pytest.approx(1 / (1 + (row.n - 1) * math.exp(-5)), rel=1e-12)
        assert table.loc[row.Index, "scalable-softmax"] == pytest.approx(
            1 / (1 + (row.n - 1) * row.n ** (-0.43 * 5)), rel=1e-12
        )
    soft = table.set_index("n").softmax
    assert soft[149] > 0.5 > soft[150] and soft[100_000] < 0.002
    ss = table.set_index("n")["scalable-softmax"]
    assert ss.min() > 0.8 and ss.loc[2:].is_monotonic_increasing
    with pytest.raises(ValueError, match="ns: must hold integers"):
        alt.one_logit_apart([0])


# ----------------------------------------------------------------------------------------------------------------
# chapter 36: rows that need not sum to one, the sink rate, the critical scaling, several windows
# ----------------------------------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), scale=st.floats(0.01, 100.0), n=st.integers(1, 7))
def test_the_separable_fraction_does_not_depend_on_a_rows_sum(seed, scale, n):
    """Distances and radius scale together: N_s/N of c * alpha is N_s/N of alpha, for rows of any sum."""
    gen = torch.Generator().manual_seed(seed)
    alpha = torch.rand(3, 8, generator=gen, dtype=torch.float64)  # sums anywhere in (0, 8)
    x = torch.randn(3, 8, 4, generator=gen, dtype=torch.float64)
    one = selection.distinguishable_fraction(alpha, x, n, sums_to_one=False)
    torch.testing.assert_close(selection.distinguishable_fraction(scale * alpha, x, n, sums_to_one=False), one)
    d = selection.cumulative_distance(alpha, x, n, sums_to_one=False)  # while d~ scales with the row
    torch.testing.assert_close(selection.cumulative_distance(scale * alpha, x, n, sums_to_one=False), scale * d)
    with pytest.raises(ValueError, match="each row must sum to 1"):
        selection.distinguishable_fraction(alpha, x, n)  # a distribution is still required by default


def test_the_critical_gamma_of_one_logit_apart_is_where_its_closed_form_stops_vanishing():
    """One logit ahead by Delta: the largest weight is 1 / (1 + (n - 1) n^{-gamma Delta}), whose slope against n
    is about gamma Delta - 1, so the slope reaches -0.1 near gamma = 0.9 / Delta."""
    delta, lengths = 4.0, [256, 1024, 4096, 16384]
    inputs = {}
    for L in lengths:
        z = torch.zeros(1, 1, L, dtype=torch.float64)
        z[..., 0] = delta
        inputs[L] = (z, None)
    table = alt.gamma_table(inputs, torch.logspace(-1.5, 0.5, 41).tolist())
    found = alt.critical_gamma(alt.gamma_slopes(table))
    assert found == pytest.approx(0.9 / delta, rel=0.05)
    slopes = alt.gamma_slopes(table)
    assert slopes.iloc[0] < -0.8 and slopes.iloc[-1] > -0.01  # spread out at small gamma, one-hot at large
    assert math.isnan(alt.critical_gamma(slopes.iloc[-5:]))  # the grid starts above the threshold
    assert math.isnan(alt.critical_gamma(slopes.iloc[:3]))  # never reached
    with pytest.raises(ValueError, match="gammas: need numbers > 0"):
        alt.gamma_table(inputs, [0.0])


def test_the_sink_table_is_gu_et_al_s_rate_per_normaliser():
    w = _FakeWindow(length=70)
    table = alt.sink_table([w], ["softmax", "sigmoid"]).set_index("normalizer").sink_rate
    for name in ("softmax", "sigmoid"):
        fn = normalizers.NORMALIZERS[name]
        want = sinks.sink_rate(fn(w.logits(layer, 64).double()) for layer in w.layer_ids)
        assert table[name] == want


def test_several_windows_give_one_table_with_a_window_column(monkeypatch):
    """The model's tables on each window, stacked with their window number; each window's part is what the
    study computes on that window alone."""
    from attnlimits import models
    from attnlimits.models import windows as capturing

    class Window(_FakeWindow):
        def __init__(self, index):
            super().__init__(length=70)
            self._z = {k: v + index for k, v in self._z.items()}  # another passage, other logits

    monkeypatch.setattr(
        capturing, "capture_windows", lambda model, text, count, **kw: [Window(i) for i in range(count)]
    )
    monkeypatch.setattr(models, "facts", lambda model: {"n_layers": 6})
    p = alt.RECENT_PRESETS["quick"].replace(model_L=(8, 16), model_rows=2, layers=2, n_points=4, T_grid=(1.0,))
    tables = alt.model_tables(object(), "text", p)
    assert p.normalizer_names() == ["softmax", *normalizers.names("recent")]
    for name in ("weights", "distance", "critical", "jacobian", "g", "sink", "gamma"):
        assert sorted(set(getattr(tables, name).window)) == [0, 1], name
    one = alt.all_tables(alt.model_heads([Window(1)], p.model_L, p.model_rows), p, p.normalizer_names())
    pd.testing.assert_frame_equal(
        tables.distance[tables.distance.window == 1].drop(columns="window").reset_index(drop=True), one["distance"]
    )
    assert set(tables.critical.reading) == set(alt.READINGS)
    only = tables.only(["softmax", "sigmoid"])
    assert set(only.weights.normalizer) == {"softmax", "sigmoid"} and only.gamma is tables.gamma


def test_a_toy_variant_of_the_recent_family_joins_chapter_36_by_one_registry_entry(monkeypatch, heads):
    toy = normalizers.Normalizer(lambda z, dim=-1, T=1.0: 0.5 * torch.softmax(z / T, dim), "toy", family="recent",
                                 sums_to_one=False)  # fmt: skip
    monkeypatch.setitem(normalizers.NORMALIZERS, "toy", toy)
    p = alt.RECENT_PRESETS["quick"]
    assert p.normalizer_names()[-1] == "toy" and "toy" not in normalizers.names("paper")
    rows = alt.weight_table(heads, p.normalizer_names())
    assert rows[rows.normalizer == "toy"].row_sum.to_numpy() == pytest.approx(0.5)
