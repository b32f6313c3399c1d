"""Runs of Algorithms 1-5: on a model and a text (:func:`run`, captured here), on attention given as arrays
(:func:`run_arrays`), through the results cache (:func:`results`), and one window at a time (:func:`window_results`:
the book's shipped design, :mod:`attnlimits.experiments.shipped`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from attnlimits import models
from attnlimits.core.normalizers import check_normalizer
from attnlimits.experiments.critical_reading import with_intervals
from attnlimits.experiments.presets import Preset, book_preset, get_preset, validate_grid
from attnlimits.experiments.tables import Results, compute, provenance_of
from attnlimits.infra import cache, provenance
from attnlimits.infra.progress import check_jobs
from attnlimits.models import arrays, describing, lens, texts
from attnlimits.models import windows as hf_windows
from attnlimits.models.capturing import TOKENS, Capture, dtype_of

__all__ = [
    "CODE",
    "capture_windows",
    "code",
    "results",
    "results_folder",
    "window_folder",
    "window_results",
    "on_two_texts",
    "run",
    "run_arrays",
    "second_text",
    "second_text_preset",
]

#: The module whose code (with what it imports) computes the experiments' tables; the results cache keys on it and
#: on the capture module of the model (:mod:`attnlimits.models.windows` or :mod:`attnlimits.models.lens`).
CODE = "attnlimits.experiments.tables"


def capture_windows(model, text, **options) -> list[Capture]:
    """The windows of ``text`` captured from ``model``: a Hugging Face model by
    :func:`attnlimits.models.windows.capture_windows`, a TransformerLens ``HookedTransformer`` by
    :func:`attnlimits.models.lens.capture_windows` (the same ``options``: ``length``, ``count``, ``first_window``,
    ``total``, ``tokens``, ``layers``, ``progress``, ``bos``). The windows are ``first_window..first_window +
    count - 1`` of ``total`` windows spread evenly over the whole text (None: ``first_window + count``), each
    capture recording its window's number (``index``) and first token's offset in the text (``start``)."""
    if options.get("tokens", "value") not in TOKENS:
        raise ValueError(f"tokens: must be one of {TOKENS}, got {options['tokens']!r}")
    first = options.get("first_window", 0)
    if isinstance(first, bool) or not isinstance(first, int) or first < 0:
        raise ValueError(f"first_window: must be an integer >= 0, got {first!r}")
    return _capture_module(model).capture_windows(model, text, **options)


def code(model=None) -> tuple[str, str]:
    """The modules the results cache keys a run of ``model`` on (with everything they import): :data:`CODE` and
    the module capturing this kind of model (a Hugging Face model's when ``model`` is None)."""
    return CODE, (hf_windows if model is None else _capture_module(model)).__name__


def _capture_module(model):
    """The module that captures ``model``'s windows; the experiments' cache keys on its code."""
    return lens if lens.is_hooked(model) else hf_windows


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
    captures: Sequence[Capture] | None = None,
    shared: Results | None = None,
    shuffle: int | None = None,
    normalizer: str | None = None,
) -> Results:
    """Algorithms 1-5 (and the sink weights) on ``windows`` windows of ``text`` (the preset's count by default).

    The windows are passages spread evenly over the whole text: a preset of W windows reads window i at text token
    ``i * (n - L) // (W - 1)`` (:func:`attnlimits.models.windows.windows`), and ``first_window`` with ``windows``
    reads the windows ``first_window..first_window + windows - 1`` of that same layout (of ``first_window +
    windows`` windows where that is more than the preset's), so that runs over disjoint ranges merge
    (:func:`attnlimits.experiments.merge`) into what one run over all of them gives. The provenance lists the
    windows' numbers and their offsets in the text (``window_starts``). With the preset's ``row_stride`` every
    algorithm reads a stratified sample of each window's rows (:class:`attnlimits.experiments.Preset`).

    ``model``: a :class:`attnlimits.models.LoadedModel`, a transformers model, or a TransformerLens
    ``HookedTransformer`` (captured by :func:`attnlimits.models.lens.capture_windows`); attention computed elsewhere
    goes
    to :func:`run_arrays`.

    In the paper's setting the distance table holds every reading of the expectation under both countings of a
    row's tokens, Algorithm 3 searches the critical N of :data:`CRITICAL_READINGS`, and Algorithm 4 runs on the
    values (every row) and on the input token embeddings (its ``tokens`` column; the row sample of
    :func:`attnlimits.experiments.row_sample.sample_rows`); with ``exclude_sink=True`` (the book's
    variant without token 0) the first two keep the book's reconstruction E on the visible tokens and Algorithm 4
    the values.

    ``precision`` applies to Algorithms 1-3: ``"float32"`` reads the model's own float32 weights and values (it
    agrees with ``"float64"`` within 1e-5 relative: benchmarks/bench_experiments.py measures it on the same
    captures, and the tests check it). Algorithms 4 and 5 always run in float64: N_s/N counts tokens on either
    side of a radius, and float32 moves a token across it now and then (a head's mean by up to about 1e-4
    relative, measured by the benchmark: above the 1e-5 of Algorithms 1-3, for a saving of only about 1.4x);
    Algorithm 5's smallest eps needs the precision. The grid is validated before anything is captured.
    Everything runs on the model's device. ``progress``: as :func:`attnlimits.infra.progress.progress_bar`
    (None: a bar on a terminal only; True: a bar; ``"lines"``: a bar on a terminal, else a line per step).

    ``n_jobs`` (an integer >= 1, or -1 for every core) runs the windows in parallel through joblib
    (:func:`attnlimits.infra.progress.map_layers`: threads by default, or the backend that
    ``joblib.parallel_config`` sets, e.g. a Dask cluster); the results do not depend on it. ``captures``: the
    windows already captured by :func:`capture_windows` (the same model and text, ``length`` at least the preset's
    longest L, the windows ``first_window..first_window+windows-1`` of the same layout, the same ``tokens``), so
    that several runs (both sink modes, say) share one capture; ``seconds["capture"]`` is then the captures' own
    time. ``shared``: a run of the same model, text, preset, windows and seed (the other sink mode, say) whose
    tables that do not depend on the sink mode, tokens or precision (Algorithm 5's ``gradient`` and the ``sink``
    weights) are taken as they are instead of computed again (their ``seconds`` are then 0). ``shuffle``: None
    reads each window in the text's order; an integer seed reads each window's tokens in a random order (a control:
    the same tokens without their order, :func:`attnlimits.models.windows.windows`), recorded in the provenance.
    ``normalizer``: None reads the model's own softmax weights; a name of
    :data:`attnlimits.core.normalizers.NORMALIZERS` swaps that normaliser in on the model's own masked logits for
    every algorithm (Algorithm 5 perturbs the logits through it), recorded in the provenance.
    """
    dtype_of(precision)
    check_jobs(n_jobs)
    check_normalizer(normalizer)
    p = get_preset(preset)
    count = p.windows if windows is None else windows
    validate_grid(p, max_positions=_max_positions(model), windows=count)
    if tokens not in TOKENS:
        raise ValueError(f"tokens: must be one of {TOKENS}, got {tokens!r}")
    if shared is not None:
        _check_shared(shared, model, text, p, list(range(first_window, first_window + count)), seed, normalizer)
    # Algorithm 4 on the input token embeddings too, in the paper's setting
    embedding = tokens == "value" and not exclude_sink
    started = time.perf_counter()
    if captures is None:
        caps = capture_windows(
            model,
            text,
            length=p.max_length,
            count=count,
            first_window=first_window,
            total=max(p.windows, first_window + count),
            tokens=tokens,
            progress=progress,
            **({} if shuffle is None else {"shuffle": shuffle}),
        )
        capture_seconds = time.perf_counter() - started
    else:
        caps = _check_captures(captures, p.max_length, count, first_window, tokens, embedding)
        capture_seconds = sum(c.seconds for c in caps)
    options = {"exclude_sink": exclude_sink, "tokens": tokens, "precision": precision, "seed": seed}
    if normalizer is not None:
        options["normalizer"] = normalizer
    tables, seconds = compute(caps, p, **options, embedding=embedding, progress=progress, n_jobs=n_jobs, shared=shared)
    seconds = {"capture": capture_seconds, **seconds, "total": time.perf_counter() - started}
    about = {"model": _model_provenance(model), "text": _text_provenance(text)}
    if shuffle is not None:
        about["shuffle"] = shuffle
    return _intervals(Results(**tables, provenance=provenance_of(caps, p, options, seconds, **about)))


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
    :func:`attnlimits.models.arrays.captures` checks them. On the captures of a model, with its logits, the
    tables equal :func:`run`'s exactly.

    ``preset``'s grids are cut to the arrays' L where they reach beyond it
    (:func:`attnlimits.models.arrays.fit_preset`: the preset is then named ``<name>@<L>``); the run reads
    every window given. ``name`` and ``text`` name the model and the text in the provenance (with the SHA-256 of
    the arrays); the other arguments are :func:`run`'s.
    """
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
    return _intervals(
        Results(
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
    )


def _intervals(res: Results) -> Results:
    """``res`` with the bootstrap interval over windows beside each critical N (its ``critical`` table), as the
    analysis reads it now (:func:`attnlimits.experiments.critical_reading.with_intervals`, seeded by the run's
    seed). The results cache stores the tables without it: it is analysis, not computation, so a change to the
    book's statistics recomputes no run."""
    raw = res.critical.drop(columns=["critical_N_lo", "critical_N_hi", "units", "method"], errors="ignore")
    res.critical = with_intervals(raw, res.critical_heads, res.preset.ks_levels, seed=res.provenance["seed"])
    return res


