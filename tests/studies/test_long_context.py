"""The long-context study: the SDPA capture against the eager one (per layer type), the row sample, and the
tables on every row equal to the experiments' own tables on the same capture."""

from __future__ import annotations

import contextlib
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from attnlimits import experiments, models
from attnlimits.infra.medians import order_ranks
from attnlimits.models import kv_capture, texts
from attnlimits.studies import long_context
from attnlimits.studies.long_context import study


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_llama():
    torch.manual_seed(1)
    config = LlamaConfig(
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        hidden_size=64,
        intermediate_size=96,
        vocab_size=97,
        max_position_embeddings=512,
    )
    return LlamaForCausalLM(config).eval()


def _ids(n, seed=1):
    return torch.randint(0, 97, (n,), generator=torch.Generator().manual_seed(seed))


def _eager(model, ids, index=0):
    return models.capture(model, ids, index=index)


# ---------------------------------------------------------------------------------------------------------------
# the SDPA capture
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tiny_gemma", "tiny_llama"])
def test_sdpa_capture_equals_the_eager_weights_per_layer_type(name, request, monkeypatch):
    model = request.getfixturevalue(name)
    monkeypatch.setattr(kv_capture, "QUERY_BLOCK", 5)  # several query blocks, each reading its keys only
    ids = _ids(23)
    ref, long = _eager(model, ids), kv_capture.capture_ids(model, ids)
    assert long.layer_ids == ref.layer_ids
    kinds = set()
    for layer in ref.layer_ids:
        assert long.window(layer, 23) == ref.window(layer, 23)
        kinds.add(long_context.layer_type(long, layer))
        a, b = ref.inputs(layer, 23, precision="float32"), long.inputs(layer, 23, precision="float32")
        torch.testing.assert_close(b[0], a[0], rtol=0, atol=2e-6)  # the weights
        torch.testing.assert_close(b[1], a[1], rtol=1e-5, atol=1e-6)  # the values
        rows = torch.tensor([22, 3, 9])
        torch.testing.assert_close(long.logits(layer, 23, rows=rows), long.logits(layer, 23)[:, [22, 3, 9]])
    assert kinds == ({"full", "sliding"} if name == "tiny_gemma" else {"full"})


def test_sdpa_capture_output_equals_the_models_own_forward(tiny_gemma, monkeypatch):
    """The blocked SDPA the capture runs gives the model's own hidden states (the capture changes nothing)."""
    monkeypatch.setattr(kv_capture, "QUERY_BLOCK", 3)
    ids = _ids(17).unsqueeze(0)
    with torch.inference_mode():
        want = tiny_gemma.model(input_ids=ids).last_hidden_state
        kv_capture.capture_ids(tiny_gemma, ids[0])  # registers the implementation
        with models.capturing.attention_implementation(tiny_gemma, kv_capture.IMPLEMENTATION):
            got = tiny_gemma.model(input_ids=ids).last_hidden_state
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_window_of_refuses_a_mask_that_is_neither_causal_nor_sliding():
    mask = torch.ones(6, 6, dtype=torch.bool).tril().reshape(1, 1, 6, 6)
    assert kv_capture._window_of(mask, 6) is None
    sliding = mask & ~torch.ones(6, 6, dtype=torch.bool).tril(-3)
    assert kv_capture._window_of(sliding, 6) == 3
    broken = mask.clone()
    broken[0, 0, 4, 1] = False
    with pytest.raises(NotImplementedError, match="neither causal nor a causal sliding window"):
        kv_capture._window_of(broken, 6)


# ---------------------------------------------------------------------------------------------------------------
# the row sample and its estimator
# ---------------------------------------------------------------------------------------------------------------
def test_sample_rows_draws_one_row_per_block_and_every_row_when_rows_reach_L():
    pos, wt = long_context.sample_rows(100, 7, seed=3)
    edges = torch.arange(8) * 100 // 7
    assert len(pos) == 7 and torch.all((pos >= edges[:-1]) & (pos < edges[1:]))
    assert torch.equal(wt, (edges[1:] - edges[:-1]).double()) and float(wt.sum()) == 100
    again, _ = long_context.sample_rows(100, 7, seed=3)
    assert torch.equal(pos, again) and not torch.equal(pos, long_context.sample_rows(100, 7, seed=4)[0])
    pos, wt = long_context.sample_rows(10, 10, seed=0)
    assert torch.equal(pos, torch.arange(10)) and torch.equal(wt, torch.ones(10, dtype=torch.float64))


