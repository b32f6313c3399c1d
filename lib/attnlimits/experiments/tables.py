"""The tables of one run of Algorithms 1-5 computed from captured windows, their provenance, and merging runs.

This module and the capture module a model goes through (:mod:`attnlimits.models.windows` for a Hugging Face
model, :mod:`attnlimits.models.lens` for TransformerLens) are what the experiments' results cache keys on
(:func:`attnlimits.experiments.results`): an edit here or in the algorithms recomputes, an edit to another model
path does not."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import attnlimits
from attnlimits.experiments.algorithms import (
    GRADIENT_COLUMNS,
    distance_table,
    gradient_table,
    separability_table,
    sink_table,
)
from attnlimits.experiments.critical import CRITICAL_READINGS, critical_n
from attnlimits.experiments.grid import Preset
from attnlimits.experiments.row_sample import row_samples
from attnlimits.infra import cache
from attnlimits.models.capturing import Capture

__all__ = ["TABLES", "Results", "compute", "merge", "provenance_of"]

TABLES = ("distance", "critical_scan", "critical", "critical_heads", "separability", "gradient", "sink")


@dataclass
class Results:
    """The tables of one run (or of several merged runs) and their provenance.

    ``distance`` (Alg. 1-2, every reading of the expectation under both countings), ``critical_scan``,
    ``critical`` (the critical N; :func:`attnlimits.experiments.run` and :func:`~attnlimits.experiments.results`
    return it with its bootstrap interval over windows) and ``critical_heads`` (each window's per-head means at
    every evaluated N) (Alg. 3), ``separability`` (Alg. 4, on the values and the input embeddings), ``gradient``
    (Alg. 5), ``sink`` (attention-sink weight per head); ``provenance``: model, text, preset, seed, versions, wall
    time per algorithm.
    """

    distance: pd.DataFrame
    critical_scan: pd.DataFrame
    critical: pd.DataFrame
    critical_heads: pd.DataFrame
    separability: pd.DataFrame
    gradient: pd.DataFrame
    sink: pd.DataFrame
    provenance: dict

    @property
    def preset(self) -> Preset:
        """The :class:`Preset` this result was computed with (from its provenance)."""
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in self.provenance["preset"].items()}
        return Preset(**fields)

    def alg1(self, counting: str = "visible") -> pd.DataFrame:
        """Algorithm 1's rows of :attr:`distance`: the fixed ``alg1_N`` at every ``alg1_L`` (Figure 2a), under one
        ``counting`` of a row's tokens (``"visible"`` or ``"row"``)."""
        p, t = self.preset, self.counted(counting)
        return t[(t.N == p.alg1_N) & t.L.isin(p.alg1_L)]

    def alg4(self, tokens: str = "value") -> pd.DataFrame:
        """Algorithm 4's rows of :attr:`separability` measured on one kind of ``tokens`` (``"value"``: the heads'
        values, Figure 3 as the book reads it; ``"embedding"``: the input token embeddings). A table without the
        ``tokens`` column (written before Algorithm 4 also ran on the embeddings) holds only the values."""
        return _rows_of(self.separability, "tokens", tokens, "value")

    def alg2(self, counting: str = "visible") -> pd.DataFrame:
        """Algorithm 2's rows of :attr:`distance`: every ``alg2_N`` at the fixed ``alg2_L`` (Figure 2b), under one
        ``counting``."""
        p, t = self.preset, self.counted(counting)
        return t[(t.L == p.alg2_L) & t.N.isin(p.alg2_N)]

    def counted(self, counting: str = "visible") -> pd.DataFrame:
        """Every row of :attr:`distance` (Algorithms 1 and 2) under one ``counting`` of a row's tokens. A table
        without the ``counting`` column (written before the row counting existed) holds only ``"visible"``."""
        return _rows_of(self.distance, "counting", counting, "visible")

    @property
    def countings(self) -> list[str]:
        """The countings of a row's tokens :attr:`distance` holds (a run without token 0 has ``"visible"`` alone)."""
        return _held(self.distance, "counting", "visible")

    def g(self, eps: float | None = None, scaling: str = "model") -> pd.DataFrame:
        """Algorithm 5's rows of :attr:`gradient` at one ``eps`` (default: the smallest) and logit ``scaling``
        (``"model"``: the logits the model's softmax sees; ``"none"``: raw q.k)."""
        t = self.gradient
        if t.empty:
            why = self.provenance.get("absent", {}).get("gradient", "its table is empty")
            raise ValueError(f"gradient: this run has no Algorithm 5 table: {why}")
        eps = float(t.eps.min()) if eps is None else eps
        if scaling not in set(t.logit_scaling.unique()):
            raise ValueError(f"scaling: must be one of {sorted(set(t.logit_scaling))}, got {scaling!r}")
        if not (t.eps == eps).any():
            raise ValueError(f"eps: must be one of {sorted(set(t.eps))}, got {eps!r}")
        return t[(t.logit_scaling == scaling) & (t.eps == eps)]

    def g_heads(self, eps: float | None = None, scaling: str = "model") -> pd.DataFrame:
        """Each head's g pooled over the run's windows, at ``eps`` and ``scaling`` (as :meth:`g`): one row per T,
        one column per (layer, head). A head's pooled g is the mean of g over all its rows t in every window, as
        the paper averages a head over its rows: the mean of its per-window means weighted by their ``rows`` where
        the table has that column, else the plain mean (every window averages the same rows)."""
        t = self.g(eps, scaling)
        w = t["rows"].to_numpy(float) if "rows" in t.columns else np.ones(len(t))
        keys = {"T": t["T"].to_numpy(), "layer": t["layer"].to_numpy(), "head": t["head"].to_numpy()}
        sums = pd.DataFrame({**keys, "w": w, "wg": np.where(w > 0, w * t["g"].to_numpy(float), 0.0)})
        sums = sums.groupby(["T", "layer", "head"])[["w", "wg"]].sum()
        return (sums.wg / sums.w.where(sums.w > 0)).rename("g").unstack(["layer", "head"])

    def g_max(self, eps: float | None = None, scaling: str = "model") -> pd.Series:
        """Figure 4's curve as the paper computes it (Algorithm 5): per T, the largest over heads of each head's
        g pooled over all its rows and windows (:meth:`g_heads`), at ``eps`` and ``scaling`` (as :meth:`g`).

        A maximum over heads has no valid bootstrap interval (the bootstrap of an extreme is inconsistent), so the
        book decides Figure 4's claims on a high quantile over heads instead
        (:mod:`attnlimits.experiments.paper_claims`)."""
        return self.g_heads(eps, scaling).max(axis=1).rename("g")

    def g_max_per_window(self, eps: float | None = None, scaling: str = "model") -> pd.Series:
        """An alternative to :meth:`g_max`, not the paper's statistic: per T, the largest g over every (head,
        window) pair, each a mean over one window's rows only. It is never smaller than :meth:`g_max` (a head
        that responds strongly on one passage counts at full height) and grows with the number of windows."""
        return self.g(eps, scaling).groupby("T").g.max()

    def save(self, folder) -> Path:
        """Write every table as ``<name>.csv`` and ``provenance.json`` into ``folder`` (created); returns it."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name in TABLES:
            getattr(self, name).to_csv(folder / f"{name}.csv", index=False, float_format="%.17g")
        (folder / "provenance.json").write_text(json.dumps(self.provenance, indent=2, sort_keys=True) + "\n")
        return folder

    def summary(self) -> str:
        """A few lines naming the model, text, preset, windows, heads, arithmetic and the time each part took."""
        p = self.provenance
        heads = self.sink.groupby("window").size()
        seconds = ", ".join(f"{k} {v:.0f} s" for k, v in p["seconds"].items())
        return "\n".join(
            [
                f"model {p['model'].get('model_id')}, text {p['text'].get('name')}, preset {p['preset']['name']}, "
                f"windows {p['windows']} ({int(heads.iloc[0])} heads each, {int(heads.sum())} head-windows)",
                f"Algorithms 1-3 in {p['precision']}, 4-5 in float64; exclude_sink={p['exclude_sink']}, "
                f"tokens={p['tokens']}, seed {p['seed']}, normaliser {p.get('normalizer') or 'the model softmax'}",
                f"computed in {p['seconds']['total']:.0f} s ({seconds})",
            ]
        )

    @classmethod
    def load(cls, folder) -> Results:
        """Read a folder written by :meth:`save` (or by ``attnlimits analyze``)."""
        folder = Path(folder)
        missing = [f"{name}.csv" for name in TABLES if not (folder / f"{name}.csv").is_file()]
        if missing or not (folder / "provenance.json").is_file():
            raise FileNotFoundError(f"{folder} holds no complete results: missing {missing or ['provenance.json']}")
        tables = {name: pd.read_csv(folder / f"{name}.csv", dtype={"window": str}) for name in TABLES}
        for column in {"critical_N", "critical_N_lo", "critical_N_hi"} & set(tables["critical"].columns):
            tables["critical"][column] = tables["critical"][column].astype("Int64")
        return cls(**tables, provenance=json.loads((folder / "provenance.json").read_text()))


def _held(table: pd.DataFrame, column: str, only: str) -> list[str]:
    """The values of ``column`` in ``table``; ``[only]`` for a table without the column (written before it existed,
    when every row had that value)."""
    return sorted(set(table[column])) if column in table.columns else [only]


def _rows_of(table: pd.DataFrame, column: str, value: str, only: str) -> pd.DataFrame:
    """The rows of ``table`` whose ``column`` is ``value`` (all of them in a table without the column, which holds
    ``only``); a value the table does not hold is refused, naming the ones it does."""
    held = _held(table, column, only)
    if value not in held:
        raise ValueError(f"{column}: must be one of {held}, got {value!r}")
    return table[table[column] == value] if column in table.columns else table


def merge(parts: Sequence[Results]) -> Results:
    """Concatenate runs over disjoint window ranges of the same model, text and preset into one result.

    Per-window tables concatenate exactly. Algorithm 3 pools the heads over a run's windows, so each run keeps its
    own critical rows, told apart by their ``windows`` column.
    """
    if not parts:
        raise ValueError("parts: nothing to merge")
    keys = {
        (
            p.provenance["model"]["sha256"],
            p.provenance["text"]["sha256"],
            json.dumps(p.provenance["preset"]),
            p.provenance["exclude_sink"],
            p.provenance["tokens"],
            p.provenance.get("normalizer"),
        )
        for p in parts
    }
    if len(keys) > 1:
        raise ValueError("parts: runs of different models, texts, presets or options cannot be merged")
    seen = [w for p in parts for w in p.provenance["windows"]]
    if len(seen) != len(set(seen)):
        raise ValueError(f"parts: the window ranges overlap ({sorted(seen)})")
    tables = {name: pd.concat([getattr(p, name) for p in parts], ignore_index=True) for name in TABLES}
    seconds = {k: sum(p.provenance["seconds"].get(k, 0) for p in parts) for k in parts[0].provenance["seconds"]}
    provenance = dict(parts[0].provenance, windows=sorted(seen), seconds=seconds)
    return Results(**tables, provenance=provenance)


def _versions() -> dict:
    import scipy
    import transformers

    return {
        "attnlimits": attnlimits.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "pandas": pd.__version__,
        "python": sys.version.split()[0],
    }


def compute(
    caps: Sequence[Capture],
    p: Preset,
    *,
    exclude_sink: bool,
    tokens: str,
    precision: str,
    seed: int,
    embedding: bool,
    progress=None,
    n_jobs: int = 1,
    shared: Results | None = None,
    normalizer: str | None = None,
) -> tuple[dict, dict]:
    """Every table of a run (:data:`TABLES`) on the captures ``caps`` and the seconds each algorithm took.

    What :func:`run` and :func:`attnlimits.experiments.run_arrays` share: ``embedding`` adds Algorithm 4 on the
    input token embeddings; captures without logits (:class:`attnlimits.models.arrays.ArrayCapture` of
    weights alone) give an empty ``gradient`` table. The preset's ``row_stride`` (None: every row) has every
    algorithm read a stratified sample of each window's rows (:func:`attnlimits.experiments.row_sample.sample_rows`).
    ``normalizer``: None reads the captures' softmax weights; a registered name swaps it in on their logits.
    """
    opts = {
        "exclude_sink": exclude_sink,
        "tokens": tokens,
        "precision": precision,
        "progress": progress,
        "n_jobs": n_jobs,
        "normalizer": normalizer,
    }
    seconds = {}
    # every reading of the expectation and both countings in the paper's setting; the book's variant without token 0
    # keeps the book's reconstruction E on the visible tokens (each further reading costs about as much as E)
    variant = {"readings": ("E",), "countings": ("visible",)} if exclude_sink else {}
    sampled = {"seed": seed, "row_stride": p.row_stride}
    distance = _timed(seconds, "alg1_2", distance_table, caps, p.distance_grid(), **sampled, **variant, **opts)
    readings = ("E",) if exclude_sink else CRITICAL_READINGS
    scan, critical, heads = _timed(
        seconds, "alg3", critical_n, caps, p.alg1_L, p.ks_levels, readings=readings, **sampled, **opts
    )
    window_range = f"{caps[0].index}-{caps[-1].index}"
    scan["windows"] = window_range
    critical["windows"] = window_range
    alg4_tokens = [tokens] + (["embedding"] if embedding else [])
    alg4 = {**opts, "precision": "float64", "seed": seed}
    separability = _timed(seconds, "alg4", _separability, caps, p, alg4_tokens, alg4)
    if shared is not None:
        gradient, sink = shared.gradient, shared.sink
        seconds |= {"alg5": 0.0, "sink": 0.0}
    else:
        gradient, sink = _gradient_and_sink(
            caps, p, seconds, seed=seed, progress=progress, n_jobs=n_jobs, normalizer=normalizer
        )
    tables = {
        "distance": distance,
        "critical_scan": scan,
        "critical": critical,
        "critical_heads": heads,
        "separability": separability,
        "gradient": gradient,
        "sink": sink,
    }
    return tables, seconds


def _timed(seconds: dict, name: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, its wall-clock time recorded as ``seconds[name]`` (a run's provenance reports it)."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    seconds[name] = time.perf_counter() - t0
    return out


def _gradient_and_sink(caps, p: Preset, seconds: dict, *, seed: int, progress, n_jobs: int, normalizer=None) -> tuple:
    """Algorithm 5's table (empty for captures without logits) and the attention sink's, timed into ``seconds``. The
    sink reads the preset's row sample (``row_stride``); Algorithm 5 reads every row of its shorter window: at low T
    a row's g is nearly 0 unless the perturbation swaps a near-tie, when it is huge, so a sampled row standing for
    its block would multiply such a spike and the largest head's mean would follow the sample, not the model."""
    if all(getattr(c, "has_logits", True) for c in caps):
        alg5 = {"seed": seed, "stride": None, "progress": progress, "n_jobs": n_jobs, "normalizer": normalizer}
        gradient = _timed(seconds, "alg5", gradient_table, caps, p.alg5_L, p.alg5_T, p.alg5_eps, **alg5)
    else:
        gradient, seconds["alg5"] = pd.DataFrame(columns=GRADIENT_COLUMNS), 0.0
    sink = {"stride": p.row_stride, "seed": seed, "normalizer": normalizer}
    return gradient, _timed(seconds, "sink", sink_table, caps, p.max_length, **sink)


