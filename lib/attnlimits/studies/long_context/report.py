"""Chapter 35's summaries, verdicts and figures from :class:`attnlimits.studies.long_context.LongSummaries`.

The windows (passages of the text, spread over it) are the units every interval resamples: a window's heads are
summarised first (its median head, its 95th percentile, its largest head), then each window's own number (its
slope, its level), then the median over windows with its order-statistic interval
(:func:`attnlimits.experiments.paper_claims.rules.interval_over_windows`: at least 95 % whatever the passages do; at
8 windows it is the smallest to the largest window), as in the Experiments chapters. Each window also
carries the row sample's error (32 rows per length); resampling windows takes it in, since every window draws its
own rows. With one window there is nothing to resample: every interval is NaN and every verdict inconclusive.

- :func:`trend`     per layer group and L, the median over windows of each window's statistic of a quantity.
- :func:`slope`     the median over windows of each window's log-log slope against L (or of g's 95th percentile
                    against T).
- :func:`claims`    the chapter's claims as :class:`attnlimits.experiments.paper_claims.Claim` rows, each decided on an
  interval in the book's words (:mod:`attnlimits.infra.verdicts`) by a rule that can fail: a trend in L is read on
  the full-attention layers only (a sliding-window layer sees at most its window whatever L, so any trend of its
  own would hold or fail by construction), and "stays put" is :func:`flat`. :func:`decided` adds the rule that no
  single window decides a reproduction (:data:`attnlimits.infra.verdicts.HINGES`).
- :func:`figure_weights`, :func:`figure_distance`, :func:`figure_critical`, :func:`figure_plateau_g`,
  :func:`figure_normalizers`: the chapter's figures, one line per model and layer group.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from attnlimits.experiments.paper_claims import INVERSE_T, LINEAR, SATURATION, Claim, windows_left_out, with_hinges
from attnlimits.experiments.paper_claims.figure4 import G_QUANTILE
from attnlimits.experiments.paper_claims.rules import METHOD, PerWindow, log_slopes, stated
from attnlimits.infra import statistics
from attnlimits.infra.verdicts import INCONCLUSIVE, NOT_REPRODUCED, PREMISE_NOT_MET, decide
from attnlimits.studies.long_context.study import READINGS, LongSummaries

__all__ = [
    "FLAT",
    "FLAT_RULE",
    "PREMISE_RULE",
    "claims",
    "claims_table",
    "cost_table",
    "critical_trend",
    "decided",
    "eager_gigabytes",
    "figure_critical",
    "figure_distance",
    "figure_normalizers",
    "figure_plateau_g",
    "figure_weights",
    "flat",
    "groups",
    "length_groups",
    "main_table",
    "slope",
    "slope_table",
    "summary",
    "trend",
    "without",
]

#: The band of a log-log slope of about 0: the quantity stays put as L grows (:func:`flat`).
FLAT = (-0.25, 0.25)
#: :func:`flat`'s rule in words, as the claims state it.
FLAT_RULE = (
    "reproduced (it stays put) when the 95 % interval of the log-log slope against L contains 0 and lies in "
    "[-0.25, 0.25], not reproduced when it excludes 0 (the quantity moves with L), inconclusive otherwise"
)
#: Why Lemma 1 cannot be "not reproduced": it is proved (chapter 12), so where its conclusion fails its premise does.
PREMISE_RULE = (
    "Lemma 1 is proved (chapter 12), so where l x the largest weight moves with L its premise, logits bounded "
    "independently of L, does not hold on these logits: the verdict then reads 'premise not met', not a refutation"
)
#: The column of a window's summary that Figure 4's rules read (its 95th percentile over heads).
_G_STAT = f"q{round(100 * G_QUANTILE):02d}"


def flat(lo: float, hi: float) -> str:
    """The verdict of "stays put as L grows" on the 95 % interval ``[lo, hi]`` of a log-log slope: "reproduced" when
    it contains 0 and lies within :data:`FLAT` (:func:`attnlimits.infra.verdicts.decide`), "not reproduced" when it
    excludes 0, "inconclusive" otherwise (it contains 0 but reaches beyond the band, or an end is NaN). An interval
    inside the band that excludes 0 is a measured trend, not a flat line; one too wide for the band decides
    nothing."""
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    if lo > 0 or hi < 0:
        return NOT_REPRODUCED
    return decide(lo, hi, FLAT)


def groups(res: LongSummaries) -> list[str]:
    """The layer groups of a run: ``full`` only, or ``all``, ``full`` and ``sliding`` for a model with both."""
    present = set(res.summary.layer_type)
    return [g for g in ("all", "full", "sliding") if g in present]


def _group(res: LongSummaries, group: str) -> str:
    """``group`` as the run names it: ``all`` is the only group of a model with one kind of layer."""
    return groups(res)[0] if group == "all" and "all" not in groups(res) else group


def without(res: LongSummaries, window: int) -> LongSummaries:
    """The run with window ``window`` left out (what :func:`decided` decides again)."""
    keep = [w for w in res.windows if w != window]
    prov = {**res.provenance, "windows": keep}
    return LongSummaries(
        res.summary[res.summary.window != window],
        res.critical[res.critical.window != window] if len(res.critical) else res.critical,
        res.exactness,
        prov,
    )


def _drawn(res: LongSummaries) -> list[tuple[str, str]]:
    """(group, legend label) of each line a figure draws for a run: the kinds of layer apart, not pooled."""
    kinds = groups(res)
    if len(kinds) == 1:
        return [(kinds[0], res.label)]
    return [(group, f"{res.label} ({group})") for group in kinds if group != "all"]


def _select(res, quantity, normalizer="softmax", N=None, T=None, group="all") -> pd.DataFrame:
    t = res.summary
    t = t[(t.quantity == quantity) & (t.normalizer == normalizer) & (t.layer_type == _group(res, group))]
    if N is not None:
        t = t[np.isclose(t.N, N)]
    if T is not None:
        t = t[np.isclose(t["T"], T)]
    if t.empty:
        raise ValueError(f"no {quantity!r} values for normalizer={normalizer!r}, N={N}, T={T}, group={group!r}")
    return t


def _interval(pw: PerWindow, statistic: Callable) -> statistics.Interval:
    """``statistic`` over the run's windows and its 95 % interval (NaN ends with fewer than two windows: nothing to
    resample)."""
    iv = pw.interval(statistic)
    return iv if iv.units >= 2 else iv._replace(lo=math.nan, hi=math.nan)


def trend(res: LongSummaries, quantity: str, *, normalizer="softmax", N=None, T=None, group="all", stat="q50"):
    """Per L: the median over windows of each window's ``stat`` over heads (a column of
    :data:`attnlimits.experiments.summaries.STATS`: the median head ``q50`` by default, ``max`` the largest head) of
    ``quantity``, its 95 % interval over windows and how many windows have it. Columns ``L, value, lo, hi,
    windows``."""
    pw = PerWindow(_select(res, quantity, normalizer, N, T, group), "L", stat)
    rows = []
    for j, L in enumerate(pw.levels):
        iv = _interval(pw, lambda c, j=j: pw.means(c, quantity)[..., j])
        present = int(np.isfinite(pw.per_window(quantity)[:, j]).sum())
        rows.append((int(L), iv.value, iv.lo, iv.hi, present))
    return pd.DataFrame(rows, columns=["L", "value", "lo", "hi", "windows"])


def _slope_of(pw: PerWindow, quantity: str) -> statistics.Interval:
    """The median over windows of each window's log-log slope against the levels of ``pw``, with its interval."""
    return _interval(pw, lambda c: log_slopes(pw.levels, pw.means(c, quantity)))


