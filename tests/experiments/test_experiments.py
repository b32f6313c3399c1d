"""attnlimits.experiments and attnlimits.core.rowstats: Algorithms 1-5 against a literal reference, on random data and
on
tiny random-init GPT-2 and Llama models; seeded runs repeat exactly; bad grids fail before anything is loaded.

The literal reference (loops over heads, rows and every N; numpy over tokens) lives in benchmarks/, where the
benchmark times it against the library.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tiny_models
import torch

from attnlimits import cli, experiments, models
from attnlimits.core import bounds, normalizers, rowstats, selection
from attnlimits.experiments import paper_claims

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import naive_experiments as naive  # noqa: E402

REL = 1e-9


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("ATTNLIMITS_MODEL", raising=False)
    monkeypatch.delenv("ATTNLIMITS_TEXT", raising=False)


# ---------------------------------------------------------------------------------------------------------------
# rowstats: every row equals attnlimits.core.selection / attnlimits.core.bounds on the row's visible prefix
# ---------------------------------------------------------------------------------------------------------------
def _causal(H, L, d, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(H, L, L, generator=gen, dtype=torch.float64) * scale
    logits = logits.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(logits, -1), torch.randn(H, L, d, generator=gen, dtype=torch.float64)


def _drop_sink(alpha):
    a = alpha.clone()
    a[..., 0] = 0
    return a / a.sum(-1, keepdim=True).clamp_min(1e-300)


@pytest.mark.parametrize("first", [0, 1])
def test_separability_on_tokens_every_head_shares_equals_the_per_head_batch(monkeypatch, first):
    """Tokens expanded over heads (the embeddings) take one matrix product for all heads: the same numbers as the
    same tokens copied into every head."""
    monkeypatch.setattr(rowstats, "ROW_BLOCK", 7)
    alpha, x = _causal(3, 30, 6, 2.0, seed=5 + first)
    shared = x[:1].expand(3, -1, -1)
    assert shared.stride(0) == 0
    ns = [1, 3, 8]
    for got, want in zip(
        rowstats.separability(alpha, shared, ns, first=first),
        rowstats.separability(alpha, shared.contiguous(), ns, first=first),
        strict=True,
    ):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize("scale", [0.5, 6.0])
@pytest.mark.parametrize("walk", [32, 1])  # walk = 1 sends most pairs of d_max to the exact masked maximum
def test_rowstats_equal_the_per_row_definitions(monkeypatch, first, scale, walk):
    monkeypatch.setattr(rowstats, "ROW_BLOCK", 7)  # several blocks, the last one short
    monkeypatch.setattr(rowstats, "_WALK", walk)
    alpha, x = _causal(3, 30, 4, scale, seed=int(scale * 10) + first)
    if first:
        alpha = _drop_sink(alpha)
    ns = [1, 3, 8]
    d_tilde, d_max = rowstats.distances(alpha, x, ns, first=first, bound=True)
    expected = rowstats.expectation(alpha, x, ns, first=first)
    checked = 0
    fracs, all_weights, _ = rowstats.separability(alpha, x, ns, first=first)
    for j, n in enumerate(ns):
        frac, weights = fracs[j], all_weights[..., :n]
        for h in range(3):
            for t in range(30):
                if t + 1 - first <= n:
                    continue
                a, xr = alpha[h, t, first : t + 1], x[h, first : t + 1]
                assert d_tilde[j, h, t].item() == pytest.approx(selection.cumulative_distance(a, xr, n).item(), rel=REL)
                assert d_max[j, h, t].item() == pytest.approx(bounds.theorem1_dmax(a, xr, n).item(), rel=REL)
                ref_e = selection.random_selection_expectation(a, xr, n).item()
                assert expected[j, h, t].item() == pytest.approx(ref_e, rel=REL)
                assert frac[h, t].item() == selection.distinguishable_fraction(a, xr, n).item()
                top = torch.sort(a, descending=True).values[:n]
                torch.testing.assert_close(weights[h, t], top, rtol=0, atol=0)
                checked += 1
    assert checked > 100


@pytest.mark.parametrize("first", [0, 1])
@pytest.mark.parametrize("spread", ["all tokens", "any positions"])
def test_rowstats_at_given_query_positions_equal_the_per_row_definitions(monkeypatch, first, spread):
    """Rows given with their query positions (every row seeing all L tokens, as chapter 33's heads, or any
    positions, repeated and unsorted): each row equals attnlimits.core.selection / bounds on the tokens it sees."""
    monkeypatch.setattr(rowstats, "ROW_BLOCK", 4)  # several blocks, the last one short
    H, R, L, d = 2, 10, 16, 3
    gen = torch.Generator().manual_seed(5 + first)
    if spread == "all tokens":
        positions = torch.full((R,), L - 1)
    else:
        positions = torch.randint(first + 4, L, (R,), generator=gen)
    logits = 2 * torch.randn(H, R, L, generator=gen, dtype=torch.float64)
    column = torch.arange(L)
    logits = logits.masked_fill((column > positions[:, None]) | (column < first), -math.inf)
    alpha, x = torch.softmax(logits, -1), torch.randn(H, L, d, generator=gen, dtype=torch.float64)
    ns = [1, 3]
    d_tilde, d_max = rowstats.distances(alpha, x, ns, first=first, bound=True, positions=positions)
    expected = rowstats.expectation(alpha, x, ns, first=first, positions=positions)
    assert d_tilde.shape == expected.shape == (2, H, R)
    fracs, all_weights, _ = rowstats.separability(alpha, x, ns, first=first, positions=positions)
    for j, n in enumerate(ns):
        frac, weights = fracs[j], all_weights[..., :n]
        for h in range(H):
            for r, t in enumerate(positions.tolist()):
                a, xr = alpha[h, r, first : t + 1], x[h, first : t + 1]
                assert d_tilde[j, h, r].item() == pytest.approx(selection.cumulative_distance(a, xr, n).item(), rel=REL)
                assert d_max[j, h, r].item() == pytest.approx(bounds.theorem1_dmax(a, xr, n).item(), rel=REL)
                ref_e = selection.random_selection_expectation(a, xr, n).item()
                assert expected[j, h, r].item() == pytest.approx(ref_e, rel=REL)
                assert frac[h, r].item() == selection.distinguishable_fraction(a, xr, n).item()
                torch.testing.assert_close(weights[h, r], torch.sort(a, descending=True).values[:n], rtol=0, atol=0)
    with pytest.raises(ValueError, match="positions: must lie in"):
        rowstats.expectation(alpha, x, ns, positions=torch.full((R,), L))
    with pytest.raises(ValueError, match="positions: expected 10 integers"):
        rowstats.expectation(alpha, x, ns, positions=torch.zeros(R + 1, dtype=torch.long))
    with pytest.raises(ValueError, match="positions: needed"):
        rowstats.expectation(alpha.transpose(1, 2), x[:, :R], ns)


def test_default_positions_are_the_causal_rows(monkeypatch):
    """positions = arange(L) is the default: the same numbers, bit for bit."""
    monkeypatch.setattr(rowstats, "ROW_BLOCK", 7)
    alpha, x = _causal(2, 20, 3, 2.0, seed=4)
    rows = torch.arange(20)
    for plain, given in (
        (
            rowstats.distances(alpha, x, [2, 15], bound=True),
            rowstats.distances(alpha, x, [2, 15], bound=True, positions=rows),
        ),
        (rowstats.expectation(alpha, x, [2, 15]), rowstats.expectation(alpha, x, [2, 15], positions=rows)),
        (rowstats.separability(alpha, x, [1, 3]), rowstats.separability(alpha, x, [1, 3], positions=rows)),
    ):
        for a, b in zip(plain, given, strict=True):
            assert torch.equal(a, b)


def test_theorem2_bounds_of_the_selected_weights_are_the_bounds_of_the_row():
    alpha, _ = _causal(1, 12, 2, 1.5, seed=9)
    rows = alpha[0, 6:, :]  # rows with 7..12 visible tokens (the rest weight 0)
    n, r, delta = 4, torch.linspace(0.5, 1.5, 6, dtype=torch.float64), torch.full((6,), 0.3, dtype=torch.float64)
    weights = torch.sort(rows, descending=True).values[:, :n]
    lower, upper = bounds.theorem2_bounds_of_weights(weights, r=r, delta=delta)
    assert torch.equal(lower, bounds.theorem2_lower(rows, n, r=r, delta=delta))
    assert torch.equal(upper, bounds.theorem2_upper_reconstructed(rows, n, r=r, delta=delta))
    assert torch.equal(bounds.theorem2_xi_of_weights(weights, delta=delta), bounds.theorem2_xi(rows, n, delta=delta))


def test_row_lengths_and_blocks():
    assert rowstats.row_lengths(4).tolist() == [1, 2, 3, 4]
    assert rowstats.row_lengths(4, first=1).tolist() == [0, 1, 2, 3]
    blocks = list(rowstats.row_blocks(2 * rowstats.ROW_BLOCK + 3))
    assert blocks[0] == (0, rowstats.ROW_BLOCK) and blocks[-1][1] == 2 * rowstats.ROW_BLOCK + 3


# ---------------------------------------------------------------------------------------------------------------
# tiny random models against the literal reference
# ---------------------------------------------------------------------------------------------------------------
def _compare(ours: pd.DataFrame, ref: pd.DataFrame, keys, values, rel=1e-6):
    ours = ours.assign(window=ours.window.astype(str)).sort_values(keys).reset_index(drop=True)
    ref = ref.sort_values(keys).reset_index(drop=True)
    assert len(ours) == len(ref) > 0
    pd.testing.assert_frame_equal(ours[keys], ref[keys], check_dtype=False)
    for col in values:
        np.testing.assert_allclose(ours[col].to_numpy(float), ref[col].to_numpy(float), rtol=rel, atol=1e-12)


def test_recomputed_weights_are_the_models_own(tiny):
    model, _ = tiny
    cap = models.capture(model, torch.randint(0, 300, (24,), generator=torch.Generator().manual_seed(0)))
    for layer in cap.layer_ids:
        alpha, _ = cap.inputs(layer, 24)
        torch.testing.assert_close(alpha.float(), cap[layer].weights[0], rtol=0, atol=2e-7)
        assert (alpha.sum(-1) - 1).abs().max() < 1e-14


def test_weights_of_given_rows_are_those_rows_of_the_whole_matrix(tiny):
    """inputs(rows=...) computes only the listed query rows, in their order, and they are the whole matrix's rows
    (the sampled readings of Algorithm 3 read them); rows outside the window are refused."""
    model, _ = tiny
    cap = models.capture(model, torch.randint(0, 300, (24,), generator=torch.Generator().manual_seed(1)))
    rows = torch.tensor([0, 3, 23, 7])
    for layer in cap.layer_ids:
        whole, x = cap.inputs(layer, 24, exclude_sink=True)
        some, x_some = cap.inputs(layer, 24, exclude_sink=True, rows=rows)
        assert some.shape == (whole.shape[0], 4, 24)
        torch.testing.assert_close(some, whole[:, rows], rtol=0, atol=1e-12)
        assert torch.equal(x_some, x)
    for bad in (torch.tensor([24]), torch.tensor([[1]]), torch.tensor([-1])):
        with pytest.raises(ValueError, match="rows: expected a 1-D tensor of positions below L = 24"):
            cap.inputs(cap.layer_ids[0], 24, rows=bad)


def test_distance_table_computes_the_readings_asked_for(tiny):
    """A subset of the readings gives the same numbers as the whole table for those, NaN for the others."""
    _, windows = tiny
    grid = {2: [8, 16], 5: [16]}
    whole = experiments.distance_table(windows, grid, seed=1)
    some = experiments.distance_table(windows, grid, seed=1, readings=("E", "E_perm"), countings=("row",))
    assert list(some.columns) == list(whole.columns)
    ref = whole[whole.counting == "row"].reset_index(drop=True)
    for col in ("d_tilde", "E", "E_perm", "rows"):
        np.testing.assert_array_equal(some[col].to_numpy(float), ref[col].to_numpy(float), err_msg=col)
    assert some[["E_mc", "E_mc_se", "E_full"]].isna().all().all() and ref[["E_mc", "E_full"]].notna().all().all()
    with pytest.raises(ValueError, match="readings: must be a non-empty subset of"):
        experiments.distance_table(windows, grid, readings=("E", "E0"))


@pytest.mark.parametrize("exclude_sink", [False, True])
def test_distances_match_the_reference(tiny, exclude_sink):
    _, windows = tiny
    grid = {2: [8, 16, 24], 5: [24], 10: [24]}
    ours = experiments.distance_table(windows, grid, exclude_sink=exclude_sink)
    ref = naive.distance_table(windows, grid, exclude_sink=exclude_sink)
    visible = ours[ours.counting == "visible"]
    _compare(visible, ref, ["window", "layer", "head", "L", "N", "rows"], ["d_tilde", "d_max", "E"])
    # the row counting averages the same rows; only what counts as a token of the row differs
    row = ours[ours.counting == "row"]
    assert row[["window", "layer", "head", "L", "N", "rows"]].equals(
        visible[["window", "layer", "head", "L", "N", "rows"]].set_axis(row.index)
    )
    assert row.d_max.isna().all() and (row.d_tilde >= visible.d_tilde.to_numpy() - 1e-12).all()
    assert set(ours.rows[ours.L == 24]) == {24 - n - int(exclude_sink) for n in (2, 5, 10)}


def test_another_normaliser_is_swapped_in_on_the_same_masked_logits(tiny):
    """normalizer=None is the model's softmax; a named normaliser replaces it on the same masked logits, and the
    algorithms compute on those weights what selection computes row by row."""
    _, windows = tiny
    w = windows[0]
    layer = w.layer_ids[-1]
    alpha, x = w.inputs(layer, 24)
    assert torch.equal(alpha, torch.softmax(w.logits(layer, 24).double(), -1))
    sparse, x2 = w.inputs(layer, 24, normalizer="sparsemax")
    assert torch.equal(x, x2)
    torch.testing.assert_close(sparse, normalizers.sparsemax(w.logits(layer, 24).double()), rtol=0, atol=0)
    visible = torch.ones(24, 24, dtype=torch.bool).tril().expand_as(alpha)
    assert (sparse[~visible] == 0).all() and (sparse[visible] == 0).any() and (alpha[visible] > 0).all()
    table = experiments.distance_table(windows[:1], {3: [24]}, normalizer="sparsemax")
    row = table[(table.layer == layer) & (table["head"] == 1)].iloc[0]
    ref = [selection.cumulative_distance(sparse[1, t, : t + 1], x[1, : t + 1], 3).item() for t in range(3, 24)]
    assert row.d_tilde == pytest.approx(float(np.mean(ref)), rel=REL)
    sep = experiments.separability_table(windows[:1], 24, [2], normalizer="sparsemax")
    assert len(sep) == len(experiments.separability_table(windows[:1], 24, [2]))
    scan, _, _ = experiments.critical_n(windows[:1], [8], (0.05,), normalizer="1.5-entmax")
    assert len(scan) > 0 and scan.p_value.between(0, 1).all()
    with pytest.raises(ValueError, match="normalizer: must be None"):
        w.inputs(layer, 24, normalizer="relu")
    # without token 0: a distribution is renormalised over the others, a map whose rows need not sum to one is not
    soft, _ = w.inputs(layer, 24, exclude_sink=True)
    rest = torch.softmax(w.logits(layer, 24).double()[..., 1:], -1)
    torch.testing.assert_close(soft[:, 1:, 1:], rest[:, 1:], rtol=1e-12, atol=1e-15)
    sig, _ = w.inputs(layer, 24, exclude_sink=True, normalizer="sigmoid")
    plain = normalizers.sigmoid(w.logits(layer, 24).double())
    assert torch.equal(sig[..., 0], torch.zeros_like(sig[..., 0])) and torch.equal(sig[..., 1:], plain[..., 1:])


def test_separability_matches_the_reference(tiny):
    _, windows = tiny
    ours = experiments.separability_table(windows, 24, [1, 2, 4, 8])
    ref = naive.separability_table(windows, 24, [1, 2, 4, 8])
    _compare(ours, ref, ["window", "layer", "head", "L", "N", "rows"], ["ns_frac", "lower", "upper", "delta"])


def test_separability_on_the_embeddings_is_the_literal_algorithm_4_on_them(tiny):
    """tokens="embedding" is Algorithm 4 with every head's tokens the input embeddings: the literal reference on
    windows whose value vectors are replaced by those embeddings gives the same table."""
    import dataclasses

    model, windows = tiny
    gen = torch.Generator().manual_seed(5)
    emb_windows, as_values = [], []
    for w in windows:
        emb = torch.randn(1, w.seq_len, 16, generator=gen)
        emb[0, 7] = emb[0, 3]  # a repeated token: delta = 0
        emb_windows.append(dataclasses.replace(w, embedding=emb))
        heads = w.layers[0].v.shape[1]
        layers = [dataclasses.replace(lc, v=emb.unsqueeze(1).expand(1, heads, -1, -1)) for lc in w.layers]
        as_values.append(dataclasses.replace(w, layers=layers))
    ours = experiments.separability_table(emb_windows, 24, [1, 2, 4, 8], tokens="embedding")
    ref = naive.separability_table(as_values, 24, [1, 2, 4, 8])
    assert set(ours.tokens) == {"embedding"} and (ours.delta == 0).all()
    _compare(ours, ref, ["window", "layer", "head", "L", "N", "rows"], ["ns_frac", "lower", "upper", "delta"])


def test_separability_on_a_row_sample_is_the_weighted_mean_of_those_rows(tiny, monkeypatch):
    """stride=1 samples every row (the exact table); a coarser stride gives each head the mean of its sampled rows'
    N_s/N weighted by the rows each stands for, those rows' values being the exact table's per-row values."""
    from attnlimits.experiments import row_sample

    _, windows = tiny
    exact = experiments.separability_table(windows, 24, [1, 3])
    pd.testing.assert_frame_equal(experiments.separability_table(windows, 24, [1, 3], stride=1), exact)
    monkeypatch.setattr(row_sample, "SAMPLE_FROM", 5)
    sampled = experiments.separability_table(windows, 24, [1, 3], stride=4, seed=2)
    assert (sampled.rows == exact.rows).all()  # every block of 4 rows lies past N = 3: the weights sum to the rows
    for w in windows:
        for layer in w.layer_ids:
            at, weight = row_sample.sample_rows(24, 2 + 1_000_003 * w.index + 7919 * layer, 4)
            alpha, x = w.inputs(layer, 24, precision="float64")
            frac = rowstats.separability(alpha, x / x.norm(dim=-1, keepdim=True), [3])[0][0]  # (H, rows)
            keep = at > 2  # rows with more than 3 tokens
            expected = (frac[:, at[keep]] * weight[keep]).sum(-1) / weight[keep].sum()
            got = sampled[(sampled.window == str(w.index)) & (sampled.layer == layer) & (sampled.N == 3)]
            np.testing.assert_allclose(got.ns_frac.to_numpy(), expected.numpy(), rtol=1e-12)
    assert not np.allclose(sampled.ns_frac, exact.ns_frac)  # a sample, not every row
    with pytest.raises(ValueError, match="stride: must be None"):
        experiments.separability_table(windows, 24, [1], stride=0)


def test_gradient_matches_the_reference(tiny):
    _, windows = tiny
    T, eps = (1e-2, 0.3, 5.0), (1e-3, 1e-1, 10.0)
    ours = experiments.gradient_table(windows, 24, T, eps, seed=3)
    ref = naive.gradient_table(windows, 24, T, eps, seed=3)
    _compare(ours, ref, ["window", "layer", "head", "T", "eps", "logit_scaling"], ["g"], rel=1e-7)


def test_unscaled_gradient_is_the_scaled_one_at_rescaled_t_and_eps(tiny):
    """g_raw(T, eps) = s * g_model(s T, s eps): the two columns are one computation seen at two scales."""
    _, windows = tiny
    s = windows[0].layers[0].scaling
    raw = experiments.gradient_table(windows[:1], 24, (0.5,), (0.1,), seed=0)
    scaled = experiments.gradient_table(windows[:1], 24, (0.5 * s,), (0.1 * s,), seed=0)
    g_raw = raw[raw.logit_scaling == "none"].g.to_numpy()
    g_model = scaled[scaled.logit_scaling == "model"].g.to_numpy()
    np.testing.assert_allclose(g_raw, s * g_model, rtol=1e-9)


def test_sink_weight_is_the_mean_weight_of_token_zero(tiny):
    _, windows = tiny
    table = experiments.sink_table(windows, 24)
    alpha, _ = windows[1].inputs(1, 24)
    row = table[(table.window == "1") & (table.layer == 1) & (table["head"] == 0)].sink_weight.item()
    assert row == pytest.approx(float(np.mean([alpha[0, t, 0].item() for t in range(1, 24)])), rel=1e-12)


# ---------------------------------------------------------------------------------------------------------------
# run(): presets, validation before loading, seeded repeats, merging, the cache, the CLI
# ---------------------------------------------------------------------------------------------------------------
TINY_PRESET = tiny_models.experiments_preset()


def test_seeded_runs_repeat_exactly_and_merge(tiny_dir, text, tmp_path):
    model = models.load(str(tiny_dir))
    one = experiments.run(model, text, TINY_PRESET, seed=5).save(tmp_path / "a")
    two = experiments.run(model, text, TINY_PRESET, seed=5).save(tmp_path / "b")
    for name in experiments.TABLES:
        assert (one / f"{name}.csv").read_bytes() == (two / f"{name}.csv").read_bytes(), name
    whole = experiments.Results.load(one)
    parts = [experiments.run(model, text, TINY_PRESET, windows=1, first_window=i, seed=5) for i in (0, 1)]
    merged = experiments.merge(parts)
    for name in ("distance", "separability", "gradient", "sink"):
        pd.testing.assert_frame_equal(
            getattr(merged, name).reset_index(drop=True), getattr(whole, name).reset_index(drop=True), check_dtype=False
        )
    assert merged.provenance["windows"] == [0, 1]
    assert set(merged.critical.windows) == {"0-0", "1-1"}
    with pytest.raises(ValueError, match="overlap"):
        experiments.merge([parts[0], parts[0]])


def test_a_run_with_a_normaliser_swapped_in_reads_it_everywhere(tiny_dir, text):
    """normalizer= puts the registered map in softmax's place for every algorithm: the sink table is its weights'
    mean on token 0, Algorithm 5 perturbs the logits through it, and the provenance and summary say so."""
    model = models.load(str(tiny_dir))
    caps = experiments.capture_windows(model, text, length=TINY_PRESET.max_length, count=1)
    own = experiments.run(model, text, TINY_PRESET, windows=1, captures=caps)
    swapped = experiments.run(model, text, TINY_PRESET, windows=1, captures=caps, normalizer="sigmoid")
    assert swapped.provenance["normalizer"] == "sigmoid" and own.provenance["normalizer"] is None
    assert "normaliser sigmoid" in swapped.summary()
    w, L = caps[0], TINY_PRESET.max_length
    layer = w.layer_ids[0]
    alpha = normalizers.sigmoid(w.logits(layer, L).double())
    sink = swapped.sink[swapped.sink.layer == layer].sort_values("head").sink_weight.to_numpy()
    np.testing.assert_allclose(sink, alpha[:, 1:, 0].mean(-1).numpy(), rtol=1e-12)
    g = swapped.gradient
    g = g[(g.layer == layer) & (g.logit_scaling == "model")].sort_values(["head", "T", "eps"])
    ref = rowstats.finite_difference_g(w.logits(layer, TINY_PRESET.alg5_L).double(), T=TINY_PRESET.alg5_T,
                                       eps=TINY_PRESET.alg5_eps, seed=layer, reduce=False,
                                       normalizer=normalizers.NORMALIZERS["sigmoid"])  # fmt: skip
    np.testing.assert_allclose(g.g.to_numpy(), ref.reshape(-1).numpy(), rtol=1e-12)
    assert not np.allclose(swapped.distance.d_tilde, own.distance.d_tilde)
    with pytest.raises(ValueError, match="parts: runs of different"):
        experiments.merge([own, swapped])
    with pytest.raises(ValueError, match="normalizer: must be None"):
        experiments.run(model, text, TINY_PRESET, windows=1, captures=caps, normalizer="relu")
    with pytest.raises(ValueError, match="another normalizer"):
        experiments.run(model, text, TINY_PRESET, windows=1, captures=caps, shared=own, normalizer="sigmoid")


@pytest.mark.parametrize("backend", ["threading", "loky"])
def test_parallel_windows_give_the_same_tables(tiny_dir, text, tmp_path, backend):
    """n_jobs=2 (threads by default, or processes when joblib's configuration says so) writes byte-identical
    tables to n_jobs=1, Algorithm 3's pooled search included; a capture passed in equals capturing again."""
    import joblib

    model = models.load(str(tiny_dir))
    one = experiments.run(model, text, TINY_PRESET, seed=3)
    with joblib.parallel_config(backend=backend):
        two = experiments.run(model, text, TINY_PRESET, seed=3, n_jobs=2)
    caps = experiments.capture_windows(model, text, length=TINY_PRESET.max_length, count=TINY_PRESET.windows)
    reused = experiments.run(model, text, TINY_PRESET, seed=3, captures=caps)
    folders = [r.save(tmp_path / name) for r, name in ((one, "one"), (two, "two"), (reused, "reused"))]
    for name in experiments.TABLES:
        first = (folders[0] / f"{name}.csv").read_bytes()
        assert all((f / f"{name}.csv").read_bytes() == first for f in folders[1:]), name
    assert reused.provenance["seconds"]["capture"] == pytest.approx(sum(c.seconds for c in caps), abs=1e-3)
    assert all(c.seconds > 0 for c in caps)


def test_a_shared_run_lends_the_tables_the_sink_mode_does_not_change(tiny_dir, text, tmp_path):
    """The variant without token 0 computed with the paper setting's run as ``shared`` writes the same tables as
    computed alone; it keeps E on the visible tokens; a run of another seed or windows is refused."""
    model = models.load(str(tiny_dir))
    caps = experiments.capture_windows(model, text, length=TINY_PRESET.max_length, count=TINY_PRESET.windows)
    paper = experiments.run(model, text, TINY_PRESET, seed=3, captures=caps)
    alone = experiments.run(model, text, TINY_PRESET, seed=3, captures=caps, exclude_sink=True)
    lent = experiments.run(model, text, TINY_PRESET, seed=3, captures=caps, exclude_sink=True, shared=paper)
    for name in experiments.TABLES:
        pd.testing.assert_frame_equal(getattr(lent, name), getattr(alone, name), obj=name)
    assert lent.provenance["seconds"]["alg5"] == 0 < alone.provenance["seconds"]["alg5"]
    assert set(alone.distance.counting) == {"visible"} and set(alone.critical.reading) == {"E"}
    assert alone.distance.E_full.isna().all() and paper.distance.E_full.notna().all()
    with pytest.raises(ValueError, match="shared: a run of another seed than this run's"):
        experiments.run(model, text, TINY_PRESET, seed=4, captures=caps, exclude_sink=True, shared=paper)
    with pytest.raises(ValueError, match="shared: a run of another windows"):
        experiments.run(model, text, TINY_PRESET, windows=1, seed=3, captures=caps[:1], shared=paper)


@pytest.mark.parametrize("n_jobs", [0, -2, 1.5, True, "2"])
def test_bad_job_counts_raise(tiny, n_jobs):
    _, windows = tiny
    with pytest.raises(ValueError, match="n_jobs: must be an integer >= 1, or -1"):
        experiments.distance_table(windows, {2: [8]}, n_jobs=n_jobs)


def test_captures_of_other_windows_or_lengths_are_refused(tiny_dir, text):
    model = models.load(str(tiny_dir))
    caps = experiments.capture_windows(model, text, length=TINY_PRESET.max_length, count=TINY_PRESET.windows)
    with pytest.raises(ValueError, match="captures: the run reads windows \\[1"):
        experiments.run(model, text, TINY_PRESET, windows=1, first_window=1, captures=caps[:1])
    short = experiments.capture_windows(model, text, length=TINY_PRESET.max_length - 1, count=TINY_PRESET.windows)
    with pytest.raises(ValueError, match="captures: the run reads"):
        experiments.run(model, text, TINY_PRESET, captures=short)


def test_results_cache_is_reused_and_invalidated(tiny_dir, text, tmp_path, monkeypatch):
    model = models.load(str(tiny_dir))
    first = experiments.results(model, text, TINY_PRESET, root=tmp_path)
    folder = experiments.results_folder(model, text, TINY_PRESET, root=tmp_path)
    assert (folder / "provenance.json").is_file()
    monkeypatch.setattr(experiments.runs, "run", lambda *a, **k: pytest.fail("the cache was not reused"))
    again = experiments.results(model, text, TINY_PRESET, root=tmp_path)
    pd.testing.assert_frame_equal(again.distance, first.distance, check_dtype=False)
    calls = []
    monkeypatch.setattr(experiments.runs, "run", lambda *a, **k: calls.append(k) or first)
    experiments.results(model, text, TINY_PRESET, root=tmp_path, seed=1)  # another seed: recomputed
    assert calls and calls[0]["seed"] == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"alg1_L": ()}, "alg1_L: the grid is empty"),
        ({"alg2_N": (1, 16)}, "alg2_N: every N must be < L"),
        ({"alg4_N": (0,)}, "alg4_N: must hold integers >= 1"),
        ({"alg5_T": (0.0, 1.0)}, "alg5_T: must hold finite numbers > 0"),
        ({"ks_levels": (1.5,)}, "ks_levels"),
    ],
)
def test_bad_grids_raise_naming_the_grid(change, message):
    bad = dataclasses.replace(TINY_PRESET, **change)
    with pytest.raises(ValueError, match=message):
        experiments.validate_grid(bad)