def test_stratified_mean_and_its_standard_error():
    values = torch.tensor([[1.0, 2.0, 4.0, 8.0]], dtype=torch.float64)
    weights = torch.tensor([2.0, 2.0, 3.0, 3.0], dtype=torch.float64)
    keep = torch.tensor([True, True, True, False])
    mean, se, read, total = study._means(values, weights, keep)
    assert read == 3 and total == 7
    assert mean[0] == pytest.approx((2 + 4 + 12) / 7, rel=1e-15)
    s2 = np.var([1.0, 2.0, 4.0], ddof=1)
    assert se[0] == pytest.approx(math.sqrt(s2 * (2 + 2 + 6) / 49), rel=1e-14)
    mean, se, read, total = study._means(values, torch.ones(4, dtype=torch.float64), keep)
    assert mean[0] == pytest.approx(7 / 3, rel=1e-15) and se[0] == 0 and total == 3
    mean, se, read, _ = study._means(values, weights, torch.zeros(4, dtype=torch.bool))
    assert read == 0 and np.isnan(mean[0]) and np.isnan(se[0])


def test_sampled_means_estimate_the_every_row_means_within_their_errors(tiny_llama):
    """On 300 tokens, 48 sampled rows: each head's d~ lies within 4 standard errors of its every-row mean."""
    caps = [kv_capture.capture_ids(tiny_llama, _ids(300))]
    quick = long_context.get_preset("quick").replace(critical_points=3, alg4_N=(4,), T=(1.0,))
    every = long_context.stats_table(caps, [300], quick.replace(rows=300, g_rows=300))
    some = long_context.stats_table(caps, [300], quick.replace(rows=48, g_rows=8))
    keys = ["layer", "head", "normalizer", "quantity", "N", "T"]
    both = every.merge(some, on=keys, suffixes=("_all", "_some"))
    assert (both.se_all == 0).all() and (both.rows_read_all >= both.rows_read_some).all()
    d = both[both.quantity == "d_tilde"]
    assert (d.se_some > 0).all() and (d.rows_read_some < d.rows_read_all).all()
    z = (d.value_some - d.value_all).abs() / d.se_some
    assert z.max() < 4


# ---------------------------------------------------------------------------------------------------------------
# every row read: the experiments' own tables, on the same capture
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tiny_gemma", "tiny_llama"])
def test_every_row_equals_the_experiments_tables(name, request):
    model = request.getfixturevalue(name)
    L = 40
    caps = [_eager(model, _ids(L, seed=s), index=s) for s in (0, 1)]
    p = long_context.get_preset("quick").replace(rows=L, g_rows=L, N=3, alg4_N=(1, 2, 8))
    st = long_context.stats_table(caps, [L], p, seed=2)
    soft = st[st.normalizer == "softmax"]
    assert ((soft.se == 0) | (soft.rows_read == 0)).all()  # no row counts on a sliding layer at N >= its window

    def ours(quantity, **at):
        t = soft[soft.quantity == quantity]
        for column, value in at.items():
            t = t[np.isclose(t[column], value)]
        return t.sort_values(["window", "layer", "head"]).value.to_numpy()

    def theirs(table, column):
        return table.assign(window=table.window.astype(str)).sort_values(["window", "layer", "head"])[column]

    # Algorithms 1-3 in the model's float32, as the experiments run them
    dist = experiments.distance_table(
        caps, {p.N: [L]}, readings=("E", "E_full"), countings=("visible",), precision="float32"
    )
    for q in ("d_tilde", "E", "E_full"):
        np.testing.assert_array_equal(ours(q, N=p.N), theirs(dist, q).to_numpy())
    sep = experiments.separability_table(caps, L, p.alg4_N)
    for n in p.alg4_N:
        np.testing.assert_array_equal(ours("ns_frac", N=n), theirs(sep[sep.N == n], "ns_frac").to_numpy())
    g = experiments.gradient_table(caps, L, p.T, [p.eps], seed=2)
    for T in p.T:
        ref = g[(g.logit_scaling == "model") & np.isclose(g["T"], T)]
        np.testing.assert_array_equal(ours("g", T=T), theirs(ref, "g").to_numpy())
    # the sink weight: the same rows, summed in another memory order (the last bit may differ)
    np.testing.assert_allclose(ours("sink_weight"), theirs(experiments.sink_table(caps, L), "sink_weight"), rtol=1e-15)