def slope(res: LongSummaries, quantity: str, *, along="L", at=None, **select) -> tuple[float, float, float]:
    """The median over windows of each window's log-log slope against L (``along="L"``) of its median head of
    ``quantity``, or against T <= 0.01 (``along="T"``) of each window's
    :data:`G_QUANTILE` over heads of g at length ``at`` (the longest by default: Figure 4's statistic in chapter 25;
    the largest head's g, the paper's, is a maximum, which has no valid interval); and its 95 % interval over
    windows."""
    if along == "L":
        pw = PerWindow(_select(res, quantity, **select), "L", "q50")
    elif along == "T":
        t = _select(res, "g", group=select.get("group", "all"))
        t = t[t.L == (t.L.max() if at is None else at)]
        pw = PerWindow(t[t["T"] <= 0.01], "T", _G_STAT)
        quantity = "g"
    else:
        raise ValueError(f"along: must be 'L' or 'T', got {along!r}")
    if len(pw.levels) < 2:
        return math.nan, math.nan, math.nan
    iv = _slope_of(pw, quantity)
    return iv.value, iv.lo, iv.hi


def slope_table(results: list[LongSummaries], quantity: str, *, normalizers=("softmax",), **select) -> pd.DataFrame:
    """:func:`slope` against L for every model, layer group and normaliser: ``model, group, normalizer, slope,
    slope_lo, slope_hi``."""
    rows = []
    for res in results:
        for group in groups(res):
            for name in normalizers:
                rows.append((res.label, group, name, *slope(res, quantity, normalizer=name, group=group, **select)))
    return pd.DataFrame(rows, columns=["model", "group", "normalizer", "slope", "slope_lo", "slope_hi"])