def _separability(caps: Sequence[Capture], p: Preset, kinds: Sequence[str], opts: dict) -> pd.DataFrame:
    """Algorithm 4 on each kind of tokens, window by window (so runs over disjoint windows concatenate): on the
    preset's row sample (``row_stride``; every row when None), the input embeddings on a coarser one
    (:func:`attnlimits.experiments.row_sample.row_samples`)."""

    def on(kind):
        stride = p.row_stride
        if kind == "embedding":
            stride = row_samples(p.row_stride)["embedding"]
        sample = {"stride": stride, "bins": p.row_stride is not None}
        return separability_table(caps, p.alg4_L, p.alg4_N, **{**opts, "tokens": kind}, **sample)

    return (
        pd.concat([on(kind) for kind in kinds])
        .sort_values("window", key=lambda w: w.astype(int), kind="stable")
        .reset_index(drop=True)
    )


def provenance_of(caps, p: Preset, options: dict, seconds: dict, *, model: dict, text: dict, **more) -> dict:
    """A run's ``provenance``: the ``model`` and ``text`` records, the preset, windows (their numbers, and their
    first tokens' offsets in the text as ``window_starts``: None for attention given as arrays) and ``options`` (sink
    mode, tokens, precision, seed), versions, the code's hash and ``seconds``; ``more`` adds entries."""
    return {
        "model": model,
        "text": text,
        "preset": p.as_dict(),
        "windows": [c.index for c in caps],
        "window_starts": [getattr(c, "start", None) for c in caps],
        "seed": options["seed"],
        "exclude_sink": options["exclude_sink"],
        "tokens": options["tokens"],
        "precision": options["precision"],
        "normalizer": options.get("normalizer"),
        "bos": bool(caps[0].bos),
        "device": str(caps[0].device),
        "versions": _versions(),
        "code_sha256": cache.code_hash(__name__),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        **more,
    }
