"""Chapter 34's tables and figure, built from a several-model run
(:class:`~attnlimits.studies.several_models.SeveralModels`): its ``manifest`` or its ``results`` (each run's
:class:`attnlimits.experiments.summaries.Summaries` by label: per window, its heads summarised). Every number read
from the results is a statistic over one window's heads, then its median over the windows: the windows (passages of
the text) are the independent units, a window's heads are not.

- :func:`overview`        one row per model: present or why not, its shape, its times, the capture's exactness.
- :func:`trained_labels`  the trained models that were present; :func:`control_labels` their controls by kind;
                          :func:`run_id` what the run is.
- :func:`summary`         one row per model: the measurements of Algorithms 1-5 side by side.
- :func:`value_table`     per model: how much of its values is a shared direction, and N_s/N with uniform weights.
- :func:`sink_rate_table` per model, the sink rate of token 0 under each normaliser on its logits.
- :func:`verdicts`        every experimental claim's verdict on every model.
- :func:`interval_table`  the number each chosen claim reads on every model, with its 95 % interval over windows.
- :func:`trends`          each claim sorted by where it holds: trained models, untrained controls, both, neither;
                          and in how many runs of each control.
- :func:`figure`          d~ against L, N_s/N against N and g against T, one line per model (per-window
                          statistics over heads, median over windows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnlimits.experiments import paper_claims
from attnlimits.experiments.paper_claims.rules import PerWindow
from attnlimits.infra.ks import KS_LEVEL

__all__ = [
    "CONTROL_STYLES",
    "control_labels",
    "control_of",
    "figure",
    "interval_table",
    "overview",
    "run_id",
    "sink_rate_table",
    "summary",
    "trained_labels",
    "trends",
    "value_table",
    "verdicts",
]


def control_of(entry: dict) -> str | None:
    """What a manifest entry is: None for a trained model read as it is, else the name of its control
    (:data:`attnlimits.studies.several_models.CONTROLS`; an entry of a manifest older than the controls'
    names is "untrained" when its weights were not trained)."""
    return entry.get("control") or (None if entry.get("trained") else "untrained")


def trained_labels(manifest: dict) -> list[str]:
    """The labels of the trained models that were present in a run's ``manifest`` (not their controls), in the
    order of :data:`attnlimits.studies.several_models.MODELS`."""
    return [e["label"] for e in manifest["models"] if e["present"] and control_of(e) is None]


def control_labels(manifest: dict) -> dict[str, list[str]]:
    """The present controls' labels by control, in the manifest's order (an empty list for a control no model
    has)."""
    from attnlimits.studies.several_models.study import CONTROLS

    out = {c: [] for c in CONTROLS}
    for e in manifest["models"]:
        if e["present"] and control_of(e) is not None:
            out.setdefault(control_of(e), []).append(e["label"])
    return out


def run_id(manifest: dict) -> tuple[tuple[str, ...], str | None, str]:
    """What a run is, as :func:`attnlimits.infra.sentences.describes` reads it: (the trained models
    present, the text's name, the preset's name)."""
    return tuple(trained_labels(manifest)), (manifest["text"] or {}).get("name"), manifest["preset"]["name"]


# ------------------------------------------------------------------------------------------------------------------
# side by side
# ------------------------------------------------------------------------------------------------------------------
def _over_windows(table: pd.DataFrame, quantity: str, at: str | None = None, stat: str = "q50") -> pd.Series:
    """Each window's ``stat`` over its heads (a column of :data:`attnlimits.experiments.summaries.STATS`: ``q50``,
    the median head, by default) of ``quantity`` in the summaries ``table``, per level of ``at`` (L, N or T; None
    for a table without a grid, such as ``sink``: one level, 0), its median over the windows (a window without a
    value at a level is left out there), as the claims read it. The windows are the independent units
    (:class:`attnlimits.experiments.paper_claims.rules.PerWindow`)."""
    rows = table[table.quantity == quantity]
    if at is None:
        rows, at = rows.assign(level=0), "level"
    pw = PerWindow(rows, at, stat=stat)
    return pd.Series(pw.medians(quantity), index=pd.Index(pw.levels, name=at), name=quantity)


def _g_max(res) -> pd.Series:
    """Figure 4's curve as this chapter draws it: per T, each window's largest g over its heads (smallest eps, the
    model's logits), median over the windows; indexed by T."""
    return _over_windows(res.g(), "g", "T", stat="max").rename("g")


def _one_over_t_range(res) -> tuple[float, float]:
    """The T range where the largest head's g (:func:`_g_max`: per window, median over windows) follows 1/T: the
    longest run of consecutive grid intervals whose log-log slope lies in [-1.2, -0.8], as ``(T_lo, T_hi)``; NaNs
    when none."""
    top = _g_max(res)
    T, g = np.log(top.index.to_numpy(float)), np.log(top.to_numpy(float))
    ok = (np.diff(g) / np.diff(T) >= -1.2) & (np.diff(g) / np.diff(T) <= -0.8)
    best, start = (0, -1), None
    for i, flag in enumerate([*ok, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            best = max(best, (i - start, start))
            start = None
    length, first = best
    if length == 0:
        return np.nan, np.nan
    return float(top.index[first]), float(top.index[first + length])


def _critical_fractions(res) -> pd.Series:
    """Each window's own critical N / L (reading E, KS level 0.05), one value per window and length; a window whose
    search reached no N below L at a length is left out there."""
    crit = res.critical
    keep = (crit.ks_level == KS_LEVEL) & (crit.reading == "E")
    if "counting" in crit.columns:  # shipped summaries hold both countings of a row's tokens
        keep &= crit.counting == "visible"
    crit = crit[keep].dropna(subset=["critical_N"])
    return crit.critical_N.astype(float) / crit.L.astype(float)


def summary(results: dict) -> pd.DataFrame:
    """One row per model and control, each number a statistic over one window's heads, its median over the windows
    (the independent units; :func:`_over_windows`): critical N / L (each window's own critical N under reading E
    at KS level 0.05, divided by L; the median over windows and lengths, leaving out a window and length where no
    N below L reached the level), the N_s/N plateau (each window's median head, median over windows, then over
    N >= 16), the growth exponent of d~(L) (the log-log slope in L, N fixed, of the median over windows of
    each window's median head), the range of T where the largest head's g follows 1/T and the slope of that g for
    T < 0.1 (each window's largest g over its heads, median over windows: :func:`_g_max`), and the attention sink's
    weight on token 0 (median: each window's median head, its median over windows; max: the largest head of any
    window)."""
    rows = []
    for label, res in results.items():
        frac = _critical_fractions(res)
        sep = _over_windows(res.alg4(), "ns_frac", "N")
        med = _over_windows(res.alg1(), "d_tilde", "L")
        top = _g_max(res)
        low = top[top.index < 0.1]
        t_lo, t_hi = _one_over_t_range(res)
        sink = res.sink
        rows.append(
            {
                "model": label,
                "critical N / L": float(frac.median()) if len(frac) else np.nan,
                "N_s/N plateau": float(sep[sep.index >= 16].mean()),
                "d~ growth exponent": paper_claims.loglog_slope(med.index, med.values),
                "g ~ 1/T from T": t_lo,
                "g ~ 1/T to T": t_hi,
                "g slope (T < 0.1)": paper_claims.loglog_slope(low.index, low.values),
                "sink weight (median)": float(_over_windows(sink, "sink_weight").iloc[0]),
                "sink weight (max)": float(sink.loc[sink.quantity == "sink_weight", "max"].max()),
            }
        )
    return pd.DataFrame(rows).set_index("model")


def value_table(manifest: dict) -> pd.DataFrame:
    """One row per present run of the manifest: the share of its values' squared norm in their common mean, and
    Figure 3's plateau with uniform weights on its values
    (:func:`attnlimits.studies.several_models.window_facts`). An illustration: each run's first window only, with
    no interval over passages, so no verdict reads it."""
    rows = [
        {"model": e["label"], "values' common-mean share": e["window"]["mean_share"],
         "N_s/N plateau, uniform weights": e["window"]["uniform_plateau"]}
        for e in manifest["models"] if e["present"] and "window" in e
    ]  # fmt: skip
    return pd.DataFrame(rows).set_index("model")


def sink_rate_table(manifest: dict) -> pd.DataFrame:
    """The sink rate of token 0 (Gu et al.: the share of heads whose importance score of token 0 exceeds 0.3 over
    the first 64 tokens), one row per present run of the manifest and one column per normaliser applied to its
    logits (``softmax``: the model's own weights). An illustration: each run's first window only, with no interval
    over passages, so no verdict reads it."""
    rows = {e["label"]: e["window"]["sink_rate"] for e in manifest["models"] if e["present"] and "window" in e}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


def verdicts(results: dict) -> pd.DataFrame:
    """The verdict of every experimental claim of :mod:`attnlimits.experiments.paper_claims` on every model (one
    column each)."""
    return pd.DataFrame({label: paper_claims.claims(res).set_index("key").verdict for label, res in results.items()})


#: The claims :func:`interval_table` shows by default: the slope of d~(L), Figure 3's plateau, the slope of g at
#: low T, the growth of the critical N under the book's reconstruction E.
INTERVAL_CLAIMS = ("fig2a-distance-linear", "fig3-plateau", "fig4-slope", "fig2c-proportional")


def interval_table(results: dict, keys=INTERVAL_CLAIMS) -> pd.DataFrame:
    """One row per model and control, one column per claim of ``keys``: the number the claim's rule reads on that
    run and its 95 % interval over the run's windows (:mod:`attnlimits.experiments.paper_claims`'s method), as
    ``"value [lo, hi]"``, with a last column ``windows``: how many windows (independent units) the intervals rest
    on."""
    rows = {}
    for label, res in results.items():
        table = paper_claims.claims(res).set_index("key")
        unknown = [k for k in keys if k not in table.index]
        if unknown:
            raise ValueError(f"keys: {unknown} are not claims; the claims are {list(table.index)}")
        rows[label] = {k: _with_interval(*table.loc[k, ["value", "value_lo", "value_hi"]]) for k in keys}
        rows[label]["windows"] = int(table.loc[list(keys), "units"].max())
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


def _with_interval(value: float, lo: float, hi: float) -> str:
    """``"v [lo, hi]"`` to three significant digits; ``"v"`` alone where the interval is not finite."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{value:.3g}"
    return f"{value:.3g} [{lo:.3g}, {hi:.3g}]"


def trends(results: dict, manifest: dict) -> pd.DataFrame:
    """Each claim sorted by where it holds: ``every trained model and every untrained control`` (softmax itself),
    ``every trained model only`` (learned), ``some trained models`` (depends on the model) or ``no trained
    model``; then, per control (:func:`control_labels`), in how many of its runs it holds. "Holds" is the verdict
    "reproduced", or "holds" for a sanity check ("inconclusive" does not hold: its interval does not decide; nor
    does "depends on the reading": some reading of the expectation fails the rule)."""
    table = verdicts(results)
    trained = trained_labels(manifest)
    kinds = {c: labels for c, labels in control_labels(manifest).items() if labels}
    untrained = kinds.get("untrained", [])
    holds = table.isin((paper_claims.REPRODUCED, paper_claims.HOLDS))
    rows = []
    for key in table.index:
        in_trained = int(holds.loc[key, trained].sum())
        in_untrained = int(holds.loc[key, untrained].sum()) if untrained else 0
        if in_trained == len(trained) and untrained and in_untrained == len(untrained):
            where = "every trained model and every untrained control"
        elif in_trained == len(trained):
            where = "every trained model only" if untrained else "every trained model"
        elif in_trained:
            where = "some trained models"
        else:
            where = "no trained model"
        row = {"claim": key, "holds in": where, "trained": f"{in_trained}/{len(trained)}"}
        for kind, labels in kinds.items():
            row[kind] = f"{int(holds.loc[key, labels].sum())}/{len(labels)}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("claim")


#: How :func:`figure` draws each control's line (the trained model's is solid).
CONTROL_STYLES = {"untrained": "--", "entropy-matched": ":", "shuffled": "-.", "second text": (0, (6, 2, 1, 2, 1, 2))}


def figure(results: dict):
    """Three panels, one line per model (its controls in the model's colour, styled by :data:`CONTROL_STYLES`), each
    a statistic over one window's heads, its median over the windows (:func:`_over_windows`): the median head's d~
    against L (N fixed), the median head's N_s/N against N, and the largest head's g against T (smallest eps, the
    model's logits: :func:`_g_max`)."""
    import matplotlib.pyplot as plt

    # a strip below the panels holds the legend: ten lines would hide the first panel's
    fig = plt.figure(figsize=(13, 5.2))
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 0.24])
    axes = [fig.add_subplot(grid[0, i]) for i in range(3)] + [fig.add_subplot(grid[1, :])]
    colors = {}
    for label, res in results.items():
        base, _, control = label.partition(" (")
        color = colors.setdefault(base, f"C{len(colors)}")
        ls = CONTROL_STYLES.get(control.rstrip(")"), "-")
        style = {"color": color, "ls": ls, "marker": "o", "ms": 3, "label": label}
        p = res.preset
        med = _over_windows(res.alg1(), "d_tilde", "L")
        axes[0].loglog(med.index, med.values, **style)
        sep = _over_windows(res.alg4(), "ns_frac", "N")
        axes[1].semilogx(sep.index, sep.values, **style)
        top = _g_max(res)
        axes[2].loglog(top.index, top.values, **style)
    # each window's head, then the median over windows
    axes[0].set(xlabel="L", ylabel="d~: median head, median of windows", title=f"Figure 2a: d~ vs L (N = {p.alg1_N})")
    axes[1].set(xlabel="N", ylabel="N_s / N: median head, median of windows", title=f"Figure 3: N_s/N (L = {p.alg4_L})")
    axes[2].set(xlabel="T", ylabel="g: largest head, median of windows", title="Figure 4: g(T) (smallest eps)")
    axes[0].set_xticks(list(med.index), [str(int(v)) for v in med.index])  # the lengths read, not powers of 10
    axes[0].xaxis.set_minor_formatter(plt.NullFormatter())
    axes[3].axis("off")
    axes[3].legend(*axes[0].get_legend_handles_labels(), loc="center", ncol=4, fontsize=9, frameon=False)
    return fig


def overview(manifest: dict) -> pd.DataFrame:
    """One row per model of the manifest: present or why not, its shape, load and run seconds, and on trained
    models the capture's largest difference from ``output_attentions`` and whether every masked entry is exactly
    where the layer's mask (causal, or causal and sliding) puts it."""
    rows = []
    for e in manifest["models"]:
        if not e["present"]:
            rows.append({"model": e["label"], "present": "no: " + e["reason"][:160]})
            continue
        f, x = e["facts"], e.get("exactness") or {}
        mask = next((v for k, v in x.items() if k.startswith("masked entries")), None)
        rows.append(
            {
                "model": e["label"],
                "present": "yes",
                "architecture": f["architecture"],
                "layers x heads (kv)": f"{f['n_layers']} x {f['n_heads']} ({f['n_kv_heads']})",
                "head dim": f["head_dim"],
                "positions": f["positional"],
                "load (s)": e["load_seconds"],
                "run (s)": e["computed_seconds"],
                "capture vs eager": x.get("weights vs eager output_attentions"),
                "masks exact": None if mask is None else bool(mask),
                "checked at L": x.get("L"),
            }
        )
    return pd.DataFrame(rows).set_index("model")