def test_grid_beyond_the_context_and_unknown_preset():
    with pytest.raises(ValueError, match="above the model's 8 positions"):
        experiments.validate_grid(TINY_PRESET, max_positions=8)
    with pytest.raises(ValueError, match="preset: must be one of"):
        experiments.get_preset("huge")


def test_cli_rejects_bad_arguments_before_loading(monkeypatch, capsys):
    monkeypatch.setattr(models, "load", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(SystemExit) as err:
        cli.main(["analyze", "--preset", "huge", "--out", "x"])
    assert err.value.code == 2
    assert "preset" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        cli.main(["analyze", "--windows", "0", "--out", "x"])
    assert err.value.code == 2
    assert "--windows" in capsys.readouterr().err


def test_cli_analyze_end_to_end(tiny_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli.main(
        [
            "analyze",
            "--model",
            str(tiny_dir),
            "--text",
            "pydoc-topics",
            "--preset",
            "quick",
            "--windows",
            "1",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    res = experiments.Results.load(out)
    assert res.provenance["preset"]["name"] == "quick" and res.provenance["windows"] == [0]
    for name in (
        "fig2a_distance_vs_length",
        "fig2b_distance_vs_n",
        "fig2c_critical_n",
        "fig3_separability",
        "fig4_gradient",
    ):
        assert (out / f"{name}.png").stat().st_size > 1000 and (out / f"{name}.svg").is_file()
    assert "critical N" in capsys.readouterr().out
    claims = pd.read_csv(out / "claims.csv")
    assert {"key", "verdict", "value", "value_lo", "value_hi"} <= set(claims.columns)
    assert claims.key.is_unique and len(claims) == len(paper_claims.claims(res))
    readings = pd.read_csv(out / "readings.csv")  # every rule on the expectation held to every reading
    assert set(readings.reading) == set(experiments.READINGS) and {"lo", "hi", "units"} <= set(readings.columns)
    assert set(readings.key) == set(paper_claims.READING_RULES) and (readings.units <= 1).all()  # one window
    predictions = pd.read_csv(out / "predictions.csv")
    assert set(predictions.reading) == set(experiments.READINGS)


def test_cli_analyze_swaps_a_normaliser_in(tiny_dir, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["analyze", "--model", str(tiny_dir), "--text", "pydoc-topics", "--preset", "quick", "--windows", "1"]
    assert cli.main([*args, "--normalizer", "softpick", "--out", str(out)]) == 0
    assert experiments.Results.load(out).provenance["normalizer"] == "softpick"
    assert "softpick in softmax's place" in (out / "report.md").read_text()
    with pytest.raises(SystemExit):
        cli.main([*args, "--normalizer", "relu", "--out", str(tmp_path / "no")])
    assert "invalid choice: 'relu'" in capsys.readouterr().err
    assert cli.main([*args, "--normalizer", "sigmoid", "--lengths", "32", "--out", str(tmp_path / "long")]) == 2
    assert "--normalizer: the long-context study" in capsys.readouterr().err


def test_text_too_short_for_the_windows(tiny_dir):
    model = models.load(str(tiny_dir))
    with pytest.raises(ValueError, match="tokens from the start"):
        experiments.run(model, "a few words only", TINY_PRESET)


def test_tables_name_layers_by_number_when_only_some_are_captured(tiny):
    model, _ = tiny
    w = models.capture(model, torch.arange(20) % 300, layers=[1], index=3)
    assert w.layer_ids == [1]
    table = experiments.distance_table([w], {2: [20]})
    assert set(table.layer) == {1} and set(table.window) == {"3"}
    with pytest.raises(models.LayerNotCapturedError, match="this capture holds layers \\[1\\]"):
        w.inputs(0, 20)


def test_float32_path_agrees_with_float64(tiny):
    """The default float32 path reads the model's own float32 weights; its means agree with float64 to 1e-5."""
    _, windows = tiny
    grid = {2: [16, 24], 5: [24]}
    f64 = experiments.distance_table(windows, grid, precision="float64")
    f32 = experiments.distance_table(windows, grid, precision="float32")
    for col in ("d_tilde", "d_max", "E"):
        np.testing.assert_allclose(f32[col], f64[col], rtol=1e-5)
    with pytest.raises(ValueError, match="precision: must be one of"):
        experiments.distance_table(windows, grid, precision="float16")


def test_selection_by_complement_equals_the_top_n(monkeypatch):
    """For large N the kernel selects the complement of the smallest weights; d~ must not change."""
    monkeypatch.setattr(rowstats, "ROW_BLOCK", 9)
    alpha, x = _causal(2, 40, 3, 3.0, seed=11)
    ns = [20, 30, 38]  # above half the block: the complement path
    d_fast = rowstats.distances(alpha, x, ns)[0]
    for j, n in enumerate(ns):
        for t in range(n, 40):
            for h in range(2):
                ref = selection.cumulative_distance(alpha[h, t, : t + 1], x[h, : t + 1], n).item()
                assert d_fast[j, h, t].item() == pytest.approx(ref, rel=REL)


def test_results_are_cached_in_the_checkout(tiny_dir, text, monkeypatch):
    monkeypatch.delenv("ATTNLIMITS_RESULTS", raising=False)
    folder = experiments.results_folder(models.load(str(tiny_dir)), text, TINY_PRESET, exclude_sink=True)
    checkout = Path(__file__).resolve().parents[2]
    assert folder.parent.parent.parent == checkout / ".cache" / "results"
    assert folder.name == "tiny-no-sink"


def test_residual_stream_tokens(tiny_dir, text):
    """tokens="residual": x is the layer's input residual stream, the same for every head."""
    model = models.load(str(tiny_dir))
    (w,) = experiments.capture_windows(model, text, length=16, count=1, tokens="residual")
    ids = models.windows.windows(model, text, length=16, count=1)
    with torch.inference_mode():
        hidden = model.model.model(input_ids=ids, output_hidden_states=True).hidden_states
    for layer in w.layer_ids:
        _, x = w.inputs(layer, 16, tokens="residual")
        for h in range(x.shape[0]):
            torch.testing.assert_close(x[h], hidden[layer][0].double(), rtol=0, atol=0)
    table = experiments.distance_table([w], {2: [16]}, tokens="residual", countings=("visible",))
    assert table.d_tilde.notna().all() and (table.d_tilde <= table.d_max * (1 + 1e-9)).all()
    with pytest.raises(ValueError, match="tokens: must be one of"):
        experiments.capture_windows(model, text, length=16, count=1, tokens="keys")
