"""What the book ships of one window of an experiments run: its per-head tables summarised over the window's heads.

A window (a passage of the text) is the unit every interval of the book resamples; heads within a window are not
independent. So what a verdict needs of a window is a few numbers per grid point, not its heads: for each grid
point (L and N and the counting of Algorithms 1-2; L, N and the tokens of Algorithm 4; T, eps and the logits'
scaling of Algorithm 5) and each quantity, the number of heads with a value and their mean, minimum, maximum and
quantiles (:data:`STATS`). A window's critical N (Algorithm 3 run on that window alone) and its KS scan ship as
they are. This is computation, not analysis: the shipped rows are keyed on this module's code too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from attnlimits.experiments.critical_reading import critical_from_heads, critical_head_subsets, one_head_per_group
from attnlimits.infra import statistics
from attnlimits.infra.ks import KS_LEVEL

__all__ = ["QUANTILES", "STATS", "SUBSET", "SUMMARIZED", "Summaries", "over_heads", "sensitivity", "summarize"]

#: How many heads the head-subset check of Algorithm 3 draws: GPT-2's 144, the paper's model.
SUBSET = 144

#: The quantiles over a window's heads every summary holds (q05 ... q95), with the mean, minimum and maximum.
QUANTILES = (0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95)
STATS = ("heads", "mean", "min", *(f"q{round(100 * q):02d}" for q in QUANTILES), "max")

#: Per table: the columns that place a row on the run's grid, and the per-head quantities summarised. A ratio
#: ``a/b`` or a difference ``a-b`` is summarised head by head (the median ratio, not the ratio of medians); ``a>x``
#: is 1 for a head whose ``a`` exceeds x, so its mean is the share of such heads.
SUMMARIZED = {
    "distance": (
        ("L", "N", "counting"),
        (
            "d_tilde",
            "d_max",
            "E",
            "E_mc",
            "E_full",
            "E_perm",
            "E/d_tilde",
            "E_mc/d_tilde",
            "E_full/d_tilde",
            "E_perm/d_tilde",
            "d_tilde/d_max",
            "rows",
        ),
    ),
    "separability": (("L", "N", "tokens"), ("ns_frac", "lower", "upper", "delta", "ns_frac-lower", "upper-ns_frac")),
    "gradient": (("T", "eps", "logit_scaling"), ("g",)),
    "sink": ((), ("sink_weight", "sink_weight>0.5")),
}


def _quantity(table: pd.DataFrame, name: str) -> pd.Series | None:
    """A per-head quantity of ``table``: a column, the ratio ``a/b`` or difference ``a-b`` of two, or the indicator
    ``a>x`` (1 where column a exceeds the number x, else 0); None where the table lacks the columns."""
    if ">" in name:
        a, x = name.split(">")
        return None if a not in table.columns else (table[a].astype(float) > float(x)).astype(float)
    for sign in "/-":
        if sign in name:
            a, b = name.split(sign)
            if a not in table.columns or b not in table.columns:
                return None
            x, y = table[a].astype(float), table[b].astype(float)
            with np.errstate(divide="ignore", invalid="ignore"):
                return x / y if sign == "/" else x - y
    return table[name].astype(float) if name in table.columns else None


def over_heads(table: pd.DataFrame, by: Sequence[str], quantities: Sequence[str]) -> pd.DataFrame:
    """Summaries over heads of each quantity, per window and per value of ``by``: columns window, the ``by``
    columns, quantity, then :data:`STATS` (``heads``: how many heads have a finite value; the statistics over
    those). A quantity the table lacks, or with no finite value anywhere (a reading a run without token 0 does
    not compute), is left out."""
    keys = ["window", *by]
    parts = []
    for name in quantities:
        values = _quantity(table, name)
        if values is None or not np.isfinite(values.to_numpy(float)).any():
            continue
        frame = table[keys].assign(value=values.where(np.isfinite(values)))
        groups = frame.groupby(keys, sort=True, dropna=False).value
        stats = pd.DataFrame(
            {
                "heads": groups.count(),
                "mean": groups.mean(),
                "min": groups.min(),
                **{f"q{round(100 * q):02d}": groups.quantile(q) for q in QUANTILES},
                "max": groups.max(),
            }
        )
        parts.append(stats.reset_index().assign(quantity=name))
    if not parts:  # no quantity with a value (a run without Algorithm 5's logits)
        return pd.DataFrame(columns=[*keys, "quantity", *STATS])
    out = pd.concat(parts, ignore_index=True)
    out["heads"] = out["heads"].astype("int64")
    order = {q: i for i, q in enumerate(quantities)}  # windows first, then the grid, then the quantities' order
    out = out.sort_values([*keys, "quantity"], key=lambda c: c.map(order) if c.name == "quantity" else c)
    return out[[*keys, "quantity", *STATS]].reset_index(drop=True)


def summarize(res, tables: Sequence[str] = tuple(SUMMARIZED)) -> dict[str, pd.DataFrame]:
    """The shipped tables of a run ``res`` (:class:`attnlimits.experiments.Results`, one window or several): each of
    ``tables`` summarised over heads per window (:func:`over_heads`), and Algorithm 3's ``critical`` and
    ``critical_scan`` as the run computed them (one search per window when the run read one window), their window
    numbers as integers."""
    out = {}
    for name in tables:
        by, quantities = SUMMARIZED[name]
        table = getattr(res, name).assign(window=lambda t: t["window"].astype(int))
        out[name] = over_heads(table, by, quantities)
    windows = [int(w) for w in res.provenance["windows"]]
    for name in ("critical", "critical_scan"):
        own = _own_search(getattr(res, name), windows)
        if own is not None:
            out[name] = own[["window", *[c for c in own.columns if c != "window"]]]
    if len(windows) == 1:
        out["sensitivity"] = sensitivity(res).assign(window=windows[0])
    return out


def _own_search(table: pd.DataFrame, windows: list[int]) -> pd.DataFrame | None:
    """Algorithm 3's ``table`` (``critical`` or ``critical_scan``) with each row's window, where each window was
    searched on its own: a run of one window, or runs of one window merged (their ``windows`` column reads
    ``"i-i"``); None for a search over several windows at once."""
    drop = ["critical_N_lo", "critical_N_hi", "units", "method", "windows", "window"]
    ranges = table["windows"].astype(str).str.split("-", expand=True) if "windows" in table.columns else None
    if len(windows) == 1:
        labels = pd.Series(windows[0], index=table.index)
    elif ranges is not None and ranges.shape[1] == 2 and (ranges[0] == ranges[1]).all():
        labels = ranges[0].astype(int)
    else:
        return None
    return table.drop(columns=drop, errors="ignore").assign(window=labels.to_numpy())


def sensitivity(res, *, level: float = KS_LEVEL, size: int = SUBSET) -> pd.DataFrame:
    """How one window's critical N depends on the heads its KS test compares, at the longest length of Algorithm 1:
    per reading of the expectation, the window's critical N with every head; the median and 95 % range of the
    critical N over 200 seeded random subsets of ``size`` heads (all of them when the model has fewer); the critical
    N on one query head per key/value group (heads of a group read the same values; NA where the run does not
    say how its heads are grouped); and the p-value of the paired
    Wilcoxon signed-rank test of d~ against the reading at the window's critical N, with the heads it tested (NaN
    and 0 where no evaluated N reaches ``level``). ``res``: a run of one window."""
    top = max(res.preset.alg1_L)
    crit, heads, facts = res.critical, res.critical_heads, res.provenance["model"]
    grouped = "n_heads" in facts and "n_kv_heads" in facts  # attention given as arrays does not say
    group = one_head_per_group(heads, facts["n_heads"], facts["n_kv_heads"]) if grouped else None
    n_heads = heads[["layer", "head"]].drop_duplicates().shape[0]
    rows = []
    for reading in pd.unique(crit.reading):
        at_top = crit[(crit.L == top) & (crit.reading == reading) & (crit.ks_level == level)]
        found = at_top.critical_N.iloc[0] if len(at_top) else pd.NA
        median, lo, hi = critical_head_subsets(heads, top, reading, level, size=min(size, n_heads))
        one = critical_from_heads(heads, top, reading, level, head_index=group) if grouped else None
        p, tested = np.nan, 0
        if not pd.isna(found):
            pick = (heads.L == top) & (heads.N == found) & (heads.reading == reading)
            _, p, tested = statistics.wilcoxon_heads(heads[pick], "d_tilde", "expected")
        rows.append((reading, top, found, min(size, n_heads), median, lo, hi, one, p, tested))
    columns = ["reading", "L", "critical_N", "subset", "subset_median", "subset_lo", "subset_hi", "one_per_group",
               "wilcoxon_p", "heads"]  # fmt: skip
    table = pd.DataFrame(rows, columns=columns)
    return table.astype({"critical_N": "Int64", "one_per_group": "Int64", "subset_lo": "Int64", "subset_hi": "Int64"})


# ----------------------------------------------------------------------------------------------------------------
# a run as its windows' summaries
# ----------------------------------------------------------------------------------------------------------------
class Summaries:
    """A run of Algorithms 1-5 as the book's analysis reads it: per window, its heads summarised (:func:`summarize`)
    and its own critical N. The windows are the units every interval resamples.

    Tables (each with a ``window`` column): ``distance``, ``separability``, ``gradient``, ``sink`` (summaries over
    heads: grid columns, ``quantity``, :data:`STATS`), ``critical`` and ``critical_scan`` (Algorithm 3 on each
    window alone), ``sensitivity`` (:func:`sensitivity`, per window). ``provenance``: the model, the text, the
    preset, the options, the windows and where they start in the text."""

    TABLES = ("distance", "separability", "gradient", "sink", "critical", "critical_scan", "sensitivity")

    def __init__(self, tables: dict[str, pd.DataFrame], provenance: dict):
        for name in self.TABLES:
            setattr(self, name, tables.get(name, pd.DataFrame(columns=["window"])))
        self.provenance = provenance

    @classmethod
    def read(cls, folders, shared=None) -> Summaries:
        """The run whose windows lie in ``folders`` (one shipped shard each: its ``<table>.parquet`` files and
        ``window.json``); ``shared``: the folders of the same windows of the run with token 0, whose Algorithm 5 and
        sink tables this run shares."""
        import json
        from pathlib import Path

        folders = [Path(f) for f in folders]
        records = [json.loads((f / "window.json").read_text()) for f in folders]
        tables = {}
        for name in cls.TABLES:
            where = folders
            if shared is not None and not (folders[0] / f"{name}.parquet").is_file():
                where = [Path(f) for f in shared]
            parts = [pd.read_parquet(f / f"{name}.parquet") for f in where if (f / f"{name}.parquet").is_file()]
            if parts:
                tables[name] = pd.concat(parts, ignore_index=True)
        first = records[0]
        provenance = {
            **{k: v for k, v in first.items() if k not in ("window", "window_start")},
            "windows": [r["window"] for r in records],
            "window_starts": [r["window_start"] for r in records],
            "shipped": True,
        }
        return cls(tables, provenance)

    @classmethod
    def of(cls, res) -> Summaries:
        """A run's per-head tables (:class:`attnlimits.experiments.Results`, several windows) summarised per window.
        A run merged from one-window runs (:func:`attnlimits.experiments.window_results`) holds each window's own
        critical N; a run of several windows at once searched the heads of all of them together, and each window's
        critical N is then read from its per-head means on the N that search evaluated
        (:func:`attnlimits.experiments.critical_reading.critical_from_heads`), which ``provenance["critical"]``
        says."""
        tables = summarize(res)
        prov = dict(res.provenance)
        windows = [int(w) for w in prov["windows"]]
        crit = res.critical
        if "critical" in tables:
            critical = tables["critical"]
            prov["critical"] = "each window's own search"
        else:
            heads = res.critical_heads
            rows = []
            for (L, reading, level), _ in crit.groupby(["L", "reading", "ks_level"], sort=False):
                for w in windows:
                    n = critical_from_heads(heads, L, reading, level, windows=[_label(heads, w)])
                    rows.append((w, L, reading, level, pd.NA if n is None else n))
            critical = pd.DataFrame(rows, columns=["window", "L", "reading", "ks_level", "critical_N"])
            prov["critical"] = "each window's per-head means on the N a search over all windows evaluated"
        keep = ["window", "L", "reading", "ks_level", "critical_N"]
        tables["critical"] = critical[keep].astype({"critical_N": "Int64"}).reset_index(drop=True)
        return cls(tables, prov)

    @property
    def preset(self):
        """The :class:`attnlimits.experiments.Preset` the run was computed with."""
        from attnlimits.experiments.grid import Preset

        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in self.provenance["preset"].items()}
        return Preset(**fields)

    @property
    def windows(self) -> list[int]:
        """The run's window numbers (the units of every interval), ascending."""
        return sorted(int(w) for w in self.provenance["windows"])

    @property
    def countings(self) -> list[str]:
        """The countings of a row's tokens the distance summaries hold."""
        return sorted(set(self.distance["counting"]))

    def counted(self, counting: str = "visible") -> pd.DataFrame:
        """The distance summaries under one ``counting`` of a row's tokens."""
        return _rows_of(self.distance, "counting", counting)

    def alg1(self, counting: str = "visible") -> pd.DataFrame:
        """Algorithm 1's summaries: ``alg1_N`` at every ``alg1_L`` (Figure 2a)."""
        p, t = self.preset, self.counted(counting)
        return t[(t.N == p.alg1_N) & t.L.isin(p.alg1_L)]

    def alg2(self, counting: str = "visible") -> pd.DataFrame:
        """Algorithm 2's summaries: every ``alg2_N`` at ``alg2_L`` (Figure 2b)."""
        p, t = self.preset, self.counted(counting)
        return t[(t.L == p.alg2_L) & t.N.isin(p.alg2_N)]

    def alg4(self, tokens: str = "value") -> pd.DataFrame:
        """Algorithm 4's summaries on one kind of ``tokens`` (``"value"`` or ``"embedding"``)."""
        return _rows_of(self.separability, "tokens", tokens)

    def g(self, eps: float | None = None, scaling: str = "model") -> pd.DataFrame:
        """Algorithm 5's summaries at one ``eps`` (default: the smallest) and logit ``scaling``."""
        t = self.gradient
        if t.empty:
            raise ValueError("gradient: this run has no Algorithm 5 table")
        eps = float(t.eps.min()) if eps is None else eps
        if not (t.eps == eps).any():
            raise ValueError(f"eps: must be one of {sorted(set(t.eps))}, got {eps!r}")
        return _rows_of(t[t.eps == eps], "logit_scaling", scaling)

    def heads(self) -> int:
        """How many heads each window summarises (the sink table's count)."""
        return int(self.sink.loc[self.sink.quantity == "sink_weight", "heads"].max())

    def without(self, window: int) -> Summaries:
        """The same run without one window (a leave-one-window-out check)."""
        if window not in self.windows:
            raise ValueError(f"window: {window!r} is not one of the run's windows {self.windows}")
        tables = {name: t[t["window"] != window] for name in self.TABLES if len(t := getattr(self, name))}
        kept = [(w, s) for w, s in zip(self.provenance["windows"], self.provenance["window_starts"], strict=True)
                if int(w) != window]  # fmt: skip
        prov = {**self.provenance, "windows": [w for w, _ in kept], "window_starts": [s for _, s in kept]}
        return Summaries(tables, prov)

    def summary(self) -> str:
        """Two lines naming the model, text, preset, windows and heads, and where the numbers come from."""
        p = self.provenance
        where = (
            "shipped with the book (results/, checked by `attnlimits results --check`)"
            if p.get("shipped")
            else "computed here into the results cache"
        )
        sink = "token 0 left out" if p.get("exclude_sink") else "every token"
        return (
            f"model {p['model'].get('model_id')}, text {p['text'].get('name')}, preset {p['preset']['name']}: "
            f"{len(self.windows)} windows of {self.heads()} heads, {sink}\n"
            f"each window summarised over its heads; {where}"
        )


def _label(heads: pd.DataFrame, window: int):
    """Window ``window`` as ``heads`` labels it (a number or its text)."""
    labels = pd.unique(heads["window"])
    return next(v for v in labels if str(v) == str(window))


def _rows_of(table: pd.DataFrame, column: str, value) -> pd.DataFrame:
    held = sorted(set(table[column]))
    if value not in held:
        raise ValueError(f"{column}: must be one of {held}, got {value!r}")
    return table[table[column] == value]