def _raw(res: Results) -> Results:
    """``res`` as the results cache stores it: its ``critical`` table without the intervals :func:`_intervals`
    adds."""
    columns = ["critical_N_lo", "critical_N_hi", "units", "method"]
    return Results(**{**vars(res), "critical": res.critical.drop(columns=columns, errors="ignore")})


def _check_captures(captures, length: int, count: int, first_window: int, tokens: str, embedding: bool) -> list:
    """The given captures as a list, after checking they are the windows and length this run reads."""
    caps = list(captures)
    if not caps or not all(isinstance(c, Capture) for c in caps):
        raise ValueError("captures: expected a non-empty list of Capture (see capture_windows)")
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


def _check_shared(shared, model, text, preset: Preset, windows: list[int], seed: int, normalizer=None) -> None:
    """Raise unless ``shared`` is a run of this model, text, preset, windows, seed and normaliser."""
    if not isinstance(shared, Results):
        raise ValueError(f"shared: expected a Results (of the other sink mode, say), got {type(shared).__name__}")
    prov = shared.provenance
    text_sha = texts.sha256_of(text)
    wanted = {
        "model": _model_provenance(model).get("sha256"),
        "text": text_sha,
        "preset": preset.as_dict(),
        "windows": windows,
        "seed": seed,
        "normalizer": normalizer,
    }
    found = {
        "model": prov["model"].get("sha256"),
        "text": prov["text"].get("sha256"),
        "preset": prov["preset"],
        "windows": list(prov["windows"]),
        "seed": prov["seed"],
        "normalizer": prov.get("normalizer"),
    }
    differ = [k for k in wanted if json.dumps(wanted[k], sort_keys=True) != json.dumps(found[k], sort_keys=True)]
    if differ:
        raise ValueError(f"shared: a run of another {', '.join(differ)} than this run's; its tables cannot be reused")


