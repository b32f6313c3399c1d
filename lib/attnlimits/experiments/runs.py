"""All five algorithms in one run, its provenance, merging runs over disjoint windows, and the results cache."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnlimits import cache, provenance, uncertainty
from attnlimits.experiments.algorithms import (
    CRITICAL_READINGS,
    GRADIENT_COLUMNS,
    SAMPLE_STRIDE,
    critical_n,
    distance_table,
    gradient_table,
    separability_table,
    sink_table,
)
from attnlimits.experiments.presets import Preset, get_preset, validate_grid
from attnlimits.experiments.windows import TOKENS, WindowCapture, capture_windows, check_jobs, dtype_of

__all__ = ["TABLES", "Results", "compute", "merge", "provenance_of", "results", "results_folder", "run", "run_arrays"]


# ----------------------------------------------------------------------------------------------------------------
# all five, their provenance, and the results cache
# ----------------------------------------------------------------------------------------------------------------
TABLES = ("distance", "critical_scan", "critical", "critical_heads", "separability", "gradient", "sink")
#: Bootstrap draws over windows behind every interval of a run (``critical_N_lo``, ``critical_N_hi``).
RESAMPLES = 1000


@dataclass
class Results:
    """The tables of one run (or of several merged runs) and their provenance.

    ``distance`` (Alg. 1-2, every reading of the expectation under both countings), ``critical_scan``,
    ``critical`` (with its bootstrap interval over windows) and ``critical_heads`` (each window's per-head means at
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
        p, t = self.preset, self._counted(counting)
        return t[(t.N == p.alg1_N) & t.L.isin(p.alg1_L)]

    def alg4(self, tokens: str = "value") -> pd.DataFrame:
        """Algorithm 4's rows of :attr:`separability` measured on one kind of ``tokens`` (``"value"``: the heads'
        values, Figure 3 as the book reads it; ``"embedding"``: the input token embeddings)."""
        t = self.separability
        if tokens not in set(t.tokens):
            raise ValueError(f"tokens: must be one of {sorted(set(t.tokens))}, got {tokens!r}")
        return t[t.tokens == tokens]

    def alg2(self, counting: str = "visible") -> pd.DataFrame:
        """Algorithm 2's rows of :attr:`distance`: every ``alg2_N`` at the fixed ``alg2_L`` (Figure 2b), under one
        ``counting``."""
        p, t = self.preset, self._counted(counting)
        return t[(t.L == p.alg2_L) & t.N.isin(p.alg2_N)]

    def _counted(self, counting: str) -> pd.DataFrame:
        t = self.distance
        if counting not in set(t.counting):
            raise ValueError(f"counting: must be one of {sorted(set(t.counting))}, got {counting!r}")
        return t[t.counting == counting]

    def g(self, eps: float | None = None, scaling: str = "model") -> pd.DataFrame:
        """Algorithm 5's rows of :attr:`gradient` at one ``eps`` (default: the smallest) and logit ``scaling``
        (``"model"``: the logits the model's softmax sees; ``"none"``: raw q.k)."""
        t = self.gradient
        if t.empty:
            why = self.provenance.get("absent", {}).get("gradient", "its table is empty")
            raise ValueError(f"gradient: this run has no Algorithm 5 table: {why}")
        eps = float(t.eps.min()) if eps is None else eps
        if scaling not in set(t.logit_scaling):
            raise ValueError(f"scaling: must be one of {sorted(set(t.logit_scaling))}, got {scaling!r}")
        if not (t.eps == eps).any():
            raise ValueError(f"eps: must be one of {sorted(set(t.eps))}, got {eps!r}")
        return t[(t.logit_scaling == scaling) & (t.eps == eps)]

    def g_max(self, eps: float | None = None, scaling: str = "model") -> pd.Series:
        """Figure 4's curve: per T, the largest g over every head and window, at ``eps`` and ``scaling`` (as
        :meth:`g`)."""
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
        for column in ("critical_N", "critical_N_lo", "critical_N_hi"):
            tables["critical"][column] = tables["critical"][column].astype("Int64")
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
    progress: bool | str | None = None,
    n_jobs: int = 1,
    captures: Sequence[WindowCapture] | None = None,
    shared: Results | None = None,
) -> Results:
    """Algorithms 1-5 (and the sink weights) on ``windows`` windows of ``text`` (the preset's count by default).

    ``model``: a :class:`attnlimits.models.LoadedModel`, a transformers model, or a TransformerLens
    ``HookedTransformer`` (captured by :func:`attnlimits.lens.capture_windows`); attention computed elsewhere goes
    to :func:`run_arrays`.

    In the paper's setting the distance table holds every reading of the expectation under both countings of a
    row's tokens, Algorithm 3 searches the critical N of :data:`CRITICAL_READINGS`, and Algorithm 4 runs on the
    values (every row) and on the input token embeddings (its ``tokens`` column; the row sample of
    :func:`attnlimits.experiments.algorithms.sample_rows`); with ``exclude_sink=True`` (the book's
    variant without token 0) the first two keep the book's reconstruction E on the visible tokens and Algorithm 4
    the values.

    ``precision`` applies to Algorithms 1-3: ``"float32"`` reads the model's own float32 weights and values (it
    agrees with ``"float64"`` within 1e-5 relative: benchmarks/bench_experiments.py measures it on the same
    captures, and the tests check it). Algorithms 4 and 5 always run in float64: N_s/N counts tokens on either
    side of a radius, and float32 moves a token across it now and then (a head's mean by up to about 1e-4
    relative, measured by the benchmark: above the 1e-5 of Algorithms 1-3, for a saving of only about 1.4x);
    Algorithm 5's smallest eps needs the precision. The grid is validated before anything is captured.
    Everything runs on the model's device. ``progress``: as :func:`attnlimits.experiments.windows.progress_bar`
    (None: a bar on a terminal only; True: a bar; ``"lines"``: a bar on a terminal, else a line per step).

    ``n_jobs`` (an integer >= 1, or -1 for every core) runs the windows in parallel through joblib
    (:func:`attnlimits.experiments.windows.map_layers`: threads by default, or the backend that
    ``joblib.parallel_config`` sets, e.g. a Dask cluster); the results do not depend on it. ``captures``: the
    windows already captured by :func:`capture_windows` (the same model and text, ``length`` at least the preset's
    longest L, the windows ``first_window..first_window+windows-1``, the same ``tokens``), so that several runs
    (both sink modes, say) share one capture; ``seconds["capture"]`` is then the captures' own time. ``shared``: a
    run of the same model, text, preset, windows and seed (the other sink mode, say) whose tables that do not
    depend on the sink mode, tokens or precision (Algorithm 5's ``gradient`` and the ``sink`` weights) are taken
    as they are instead of computed again (their ``seconds`` are then 0).
    """
    dtype_of(precision)
    check_jobs(n_jobs)
    p = get_preset(preset)
    count = p.windows if windows is None else windows
    validate_grid(p, max_positions=_max_positions(model), windows=count)
    if tokens not in TOKENS:
        raise ValueError(f"tokens: must be one of {TOKENS}, got {tokens!r}")
    if shared is not None:
        _check_shared(shared, model, text, p, list(range(first_window, first_window + count)), seed)
    # Algorithm 4 on the input token embeddings too, in the paper's setting
    embedding = tokens == "value" and not exclude_sink
    started = time.perf_counter()
    if captures is None:
        caps = capture_windows(
            model, text, length=p.max_length, count=count, first_window=first_window, tokens=tokens, progress=progress
        )
        capture_seconds = time.perf_counter() - started
    else:
        caps = _check_captures(captures, p.max_length, count, first_window, tokens, embedding)
        capture_seconds = sum(c.seconds for c in caps)
    options = {"exclude_sink": exclude_sink, "tokens": tokens, "precision": precision, "seed": seed}
    tables, seconds = compute(caps, p, **options, embedding=embedding, progress=progress, n_jobs=n_jobs, shared=shared)
    seconds = {"capture": capture_seconds, **seconds, "total": time.perf_counter() - started}
    return Results(
        **tables,
        provenance=provenance_of(
            caps, p, options, seconds, model=_model_provenance(model), text=_text_provenance(text)
        ),
    )