# ---------------------------------------------------------------------------------------------------------------
# Algorithm 3 on the grid, and the run's checks
# ---------------------------------------------------------------------------------------------------------------
def _stats(d_of, e_of, se=0.0, heads=40, L=100, grid=(1, 4, 16, 64)):
    rng = np.random.default_rng(0)
    rows = []
    for n in grid:
        base = rng.normal(size=heads)
        for h in range(heads):
            for q, f in (("d_tilde", d_of), ("E", e_of), ("E_full", e_of)):
                rows.append(("0", h, "full", 0, L, "softmax", q, n, math.nan, f(n, base[h]), se, 10, 10.0))
    return pd.DataFrame(rows, columns=long_context.COLUMNS)


def test_critical_table_finds_the_first_grid_N_where_d_and_E_agree():
    stats = _stats(lambda n, b: b + (0 if n >= 16 else 5), lambda n, b: b)
    crit = long_context.critical_table(stats)
    assert list(crit.reading) == ["E", "E_full"]
    row = crit.iloc[0]
    assert (row.critical_N, row.critical_frac, row.heads) == (16, 0.16, 40)
    assert row.critical_N_lo == row.critical_N_hi == 16  # no row-sampling error: every draw agrees
    never = long_context.critical_table(_stats(lambda n, b: b + 5, lambda n, b: b)).iloc[0]
    assert np.isnan(never.critical_N) and np.isnan(never.critical_N_hi)


def test_critical_interval_widens_with_the_row_sampling_error():
    # d~ = E + 0.3 at N = 4: told apart without error; with se = 0.5 per head some draws cannot tell them apart
    stats = _stats(lambda n, b: b + (0.3 if n == 4 else 0 if n >= 16 else 5), lambda n, b: b, se=0.5, heads=60)
    row = long_context.critical_table(stats, seed=1).iloc[0]
    assert row.critical_N_lo < row.critical_N or row.critical_N_hi > row.critical_N


def test_run_refuses_lengths_beyond_the_context_and_bad_options(tiny_llama):
    with pytest.raises(ValueError, match="exceed the model's context of 512"):
        long_context.run(tiny_llama, "text", "quick", lengths=[256, 1024])
    with pytest.raises(ValueError, match="increasing"):
        long_context.run(tiny_llama, "text", "quick", lengths=[128, 64])
    with pytest.raises(ValueError, match="rows: must be an integer >= 1"):
        long_context.run(tiny_llama, "text", "quick", rows=0)


def test_a_text_too_short_is_refused_before_anything_is_captured():
    model = models.load("fallback")
    with pytest.raises(ValueError, match="windows: the text has only .* tokens"):
        long_context.capture_long(model, "only a few words", length=64)
    with pytest.raises(ValueError, match="windows: the text holds 0 windows of 64 tokens for this model, not 1"):
        long_context.run(model, "only a few words", "quick", lengths=[32, 64])


def test_seeded_runs_repeat_exactly(tmp_path):
    model, text = models.load("fallback"), texts.load("pydoc-topics")
    p = long_context.get_preset("quick").replace(lengths=(32, 64), rows=8, g_rows=4, alg4_N=(1, 4), T=(1.0,))
    one = long_context.run(model, text, p, seed=3, windows=2)
    two = long_context.run(model, text, p, seed=3, windows=2)
    assert set(one.stats.window) == {"0", "1"} and one.provenance["windows"] == [0, 1]
    pd.testing.assert_frame_equal(one.stats, two.stats)
    pd.testing.assert_frame_equal(one.critical, two.critical)
    back = long_context.LongResults.load(one.save(tmp_path))
    pd.testing.assert_frame_equal(back.stats, one.stats, check_dtype=False)
    assert back.provenance["preset"]["lengths"] == [32, 64] and back.provenance["peak_memory_gb"] > 0
    assert set(one.stats.quantity) >= {"max_weight_x_len", "rest_max_x_len", "sink_weight", "d_tilde", "E", "g"}
    # every run checks its SDPA capture against the eager one
    assert one.exactness["same mask and window"].all() and (one.exactness["weights (max abs diff)"] < 1e-5).all()
    # two windows spread over the whole text: the first at its start, the second its last full window
    tokens = one.provenance["text_tokens"]
    assert one.provenance["window_starts"] == [0, tokens - 64]
    # each window has its own Algorithm 3 decision
    assert set(one.critical.window) == {"0", "1"} and list(one.critical.columns)[0] == "window"
    summaries = long_context.summarize(one)
    assert summaries.windows == [0, 1] and summaries.text_windows(64) == tokens // 64 > 1000
    assert summaries.provenance["heads"] == 30 * 9