def _claim(res, key, figure, paper, measured_fmt, value, lo, hi, band, rule, units=None) -> Claim:
    """A claim decided on ``[lo, hi]``: by :func:`flat` when ``band`` is :data:`FLAT` (it must also contain 0), else
    by :func:`attnlimits.infra.verdicts.decide`; its interval stated (the method and the windows it rests on:
    ``units``, default every window of the run)."""
    verdict = flat(lo, hi) if band == FLAT else decide(lo, hi, band)
    n = len(res.windows) if units is None else int(units)
    how = stated(statistics.Interval(value, lo, hi, n, METHOD))
    measured = measured_fmt.format(v=value, lo=lo, hi=hi) + f"; {how}"
    return Claim(key, figure, paper, measured, verdict, rule, value, lo, hi, units=n)


def _critical_windows(res: LongSummaries, group: str, reading: str) -> PerWindow:
    """Each window's critical N/L (Algorithm 3 on that window's heads alone) per L, as a :class:`PerWindow`."""
    c = res.critical
    c = c[(c.layer_type == _group(res, group)) & (c.reading == reading)]
    return PerWindow(c.assign(quantity=reading), "L", "critical_frac")


def critical_trend(res: LongSummaries, group: str, reading: str) -> pd.DataFrame:
    """Per L: the median over windows of each window's critical N/L, its 95 % interval over windows, and how many
    windows reach an N of the grid (a window that reaches none is left out of that length's median). Columns ``L,
    value, lo, hi, windows``."""
    pw = _critical_windows(res, group, reading)
    rows = []
    for j, L in enumerate(pw.levels):
        iv = _interval(pw, lambda c, j=j: pw.means(c, reading)[..., j])
        rows.append((int(L), iv.value, iv.lo, iv.hi, int(np.isfinite(pw.per_window(reading)[:, j]).sum())))
    return pd.DataFrame(rows, columns=["L", "value", "lo", "hi", "windows"])


