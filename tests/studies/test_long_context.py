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
    # every run checks its SDPA capture against the eager one, and counts the windows its text holds
    assert one.exactness["same mask and window"].all() and (one.exactness["weights (max abs diff)"] < 1e-5).all()
    assert one.text_windows(64) == one.provenance["text_tokens"] // 64 > 1000


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
def _power_law(exponent, se=0.0, heads=30, lengths=(1024, 2048, 4096, 8192), kinds=("full",)):
    rows = []
    for kind in kinds:
        for L in lengths:
            for h in range(heads):
                value = (1 + h / heads) * L**exponent
                rows.append(("0", 0 if kind == "full" else 1, kind, h, L, "softmax", "d_tilde", 5, math.nan, value,
                             se * value, 32, float(L)))  # fmt: skip
    stats = pd.DataFrame(rows, columns=long_context.COLUMNS)
    prov = {"model": {"model_id": "org/tiny"}, "preset": {"N": 5}}
    return long_context.LongResults(stats, pd.DataFrame(), pd.DataFrame(), prov)


def test_slope_recovers_a_power_law_and_its_interval_widens_with_the_errors():
    from attnlimits.studies.long_context import report

    exact = report.slope(_power_law(0.7), "d_tilde", N=5)
    assert exact == pytest.approx((0.7, 0.7, 0.7), abs=1e-9)
    value, lo, hi = report.slope(_power_law(0.7, se=0.2), "d_tilde", N=5)
    assert value == pytest.approx(0.7, abs=1e-9) and lo < 0.7 < hi and hi - lo > 0.02
    t = report.trend(_power_law(1.0), "d_tilde", N=5)
    assert list(t.L) == [1024, 2048, 4096, 8192] and (t.heads == 30).all()
    assert t.value.iloc[0] == pytest.approx(np.median([(1 + h / 30) * 1024 for h in range(30)]))


def test_groups_split_a_model_with_sliding_layers():
    from attnlimits.studies.long_context import report

    both = _power_law(1.0, kinds=("full", "sliding"))
    assert report.groups(both) == ["all", "full", "sliding"] and report.groups(_power_law(1.0)) == ["full"]
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


def _critical(first, last, grid=()):
    """A run whose critical table has (N, lo, hi) at L = 1024 and 8192 (reading E, full layers) and, when given,
    the study's N grid (the same fractions of L at both lengths)."""
    rows = [(1024, "E", "full", 0.05, first[0], first[0] / 1024, first[1], first[2], 10),
            (8192, "E", "full", 0.05, last[0], last[0] / 8192, last[1], last[2], 10)]  # fmt: skip
    columns = ["L", "reading", "layer_type", "level", "critical_N", "critical_frac", "critical_N_lo"]
    crit = pd.DataFrame(rows, columns=[*columns, "critical_N_hi", "heads"])
    stats = pd.DataFrame(
        [
            ("0", 0, "full", 0, L, "softmax", "E", round(f * L), math.nan, 1.0, 0.0, 32, L)
            for L in (1024, 8192)
            for f in grid
        ],  # fmt: skip
        columns=long_context.COLUMNS,
    )
    return long_context.LongResults(stats, crit, pd.DataFrame(), {})


def test_the_critical_fraction_stays_put_by_its_slope_with_an_interval():
    from attnlimits.studies.long_context import report

    def claim(first, last, grid=()):
        return report._fraction_slope(_critical(first, last, grid), "full", "E")

    same = claim((512, 500, 520), (4096, 4000, 4160))
    assert same.verdict == "reproduced" and same.value == pytest.approx(0.0)
    assert same.value_lo < 0 < same.value_hi and "contains 0" in same.rule
    # wide intervals that overlap decide nothing (an overlap of the two would have called this reproduced)
    assert claim((512, 40, 1000), (4096, 320, 8000)).verdict == "inconclusive"
    # a fraction that falls like 1/L is not flat, however its intervals are placed
    falls = claim((512, 480, 540), (512, 480, 540))
    assert falls.verdict == "not reproduced" and falls.value == pytest.approx(-1.0)
    # a small but measured drift is not flat either: the interval must contain 0
    assert claim((500, 495, 505), (4400, 4380, 4420)).verdict == "not reproduced"
    assert claim((512, 400, math.nan), (4096, 3000, 5000)).verdict == "inconclusive"  # an open end
    assert claim((math.nan, 400, 600), (4096, 3000, 5000)).verdict == "inconclusive"