def test_results_read_back_exactly_and_save_the_same_bytes(tmp_path):
    """Every table of a saved run loads back equal to the last bit (a float column whose values are all integers
    reads back as integers: the CSV does not keep the dtype), and saving what was loaded writes the same files byte
    for byte."""
    model, text = models.load("fallback"), texts.load("pydoc-topics")
    p = long_context.get_preset("quick").replace(lengths=(32,), rows=4, g_rows=4, alg4_N=(1,), T=(1.0,))
    one = long_context.run(model, text, p)
    back = long_context.LongResults.load(one.save(tmp_path / "one"))
    for name in long_context.LongResults.TABLES:
        pd.testing.assert_frame_equal(
            getattr(back, name), getattr(one, name), check_exact=True, check_dtype=False, obj=name
        )
    assert back.provenance == json.loads(json.dumps(one.provenance))
    back.save(tmp_path / "two")
    files = sorted(f.name for f in (tmp_path / "one").iterdir())
    assert len(files) == len(long_context.LongResults.TABLES) + 1
    assert files == sorted(f.name for f in (tmp_path / "two").iterdir())
    for name in files:
        assert (tmp_path / "two" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name


def test_each_windows_heads_are_summarised_per_layer_group():
    """A window's summary is its heads' statistics at each grid point, per layer group (all layers and each kind):
    the median of the heads' values, their largest, how many."""
    rows = [
        (str(w), layer, kind, h, 64, "softmax", "d_tilde", 5, math.nan, 10.0 * w + layer + h / 10, 0.0, 8, 64.0)
        for w in (0, 1)
        for layer, kind in ((0, "full"), (1, "sliding"))
        for h in range(3)
    ]
    table = long_context.summary_table(pd.DataFrame(rows, columns=long_context.COLUMNS))
    assert list(table.columns) == long_context.SUMMARY_COLUMNS
    at = table.set_index(["window", "layer_type"])
    assert at.loc[(1, "all"), "heads"] == 6 and at.loc[(1, "full"), "heads"] == 3
    assert at.loc[(1, "all"), "q50"] == pytest.approx(np.median([10, 10.1, 10.2, 11, 11.1, 11.2]))
    assert at.loc[(0, "sliding"), "max"] == pytest.approx(1.2) and at.loc[(0, "full"), "min"] == 0.0


def test_a_window_is_computed_once_and_read_back_by_the_whole_run(tmp_path, monkeypatch):
    """The results cache holds one entry per window: a window computed alone is read back, not recomputed, when the
    whole run is asked for, and the first window checks the capture's exactness."""
    model, text = models.load("fallback"), texts.load("pydoc-topics")
    p = long_context.get_preset("quick").replace(windows=2, lengths=(32,), rows=4, g_rows=4, alg4_N=(1,), T=(1.0,))
    ran = []
    real = study.run
    monkeypatch.setattr(study, "run", lambda *a, **k: ran.append(k["only"]) or real(*a, **k))
    alone = long_context.results(model, text, p, window=1, root=tmp_path)
    both = long_context.results(model, text, p, root=tmp_path)
    assert ran == [[1], [0]] and alone.windows == [1] and both.windows == [0, 1]
    assert alone.exactness.empty and both.exactness["same mask and window"].all()
    pd.testing.assert_frame_equal(both.summary[both.summary.window == 1].reset_index(drop=True), alone.summary)
    again = long_context.results(model, text, p, root=tmp_path)
    assert ran == [[1], [0]]
    pd.testing.assert_frame_equal(again.summary, both.summary, check_exact=True)


# ---------------------------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------------------------
def test_analyze_with_lengths_writes_the_long_context_tables_and_figures(tmp_path, capsys):
    from attnlimits import cli

    out = tmp_path / "long"
    argv = ["analyze", "--out", str(out), "--model", "fallback", "--text", "pydoc-topics", "--preset", "quick"]
    assert cli.main([*argv, "--lengths", "32,64", "--rows", "8"]) == 0
    written = {p.name for p in out.iterdir()}
    assert {"long_stats.csv", "long_critical.csv", "long_claims.csv", "long_summary.csv"} <= written
    assert {"long_provenance.json", "long_exactness.csv", "long_weights.png", "long_normalizers.png"} <= written
    stats = pd.read_csv(out / "long_stats.csv")
    assert sorted(set(stats.L)) == [32, 64] and (stats.rows_read <= 8).all()
    claims = pd.read_csv(out / "long_claims.csv")
    assert set(claims.verdict) <= {"reproduced", "not reproduced", "inconclusive"} and len(claims) >= 6
    assert "lengths 32, 64, 8 rows each" in capsys.readouterr().out
    report = (out / "report.md").read_text()
    assert "attnlimits analyze --out" in report and "--lengths 32,64 --rows 8" in report
    assert all(f"| {verdict} |" in report for verdict in claims.verdict)
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 5 and "<math" in page


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--lengths", "1024,16384"], "16384 tokens exceed the model's context of 8192"),
        (["--lengths", "64,32"], "argument --lengths: must be increasing integers"),
        (["--lengths", "64", "--preset", "paper"], "the long-context study (--lengths, --rows) has the presets"),
        (["--rows", "8", "--exclude-sink"], "apply to Algorithms 1-5, not to the long-context study"),
        (["--rows", "0"], "argument --rows: must be an integer >= 1"),
    ],
)
def test_analyze_refuses_long_context_options_it_cannot_run(tmp_path, capsys, extra, message):
    from attnlimits import cli

    out = tmp_path / "never"
    with pytest.raises(SystemExit) if "argument" in message else contextlib.nullcontext():
        code = cli.main(["analyze", "--out", str(out), "--model", "fallback", *extra])
        assert code == 2
    assert message in capsys.readouterr().err and not out.exists()