def _fraction_slope(res: LongSummaries, group: str, reading: str) -> Claim:
    """Does the critical fraction N/L stay put as L grows? The median over windows of each window's log-log slope
    across every length of its critical N/L, with its interval over windows, decided by :func:`flat`; a window
    that reaches no N of the grid at some length has no slope and is left out (the claim names it and counts the
    windows its interval rests on)."""
    pw = _critical_windows(res, group, reading)
    t = critical_trend(res, group, reading)
    first, last = t.iloc[0], t.iloc[-1]
    iv = _slope_of(pw, reading) if len(pw.levels) >= 2 else statistics.Interval(math.nan, math.nan, math.nan, 0, METHOD)
    n = len(res.windows)
    missing = [f"{n - int(r.windows)} of {n} windows reach no N of the grid at L = {r.L}" for r in t.itertuples()
               if r.windows < n]  # fmt: skip
    measured = (
        f"median N/L = {first.value:.3g} [{first.lo:.3g}, {first.hi:.3g}] at L = {int(first.L)}, "
        f"{last.value:.3g} [{last.lo:.3g}, {last.hi:.3g}] at L = {int(last.L)}: log-log slope {iv.value:.2f} "
        f"[{iv.lo:.2f}, {iv.hi:.2f}]" + "".join(f" ({m})" for m in missing)
    )
    rule = (
        "the median over windows of each window's log-log slope across the lengths of its critical N/L (Algorithm 3 "
        "on that window's heads, on the grid), its 95 % interval the order statistics over windows; " + FLAT_RULE
    )
    paper = f"the critical N/L stays put as L grows (d~ against {reading})"
    return _claim(res, f"critical-{reading}-{group}", "35c", paper, measured, iv.value, iv.lo, iv.hi, FLAT, rule,
                  units=iv.units)  # fmt: skip


def length_groups(res: LongSummaries) -> list[str]:
    """The layer groups whose trends in L the claims decide: the full-attention layers only. A sliding-window
    layer's row sees at most its window however long the context, so a trend of its own (or of ``all``, which pools
    it in) holds or fails by construction; the figures and tables still show it."""
    return [g for g in groups(res) if g == "full"]


def claims(res: LongSummaries) -> list[Claim]:
    """Chapter 35's claims on one model: on the full-attention layers (:func:`length_groups`), Lemma 1's 1/L on the
    tokens other than the sink, d~'s growth and the critical fraction under each reading; per layer group, the
    N_s/N plateau at the longest length; and g's 1/T. Each is decided on its interval over windows by a rule that
    can fail (a flat trend by :func:`flat`)."""
    out = []
    s = res.summary
    top = int(s.L.max())
    n_alg4 = int(s[s.quantity == "ns_frac"].N.max())
    N = res.provenance["preset"]["N"]
    for group in groups(res):
        tag = f"{res.label}, {group} layers"
        if group in length_groups(res):
            lemma = slope(res, "rest_max_x_len", group=group)
            claim = _claim(
                res, f"lemma1-{group}", "35a", "weights vanish like 1/L (Lemma 1): l x the largest weight stays put",
                "slope of the median l x largest non-sink weight: {v:.2f} [{lo:.2f}, {hi:.2f}] (" + tag + ")",
                *lemma, FLAT, FLAT_RULE + "; " + PREMISE_RULE,
            )  # fmt: skip
            premise = PREMISE_NOT_MET if claim.verdict == NOT_REPRODUCED else claim.verdict
            out.append(dataclasses.replace(claim, verdict=premise))
            grow = slope(res, "d_tilde", N=N, group=group)
            out.append(_claim(
                res, f"distance-{group}", "35b", f"d~ at N = {N} grows like L (Figure 2a)",
                "slope of the median d~: {v:.2f} [{lo:.2f}, {hi:.2f}] (" + tag + ")", *grow, LINEAR,
                "reproduced when the 95 % interval of the log-log slope against L lies in [0.8, 1.2], not reproduced "
                "when it lies outside, else inconclusive",
            ))  # fmt: skip
            out += [_fraction_slope(res, group, reading) for reading in READINGS]
        plateau = trend(res, "ns_frac", N=n_alg4, group=group)
        last = plateau[plateau.L == top].iloc[0]
        out.append(_claim(
            res, f"plateau-{group}", "35d", "about 70-85 % of the selected tokens are separable (Figure 3)",
            f"median N_s/N at N = {n_alg4}, L = {top}: " + "{v:.2f} [{lo:.2f}, {hi:.2f}] (" + tag + ")",
            last.value, last.lo, last.hi, SATURATION,
            "reproduced when the 95 % interval lies in [0.70, 0.85], not reproduced when it lies outside, else "
            "inconclusive",
        ))  # fmt: skip
    g = slope(res, "g", along="T")
    out.append(_claim(
        res, "gradient", "35e", "g grows like 1/T at low temperature (Figure 4)",
        f"slope of the {100 * G_QUANTILE:g}th percentile over heads of g against T <= 0.01 at L = {top}: "
        + "{v:.2f} [{lo:.2f}, {hi:.2f}]", *g, INVERSE_T,
        "decided on the 95th percentile over heads (the paper's largest head is a maximum, which has no valid "
        "interval): reproduced when the 95 % interval of its log-log slope lies in [-1.2, -0.8], not reproduced "
        "when it lies outside, else inconclusive",
    ))  # fmt: skip
    return out