def _max_positions(model) -> int | None:
    if lens.is_hooked(model):
        return int(model.cfg.n_ctx)
    return models.facts(model).get("max_positions")


def _model_provenance(model) -> dict:
    return lens.provenance(model) if lens.is_hooked(model) else describing.model_record(model)


def _text_provenance(text) -> dict:
    return (
        text.provenance.as_dict()
        if hasattr(text, "provenance")
        else {"name": "string", "sha256": texts.sha256_of(text)}
    )


def results_folder(
    model,
    text,
    preset: str | Preset = "paper",
    *,
    exclude_sink: bool = False,
    tokens: str = "value",
    precision: str = "float32",
    shuffle: int | None = None,
    root=None,
) -> Path:
    """Where :func:`results` caches a run: ``<root>/<model>/<text>/<preset>[-options]``; a TransformerLens model's
    ``<model>`` is ``transformer-lens--<name>``, apart from the Hugging Face model of the same name.

    ``root``: :func:`attnlimits.infra.provenance.results_root` by default (``$ATTNLIMITS_RESULTS``, else the ``results``
    folder of the book's checkout, git-ignored, else the user cache).
    """
    model_name = _model_provenance(model)["model_id"].replace("/", "--")
    model_name = f"transformer-lens--{model_name}" if lens.is_hooked(model) else model_name
    text_name = text.provenance.name if hasattr(text, "provenance") else "string-" + texts.sha256_of(text)[:12]
    name = get_preset(preset).name + ("-no-sink" if exclude_sink else "") + ("" if tokens == "value" else f"-{tokens}")
    name += "" if precision == "float32" else f"-{precision}"
    name += "" if shuffle is None else f"-shuffled{shuffle}"
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
    captures: Sequence[Capture] | Callable[[], Sequence[Capture]] | None = None,
    shared: Results | None = None,
    shuffle: int | None = None,
) -> Results:
    """The results of :func:`run` from the cache when the same model, text, preset, options, seed and code produced
    them, else computed now and cached (so a test run computes once and the book build reuses the numbers).

    The entry (:func:`results_folder`) is keyed by :func:`attnlimits.infra.cache.study_key`: the model's and the text's
    SHA-256, the preset, the options, the windows (all of the preset's), the seed, the code that computes the
    tables (:data:`CODE`: :mod:`attnlimits.experiments.tables` with everything it imports, and the module that
    captures this kind of model), and the torch version. ``n_jobs`` and ``captures`` only change how a missing entry is
    computed (as in :func:`run`), not what it holds; ``captures`` may also be a function returning them, called
    only when the entry must be computed (``functools.cache`` of :func:`capture_windows` lets both sink modes
    share one capture, and a current cache capture nothing). ``shared`` (as in :func:`run`) does not change what
    the entry holds either: the tables it lends are those the run would compute. ``shuffle`` (as in :func:`run`)
    has an entry of its own.
    """
    p = get_preset(preset)
    options = {"exclude_sink": exclude_sink, "tokens": tokens, "precision": precision}
    order = {} if shuffle is None else {"shuffle": shuffle}
    key = cache.study_key(
        code(model),
        model_sha256=_model_provenance(model).get("sha256"),
        text_sha256=texts.sha256_of(text),
        preset=p.as_dict(),
        options=options,
        windows=list(range(p.windows)),
        seed=seed,
        **order,
    )
    return cache.cached(
        results_folder(model, text, p, **options, **order, root=root),
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
            **order,
        ),
        save=lambda res, folder: _raw(res).save(folder),
        load=lambda folder: _intervals(Results.load(folder)),
    )