# ---------------------------------------------------------------------------------------------------------------
# the chapter's summaries and verdicts
# ---------------------------------------------------------------------------------------------------------------
LENGTHS = (1024, 2048, 4096, 8192)


def _run(windows=6, kinds=("full",), drift=0.0, noise=0.0, critical=None, bump=None):
    """Synthetic windows of every quantity the claims read, summarised by the study's own code: per head, l x the
    largest weight flat (``drift``: growing like L**drift), d~ growing like L, N_s/N at 0.75 and g like 1/T, each
    window's values scaled by its own factor, drawn with spread ``noise`` per window and length. ``critical(w, L)``:
    each window's critical N/L (0.9 by default); ``bump(w, L)``: a factor on window w's d~ at L."""
    rng = np.random.default_rng(7)
    rows, crit = [], []
    for w in range(windows):
        for k, kind in enumerate(kinds):
            for L in LENGTHS:
                f = math.exp(noise * rng.standard_normal())
                b = 1.0 if bump is None else bump(w, L)
                for h in range(12):
                    scale = f * (1 + h / 12)
                    for quantity, N, T, value in (
                        ("rest_max_x_len", math.nan, math.nan, 3.0 * scale * L**drift),
                        ("d_tilde", 5, math.nan, b * scale * L),
                        ("ns_frac", 64, math.nan, 0.75 + 0.001 * h),
                        ("g", math.nan, 1e-3, scale * 1e3),
                        ("g", math.nan, 1e-2, scale * 1e2),
                    ):
                        rows.append((str(w), k, kind, h, L, "softmax", quantity, N, T, value, 0.0, 32, L))
        for group in ["all", *kinds] if len(kinds) > 1 else kinds:
            for L in LENGTHS:
                frac = 0.9 if critical is None else critical(w, L)
                for reading in study.READINGS:
                    crit.append((w, L, reading, group, 0.05, frac * L, frac, frac * L, frac * L, 12))
    stats = pd.DataFrame(rows, columns=long_context.COLUMNS)
    columns = ["window", "L", "reading", "layer_type", "level", "critical_N", "critical_frac", "critical_N_lo"]
    prov = {"model": {"model_id": "org/tiny"}, "preset": {"N": 5}, "windows": list(range(windows))}
    return long_context.LongSummaries(
        long_context.summary_table(stats),
        pd.DataFrame(crit, columns=[*columns, "critical_N_hi", "heads"]),
        pd.DataFrame(),
        prov,
    )