def test_the_critical_fraction_is_bracketed_by_the_grid():
    """The first N the test accepts lies between the grid point below it and itself: a coarse grid widens the
    interval until it cannot decide."""
    from attnlimits.studies.long_context import report

    fine = report._fraction_slope(_critical((922, 922, 922), (7373, 7373, 7373), grid=(0.89, 0.9)), "full", "E")
    assert fine.verdict == "reproduced"
    coarse = report._fraction_slope(_critical((922, 922, 922), (7373, 7373, 7373), grid=(0.125, 0.9)), "full", "E")
    assert coarse.verdict == "inconclusive"
    assert coarse.value_lo == pytest.approx(math.log((1024 / 8192) / (922 / 1024)) / math.log(8))  # from L/8


def _model(kinds=("full", "sliding"), drift=0.0):
    """A run of every quantity the claims read: l x the largest weight flat, d~ growing like L, N_s/N at 0.75 and g
    like 1/T, on each kind of layer, every value with a 2 % standard error; ``drift``: l x the largest weight grows
    like L**drift instead."""
    rows, crit = [], []
    lengths = (1024, 2048, 4096, 8192)
    for k, kind in enumerate(kinds):
        for L in lengths:
            for h in range(12):
                scale = 1 + h / 12
                for quantity, N, T, value in (
                    ("rest_max_x_len", math.nan, math.nan, 3.0 * scale * L**drift),
                    ("d_tilde", 5, math.nan, scale * L),
                    ("ns_frac", 64, math.nan, 0.75 + 0.001 * h),
                    ("g", math.nan, 1e-3, scale * 1e3),
                    ("g", math.nan, 1e-2, scale * 1e2),
                ):
                    rows.append(("0", k, kind, h, L, "softmax", quantity, N, T, value, 0.02 * value, 32, L))
    for group in ["all", *kinds] if len(kinds) > 1 else kinds:
        for L in lengths:
            for reading in study.READINGS:
                crit.append((L, reading, group, 0.05, 0.9 * L, 0.9, 0.9 * L, 0.9 * L, 12))
    columns = ["L", "reading", "layer_type", "level", "critical_N", "critical_frac", "critical_N_lo"]
    prov = {"model": {"model_id": "org/tiny"}, "preset": {"N": 5}}
    return long_context.LongResults(
        pd.DataFrame(rows, columns=long_context.COLUMNS),
        pd.DataFrame(crit, columns=[*columns, "critical_N_hi", "heads"]),
        pd.DataFrame(),
        prov,
    )


def test_trends_in_L_are_decided_on_full_attention_layers_only():
    """A sliding-window layer sees at most its window: Lemma 1, d~'s growth and the critical fraction are not read
    on it (nor on all layers pooled), and no claim sets the sink's weight up as the paper's."""
    from attnlimits.studies.long_context import report

    both = {c.key: c for c in report.claims(_model())}
    assert set(both) == {
        "lemma1-full", "distance-full", "critical-E-full", "critical-E_full-full",
        "plateau-all", "plateau-full", "plateau-sliding", "gradient",
    }  # fmt: skip
    assert report.length_groups(_model()) == ["full"]
    alone = {c.key: c.verdict for c in report.claims(_model(kinds=("full",)))}
    assert alone == {
        "lemma1-full": "reproduced", "distance-full": "reproduced", "critical-E-full": "reproduced",
        "critical-E_full-full": "reproduced", "plateau-full": "reproduced", "gradient": "reproduced",
    }  # fmt: skip
    assert "contains 0" in both["lemma1-full"].rule
    drifting = {c.key: c for c in report.claims(_model(kinds=("full",), drift=0.1))}["lemma1-full"]
    assert drifting.value_lo > 0 and drifting.value_hi < 0.25 and drifting.verdict == "not reproduced"
    table = report.claims_table([_model()])
    assert not table.key.str.startswith("sink").any()
    assert set(table.key[table.key.str.endswith(("sliding", "all"))]) == {"plateau-sliding", "plateau-all"}


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
    pd.testing.assert_frame_equal(read.stats, computed.stats, check_dtype=False)
    # another preset's entry is not taken for this one: it would be computed (and needs the model)
    with pytest.raises(AssertionError, match="without loading the model"):
        long_context.book_results(quick.replace(rows=5))