def window_folder(
    model,
    text,
    preset: str | Preset = "paper",
    window: int = 0,
    *,
    exclude_sink: bool = False,
    precision: str = "float32",
    shuffle: int | None = None,
    root=None,
) -> Path:
    """Where :func:`window_results` caches one window of a run: ``<results_folder>-by-window/window-<i>-of-<W>``
    (W: the preset's windows, whose layout places window i)."""
    p = get_preset(preset)
    opts = {"exclude_sink": exclude_sink, "precision": precision, "shuffle": shuffle}
    folder = results_folder(model, text, p, **opts, root=root)
    return folder.with_name(folder.name + "-by-window") / f"window-{window:02d}-of-{p.windows:02d}"


def window_results(
    model,
    text,
    preset: str | Preset = "paper",
    window: int = 0,
    *,
    exclude_sink: bool = False,
    precision: str = "float32",
    seed: int = 0,
    root=None,
    progress: bool | str | None = None,
    captures: Sequence[Capture] | Callable[[], Sequence[Capture]] | None = None,
    shared: Results | None = None,
    shuffle: int | None = None,
) -> Results:
    """One window of :func:`results`: window ``window`` of the preset's ``windows`` spread over the text, its
    tables computed alone (Algorithm 3 searches that window's own critical N) and cached in
    :func:`window_folder`, keyed as :func:`results` is, on that window alone. The windows of a preset are the
    units the book's intervals resample: each is computed, shipped and audited on its own, and
    :func:`attnlimits.experiments.merge` joins their per-head tables. ``captures`` (or a function returning them)
    holds that one window; ``shared``: the same window's run in the other sink mode (as in :func:`run`);
    ``precision`` and ``shuffle`` (the window's tokens in a seeded random order, an entry of its own): as in
    :func:`run`."""
    p = get_preset(preset)
    if isinstance(window, bool) or not isinstance(window, int) or not 0 <= window < p.windows:
        raise ValueError(f"window: must be an integer in 0..{p.windows - 1} (the preset's windows), got {window!r}")
    options = {"exclude_sink": exclude_sink, "tokens": "value", "precision": precision}
    order = {} if shuffle is None else {"shuffle": shuffle}
    key = cache.study_key(
        code(model),
        model_sha256=_model_provenance(model).get("sha256"),
        text_sha256=texts.sha256_of(text),
        preset=p.as_dict(),
        options=options,
        windows=[window],
        seed=seed,
        **order,
    )
    return cache.cached(
        window_folder(
            model, text, p, window, exclude_sink=exclude_sink, precision=precision, shuffle=shuffle, root=root
        ),
        key,
        compute=lambda: run(
            model,
            text,
            p,
            windows=1,
            first_window=window,
            exclude_sink=exclude_sink,
            precision=precision,
            seed=seed,
            progress=progress,
            captures=captures() if callable(captures) else captures,
            shared=shared,
            **order,
        ),
        save=lambda res, folder: _raw(res).save(folder),
        load=lambda folder: _intervals(Results.load(folder)),
    )