def test_slope_recovers_a_power_law_and_its_interval_widens_with_the_windows_spread():
    from attnlimits.studies.long_context import report

    assert report.slope(_run(), "d_tilde", N=5) == pytest.approx((1.0, 1.0, 1.0), abs=1e-9)
    value, lo, hi = report.slope(_run(noise=0.1), "d_tilde", N=5)
    assert lo < value < hi and hi - lo > 0.02 and abs(value - 1.0) < 0.1
    wider = report.slope(_run(noise=0.3), "d_tilde", N=5)
    assert wider[2] - wider[1] > hi - lo
    t = report.trend(_run(), "d_tilde", N=5)
    assert list(t.L) == list(LENGTHS) and (t.windows == 6).all()
    assert t.value.iloc[0] == pytest.approx(np.median([(1 + h / 12) * 1024 for h in range(12)]))


def test_a_trend_reads_the_median_over_windows_of_each_windows_median_head():
    """Each window's median head first, then the median over windows with its order-statistic interval: seven
    windows whose median heads are 1, 1, 1, 3, 3.2, 9 and 9 (times the median head) read 3, not their mean (3.89)
    nor the median of the heads pooled (2.57); the interval runs from the k-th smallest to the k-th largest window
    (k = 1 at seven windows). Three windows give the median and no interval."""
    from attnlimits.studies.long_context import report

    median_head = np.median([1 + h / 12 for h in range(12)])
    bumps = (9.0, 1.0, 3.2, 1.0, 9.0, 3.0, 1.0)
    t = report.trend(_run(windows=7, bump=lambda w, L: bumps[w]), "d_tilde", N=5)
    per_window = np.array(bumps) * median_head * 1024
    (k, _), ends = order_ranks(7), np.sort(per_window)
    assert k == 1 and t.windows.iloc[0] == 7
    assert t.value.iloc[0] == pytest.approx(np.median(per_window), rel=1e-12)
    assert t.value.iloc[0] == pytest.approx(3 * median_head * 1024, rel=1e-12)
    assert (t.lo.iloc[0], t.hi.iloc[0]) == pytest.approx((ends[k - 1], ends[-k]), rel=1e-12)
    pooled = np.median(np.outer(bumps, [1 + h / 12 for h in range(12)])) * 1024
    assert abs(t.value.iloc[0] - pooled) > 0.1 * pooled and abs(t.value.iloc[0] - per_window.mean()) > 0.1 * pooled
    few = report.trend(_run(windows=3, bump=lambda w, L: (1.0, 2.0, 9.0)[w]), "d_tilde", N=5)
    assert few.value.iloc[0] == pytest.approx(2 * median_head * 1024, rel=1e-12)  # the mean would read 4
    assert few.lo.isna().all() and few.hi.isna().all()  # fewer than 6 windows: no pair of them covers 95 %


def test_one_window_decides_nothing():
    """With one window there is nothing to resample: every interval is NaN and every verdict inconclusive, however
    well the window fits the paper."""
    from attnlimits.studies.long_context import report

    alone = report.claims(_run(windows=1))
    assert {c.verdict for c in alone} == {"inconclusive"} and all(math.isnan(c.value_lo) for c in alone)
    assert "1 window, no interval" in alone[0].measured


def test_groups_split_a_model_with_sliding_layers():
    from attnlimits.studies.long_context import report

    both = _run(kinds=("full", "sliding"))
    assert report.groups(both) == ["all", "full", "sliding"] and report.groups(_run()) == ["full"]
    assert report.slope(both, "d_tilde", N=5, group="sliding")[0] == pytest.approx(1.0)


