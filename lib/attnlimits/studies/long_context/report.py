"""Chapter 35's summaries, verdicts and figures from :class:`attnlimits.studies.long_context.LongResults`.

Every interval here is the uncertainty the row sample allows: :data:`DRAWS` parametric draws of every head's
value from its mean and standard error (the heads are every head of the model, a whole population, not a sample
of one). With one window the variation between passages of the text is not in it; the ``full`` preset reads more.

- :func:`trend`     per layer group and L, the median over heads of a quantity, with its interval.
- :func:`slope`     the log-log slope of that median against L (or g's against T), with its interval.
- :func:`claims`    the chapter's claims as :class:`attnlimits.experiments.paper_claims.Claim` rows, each decided on an
  interval in the book's words (:mod:`attnlimits.infra.verdicts`) by a rule that can fail: a trend in L is read on
  the full-attention layers only (a sliding-window layer sees at most its window whatever L, so any trend of its
  own would hold or fail by construction), and "stays put" is :func:`flat`.
- :func:`figure_weights`, :func:`figure_distance`, :func:`figure_critical`, :func:`figure_plateau_g`,
  :func:`figure_normalizers`: the chapter's figures, one line per model and layer group.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from attnlimits.experiments.paper_claims import INVERSE_T, LINEAR, SATURATION, Claim
from attnlimits.experiments.paper_claims.figure4 import G_QUANTILE
from attnlimits.infra.statistics import SEED
from attnlimits.infra.verdicts import INCONCLUSIVE, NOT_REPRODUCED, decide
from attnlimits.studies.long_context.study import READINGS, LongResults, in_group, layer_groups, pooled

__all__ = [
    "DRAWS",
    "FLAT",
    "FLAT_RULE",
    "claims",
    "claims_table",
    "cost_table",
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
]

#: Parametric draws behind every interval (each head's value from its mean and row-sampling standard error).
DRAWS = 1000
#: The band of a log-log slope of about 0: the quantity stays put as L grows (:func:`flat`).
FLAT = (-0.25, 0.25)
#: :func:`flat`'s rule in words, as the claims state it.
FLAT_RULE = (
    "reproduced (it stays put) when the 95 % interval of the log-log slope against L contains 0 and lies in "
    "[-0.25, 0.25], not reproduced when it excludes 0 (the quantity moves with L), inconclusive otherwise"
)


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


def groups(res: LongResults) -> list[str]:
    """The layer groups of a run: ``full`` only, or ``all``, ``full`` and ``sliding`` for a model with both."""
    return layer_groups(res.stats)


def _drawn(res: LongResults) -> list[tuple[str, str]]:
    """(group, legend label) of each line a figure draws for a run: the kinds of layer apart, not pooled."""
    kinds = groups(res)
    if len(kinds) == 1:
        return [(kinds[0], res.label)]
    return [(group, f"{res.label} ({group})") for group in kinds if group != "all"]


def _select(res, quantity, normalizer="softmax", N=None, T=None, group="all") -> pd.DataFrame:
    t = res.stats
    t = t[(t.quantity == quantity) & (t.normalizer == normalizer)]
    if N is not None:
        t = t[np.isclose(t.N, N)]
    if T is not None:
        t = t[np.isclose(t["T"], T)]
    t = in_group(t, group)
    if t.empty:
        raise ValueError(f"no {quantity!r} values for normalizer={normalizer!r}, N={N}, T={T}, group={group!r}")
    return pooled(t)


def _g_quantile(values) -> float:
    """The :data:`G_QUANTILE` over heads (what Figure 4's rules read)."""
    return float(np.quantile(values, G_QUANTILE))


def _draws(part: pd.DataFrame, stat, seed: int) -> np.ndarray:
    """``stat`` of the heads' values under :data:`DRAWS` parametric draws (each value + se x a standard normal)."""
    rng = np.random.default_rng(seed)
    v, se = part.value.to_numpy(), np.nan_to_num(part.se.to_numpy())
    return np.array([stat(v + rng.standard_normal(len(v)) * se) for _ in range(DRAWS)])


def trend(res: LongResults, quantity: str, *, normalizer="softmax", N=None, T=None, group="all", stat=np.median):
    """Per L: ``stat`` over heads (the median by default) of ``quantity`` and its 95 % interval over the draws.
    Columns ``L, value, lo, hi, heads``."""
    t = _select(res, quantity, normalizer, N, T, group)
    rows = []
    for L, part in t.groupby("L"):
        part = part.dropna(subset=["value"])
        draws = _draws(part, stat, SEED + int(L))
        rows.append((int(L), float(stat(part.value)), *np.percentile(draws, [2.5, 97.5]), len(part)))
    return pd.DataFrame(rows, columns=["L", "value", "lo", "hi", "heads"])


def slope(res: LongResults, quantity: str, *, along="L", at=None, **select) -> tuple[float, float, float]:
    """The log-log slope of the median over heads of ``quantity`` against L (``along="L"``), or of the
    :data:`G_QUANTILE` over heads of g against T at length ``at`` for T <= 0.01 (``along="T"``: Figure 4's statistic
    in chapter 25; the largest head's g, the paper's, is a maximum, which has no valid interval), and its 95 %
    interval over the draws."""
    if along == "L":
        t = _select(res, quantity, **select)
        xs = sorted(set(t.L))
        parts = [t[t.L == L].dropna(subset=["value"]) for L in xs]
        stat = np.median
    elif along == "T":
        t = res.stats[(res.stats.quantity == "g") & (res.stats.normalizer == "softmax")]
        t = pooled(t[t.L == (t.L.max() if at is None else at)])
        xs = sorted(T for T in set(t["T"]) if T <= 0.01)
        parts = [t[np.isclose(t["T"], T)] for T in xs]
        stat = _g_quantile
    else:
        raise ValueError(f"along: must be 'L' or 'T', got {along!r}")
    if len(xs) < 2:
        return math.nan, math.nan, math.nan
    logx = np.log(xs)
    fit = np.polyfit(logx, np.log([stat(p.value) for p in parts]), 1)[0]
    draws = np.stack([_draws(p, stat, SEED + i) for i, p in enumerate(parts)], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slopes = np.polyfit(logx, np.log(draws.T), 1)[0]
    lo, hi = np.nanpercentile(slopes, [2.5, 97.5])
    return float(fit), float(lo), float(hi)


def slope_table(results: list[LongResults], quantity: str, *, normalizers=("softmax",), **select) -> pd.DataFrame:
    """:func:`slope` against L for every model, layer group and normaliser: ``model, group, normalizer, slope,
    slope_lo, slope_hi``."""
    rows = []
    for res in results:
        for group in groups(res):
            for name in normalizers:
                rows.append((res.label, group, name, *slope(res, quantity, normalizer=name, group=group, **select)))
    return pd.DataFrame(rows, columns=["model", "group", "normalizer", "slope", "slope_lo", "slope_hi"])


def _claim(key, figure, paper, measured_fmt, value, lo, hi, band, rule) -> Claim:
    """A claim decided on ``[lo, hi]``: by :func:`flat` when ``band`` is :data:`FLAT` (it must also contain 0), else
    by :func:`attnlimits.infra.verdicts.decide`."""
    verdict = flat(lo, hi) if band == FLAT else decide(lo, hi, band)
    return Claim(key, figure, paper, measured_fmt.format(v=value, lo=lo, hi=hi), verdict, rule, value, lo, hi)


def _critical_of(res: LongResults, group: str, reading: str) -> pd.DataFrame:
    c = res.critical
    return c[(c.layer_type == group) & (c.reading == reading)].sort_values("L")


def _grid_below(res: LongResults, L: int, reading: str, n: float) -> float:
    """The largest N of the study's grid at length L below ``n`` (where the KS test still told d~ from the reading),
    or ``n`` itself when the grid has none below it (or the run's table does not give the grid)."""
    t = res.stats
    if t.empty:
        return n
    grid = t[(t.quantity == reading) & (t.L == L)].N.dropna()
    below = grid[grid < n]
    return float(below.max()) if len(below) else n


def _fraction_range(res: LongResults, row, reading: str) -> tuple[float, float]:
    """Where the critical N/L can lie at one length: from the grid point below the lower end of its 95 % interval
    (the grid brackets the first N the test accepts between two of its points) to the upper end, widened to take in
    the measured N (the interval of the draws need not contain it); NaN where an end is open."""
    ends = (row.critical_N, row.critical_N_lo, row.critical_N_hi)
    if any(math.isnan(v) for v in ends):
        return math.nan, math.nan
    return _grid_below(res, int(row.L), reading, min(ends)) / row.L, max(ends) / row.L


def _fraction_slope(res: LongResults, group: str, reading: str) -> Claim:
    """Does the critical fraction N/L stay put as L grows? Its log-log slope against L between the shortest and the
    longest length, with the interval the two lengths' ranges allow (:func:`_fraction_range`: each length's 95 %
    interval, bracketed by the grid), decided by :func:`flat`."""
    c = _critical_of(res, group, reading)
    first, last = c.iloc[0], c.iloc[-1]
    span = math.log(last.L / first.L)
    a, b = _fraction_range(res, first, reading), _fraction_range(res, last, reading)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = float(np.log(last.critical_frac / first.critical_frac) / span)
        lo, hi = float(np.log(b[0] / a[1]) / span), float(np.log(b[1] / a[0]) / span)
    measured = (
        f"N/L = {first.critical_frac:.3g} [{a[0]:.3g}, {a[1]:.3g}] at L = {first.L}, "
        f"{last.critical_frac:.3g} [{b[0]:.3g}, {b[1]:.3g}] at L = {last.L}: log-log slope {value:.2f} "
        f"[{lo:.2f}, {hi:.2f}]"
    )
    rule = (
        "the log-log slope of the critical N/L between the shortest and the longest length, its interval from the "
        "ends of the two lengths' ranges (each the 95 % interval of the row sample, from the grid point below its "
        "lower end, which brackets the first N the test accepts, to its upper end); "
        + FLAT_RULE
        + " (an open end: inconclusive)"
    )
    paper = f"the critical N/L stays put as L grows (d~ against {reading})"
    return Claim(f"critical-{reading}-{group}", "35c", paper, measured, flat(lo, hi), rule, value, lo, hi)


def length_groups(res: LongResults) -> list[str]:
    """The layer groups whose trends in L the claims decide: the full-attention layers only. A sliding-window
    layer's row sees at most its window however long the context, so a trend of its own (or of ``all``, which pools
    it in) holds or fails by construction; the figures and tables still show it."""
    return [g for g in groups(res) if g == "full"]


def claims(res: LongResults) -> list[Claim]:
    """Chapter 35's claims on one model: on the full-attention layers (:func:`length_groups`), Lemma 1's 1/L on the
    tokens other than the sink, d~'s growth and the critical fraction under each reading; per layer group, the
    N_s/N plateau at the longest length; and g's 1/T. Each is decided on the interval of :func:`slope`,
    :func:`trend` or the critical table by a rule that can fail (a flat trend by :func:`flat`)."""
    out = []
    top = int(res.stats.L.max())
    n_alg4 = int(res.stats[res.stats.quantity == "ns_frac"].N.max())
    N = res.provenance["preset"]["N"]
    for group in groups(res):
        tag = f"{res.label}, {group} layers"
        if group in length_groups(res):
            lemma = slope(res, "rest_max_x_len", group=group)
            out.append(_claim(
                f"lemma1-{group}", "35a", "weights vanish like 1/L (Lemma 1): l x the largest weight stays put",
                "slope of the median l x largest non-sink weight: {v:.2f} [{lo:.2f}, {hi:.2f}] (" + tag + ")",
                *lemma, FLAT, FLAT_RULE,
            ))  # fmt: skip
            grow = slope(res, "d_tilde", N=N, group=group)
            out.append(_claim(
                f"distance-{group}", "35b", f"d~ at N = {N} grows like L (Figure 2a)",
                "slope of the median d~: {v:.2f} [{lo:.2f}, {hi:.2f}] (" + tag + ")", *grow, LINEAR,
                "reproduced when the 95 % interval of the log-log slope against L lies in [0.8, 1.2], not reproduced "
                "when it lies outside, else inconclusive",
            ))  # fmt: skip
            out += [_fraction_slope(res, group, reading) for reading in READINGS]
        plateau = trend(res, "ns_frac", N=n_alg4, group=group)
        last = plateau[plateau.L == top].iloc[0]
        out.append(_claim(
            f"plateau-{group}", "35d", "about 70-85 % of the selected tokens are separable (Figure 3)",
            f"median N_s/N at N = {n_alg4}, L = {top}: " + "{v:.2f} [{lo:.2f}, {hi:.2f}] (" + tag + ")",
            last.value, last.lo, last.hi, SATURATION,
            "reproduced when the 95 % interval lies in [0.70, 0.85], not reproduced when it lies outside, else "
            "inconclusive",
        ))  # fmt: skip
    g = slope(res, "g", along="T")
    out.append(_claim(
        "gradient", "35e", "g grows like 1/T at low temperature (Figure 4)",
        f"slope of the {100 * G_QUANTILE:g}th percentile over heads of g against T <= 0.01 at L = {top}: "
        + "{v:.2f} [{lo:.2f}, {hi:.2f}]", *g, INVERSE_T,
        "decided on the 95th percentile over heads (the paper's largest head is a maximum, which has no valid "
        "interval): reproduced when the 95 % interval of its log-log slope lies in [-1.2, -0.8], not reproduced "
        "when it lies outside, else inconclusive",
    ))  # fmt: skip
    return out


def claims_table(results: list[LongResults]) -> pd.DataFrame:
    """:func:`claims` of every model as one table (``model`` first)."""
    rows = [{"model": res.label, **c.as_dict()} for res in results for c in claims(res)]
    return pd.DataFrame(rows)


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


def figure_weights(results: list[LongResults]):
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


def figure_distance(results: list[LongResults]):
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


def figure_critical(results: list[LongResults]):
    """The critical N / L against L (KS level of the preset) under each reading, with the 95 % interval of the row
    sample drawn as a bar from its lower to its upper end."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, len(READINGS), figsize=(13, 4), sharey=True)
    colors = sns.color_palette(n_colors=len(results))
    for ax, reading in zip(axes, READINGS, strict=True):
        for color, res in zip(colors, results, strict=True):
            for group, label in _drawn(res):
                c = _critical_of(res, group, reading)
                ax.plot(c.L, c.critical_frac, _STYLE[group] + "o", color=color, label=label)
                # the interval as drawn from its ends (it need not contain the point); an open end stops at the point
                top = np.where(c.critical_N_hi.isna(), c.critical_frac, c.critical_N_hi / c.L)
                ax.vlines(c.L, c.critical_N_lo / c.L, top, color=color, alpha=0.6, linewidth=3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("L (tokens)")
        ax.set_title(f"d~ against {reading}")
    axes[0].set_ylabel("critical N / L")
    axes[0].legend(fontsize="small")
    return fig


def figure_plateau_g(results: list[LongResults]):
    """Per model, N_s/N against N at every L (left) and the largest g over heads against T at every L (right)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(12, 3.6 * len(results)), squeeze=False)
    for (left, right), res in zip(axes, results, strict=True):
        st = pooled(res.stats[res.stats.normalizer == "softmax"])
        for L, part in st[st.quantity == "ns_frac"].groupby("L"):
            med = part.groupby("N").value.median()
            left.plot(med.index, med.values, marker="o", label=f"L = {int(L)}")
        left.axhspan(0.70, 0.85, color="grey", alpha=0.15, label="the paper's 70-85 %")
        left.set_xscale("log", base=2)
        left.set_xlabel("N")
        left.set_ylabel("median N_s / N")
        left.set_title(res.label)
        left.legend(fontsize="small")
        for L, part in st[st.quantity == "g"].groupby("L"):
            top = part.groupby("T").value.max()
            right.plot(top.index, top.values, marker="o", label=f"L = {int(L)}")
        right.set_xscale("log")
        right.set_yscale("log")
        right.set_xlabel("T")
        right.set_ylabel("largest g over heads")
        right.set_title(res.label)
        right.legend(fontsize="small")
    return fig


def figure_normalizers(results: list[LongResults]):
    """Per model, l x the largest weight against L under every normaliser on the same logits (medians over
    heads): softmax's own weights beside the ones the other normalisers would give."""
    import matplotlib.pyplot as plt

    from attnlimits.infra import plotting

    names = list(dict.fromkeys(results[0].stats.normalizer))
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


def main_table(results: list[LongResults]) -> pd.DataFrame:
    """One row per model, layer group and L: the medians over heads of l x the largest non-sink weight, the sink
    weight, d~ and E at Algorithm 1's N, N_s/N at the largest N of Algorithm 4, the largest g at the smallest T,
    and the critical N / L under each reading with its interval."""
    rows = []
    for res in results:
        N = res.provenance["preset"]["N"]
        n4 = int(res.stats[res.stats.quantity == "ns_frac"].N.max())
        t_min = float(res.stats[res.stats.quantity == "g"]["T"].min())
        for group in groups(res):
            cols = {
                "l x max weight (no sink)": trend(res, "rest_max_x_len", group=group),
                "sink weight": trend(res, "sink_weight", group=group),
                f"d~ (N={N})": trend(res, "d_tilde", N=N, group=group),
                f"E (N={N})": trend(res, "E", N=N, group=group),
                f"N_s/N (N={n4})": trend(res, "ns_frac", N=n4, group=group),
                f"max g (T={t_min:g})": trend(res, "g", T=t_min, group=group, stat=np.max),
            }
            for L in cols["sink weight"].L:
                row = {"model": res.label, "layers": group, "L": int(L)}
                row |= {name: float(t.set_index("L").value.get(L, math.nan)) for name, t in cols.items()}
                for reading in READINGS:
                    c = _critical_of(res, group, reading).set_index("L").loc[L]
                    row[f"critical N/L ({reading})"] = c.critical_frac
                    row[f"interval ({reading})"] = f"[{c.critical_N_lo / L:.3g}, {c.critical_N_hi / L:.3g}]"
                rows.append(row)
    return pd.DataFrame(rows)


def summary(res: LongResults) -> str:
    """Two lines: the model, text, lengths, rows and windows of a run, and its time and peak memory."""
    p = res.provenance
    kinds = pd.Series(p["layer_types"]).value_counts()
    layers = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    return (
        f"{p['model'].get('model_id')} ({layers} layers) on {p['text'].get('name')}: L = "
        f"{', '.join(map(str, p['preset']['lengths']))}, {p['preset']['rows']} rows per length "
        f"({p['preset']['g_rows']} for g and the other normalisers), windows {p['windows']}\n"
        f"  computed in {p['seconds']['total']:.0f} s (capture {p['seconds']['capture']:.0f} s), "
        f"peak memory {p['peak_memory_gb']:.2f} GB"
    )


def eager_gigabytes(res: LongResults, length: int) -> float:
    """What the eager capture would hold for one window of ``length`` tokens: every layer's (H, L, L) float32
    weights and logits, in GB (what the SDPA capture never forms)."""
    heads = res.stats.groupby("layer")["head"].nunique().sum()
    return float(heads * length * length * 4 * 2 / 1e9)


def cost_table(results: list[LongResults], length: int = 8192) -> pd.DataFrame:
    """What each run cost, one row per model (its label): the memory the eager capture would need for one window
    of ``length`` tokens (:func:`eager_gigabytes`), the seconds of the capture and of the whole study, the peak
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