def second_text(model, preset: str | Preset | None = None, **options) -> tuple[Results | None, str]:
    """:func:`results` of ``model`` on the book's second text, the King James Version
    (:func:`attnlimits.models.texts.load` of ``"kjv"``: narrative English, like the paper's novel, that needs no
    network), with ``preset`` (:func:`second_text_preset` by default) and
    :func:`results`'s ``options``: ``(results, "")``, or ``(None, why)`` where the text cannot be read here. It never
    falls back to another text: the comparison would read the first text twice."""
    try:
        text = texts.load(texts.KJV, allow_fallback=False)
    except texts.TextUnavailableError as e:
        return None, f"the second text ({texts.KJV_TITLE}) is not read here: {e}"
    return results(model, text, second_text_preset() if preset is None else preset, **options), ""


def on_two_texts(model, text) -> tuple[list[Results], str]:
    """``model`` on ``text`` and on the second text (:func:`second_text`), both with :func:`second_text_preset`
    (one grid, so that what differs is the text's): ``([first, second], "")``, or ``([], why)`` where the second
    text cannot be read here. Both runs are chapter 34's, read from the cache that ``make results`` fills."""
    second, why = second_text(model)
    if second is None:
        return [], why
    return [results(model, text, second_text_preset()), second], ""


def second_text_preset() -> Preset:
    """The preset the Experiments chapters read on their second text (:func:`second_text`): ``reduced`` (8 windows,
    L <= 256: the run chapter 34 computes for its second-text control, so the book pays for it once) when the book
    reads ``paper``, else the book's own preset (``quick``: a smoke run in seconds)."""
    book = book_preset()
    return get_preset("reduced") if book.name == "paper" else book