def test_flat_means_an_interval_around_zero_inside_the_band():
    from attnlimits.studies.long_context import report

    assert report.FLAT == (-0.25, 0.25)
    assert report.flat(-0.1, 0.2) == report.flat(-0.25, 0.25) == "reproduced"
    assert report.flat(0.05, 0.2) == "not reproduced"  # inside the band, but a measured rise: not flat
    assert report.flat(-0.2, -0.01) == report.flat(0.84, 0.9) == "not reproduced"
    assert report.flat(-0.1, 0.4) == report.flat(-3.0, 3.0) == "inconclusive"  # too wide to tell
    assert report.flat(math.nan, 0.1) == "inconclusive"
    assert "contains 0" in report.FLAT_RULE and "[-0.25, 0.25]" in report.FLAT_RULE


def test_the_critical_fraction_stays_put_by_its_slope_over_windows():
    """Each window's own critical N/L fitted across every length, then the median over windows of those slopes with
    its order-statistic interval; windows that disagree widen it until it cannot decide."""
    from attnlimits.studies.long_context import report

    def claim(frac, windows=6):
        return report._fraction_slope(_run(windows=windows, critical=frac), "full", "E")

    same = claim(lambda w, L: 0.9)
    assert same.verdict == "reproduced" and same.value == pytest.approx(0.0, abs=1e-12)
    assert "contains 0" in same.rule and "over 6 windows" in same.measured
    falls = claim(lambda w, L: 0.9 * 1024 / L)  # a fixed N: the fraction falls like 1/L
    assert falls.verdict == "not reproduced" and falls.value == pytest.approx(-1.0)
    scattered = claim(lambda w, L: 0.5 * (L / 1024) ** (0.5 if w % 2 else -0.5))  # half rise, half fall
    assert scattered.verdict == "inconclusive" and scattered.value_hi - scattered.value_lo > 0.5
    # each window's own slope, then their median: the window at 0.9 moves it no further than one at 0.3 would
    slopes = np.array([0.3, -0.1, 0.05, 0.9, 0.0, 0.1, -0.05, 0.2, 0.15])
    spread = claim(lambda w, L: 0.1 * (L / 1024) ** slopes[w], windows=len(slopes))
    (k, _), ends = order_ranks(len(slopes)), np.sort(slopes)
    assert k == 2 and spread.value == pytest.approx(np.median(slopes), abs=1e-12)  # 0.1; the mean is 0.17
    assert (spread.value_lo, spread.value_hi) == pytest.approx((ends[k - 1], ends[-k]), abs=1e-12)  # [-0.05, 0.3]
    assert spread.verdict == "inconclusive" and "over 9 windows" in spread.measured
    # a window that reaches no N of the grid at one length is left out of that length's median, and said so; its
    # slope across the lengths has a gap, so the median reads the other windows' (six, enough for an interval)
    with pytest.warns(RuntimeWarning, match="1 of 7 values are NaN: left out"):
        gaps = claim(lambda w, L: math.nan if (w, L) == (0, 8192) else 0.9, windows=7)
    assert gaps.verdict == "reproduced" and "1 of 7 windows reach no N of the grid at L = 8192" in gaps.measured
    assert (gaps.value, gaps.value_lo, gaps.value_hi) == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    with pytest.warns(RuntimeWarning, match="1 of 7 values are NaN: left out"):
        t = report.critical_trend(
            _run(windows=7, critical=lambda w, L: math.nan if (w, L) == (0, 8192) else 0.1 * (w + 1)), "full", "E"
        )
    assert list(t.windows) == [7, 7, 7, 6]
    assert t.value.iloc[0] == pytest.approx(0.4) and t.value.iloc[-1] == pytest.approx(0.45)  # windows 1-6: 0.2-0.7