def decided(res: LongSummaries) -> pd.DataFrame:
    """:func:`claims` of one model as a table, each decided again with every window left out in turn
    (:func:`attnlimits.experiments.paper_claims.decided`'s rule and columns): ``loo_lo`` and ``loo_hi`` (the range
    of its number), ``verdict_all`` (the whole run's verdict) and ``hinges_on`` (each window whose leaving out
    changes a reproduction's verdict, and that verdict). Such a verdict reads
    :data:`attnlimits.infra.verdicts.HINGES`: one passage decides it, not the run. With two windows or fewer no
    window is left out (one left would have no interval)."""
    table = pd.DataFrame([c.as_dict() for c in claims(res)])
    windows = res.windows if len(res.windows) > 2 else []
    left = windows_left_out(table, windows, lambda w: pd.DataFrame([c.as_dict() for c in claims(without(res, w))]))
    return with_hinges(table, left)


def claims_table(results: list[LongSummaries]) -> pd.DataFrame:
    """:func:`decided` of every model as one table (``model`` first)."""
    return pd.concat([decided(res).assign(model=res.label) for res in results], ignore_index=True).pipe(
        lambda t: t[["model", *[c for c in t.columns if c != "model"]]]
    )


# ----------------------------------------------------------------------------------------------------------------
# figures
# ----------------------------------------------------------------------------------------------------------------
_STYLE = {"all": "-", "full": "-", "sliding": "--"}


def _lines(ax, results, quantity, **select):
    import seaborn as sns

    colors = dict(zip([r.label for r in results], sns.color_palette(n_colors=len(results)), strict=True))
    for res in results:
        for group, label in _drawn(res):
            t = trend(res, quantity, group=group, **select)
            ax.plot(t.L, t.value, _STYLE[group], marker="o", color=colors[res.label], label=label)
            ax.fill_between(t.L, t.lo, t.hi, color=colors[res.label], alpha=0.2)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("L (tokens)")


