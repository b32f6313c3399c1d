"""All five algorithms in one run, its provenance, merging runs over disjoint windows, and the results cache."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnlimits import rowstats
from attnlimits.experiments.algorithms import (
    critical_n,
    distance_table,
    gradient_table,
    separability_table,
    sink_table,
)
from attnlimits.experiments.presets import Preset, get_preset, validate_grid
from attnlimits.experiments.windows import TOKENS, capture_windows, dtype_of

__all__ = ["TABLES", "Results", "merge", "results", "results_folder", "run"]


# ----------------------------------------------------------------------------------------------------------------
# all five, their provenance, and the results cache
# ----------------------------------------------------------------------------------------------------------------
TABLES = ("distance", "critical_scan", "critical", "separability", "gradient", "sink")


@dataclass
class Results:
    """The tables of one run (or of several merged runs) and their provenance.

    ``distance`` (Alg. 1-2), ``critical_scan`` and ``critical`` (Alg. 3), ``separability`` (Alg. 4), ``gradient``
    (Alg. 5), ``sink`` (attention-sink weight per head); ``provenance``: model, text, preset, seed, versions, wall
    time per algorithm.
    """

    distance: pd.DataFrame
    critical_scan: pd.DataFrame
    critical: pd.DataFrame
    separability: pd.DataFrame
    gradient: pd.DataFrame
    sink: pd.DataFrame
    provenance: dict

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
                f"tokens={p['tokens']}, seed {p['seed']}",
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
        tables["critical"]["critical_N"] = tables["critical"]["critical_N"].astype("Int64")
        return cls(**tables, provenance=json.loads((folder / "provenance.json").read_text()))


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

    import attnlimits

    return {
        "attnlimits": attnlimits.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "pandas": pd.__version__,
        "python": sys.version.split()[0],
    }


def _code_hash() -> str:
    """SHA-256 of the code that computes the results (this package, the kernels, Algorithm 5's measurement): a
    cached result from other code is not reused."""
    from attnlimits import sweeps

    digest = hashlib.sha256()
    files = sorted(Path(__file__).parent.glob("*.py")) + [Path(rowstats.__file__), Path(sweeps.__file__)]
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def run(
    model,
    text,
    preset: str | Preset = "paper",
    *,
    windows: int | None = None,
    first_window: int = 0,
    exclude_sink: bool = False,
    tokens: str = "value",
    precision: str = "float32",
    seed: int = 0,
    progress: bool | None = None,
) -> Results:
    """Algorithms 1-5 (and the sink weights) on ``windows`` windows of ``text`` (the preset's count by default).

    ``precision`` applies to Algorithms 1-3: ``"float32"`` reads the model's own float32 weights and values (it
    agrees with ``"float64"`` within 1e-5 relative: benchmarks/bench_experiments.py measures it on the same
    captures, and the tests check it). Algorithms 4 and 5 always run in float64: N_s/N counts tokens on either
    side of a radius, and float32 moves a few of them (about 4 % relative on a head's mean, measured by the
    benchmark); Algorithm 5's smallest eps needs the precision. The grid is validated before anything is captured.
    Everything runs on the model's device.
    """
    dtype_of(precision)
    p = get_preset(preset)
    count = p.windows if windows is None else windows
    validate_grid(p, max_positions=_max_positions(model), windows=count)
    if tokens not in TOKENS:
        raise ValueError(f"tokens: must be one of {TOKENS}, got {tokens!r}")
    seconds = {}
    started = time.perf_counter()
    caps = capture_windows(
        model, text, length=p.max_length, count=count, first_window=first_window, tokens=tokens, progress=progress
    )
    seconds["capture"] = time.perf_counter() - started
    opts = {"exclude_sink": exclude_sink, "tokens": tokens, "precision": precision, "progress": progress}

    def timed(name, fn, *args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        seconds[name] = time.perf_counter() - t0
        return out

    grid = {p.alg1_N: list(p.alg1_L)}
    for n in p.alg2_N:
        grid.setdefault(n, []).append(p.alg2_L)
    distance = timed("alg1_2", distance_table, caps, grid, **opts)
    scan, critical = timed("alg3", critical_n, caps, p.alg1_L, p.ks_levels, **opts)
    window_range = f"{caps[0].index}-{caps[-1].index}"
    scan["windows"] = window_range
    critical["windows"] = window_range
    separability = timed("alg4", separability_table, caps, p.alg4_L, p.alg4_N, **{**opts, "precision": "float64"})
    gradient = timed("alg5", gradient_table, caps, p.alg5_L, p.alg5_T, p.alg5_eps, seed=seed, progress=progress)
    sink = timed("sink", sink_table, caps, p.max_length)
    seconds["total"] = time.perf_counter() - started
    provenance = {
        "model": _model_provenance(model),
        "text": text.provenance.as_dict() if hasattr(text, "provenance") else {"name": "string", "sha256": _sha(text)},
        "preset": p.as_dict(),
        "windows": [c.index for c in caps],
        "seed": seed,
        "exclude_sink": exclude_sink,
        "tokens": tokens,
        "precision": precision,
        "device": str(caps[0].layers[0].q.device),
        "versions": _versions(),
        "code_sha256": _code_hash(),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
    }
    return Results(distance, scan, critical, separability, gradient, sink, provenance)


def _max_positions(model) -> int | None:
    from attnlimits import models

    return models.facts(model).get("max_positions")


def _model_provenance(model) -> dict:
    prov = getattr(model, "provenance", None)
    if prov is not None:
        return prov.as_dict()
    return {"model_id": type(model).__name__, "sha256": "unrecorded (a bare torch module)"}


def _sha(text: str) -> str:
    return hashlib.sha256(str(text).encode()).hexdigest()


def results_folder(
    model,
    text,
    preset: str | Preset = "paper",
    *,
    exclude_sink: bool = False,
    tokens: str = "value",
    precision: str = "float32",
    root=None,
) -> Path:
    """Where :func:`results` caches a run: ``<root>/<model>/<text>/<preset>[-options]``.

    ``root``: ``$ATTNLIMITS_RESULTS``, else the ``results`` folder of the book's checkout (git-ignored), else the
    user cache.
    """
    if root is None:
        root = os.environ.get("ATTNLIMITS_RESULTS")
    if root is None:
        checkout = next(
            (
                d
                for d in Path(__file__).resolve().parents
                if (d / "pyproject.toml").is_file() and (d / "_toc.yml").is_file()
            ),
            None,
        )
        if checkout is not None:
            root = checkout / "results"
        else:
            from attnlimits import provenance

            root = provenance.cache_dir() / "results"
    model_name = _model_provenance(model)["model_id"].replace("/", "--")
    text_name = text.provenance.name if hasattr(text, "provenance") else "string-" + _sha(text)[:12]
    name = get_preset(preset).name + ("-no-sink" if exclude_sink else "") + ("" if tokens == "value" else f"-{tokens}")
    name += "" if precision == "float32" else f"-{precision}"
    return Path(root) / model_name / text_name / name


def results(
    model,
    text,
    preset: str | Preset = "paper",
    *,
    exclude_sink: bool = False,
    tokens: str = "value",
    precision: str = "float32",
    seed: int = 0,
    root=None,
    progress: bool | None = None,
) -> Results:
    """The results of :func:`run` from the cache when the same model, text, preset, options and code produced
    them, else computed now and cached (so a test run computes once and the book build reuses the numbers)."""
    folder = results_folder(
        model, text, preset, exclude_sink=exclude_sink, tokens=tokens, precision=precision, root=root
    )
    p = get_preset(preset)
    try:
        cached = Results.load(folder)
    except (FileNotFoundError, ValueError, KeyError, json.JSONDecodeError):
        cached = None
    if cached is not None:
        prov = cached.provenance
        same = (
            prov.get("model", {}).get("sha256") == _model_provenance(model).get("sha256")
            and prov.get("text", {}).get("sha256")
            == (text.provenance.sha256 if hasattr(text, "provenance") else _sha(text))
            and prov.get("preset") == json.loads(json.dumps(p.as_dict()))
            and prov.get("seed") == seed
            and prov.get("code_sha256") == _code_hash()
            and prov.get("windows") == list(range(p.windows))
        )
        if same:
            return cached
    res = run(
        model, text, p, exclude_sink=exclude_sink, tokens=tokens, precision=precision, seed=seed, progress=progress
    )
    res.save(folder)
    return res