def compute(
    caps: Sequence[WindowCapture],
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
) -> tuple[dict, dict]:
    """Every table of a run (:data:`TABLES`) on the captures ``caps`` and the seconds each algorithm took.

    What :func:`run` and :func:`attnlimits.experiments.run_arrays` share: ``embedding`` adds Algorithm 4 on the
    input token embeddings; captures without logits (:class:`attnlimits.experiments.arrays.ArrayCapture` of
    weights alone) give an empty ``gradient`` table.
    """
    opts = {
        "exclude_sink": exclude_sink,
        "tokens": tokens,
        "precision": precision,
        "progress": progress,
        "n_jobs": n_jobs,
    }
    seconds = {}

    def timed(name, fn, *args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        seconds[name] = time.perf_counter() - t0
        return out

    # every reading of the expectation and both countings in the paper's setting; the book's variant without token 0
    # keeps the book's reconstruction E on the visible tokens (each further reading costs about as much as E)
    variant = {"readings": ("E",), "countings": ("visible",)} if exclude_sink else {}
    distance = timed("alg1_2", distance_table, caps, p.distance_grid(), seed=seed, **variant, **opts)
    readings = ("E",) if exclude_sink else CRITICAL_READINGS
    scan, critical, heads = timed("alg3", critical_n, caps, p.alg1_L, p.ks_levels, readings=readings, seed=seed, **opts)
    intervals = uncertainty.critical_intervals(heads, p.ks_levels, resamples=RESAMPLES, seed=seed)
    critical = critical.merge(intervals, on=["L", "reading", "ks_level"], how="left", validate="one_to_one")
    window_range = f"{caps[0].index}-{caps[-1].index}"
    scan["windows"] = window_range
    critical["windows"] = window_range
    alg4 = {**opts, "precision": "float64", "seed": seed}

    def alg4_on(kind):  # the embeddings (d_model dimensions) on the stratified row sample of the sampled readings
        stride = SAMPLE_STRIDE if kind == "embedding" else None
        return separability_table(caps, p.alg4_L, p.alg4_N, **{**alg4, "tokens": kind}, stride=stride)

    alg4_tokens = [tokens] + (["embedding"] if embedding else [])
    separability = timed(
        "alg4",
        lambda: (
            pd.concat([alg4_on(kind) for kind in alg4_tokens])
            # window by window (so runs over disjoint windows concatenate to the whole), the values first in each
            .sort_values("window", key=lambda w: w.astype(int), kind="stable")
            .reset_index(drop=True)
        ),
    )
    if shared is not None:
        gradient, sink = shared.gradient, shared.sink
        seconds |= {"alg5": 0.0, "sink": 0.0}
    else:
        if all(getattr(c, "has_logits", True) for c in caps):
            gradient = timed(
                "alg5",
                gradient_table,
                caps,
                p.alg5_L,
                p.alg5_T,
                p.alg5_eps,
                seed=seed,
                progress=progress,
                n_jobs=n_jobs,
            )
        else:
            gradient, seconds["alg5"] = pd.DataFrame(columns=GRADIENT_COLUMNS), 0.0
        sink = timed("sink", sink_table, caps, p.max_length)
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


def provenance_of(caps, p: Preset, options: dict, seconds: dict, *, model: dict, text: dict, **more) -> dict:
    """A run's ``provenance``: the ``model`` and ``text`` records, the preset, windows and ``options`` (sink mode,
    tokens, precision, seed), versions, the code's hash and ``seconds``; ``more`` adds entries."""
    return {
        "model": model,
        "text": text,
        "preset": p.as_dict(),
        "windows": [c.index for c in caps],
        "seed": options["seed"],
        "exclude_sink": options["exclude_sink"],
        "tokens": options["tokens"],
        "precision": options["precision"],
        "bos": bool(caps[0].bos),
        "resamples": RESAMPLES,
        "device": str(caps[0].device),
        "versions": _versions(),
        "code_sha256": cache.code_hash(__name__),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        **more,
    }


def run_arrays(
    weights=None,
    values=None,
    logits=None,
    *,
    embeddings=None,
    mask=None,
    scaling: float | None = None,
    preset: str | Preset = "paper",
    exclude_sink: bool = False,
    precision: str = "float32",
    seed: int = 0,
    tolerance: float | None = None,
    bos: bool = False,
    name: str = "arrays",
    text: str = "arrays",
    progress: bool | str | None = None,
    n_jobs: int = 1,
) -> Results:
    """Algorithms 1-5 (and the sink weights) on attention given as arrays: the tables of :func:`run`.

    ``weights`` ``(W, H, L, L)`` and ``values`` ``(W, H, L, d)`` per layer (torch or numpy; a list, a dict of layer
    numbers, or one array with the layers first), ``logits`` optional (needed by Algorithm 5: without them the
    ``gradient`` table is empty and ``provenance["absent"]`` says why), ``embeddings`` ``(W, L, d_model)``
    optional (Algorithm 4's second reading), ``mask`` inferred unless given: all as
    :func:`attnlimits.experiments.arrays.captures` checks them. On the captures of a model, with its logits, the
    tables equal :func:`run`'s exactly.

    ``preset``'s grids are cut to the arrays' L where they reach beyond it
    (:func:`attnlimits.experiments.arrays.fit_preset`: the preset is then named ``<name>@<L>``); the run reads
    every window given. ``name`` and ``text`` name the model and the text in the provenance (with the SHA-256 of
    the arrays); the other arguments are :func:`run`'s.
    """
    from attnlimits.experiments import arrays

    dtype_of(precision)
    check_jobs(n_jobs)
    started = time.perf_counter()
    caps = arrays.captures(
        weights, values, logits, embeddings=embeddings, mask=mask, scaling=scaling, tolerance=tolerance, bos=bos
    )
    p = arrays.fit_preset(get_preset(preset), caps[0].seq_len)
    validate_grid(p, windows=len(caps))
    options = {"exclude_sink": exclude_sink, "tokens": "value", "precision": precision, "seed": seed}
    embedding = embeddings is not None and not exclude_sink
    tables, seconds = compute(caps, p, **options, embedding=embedding, progress=progress, n_jobs=n_jobs)
    seconds = {"capture": 0.0, **seconds, "total": time.perf_counter() - started}
    absent = {}
    if logits is None:
        absent["gradient"] = arrays.NO_LOGITS
    if not embedding:
        absent["separability (embedding)"] = (
            "the book's variant without token 0 reads the values only" if exclude_sink else "no embeddings were given"
        )
    digest = arrays.arrays_sha256(caps)
    model = {"model_id": name, "sha256": digest, "source": "arrays (attnlimits.experiments.run_arrays)"}
    return Results(
        **tables,
        provenance=provenance_of(
            caps,
            p,
            options,
            seconds,
            model=model,
            text={"name": text, "sha256": f"unrecorded (the tokens behind the arrays {digest[:12]})"},
            absent=absent,
            mask={str(layer): caps[0].window(layer, caps[0].seq_len) or "causal" for layer in caps[0].layer_ids},
        ),
    )


def _check_captures(captures, length: int, count: int, first_window: int, tokens: str, embedding: bool) -> list:
    """The given captures as a list, after checking they are the windows and length this run reads."""
    caps = list(captures)
    if not caps or not all(isinstance(c, WindowCapture) for c in caps):
        raise ValueError("captures: expected a non-empty list of WindowCapture (see capture_windows)")
    indices = [c.index for c in caps]
    wanted = list(range(first_window, first_window + count))
    if indices != wanted:
        raise ValueError(f"captures: the run reads windows {wanted}, the captures hold windows {indices}")
    short = min(c.seq_len for c in caps)
    if short < length:
        raise ValueError(f"captures: the run reads {length} tokens per window, the captures hold {short}")
    if (tokens == "residual") != all(c.residual is not None for c in caps):
        raise ValueError(f"captures: tokens={tokens!r} needs captures made with the same tokens")
    if embedding and any(c.embedding is None for c in caps):
        raise ValueError("captures: Algorithm 4 reads the input token embeddings; capture_windows keeps them")
    return caps


def _check_shared(shared, model, text, preset: Preset, windows: list[int], seed: int) -> None:
    """Raise unless ``shared`` is a run of this model, text, preset, windows and seed."""
    if not isinstance(shared, Results):
        raise ValueError(f"shared: expected a Results (of the other sink mode, say), got {type(shared).__name__}")
    prov = shared.provenance
    text_sha = text.provenance.sha256 if hasattr(text, "provenance") else _sha(text)
    wanted = {
        "model": _model_provenance(model).get("sha256"),
        "text": text_sha,
        "preset": preset.as_dict(),
        "windows": windows,
        "seed": seed,
    }
    found = {
        "model": prov["model"].get("sha256"),
        "text": prov["text"].get("sha256"),
        "preset": prov["preset"],
        "windows": list(prov["windows"]),
        "seed": prov["seed"],
    }
    differ = [k for k in wanted if json.dumps(wanted[k], sort_keys=True) != json.dumps(found[k], sort_keys=True)]
    if differ:
        raise ValueError(f"shared: a run of another {', '.join(differ)} than this run's; its tables cannot be reused")


def _max_positions(model) -> int | None:
    from attnlimits import lens, models

    if lens.is_hooked(model):
        return int(model.cfg.n_ctx)
    return models.facts(model).get("max_positions")


def _model_provenance(model) -> dict:
    from attnlimits import lens

    if lens.is_hooked(model):
        return lens.provenance(model)
    prov = getattr(model, "provenance", None)
    if prov is not None:
        return prov.as_dict()
    return {"model_id": type(model).__name__, "sha256": "unrecorded (a bare torch module)"}


def _text_provenance(text) -> dict:
    return text.provenance.as_dict() if hasattr(text, "provenance") else {"name": "string", "sha256": _sha(text)}


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
    """Where :func:`results` caches a run: ``<root>/<model>/<text>/<preset>[-options]``; a TransformerLens model's
    ``<model>`` is ``transformer-lens--<name>``, apart from the Hugging Face model of the same name.

    ``root``: :func:`attnlimits.provenance.results_root` by default (``$ATTNLIMITS_RESULTS``, else the ``results``
    folder of the book's checkout, git-ignored, else the user cache).
    """
    from attnlimits import lens

    model_name = _model_provenance(model)["model_id"].replace("/", "--")
    model_name = f"transformer-lens--{model_name}" if lens.is_hooked(model) else model_name
    text_name = text.provenance.name if hasattr(text, "provenance") else "string-" + _sha(text)[:12]
    name = get_preset(preset).name + ("-no-sink" if exclude_sink else "") + ("" if tokens == "value" else f"-{tokens}")
    name += "" if precision == "float32" else f"-{precision}"
    return Path(provenance.results_root() if root is None else root) / model_name / text_name / name


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
    progress: bool | str | None = None,
    n_jobs: int = 1,
    captures: Sequence[WindowCapture] | Callable[[], Sequence[WindowCapture]] | None = None,
    shared: Results | None = None,
) -> Results:
    """The results of :func:`run` from the cache when the same model, text, preset, options, seed and code produced
    them, else computed now and cached (so a test run computes once and the book build reuses the numbers).

    The entry (:func:`results_folder`) is keyed by :func:`attnlimits.cache.study_key`: the model's and the text's
    SHA-256, the preset, the options, the windows (all of the preset's), the seed, the code of this module and of
    everything it imports, and the torch version. ``n_jobs`` and ``captures`` only change how a missing entry is
    computed (as in :func:`run`), not what it holds; ``captures`` may also be a function returning them, called
    only when the entry must be computed (``functools.cache`` of :func:`capture_windows` lets both sink modes
    share one capture, and a current cache capture nothing). ``shared`` (as in :func:`run`) does not change what
    the entry holds either: the tables it lends are those the run would compute.
    """
    p = get_preset(preset)
    options = {"exclude_sink": exclude_sink, "tokens": tokens, "precision": precision}
    key = cache.study_key(
        __name__,
        model_sha256=_model_provenance(model).get("sha256"),
        text_sha256=text.provenance.sha256 if hasattr(text, "provenance") else _sha(text),
        preset=p.as_dict(),
        options=options,
        windows=list(range(p.windows)),
        seed=seed,
    )
    return cache.cached(
        results_folder(model, text, p, **options, root=root),
        key,
        compute=lambda: run(
            model,
            text,
            p,
            **options,
            seed=seed,
            progress=progress,
            n_jobs=n_jobs,
            captures=captures() if callable(captures) else captures,
            shared=shared,
        ),
        save=lambda res, folder: res.save(folder),
        load=Results.load,
    )