def figure_weights(results: list[LongSummaries]):
    """Three panels against L: l x the largest weight of the tokens other than the sink, the sink's weight, and
    the largest weight itself (medians over heads, bands: 95 % intervals)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, (q, title) in zip(
        axes,
        [
            ("rest_max_x_len", "l x largest weight (sink excluded)"),
            ("sink_weight", "attention-sink weight"),
            ("max_weight", "largest weight"),
        ],
        strict=True,
    ):
        _lines(ax, results, q)
        ax.set_yscale("log")
        ax.set_title(title)
    axes[0].legend(fontsize="small")
    return fig


def figure_distance(results: list[LongSummaries]):
    """d~, E (the book's reconstruction) and E_full at Algorithm 1's N against L, one panel each."""
    import matplotlib.pyplot as plt

    N = results[0].provenance["preset"]["N"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), sharey=True)
    for ax, q in zip(axes, ["d_tilde", "E", "E_full"], strict=True):
        _lines(ax, results, q, N=N)
        ax.set_yscale("log")
        ax.set_title({"d_tilde": "d~", "E": "E (the book's reconstruction)", "E_full": "E_full"}[q] + f", N = {N}")
    axes[0].legend(fontsize="small")
    return fig


def figure_critical(results: list[LongSummaries]):
    """The critical N / L against L (KS level of the preset) under each reading: the median over windows of each
    window's own critical N / L, with its 95 % interval over windows as a bar."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, len(READINGS), figsize=(13, 4), sharey=True)
    colors = sns.color_palette(n_colors=len(results))
    for ax, reading in zip(axes, READINGS, strict=True):
        for color, res in zip(colors, results, strict=True):
            for group, label in _drawn(res):
                c = critical_trend(res, group, reading)
                ax.plot(c.L, c.value, _STYLE[group] + "o", color=color, label=label)
                ax.vlines(c.L, c.lo, c.hi, color=color, alpha=0.6, linewidth=3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("L (tokens)")
        ax.set_title(f"d~ against {reading}")
    axes[0].set_ylabel("critical N / L (median over windows)")
    axes[0].legend(fontsize="small")
    return fig


def figure_plateau_g(results: list[LongSummaries]):
    """Per model, N_s/N against N at every L (left: each window's median head, median over windows) and g against T
    at every L (right: each window's largest head, median over windows), every layer together."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(12, 3.6 * len(results)), squeeze=False)
    for (left, right), res in zip(axes, results, strict=True):
        for L, part in _select(res, "ns_frac").groupby("L"):
            med = part.groupby("N")["q50"].median()
            left.plot(med.index, med.values, marker="o", label=f"L = {int(L)}")
        left.axhspan(0.70, 0.85, color="grey", alpha=0.15, label="the paper's 70-85 %")
        left.set_xscale("log", base=2)
        left.set_xlabel("N")
        left.set_ylabel("median N_s / N")
        left.set_title(res.label)
        left.legend(fontsize="small")
        for L, part in _select(res, "g").groupby("L"):
            top = part.groupby("T")["max"].median()
            right.plot(top.index, top.values, marker="o", label=f"L = {int(L)}")
        right.set_xscale("log")
        right.set_yscale("log")
        right.set_xlabel("T")
        right.set_ylabel("largest g over heads")
        right.set_title(res.label)
        right.legend(fontsize="small")
    return fig


def figure_normalizers(results: list[LongSummaries]):
    """Per model, l x the largest weight against L under every normaliser on the same logits (medians over
    heads): softmax's own weights beside the ones the other normalisers would give."""
    import matplotlib.pyplot as plt

    from attnlimits.infra import plotting

    names = list(dict.fromkeys(results[0].summary.normalizer))
    colors, labels = plotting.normalizer_colors(names), plotting.normalizer_labels(names)
    fig, axes = plt.subplots(1, len(results), figsize=(6.5 * len(results), 4), squeeze=False)
    for ax, res in zip(axes[0], results, strict=True):
        for name in names:
            t = trend(res, "max_weight_x_len", normalizer=name)
            ax.plot(t.L, t.value, marker="o", color=colors[name], label=labels[name])
            ax.fill_between(t.L, t.lo, t.hi, color=colors[name], alpha=0.2)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("L (tokens)")
        ax.set_ylabel("median l x largest weight")
        ax.set_title(res.label)
    axes[0][0].legend(fontsize="small")
    return fig


def main_table(results: list[LongSummaries]) -> pd.DataFrame:
    """One row per model, layer group and L: the medians over windows of each window's median head of l x the largest
    non-sink weight, the sink weight, d~ and E at Algorithm 1's N and N_s/N at the largest N of Algorithm 4, of its
    largest head's g at the smallest T, and the median critical N / L under each reading with its interval over
    windows."""
    rows = []
    for res in results:
        s = res.summary
        N = res.provenance["preset"]["N"]
        n4 = int(s[s.quantity == "ns_frac"].N.max())
        t_min = float(s[s.quantity == "g"]["T"].min())
        for group in groups(res):
            cols = {
                "l x max weight (no sink)": trend(res, "rest_max_x_len", group=group),
                "sink weight": trend(res, "sink_weight", group=group),
                f"d~ (N={N})": trend(res, "d_tilde", N=N, group=group),
                f"E (N={N})": trend(res, "E", N=N, group=group),
                f"N_s/N (N={n4})": trend(res, "ns_frac", N=n4, group=group),
                f"max g (T={t_min:g})": trend(res, "g", T=t_min, group=group, stat="max"),
            }
            critical = {reading: critical_trend(res, group, reading).set_index("L") for reading in READINGS}
            for L in cols["sink weight"].L:
                row = {"model": res.label, "layers": group, "L": int(L)}
                row |= {name: float(t.set_index("L").value.get(L, math.nan)) for name, t in cols.items()}
                for reading, c in critical.items():
                    row[f"critical N/L ({reading})"] = c.value.get(L, math.nan)
                    row[f"interval ({reading})"] = f"[{c.lo.get(L, math.nan):.3g}, {c.hi.get(L, math.nan):.3g}]"
                rows.append(row)
    return pd.DataFrame(rows)


def summary(res: LongSummaries) -> str:
    """Two lines: the model, text, lengths, rows and windows of a run, and its time and peak memory."""
    p = res.provenance
    kinds = pd.Series(p["layer_types"]).value_counts()
    layers = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    starts = ", ".join(f"{s:,}" for s in p["window_starts"])
    return (
        f"{p['model'].get('model_id')} ({layers} layers) on {p['text'].get('name')}: L = "
        f"{', '.join(map(str, p['preset']['lengths']))}, {p['preset']['rows']} rows per length "
        f"({p['preset']['g_rows']} for g and the other normalisers), {len(p['windows'])} windows starting at text "
        f"tokens {starts}\n"
        f"  computed in {p['seconds']['total']:.0f} s (capture {p['seconds']['capture']:.0f} s), "
        f"peak memory {p['peak_memory_gb']:.2f} GB"
    )


def eager_gigabytes(res: LongSummaries, length: int) -> float:
    """What the eager capture would hold for one window of ``length`` tokens: every layer's (H, L, L) float32
    weights and logits, in GB (what the SDPA capture never forms)."""
    return float(res.provenance["heads"] * length * length * 4 * 2 / 1e9)


def cost_table(results: list[LongSummaries], length: int = 8192) -> pd.DataFrame:
    """What each run cost, one row per model (its label): the memory the eager capture would need for one window
    of ``length`` tokens (:func:`eager_gigabytes`), the seconds of the capture and of the whole study (summed over
    its windows), the peak
    memory the run measured (GB) and of what (``peak of``: "the run" where the machine let the study measure its
    own, :func:`attnlimits.infra.profiling.peak_memory`, else "the process", which may have run other studies
    first; runs cached before the study measured its own read "the process" too)."""
    return pd.DataFrame(
        {
            f"eager, L = {length} (GB)": [eager_gigabytes(r, length) for r in results],
            "capture (s)": [r.provenance["seconds"]["capture"] for r in results],
            "study (s)": [r.provenance["seconds"]["total"] for r in results],
            "peak memory (GB)": [r.provenance["peak_memory_gb"] for r in results],
            "peak of": [
                "the run" if r.provenance.get("peak_memory_scope") == "block" else "the process" for r in results
            ],
        },
        index=[r.label for r in results],
    )
