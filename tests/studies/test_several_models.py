"""attnlimits.studies.several_models: untrained controls, the several-model run and its manifest, read back without
loading a model (and its round trip through the manifest); the side-by-side tables. A tiny random-init Gemma 3
(sliding window 16) stands in for the real models."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from attnlimits import experiments, models
from attnlimits.core import normalizers
from attnlimits.experiments import paper_claims
from attnlimits.experiments.paper_claims.rules import as_summaries
from attnlimits.experiments.summaries import STATS, Summaries
from attnlimits.infra import cache
from attnlimits.infra.medians import order_ranks
from attnlimits.models import texts
from attnlimits.studies import several_models
from attnlimits.studies.several_models import report, runs, study

PRESET = dataclasses.replace(
    experiments.PRESETS["quick"], name="tiny-models", alg1_L=(16, 32, 48), alg2_L=48, alg4_L=48, alg5_L=32
)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("ATTNLIMITS_MODEL", raising=False)


@pytest.fixture(scope="module")
def tiny_gemma_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        tok = models.load("fallback").tokenizer
    torch.manual_seed(3)
    config = Gemma3TextConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=16,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=128,
    )
    folder = tmp_path_factory.mktemp("tiny-gemma")
    Gemma3ForCausalLM(config).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def text():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return texts.load()


def test_untrained_control_is_seeded_and_named(tiny_gemma_dir):
    loaded = models.load(str(tiny_gemma_dir))
    a, b, c = (
        several_models.untrained(loaded, 0),
        several_models.untrained(loaded, 0),
        several_models.untrained(loaded, 1),
    )
    assert a.provenance.sha256 == b.provenance.sha256 != c.provenance.sha256
    for name, tensor in a.model.state_dict().items():
        torch.testing.assert_close(tensor, b.model.state_dict()[name], rtol=0, atol=0)
    assert a.provenance.model_id.startswith("untrained-seed0/") and a.provenance.source == "untrained"
    assert a.model.config.to_dict() == loaded.model.config.to_dict()
    trained = dict(loaded.model.named_parameters())
    assert any(not torch.equal(p, trained[n]) for n, p in a.model.named_parameters())
    with pytest.raises(ValueError, match="seed"):
        several_models.untrained(loaded, 0.5)


def test_entropy_matched_control_matches_each_heads_entropy(tiny_gemma_dir, text):
    """Each head of the matched control has the trained head's mean row entropy on the first window (the rows the
    factors were fitted on), through hooks on the untrained network's queries; the plain untrained control is
    left as it was."""
    loaded = models.load(str(tiny_gemma_dir))
    matched = several_models.entropy_matched(loaded, text, PRESET, seed=0)
    window = {"length": PRESET.max_length, "count": 1, "total": PRESET.windows}
    (trained,) = experiments.capture_windows(loaded, text, **window)
    (control,) = experiments.capture_windows(matched, text, **window)
    (plain,) = experiments.capture_windows(several_models.untrained(loaded, 0), text, **window)
    for layer in trained.layer_ids:
        goal = several_models.mean_row_entropy(trained.weights(layer, PRESET.max_length))
        got = several_models.mean_row_entropy(control.weights(layer, PRESET.max_length))
        torch.testing.assert_close(got, goal, rtol=1e-5, atol=1e-6)
        assert matched.matched_entropy[layer]["matched_entropy"] == pytest.approx(goal.tolist(), rel=1e-5)
    # the first layer reads the untrained network's own inputs: its logits are the plain ones, scaled per head
    first = trained.layer_ids[0]
    scale = torch.tensor(matched.matched_entropy[first]["scale"], dtype=torch.float64)
    logits = plain.logits(first, PRESET.max_length).double() * scale.view(-1, 1, 1)
    torch.testing.assert_close(control.logits(first, PRESET.max_length).double(), logits, rtol=1e-5, atol=1e-5)
    assert matched.provenance.sha256 != several_models.untrained(loaded, 0).provenance.sha256
    assert matched.provenance.model_id.startswith("entropy-matched-seed0/")


@pytest.fixture(scope="module")
def second_text(text, tmp_path_factory):
    """A stand-in for the King James Version (which needs Debian's bible-kjv): a local file of other prose, the
    fallback's paragraphs in reverse order."""
    path = tmp_path_factory.mktemp("second-text") / "second.txt"
    path.write_text("\n\n".join(reversed(text.text.split("\n\n"))))
    return texts.load(path)


@pytest.fixture(scope="module")
def computed(tiny_gemma_dir, text, second_text, tmp_path_factory) -> tuple[dict, object]:
    """A run of the tiny model (and its controls) beside one that does not load: its manifest and results root."""
    root = tmp_path_factory.mktemp("several-models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(study, "MODELS", {"Tiny": str(tiny_gemma_dir), "Absent": "/no/such/model/dir"})
        mp.setattr(runs, "second_text", lambda: second_text)
        return several_models.compute(preset=PRESET, text=text, root=root, n_jobs=2), root


def test_compute_then_load_without_loading_a_model(computed, text, second_text, monkeypatch):
    manifest, root = computed
    labels = [e["label"] for e in manifest["models"]]
    controls = ["Tiny (untrained)", "Tiny (entropy-matched)", "Tiny (shuffled)", "Tiny (second text)"]
    assert labels == ["Tiny", *controls, "Absent"]
    assert [e.get("control") for e in manifest["models"][:5]] == [None, *several_models.CONTROLS]
    assert [e["trained"] for e in manifest["models"][:5]] == [True, False, False, True, True]
    assert report.trained_labels(manifest) == ["Tiny"]
    assert report.control_labels(manifest) == {c: [f"Tiny ({c})"] for c in several_models.CONTROLS}
    names = {e["label"]: e["text"] for e in manifest["models"][:5]}
    assert names == {
        **dict.fromkeys(["Tiny", *controls[:3]], text.provenance.name),
        controls[3]: second_text.provenance.name,
    }
    absent = manifest["models"][5]
    assert absent["present"] is False and "/no/such/model/dir" in absent["reason"]
    check = manifest["models"][0]["exactness"]
    assert check["weights vs eager output_attentions"] == 0.0
    assert check["masked entries = each layer's causal mask, all -inf"] is True and check["L"] > 16
    assert json.loads(several_models.manifest_path(PRESET, root).read_text())["models"][0]["label"] == "Tiny"

    def no_loading(*args, **kwargs):
        raise AssertionError("reading a run back must not load a model")

    monkeypatch.setattr(models, "load", no_loading)
    run = several_models.SeveralModels.load(root, PRESET)
    assert run.manifest == json.loads(json.dumps(manifest, default=str))
    again, results = run.manifest, run.results
    assert list(results) == ["Tiny", *controls]
    assert results["Tiny (shuffled)"].provenance["shuffle"] == 0 and "shuffle" not in results["Tiny"].provenance
    assert results["Tiny (shuffled)"].provenance["window_starts"] == results["Tiny"].provenance["window_starts"]
    assert results["Tiny (entropy-matched)"].provenance["model"]["model_id"].startswith("entropy-matched-seed0/")
    other = results["Tiny (second text)"].provenance["text"]
    assert other["sha256"] == second_text.provenance.sha256 != results["Tiny"].provenance["text"]["sha256"]
    values = report.value_table(manifest)
    assert list(values.index) == ["Tiny", *controls]
    assert values.iloc[:, 0].between(0, 1).all() and values.iloc[:, 1].between(0, 1).all()
    monkeypatch.setattr(runs, "compute", lambda *args, **kwargs: pytest.fail("a current run is read, not computed"))
    assert list(several_models.results(PRESET, root=root).results) == list(results)
    # a sliding-window layer at L = 48 > 16: its rows hold at most 16 tokens
    dist = results["Tiny"].distance
    rows = dist[(dist.L == 48) & (dist.N == 2) & (dist.quantity == "rows")]
    assert rows["min"].unique().tolist() == rows["max"].unique().tolist() == [48 - 2]
    assert len(rows.window.unique()) == PRESET.windows  # each window summarised on its own
    overview = report.overview(again)
    assert overview.loc["Absent", "present"].startswith("no: ")
    assert overview.loc["Tiny", "masks exact"]


def test_the_shipped_run_is_read_as_it_lies_without_computing(computed, tmp_path, monkeypatch):
    """A run laid out as the book ships it (``results/models/<preset>``: the manifest and each window's summaries)
    is what :func:`results` reads, table for table the run it was copied from, with nothing computed."""
    import shutil

    _, root = computed
    shutil.copytree(several_models.study_folder(PRESET, root), tmp_path / "shipped" / "models" / PRESET.name)
    monkeypatch.setenv("ATTNLIMITS_SHIPPED", str(tmp_path / "shipped"))
    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(runs, "compute", lambda *args, **kwargs: pytest.fail("a shipped run is read, not computed"))
    run, there = several_models.results(PRESET), several_models.SeveralModels.load(root, PRESET)
    assert run.manifest == there.manifest and list(run.results) == list(there.results)
    for label, res in there.results.items():
        for name in res.TABLES:
            pd.testing.assert_frame_equal(getattr(run.results[label], name), getattr(res, name), obj=f"{label} {name}")
    assert several_models.slug("Tiny (second text)") == "tiny--second-text"
    # saved again, it reads back the same, table for table
    assert run.save(tmp_path / "saved") == tmp_path / "saved"
    back = several_models.SeveralModels.load(tmp_path / "saved", PRESET)
    assert back.manifest == run.manifest
    for label, res in run.results.items():
        for name in res.TABLES:
            pd.testing.assert_frame_equal(getattr(back.results[label], name), getattr(res, name), obj=f"{label} {name}")
        assert back.results[label].provenance == res.provenance


def test_load_refuses_results_of_other_code(tiny_gemma_dir, text, tmp_path, monkeypatch):
    monkeypatch.setattr(study, "MODELS", {"Tiny": str(tiny_gemma_dir)})
    several_models.compute(preset=PRESET, text=text, root=tmp_path, controls=False)
    monkeypatch.setattr(cache, "module_hashes", lambda *modules: {"attnlimits.other": "code"})
    with pytest.raises(ValueError, match="make models"):
        several_models.SeveralModels.load(tmp_path, PRESET)
    with pytest.raises(FileNotFoundError, match="make models"):
        several_models.SeveralModels.load(tmp_path / "empty", PRESET)
    with pytest.raises(ValueError, match="names"):
        several_models.compute(["Nope"], preset=PRESET, text=text, root=tmp_path)


def test_a_second_text_that_is_not_installed_is_listed_with_the_reason(tiny_gemma_dir, text, tmp_path, monkeypatch):
    monkeypatch.setattr(study, "MODELS", {"Tiny": str(tiny_gemma_dir)})
    missing = texts.TextUnavailableError("the program 'bible' is not installed (apt-get install bible-kjv)")
    monkeypatch.setattr(runs, "second_text", lambda: missing)
    manifest = several_models.compute(preset=PRESET, text=text, root=tmp_path, controls=["second text"])
    (_, entry) = manifest["models"]
    assert entry["label"] == "Tiny (second text)" and entry["present"] is False
    assert "apt-get install bible-kjv" in entry["reason"]
    assert list(several_models.SeveralModels.load(tmp_path, PRESET).results) == ["Tiny"]


def test_load_refuses_a_manifest_of_another_grid(tiny_gemma_dir, text, tmp_path, monkeypatch):
    monkeypatch.setattr(study, "MODELS", {"Tiny": str(tiny_gemma_dir)})
    several_models.compute(preset=PRESET, text=text, root=tmp_path, controls=False)
    wider = dataclasses.replace(PRESET, windows=PRESET.windows + 1)
    with pytest.raises(ValueError, match="another grid"):
        several_models.SeveralModels.load(tmp_path, wider)
    calls = []
    monkeypatch.setattr(runs, "compute", lambda *args, **kwargs: calls.append(kwargs["n_jobs"]))
    with pytest.raises(ValueError, match="another grid"):  # recomputed (here: not), then read again
        several_models.results(wider, root=tmp_path, n_jobs=2)
    assert calls == [2]


def test_trends_sort_claims_by_where_they_hold(monkeypatch):
    table = {
        "A": {"k1": "reproduced", "k2": "reproduced", "k3": "reproduced", "k4": "not reproduced"},
        "B": {"k1": "reproduced", "k2": "reproduced", "k3": "inconclusive",
              "k4": "not reproduced"},
        "A (untrained)": {"k1": "reproduced", "k2": "not reproduced", "k3": "reproduced", "k4": "reproduced"},
        "B (untrained)": {"k1": "reproduced", "k2": "not reproduced", "k3": "reproduced", "k4": "reproduced"},
    }  # fmt: skip
    monkeypatch.setattr(report, "verdicts", lambda results: pd.DataFrame(table))
    manifest = {
        "models": [{"label": k, "present": True, "trained": "untrained" not in k} for k in table]
        + [{"label": "C", "present": False}]
    }  # a manifest from before the controls had names: "trained" alone tells them apart
    out = report.trends({}, manifest)
    assert out.loc["k1", "holds in"] == "every trained model and every untrained control"
    assert out.loc["k2", "holds in"] == "every trained model only"
    assert out.loc["k3", "holds in"] == "some trained models"
    assert out.loc["k4", "holds in"] == "no trained model"
    assert out.loc["k2", "untrained"] == "0/2" and out.loc["k3", "trained"] == "1/2"
    assert paper_claims.NOT == "not reproduced"


def test_sink_rates_of_the_manifest(computed):
    manifest, _ = computed
    rates = report.sink_rate_table(manifest)
    assert list(rates.columns) == list(normalizers.NORMALIZERS)
    assert list(rates.index) == [
        "Tiny", "Tiny (untrained)", "Tiny (entropy-matched)", "Tiny (shuffled)", "Tiny (second text)"
    ]  # fmt: skip
    assert rates.stack().between(0, 1).all()


@pytest.fixture(scope="module")
def summaries(computed) -> dict[str, Summaries]:
    """The tiny run's results by label as the report reads them: each window's heads summarised."""
    _, root = computed
    return {label: as_summaries(res) for label, res in several_models.SeveralModels.load(root, PRESET).results.items()}


def test_summary_reads_each_windows_heads_then_their_median_over_windows(summaries):
    table = report.summary(summaries)
    assert list(table.index) == list(summaries)
    frac = table["critical N / L"].dropna()
    assert len(frac) and ((frac > 0) & (frac <= 1)).all()
    assert (table["sink weight (max)"] >= table["sink weight (median)"]).all()
    assert table[["sink weight (median)", "sink weight (max)"]].stack().between(0, 1).all()
    assert table["d~ growth exponent"].notna().all()
    assert table["g slope (T < 0.1)"].notna().all()
    # the numbers are each window's statistic over its heads, then their median over the windows
    tiny = summaries["Tiny"]
    g = tiny.g()
    g_max = g[g.quantity == "g"].groupby("T")["max"].median()
    pd.testing.assert_series_equal(report._g_max(tiny), g_max, check_names=False, check_index_type=False)
    low = g_max[g_max.index < 0.1]
    assert table.loc["Tiny", "g slope (T < 0.1)"] == pytest.approx(paper_claims.loglog_slope(low.index, low.values))
    sink = tiny.sink[tiny.sink.quantity == "sink_weight"]
    assert table.loc["Tiny", "sink weight (median)"] == pytest.approx(sink.q50.median())
    assert table.loc["Tiny", "sink weight (max)"] == pytest.approx(sink["max"].max())


def _three_windows(levels: dict[int, float]) -> Summaries:
    """A run of three windows whose heads are summarised by one number ``v`` per window (``levels``: window -> v):
    a window's median head has d~ = v L^(1 + v), N_s/N = v from N = 16 on (1 below), g = v / (2T) at the smallest
    eps (its largest head's: v / T; 10 times more at the other eps), a sink weight of v (its largest head's:
    v + 0.05), and its own critical N is v L (none found at window 0's longest L; other readings and KS levels read
    otherwise). Its mean over heads differs from its median."""
    p = dataclasses.replace(PRESET, alg4_N=(1, 2, 4, 8, 16, 32))

    def rows(w, v, grid, value, top=None):
        stats = dict.fromkeys(STATS, value) | {"heads": 4, "mean": value + 0.01, "min": value / 2}
        return {"window": w, **grid, **stats, "max": value if top is None else top}

    distance, separability, gradient, sink, critical = [], [], [], [], []
    for w, v in levels.items():
        for L in p.alg1_L:
            grid = {"L": L, "N": p.alg1_N, "counting": "visible", "quantity": "d_tilde"}
            distance.append(rows(w, v, grid, v * L ** (1 + v)))
            found = pd.NA if (w, L) == (0, max(p.alg1_L)) else round(v * L)  # NA: no N reached the level
            critical += [(w, L, "E", 0.05, found), (w, L, "E_full", 0.05, L), (w, L, "E", 0.01, 1)]
        for N in p.alg4_N:
            grid = {"L": p.alg4_L, "N": N, "tokens": "value", "quantity": "ns_frac"}
            separability.append(rows(w, v, grid, v if N >= 16 else 1.0))
        for T in p.alg5_T:
            for eps in p.alg5_eps:
                scale = 1 if eps == min(p.alg5_eps) else 10
                grid = {"T": T, "eps": eps, "logit_scaling": "model", "quantity": "g"}
                gradient.append(rows(w, v, grid, scale * v / T / 2, top=scale * v / T))
        sink.append(rows(w, v, {"quantity": "sink_weight"}, v, top=v + 0.05))
    tables = {
        "distance": pd.DataFrame(distance),
        "separability": pd.DataFrame(separability),
        "gradient": pd.DataFrame(gradient),
        "sink": pd.DataFrame(sink),
        "critical": pd.DataFrame(critical, columns=["window", "L", "reading", "ks_level", "critical_N"]).astype(
            {"critical_N": "Int64"}
        ),
    }
    provenance = {"preset": dataclasses.asdict(p), "windows": list(levels), "window_starts": [0] * len(levels)}
    return Summaries(tables, provenance)


def test_summary_and_figure_read_the_median_over_windows_not_their_mean_nor_a_mean_head():
    """Three windows whose median heads read 0.1, 0.2 and 0.9: every number is the median of the windows' own
    statistics (0.2), not their mean (0.4), nor a mean over heads (0.21), nor a pooled statistic."""
    import matplotlib.pyplot as plt

    levels = {0: 0.1, 1: 0.2, 2: 0.9}
    run = _three_windows(levels)
    row = report.summary({"A": run}).loc["A"]
    assert row["N_s/N plateau"] == pytest.approx(0.2, rel=1e-12)
    assert row["sink weight (median)"] == pytest.approx(0.2, rel=1e-12)
    assert row["sink weight (max)"] == pytest.approx(0.95, rel=1e-12)  # the largest head of any window
    L = np.array(PRESET.alg1_L, float)
    median_curve = np.median([v * L ** (1 + v) for v in levels.values()], axis=0)  # window 1's at every L
    assert row["d~ growth exponent"] == pytest.approx(paper_claims.loglog_slope(L, median_curve), rel=1e-12)
    assert row["d~ growth exponent"] == pytest.approx(1.2, rel=1e-12)
    assert row["g slope (T < 0.1)"] == pytest.approx(-1, rel=1e-12)
    assert (row["g ~ 1/T from T"], row["g ~ 1/T to T"]) == (min(PRESET.alg5_T), max(PRESET.alg5_T))
    T = np.array(PRESET.alg5_T)
    np.testing.assert_allclose(report._g_max(run).to_numpy(), 0.2 / T, rtol=1e-12)
    found = [round(v * n) / n for w, v in levels.items() for n in PRESET.alg1_L if (w, n) != (0, max(L))]
    assert row["critical N / L"] == pytest.approx(np.median(found))  # a length where none was reached left out
    fig = report.figure({"A": run})
    (d,), (sep,), (g,) = (ax.get_lines() for ax in fig.axes[:3])
    np.testing.assert_allclose(d.get_ydata(), median_curve, rtol=1e-12)
    np.testing.assert_allclose(sep.get_ydata()[-2:], 0.2, rtol=1e-12)
    np.testing.assert_allclose(g.get_ydata(), 0.2 / T, rtol=1e-12)
    plt.close(fig)


def _pooled(results: dict[str, Summaries], count: int) -> tuple[Summaries, list]:
    """The first ``count`` windows of the runs of ``results`` (the tiny model's and its controls', on one grid) read
    as one run, numbered 0, 1, ...; and each as its own one-window run, in that order."""
    parts = [(res, w) for res in results.values() for w in res.windows][:count]
    tables = {}
    for name in Summaries.TABLES:
        pieces = [getattr(res, name) for res, _ in parts]
        if any(len(t) for t in pieces):
            tables[name] = pd.concat(
                [t[t.window == w].assign(window=i) for i, (t, (_, w)) in enumerate(zip(pieces, parts, strict=True))],
                ignore_index=True,
            )
    first = next(iter(results.values())).provenance
    run = Summaries(tables, {**first, "windows": list(range(count)), "window_starts": [0] * count})
    alone = []
    for res, w in parts:
        for other in res.windows:
            res = res.without(other) if other != w else res
        alone.append(res)
    return run, alone


def test_interval_table_shows_each_claims_number_and_interval_over_windows(summaries):
    results = summaries
    table = report.interval_table(results)
    assert list(table.index) == list(results) and list(table.columns) == [*report.INTERVAL_CLAIMS, "windows"]
    assert (table["windows"] == PRESET.windows).all()
    # two windows: the claim's number, and no interval (fewer than 6 windows: no pair of them covers 95 %)
    claims = paper_claims.claims(results["Tiny"]).set_index("key")
    row = claims.loc["fig3-plateau"]
    assert PRESET.windows < 6 and np.isnan(row.value_lo) and np.isnan(row.value_hi)
    assert table.loc["Tiny", "fig3-plateau"] == f"{row.value:.3g}"
    # nine windows: each claim's number is the median of the numbers each window gives alone, its interval the
    # 2nd smallest to the 2nd largest of them (order_ranks(9))
    run, alone = _pooled(results, 9)
    pooled = report.interval_table({"pooled": run}).loc["pooled"]
    assert pooled["windows"] == 9 and order_ranks(9)[0] == 2
    for key in report.INTERVAL_CLAIMS:
        figure = key.split("-")[0].removeprefix("fig")
        each = np.sort([paper_claims.claims(one, figure).set_index("key").loc[key, "value"] for one in alone])
        value, lo, hi = np.median(each), each[1], each[-2]
        assert lo < hi, key  # nine windows that differ: a finite interval of some width
        assert pooled[key] == f"{value:.3g} [{lo:.3g}, {hi:.3g}]", key
        whole = paper_claims.claims(run, figure).set_index("key").loc[key]
        assert (whole.value, whole.value_lo, whole.value_hi) == pytest.approx((value, lo, hi), rel=1e-12), key
    assert report._with_interval(0.5, float("nan"), 1.0) == "0.5"
    with pytest.raises(ValueError, match="not claims"):
        report.interval_table(results, keys=["fig9-nothing"])


def test_figure_draws_a_line_per_run_and_lists_them_beside_the_panels(summaries):
    import matplotlib.pyplot as plt

    results = summaries
    fig = report.figure(results)
    panels, legend = fig.axes[:3], fig.axes[3]
    assert all(len(ax.get_lines()) == len(results) for ax in panels)
    assert [t.get_text() for t in legend.get_legend().get_texts()] == list(results)
    assert not legend.get_lines() and panels[0].get_legend() is None
    styles = {line.get_label(): line.get_linestyle() for line in panels[0].get_lines()}
    assert styles.pop("Tiny") == "-" and "-" not in styles.values()  # the controls are dashed
    plt.close(fig)