def test_trends_in_L_are_decided_on_full_attention_layers_only():
    """A sliding-window layer sees at most its window: Lemma 1, d~'s growth and the critical fraction are not read
    on it (nor on all layers pooled), and no claim sets the sink's weight up as the paper's."""
    from attnlimits.studies.long_context import report

    both = {c.key: c for c in report.claims(_run(kinds=("full", "sliding")))}
    assert set(both) == {
        "lemma1-full", "distance-full", "critical-E-full", "critical-E_full-full",
        "plateau-all", "plateau-full", "plateau-sliding", "gradient",
    }  # fmt: skip
    assert report.length_groups(_run(kinds=("full", "sliding"))) == ["full"]
    alone = {c.key: c.verdict for c in report.claims(_run(noise=0.01))}
    assert alone == {
        "lemma1-full": "reproduced", "distance-full": "reproduced", "critical-E-full": "reproduced",
        "critical-E_full-full": "reproduced", "plateau-full": "reproduced", "gradient": "reproduced",
    }  # fmt: skip
    assert "contains 0" in both["lemma1-full"].rule
    drifting = {c.key: c for c in report.claims(_run(drift=0.1, noise=0.01))}["lemma1-full"]
    # a proved lemma whose conclusion fails: its premise (bounded logits) does not hold, not a refutation
    assert drifting.value_lo > 0 and drifting.value_hi < 0.25 and drifting.verdict == "premise not met"
    assert "premise not met" in drifting.rule
    table = report.claims_table([_run(kinds=("full", "sliding"))])
    assert not table.key.str.startswith("sink").any() and list(table.columns)[0] == "model"
    assert set(table.key[table.key.str.endswith(("sliding", "all"))]) == {"plateau-sliding", "plateau-all"}


def test_a_verdict_one_window_flips_hinges_on_that_passage():
    """Seven windows: the 95 % interval is the smallest to the largest window's slope. Window 2's d~ grows like
    L**1.4 where the others grow like L, so the interval reaches past the band's 1.2 ("inconclusive"); leaving window
    2 out turns it into "reproduced", leaving out any other window does not: the claim hinges on one passage, named,
    and is not decided; the others keep their verdict."""
    from attnlimits.studies.long_context import report

    res = _run(windows=7, noise=0.01, bump=lambda w, L: (L / 1024) ** 0.4 if w == 2 else 1.0)
    table = report.decided(res).set_index("key")
    row = table.loc["distance-full"]
    # each window's own log-log slope of its median head's d~ against L, read off the summaries
    s = res.summary
    d = s[(s.quantity == "d_tilde") & (s.layer_type == "full") & np.isclose(s.N, 5)]
    curves = d.pivot(index="window", columns="L", values="q50").sort_index(key=lambda w: w.astype(int))
    slopes = np.array([np.polyfit(np.log(LENGTHS), np.log(c), 1)[0] for c in curves.to_numpy()])
    assert np.argmax(slopes) == 2 and slopes[2] > 1.2 and np.delete(slopes, 2).max() < 1.02  # only window 2 is steep
    assert order_ranks(7)[0] == 1
    assert (row.value, row.value_lo, row.value_hi) == pytest.approx(
        (np.median(slopes), slopes.min(), slopes.max()), rel=1e-12
    )
    assert row.verdict == "hinges on one passage" and row.verdict_all == "inconclusive"
    assert row.hinges_on == "window 2: reproduced"
    left_out = [np.median(np.delete(slopes, w)) for w in range(7)]
    assert (row.loo_lo, row.loo_hi) == pytest.approx((min(left_out), max(left_out)), rel=1e-12)
    assert table.loc["lemma1-full", "verdict"] == "reproduced" and table.loc["lemma1-full", "hinges_on"] == ""
    steady = report.decided(_run(windows=7, noise=0.01)).set_index("key")
    assert steady.loc["distance-full", "verdict"] == "reproduced"


def test_book_results_reads_a_current_entry_without_loading_the_model(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path))
    monkeypatch.setattr(study, "BOOK_MODELS", ("fallback",))
    quick = long_context.get_preset("quick").replace(lengths=(32,), rows=4, g_rows=4, alg4_N=(1,), T=(1.0,))
    monkeypatch.setitem(long_context.PRESETS._presets, "quick", quick)
    runs = long_context.book_results("quick")
    (computed,), absent = runs  # unpacks as a pair
    assert isinstance(runs, long_context.BookRuns) and runs.results == [computed] and runs.not_run == absent == []

    def no_model(*args, **kwargs):
        raise AssertionError("a current entry must be read without loading the model")

    monkeypatch.setattr(models, "load", no_model)
    (read,), _ = long_context.book_results("quick")
    pd.testing.assert_frame_equal(read.summary, computed.summary, check_dtype=False)
    # another preset's entry is not taken for this one: it would be computed (and needs the model)
    with pytest.raises(AssertionError, match="without loading the model"):
        long_context.book_results(quick.replace(rows=5))
