"""The ``attnlimits`` command.

    attnlimits check [--json] [--trials N] [--seed S] [--only ID[,ID...]]...

runs every registered numerical check of :mod:`attnlimits.theory.checks` (or, with ``--only``, the checks with those
ids, e.g. ``cor3-printed``) and prints one row per bound (or, with ``--json``, a list of records
``{id, bound, statement, trials, violations, worst_ratio, verdict, expected}``). The exit status is 0 exactly when
every bound behaves as the book says: zero violations for the bounds it proves, at least one for the bound it
refutes (Corollary 3 as printed); otherwise 1. Bad arguments, and unknown ids, exit with status 2.

    attnlimits analyze --out DIR [--force] [--model NAME_OR_PATH] [--text NAME_OR_PATH] [--preset NAME]
                       [--windows K] [--first-window I] [--device cpu|cuda] [--exclude-sink]
                       [--precision float32|float64] [--seed S] [--jobs J]

runs the paper's Algorithms 1-5 on every head of a causal language model and writes their tables (CSV),
``provenance.json``, the figures (PNG and SVG) and a one-page report of the run (``report.html``, self-contained,
and ``report.md``: :mod:`attnlimits.reporting.run_page`) into DIR. Runs over disjoint window ranges
(``--first-window``) write tables that concatenate into the result of one run (:func:`attnlimits.experiments.merge`).
Bad grids and arguments, and a DIR that cannot be written (a file, an unwritable place, a non-empty folder without
``--force``), exit with status 2 before any model is loaded. DIR appears only complete: everything is written into a
temporary sibling folder that is renamed into place at the end; an error or Ctrl-C (exit status 130) leaves DIR as
it was. Progress goes to stderr: a bar on a terminal, else one line per step. ``--jobs J`` runs the windows'
per-layer work in J workers (-1: one per core) that share the machine's cores; the results are the same for any J.

    attnlimits analyze --out DIR --lengths L1,L2,... [--rows R] [--preset reduced|full|quick] [...]

runs the long-context study instead (:mod:`attnlimits.studies.long_context`, chapter 35): the paper's quantities at
every
length up to the model's context on ``R`` sampled query rows per length, with the model's own SDPA attention in the
capture; it writes ``long_stats.csv``, ``long_critical.csv``, ``long_claims.csv``, ``long_summary.csv``,
``long_exactness.csv``, ``long_provenance.json``, the figures and the report. ``--rows`` alone (or ``--preset
full``) runs it at the preset's lengths. Lengths beyond the model's context or the text are refused with status 2.

    attnlimits results [--study NAME[,NAME...]] [--preset NAME] [--jobs J] [--progress | --quiet]
    attnlimits results --check
    attnlimits results --audit [--budget SECONDS] [--seed S] [--all] [--report PATH]

computes the book's results cache (what ``make results`` runs): every study of the pipeline
(:mod:`attnlimits.reporting.book_results`: ``experiments``, ``training``, ``alternatives``, ``models``,
``long-context``, ``claims``), or those named, in the pipeline's order; a study whose cache entry is current is read
back, not recomputed. Each study uses its own default preset (the one the book reads), or with ``--preset`` the
preset named, which every chosen study must have. ``--jobs J`` runs the experiments' windows in J workers. One line
per study (its preset, wall time and where its results lie) goes to stdout, progress to stderr (none with
``--quiet``). An unknown study, or a preset a chosen study lacks, exits with status 2 before anything is loaded.
At the book's own presets it then ships what the chapters read (:mod:`attnlimits.infra.shipping`): the shards that
are not current are written under ``results/`` and recorded in its manifest. ``--check`` computes nothing and says
whether the shipped results are current (0), stale (1) or corrupt (2); ``--audit`` recomputes a seeded sample of
them in an empty cache and compares (0 when they agree, 1 when not).

Subcommands are registered in :func:`build_parser` through ``_add_<name>(subparsers)`` helpers, each setting
``func`` to a handler ``(args) -> int``.
``main(argv)`` returns the exit code instead of exiting, so tests call it in-process; ``python -m attnlimits.cli``
works too.

One concept, one module (over 600 lines): the command line, its four subcommands' argument parsing and
dispatch to the library, which does the computing.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["build_parser", "main"]


def _int_at_least(minimum: int):
    """An argparse type: an integer >= ``minimum``, with a message saying what was allowed."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


def _lengths(text: str) -> list[int]:
    """An argparse type: comma-separated increasing integers >= 2 (``1024,2048,4096``)."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, e.g. 1024,2048, got {text!r}") from None
    if any(v < 2 for v in values) or values != sorted(set(values)):
        raise argparse.ArgumentTypeError(f"must be increasing integers >= 2 without repeats, got {text!r}")
    return values


def _jobs(text: str) -> int:
    """An argparse type: a number of workers, an integer >= 1 or -1 for one per core (joblib's convention)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, or -1 for every core, got {text!r}") from None
    if value < 1 and value != -1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, or -1 for every core, got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**63), got {text!r}") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**63), got {value}")
    return value


def _table(verdicts, elapsed: float) -> str:
    """A plain-text table: one row per bound, then the total run time."""
    header = ("id", "bound", "trials", "violations", "worst ratio", "expected", "ok", "verdict")
    rows = [
        (
            v.id,
            v.bound,
            str(v.trials),
            str(v.violations),
            f"{v.worst_ratio:.4g}",
            v.expected,
            "✓" if v.as_expected else "✗",
            v.verdict,
        )
        for v in verdicts
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    right = {2, 3, 4}

    def fmt(row):
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False))]
        return "  ".join([*cells, row[-1]])

    lines = [fmt(header), "  ".join("-" * w for w in widths) + "  " + "-" * 7, *map(fmt, rows)]
    n_ok = sum(v.as_expected for v in verdicts)
    lines.append("")
    lines.append(f"{n_ok}/{len(verdicts)} bounds as the book claims; total run time {elapsed:.1f} s")
    return "\n".join(lines)


def _check_ids(values: list[str] | None) -> list[str] | None:
    """The ids given to ``--only`` (repeatable, comma-separated), or None for every check."""
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _run_check(args) -> int:
    from attnlimits.theory import checks

    try:
        only = checks.select(_check_ids(args.only)) if args.only else None
    except checks.UnknownCheckError as e:
        print(f"attnlimits check: error: {e}", file=sys.stderr)
        return 2
    if args.only and not only:
        print(f"attnlimits check: error: --only names no check; valid ids: {', '.join(checks.CHECKS)}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    verdicts = checks.run_all(trials=args.trials, seed=args.seed, only=only)
    elapsed = time.perf_counter() - start
    records = [{"id": v.id, **v.record()} for v in verdicts]
    text = json.dumps(records, indent=2, ensure_ascii=False) if args.json else _table(verdicts, elapsed)
    _print(text)
    return 0 if all(v.as_expected for v in verdicts) else 1


def _print(text: str) -> None:
    """Print, tolerating a reader that closes the pipe early (``attnlimits check --json | head``)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at interpreter exit


def _add_check(subparsers) -> None:
    p = subparsers.add_parser(
        "check",
        help="numerically check every bound of the book and print a verdict per bound",
        description="Run every registered check (random trials + adversarial search) and print one row per bound. "
        "Exit status 0 when every bound behaves as the book claims, 1 otherwise.",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list of records instead of a table")
    p.add_argument(
        "--trials",
        type=_positive_int,
        default=2000,
        metavar="N",
        help="random trials per check (integer >= 1; default 2000)",
    )
    p.add_argument("--seed", type=_seed, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument(
        "--only",
        action="append",
        metavar="ID",
        help="run only the check with this id (repeatable, or comma-separated: "
        "--only cor3-printed,thm2-upper); an unknown id lists the valid ones",
    )
    p.set_defaults(func=_run_check)


def _out_error(out: Path, force: bool) -> str | None:
    """Why ``--out`` cannot receive the results, or None when it can; checked before any model is loaded.

    ``out`` must be a folder or not exist yet; an existing non-empty folder needs ``force``; the nearest existing
    folder above it must accept a new folder (tried for real: permissions alone do not tell, e.g. under /proc).
    """
    if not out.name:
        return f"--out: {out} names no folder that could be created"
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            return f"--out: {out} is an existing file, not a folder"
        try:
            nonempty = any(out.iterdir())
        except OSError as err:
            return f"--out: {out} cannot be read ({err.strerror})"
        if nonempty and not force:
            return f"--out: {out} is a non-empty folder; pass --force to replace it"
    base = out.parent
    while not base.exists():
        base = base.parent
    if not base.is_dir():
        return f"--out: cannot create {out}: {base} is a file, not a folder"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=f".{out.name}.probe-", dir=base))
    except OSError as err:
        return f"--out: cannot create {out}: no folder can be written in {base} ({err.strerror})"
    return None


def _write_into_place(out: Path, write) -> None:
    """``write(folder)`` into a temporary sibling of ``out``, then rename it to ``out``, replacing an existing
    folder only once the new one is complete. On any error or interrupt, nothing new is left behind: the partial
    folder, and the parents created for it, are removed, and a folder being replaced is put back."""
    created = [p for p in [out.parent, *out.parent.parents] if not p.exists()]
    partial = out.parent / f".{out.name}.partial-{os.getpid()}"
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        partial.mkdir()
        write(partial)
        if out.exists():
            out.rename(old)
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        if old.exists() and not out.exists():
            old.rename(out)
        for parent in created:  # deepest first
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise
    shutil.rmtree(old, ignore_errors=True)


def _long_study(args) -> bool:
    """Whether ``analyze`` runs the long-context study: ``--lengths`` or ``--rows``, or a preset only it has."""
    from attnlimits import experiments

    return args.lengths is not None or args.rows is not None or (args.preset not in (None, *experiments.PRESETS))


def _run_long(args, out: Path) -> int:
    """``analyze`` with ``--lengths`` / ``--rows``: the long-context study of :mod:`attnlimits.studies.long_context`."""
    import matplotlib

    matplotlib.use("Agg")
    from attnlimits import models
    from attnlimits.models import texts
    from attnlimits.reporting import run_page
    from attnlimits.studies import long_context

    if args.exclude_sink or args.first_window or args.jobs != 1 or args.precision != "float32":
        print(
            "attnlimits analyze: error: --exclude-sink, --first-window, --jobs and --precision apply to Algorithms "
            "1-5, not to the long-context study (--lengths, --rows)",
            file=sys.stderr,
        )
        return 2
    try:
        model = models.load(args.model, device=args.device, allow_fallback=True if args.allow_fallback else None)
        text = texts.load(args.text)
        res = long_context.run(
            model,
            text,
            args.preset or "reduced",
            lengths=args.lengths,
            rows=args.rows,
            windows=args.windows,
            seed=args.seed,
            progress="lines",
        )
    except (models.ModelUnavailableError, FileNotFoundError, ValueError) as err:
        print(f"attnlimits analyze: error: {err}", file=sys.stderr)
        return 2

    _write_into_place(out, lambda folder: run_page.write_long(res, folder, command=args.command_line))
    p = res.provenance
    _print(
        f"wrote {out}: report.html, report.md, long_stats.csv, long_critical.csv, long_exactness.csv, "
        "window_summary.csv, long_claims.csv, long_summary.csv, long_provenance.json, "
        f"figures\nlengths {', '.join(map(str, p['preset']['lengths']))}, {p['preset']['rows']} rows each, "
        f"windows {p['windows']}\nwall time {p['seconds']['total']:.1f} s (capture {p['seconds']['capture']:.1f} s), "
        f"peak memory {p['peak_memory_gb']:.2f} GB"
    )
    return 0


def _grid_problem(args, long: bool) -> str | None:
    """Why the preset (and windows) cannot run, or None; checked before any model is loaded."""
    from attnlimits import experiments
    from attnlimits.studies import long_context

    if long:
        if args.normalizer is not None:
            return (
                "--normalizer: the long-context study (--lengths, --rows) already reads every normaliser of the "
                "paper's family on the same logits; give --normalizer without --lengths and --rows"
            )
        if (args.preset or "reduced") not in long_context.PRESETS:
            return (
                f"--preset: the long-context study (--lengths, --rows) has the presets "
                f"{', '.join(long_context.PRESETS)}, got {args.preset!r}"
            )
        return None
    try:
        experiments.validate_grid(experiments.get_preset(args.preset or "paper"), windows=args.windows)
    except ValueError as err:
        return str(err)
    return None


def _run_analyze(args) -> int:
    from attnlimits import experiments, models
    from attnlimits.experiments import paper_claims
    from attnlimits.infra.ks import KS_LEVEL
    from attnlimits.models import texts
    from attnlimits.reporting import run_page

    out = Path(os.path.abspath(args.out))
    long = _long_study(args)
    problem = _grid_problem(args, long) or _out_error(out, args.force)
    if problem:
        print(f"attnlimits analyze: error: {problem}", file=sys.stderr)
        return 2
    if long:
        try:
            return _run_long(args, out)
        except KeyboardInterrupt:
            print(f"attnlimits analyze: interrupted; {out} left as it was", file=sys.stderr)
            return 130
    preset = experiments.get_preset(args.preset or "paper")
    try:
        try:
            model = models.load(args.model, device=args.device, allow_fallback=True if args.allow_fallback else None)
        except (models.ModelUnavailableError, FileNotFoundError, ValueError) as err:
            print(f"attnlimits analyze: error: {err}", file=sys.stderr)
            return 2
        text = texts.load(args.text)
        res = experiments.run(
            model,
            text,
            preset,
            windows=args.windows,
            first_window=args.first_window,
            exclude_sink=args.exclude_sink,
            precision=args.precision,
            seed=args.seed,
            progress="lines",
            n_jobs=args.jobs,
            normalizer=args.normalizer,
        )

        _write_into_place(out, lambda folder: run_page.write(res, folder, command=args.command_line))
    except KeyboardInterrupt:
        print(f"attnlimits analyze: interrupted; {out} left as it was", file=sys.stderr)
        return 130
    crit = res.critical[res.critical.reading == "E"].dropna(subset=["critical_N"])
    lines = [
        f"wrote {out}: report.html, report.md, "
        f"{', '.join(f'{t}.csv' for t in (*experiments.TABLES, *paper_claims.TABLES))}, provenance.json, figures",
        f"critical N (KS level {KS_LEVEL:g}): "
        + ", ".join(f"L={r.L}: {r.critical_N}" for r in crit[crit.ks_level == KS_LEVEL].itertuples()),
        f"wall time {res.provenance['seconds']['total']:.1f} s",
    ]
    _print("\n".join(lines))
    return 0


def _add_analyze(subparsers) -> None:
    from attnlimits.core.normalizers import NORMALIZERS
    from attnlimits.experiments import PRESETS
    from attnlimits.studies import long_context

    p = subparsers.add_parser(
        "analyze",
        help="run the paper's Algorithms 1-5 on every head of a model and write tables and figures",
        description="Capture consecutive windows of a text, run Algorithms 1-5 on every layer and head, and write "
        "the CSV tables, provenance.json, the figures (PNG, SVG) and a one-page report (report.html, report.md) "
        "into --out.",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="folder for the tables and figures: created, or replaced with --force, and only once the run is "
        "complete (checked writable before the model is loaded)",
    )
    p.add_argument("--force", action="store_true", help="replace --out when it is an existing non-empty folder")
    p.add_argument(
        "--model",
        default=None,
        metavar="NAME_OR_PATH",
        help="Hugging Face id, local directory, .gguf file or 'fallback' (default: $ATTNLIMITS_MODEL, "
        "else gpt2, else the offline fallback); a named model that cannot be loaded is an error",
    )
    p.add_argument(
        "--allow-fallback",
        action="store_true",
        help="run on the offline fallback when --model cannot be loaded (by default only gpt2 falls back)",
    )
    p.add_argument(
        "--text",
        default=None,
        metavar="NAME_OR_PATH",
        help="'war-and-peace', 'pydoc-topics' or a UTF-8 file (default: $ATTNLIMITS_TEXT, else War and "
        "Peace, else the offline fallback)",
    )
    p.add_argument(
        "--preset",
        choices=list(dict.fromkeys([*PRESETS, *long_context.PRESETS])),
        default=None,
        metavar="NAME",
        help=f"the grids of Algorithms 1-5: {', '.join(PRESETS)} (default: paper); with --lengths or --rows, "
        f"the long-context study's: {', '.join(long_context.PRESETS)} (default: reduced; full: up to the model's "
        "context)",
    )
    p.add_argument(
        "--lengths",
        type=_lengths,
        default=None,
        metavar="L1,L2,...",
        help="run the long-context study at these lengths (increasing, up to the model's context and the text), "
        "e.g. 1024,2048,4096,8192",
    )
    p.add_argument(
        "--rows",
        type=_positive_int,
        default=None,
        metavar="R",
        help="query rows sampled per length in the long-context study (default: the preset's; every row when "
        "R >= L); implies the long-context study",
    )
    p.add_argument(
        "--windows", type=_positive_int, default=None, metavar="K", help="number of windows (default: the preset's)"
    )
    p.add_argument(
        "--first-window",
        type=_non_negative_int,
        default=0,
        metavar="I",
        help="index of the first window (default 0); disjoint ranges merge into one result",
    )
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where the model and the work run")
    p.add_argument("--exclude-sink", action="store_true", help="drop token 0 from selection and comparison")
    p.add_argument(
        "--normalizer",
        choices=list(NORMALIZERS),
        default=None,
        metavar="NAME",
        help="swap this normaliser in for softmax on the model's own logits, in every algorithm: "
        f"{', '.join(NORMALIZERS)} (default: the model's softmax)",
    )
    p.add_argument(
        "--precision",
        choices=["float32", "float64"],
        default="float32",
        help="arithmetic of Algorithms 1-3 (default float32: agrees with float64 within 1e-5 relative)",
    )
    p.add_argument("--seed", type=_seed, default=0, metavar="S", help="seed of Algorithm 5's directions (default 0)")
    p.add_argument(
        "--jobs",
        type=_jobs,
        default=1,
        metavar="J",
        help="run the windows' per-layer work in J parallel workers, -1 for one per core (default 1); the J "
        "workers split the machine's cores between them, and the results are identical for any J",
    )
    p.set_defaults(func=_run_analyze)


def _run_models(args) -> int:
    if not args.compute:
        from attnlimits.models import registry

        _print(f"{'NAME':<12} {'LABEL':<13} {'HERE':<4} DESCRIPTION (and why it is or is not here)")
        for entry in registry.MODELS:
            present, why = entry.present()
            _print(f"{entry.name:<12} {entry.label:<13} {'yes' if present else 'no':<4} {entry.description}")
            _print(f"{'':<30}{why}")
        return 0
    from attnlimits.experiments.presets import get_preset
    from attnlimits.studies import several_models

    try:
        preset = get_preset(args.preset)
    except ValueError as e:
        print(f"attnlimits models: error: --preset: {e}", file=sys.stderr)
        return 2
    manifest = several_models.compute(preset=preset, n_jobs=-1)
    for e in manifest["models"]:
        done = f"{e['computed_seconds']:.1f} s" if e["present"] else f"not run: {e['reason']}"
        _print(f"{e['label']:<28} {done}")
    _print(f"manifest: {several_models.manifest_path(preset)}")
    return 0


def _add_models(subparsers) -> None:
    p = subparsers.add_parser(
        "models",
        help="list the named models and whether each loads here, or run the experiments on all of them",
        description="Without --compute: list the named models (name, label, whether its files are on this "
        "machine, description) without loading any weights. With --compute: run Algorithms 1-5 on every model "
        "that loads and on its four controls (untrained, entropy-matched, shuffled, the second text), for the "
        "several-models chapter.",
    )
    p.add_argument(
        "--compute", action="store_true", help="run the experiments on every model that loads (minutes to hours)"
    )
    p.add_argument(
        "--preset",
        default="reduced",
        metavar="NAME",
        help="with --compute: the experiments' grids, 'reduced' (the book's build; default) or 'paper'",
    )
    p.set_defaults(func=_run_models)


def _studies(text: str) -> list[str]:
    """An argparse type: comma-separated names of the pipeline's studies (``experiments,training``)."""
    from attnlimits.reporting import book_results

    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"names no study; the studies are {', '.join(book_results.STUDIES)}")
    try:
        book_results.select(names)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return names


def _run_results(args) -> int:
    from attnlimits.reporting import book_results

    if args.check:
        return _check_results()
    if args.audit:
        return _audit_results(args)
    studies = book_results.select([n for names in args.study for n in names] if args.study else None)
    presets, problems = [], []
    for study in studies:
        try:
            presets.append(study.preset(args.preset))
        except ValueError as err:
            problems.append(str(err))
    if problems:
        where = "--preset: " if args.preset is not None else ""
        print(f"attnlimits results: error: {where}{'; '.join(dict.fromkeys(problems))}", file=sys.stderr)
        return 2
    progress = "lines" if args.progress else False
    if args.progress:
        for study, preset in zip(studies, presets, strict=True):
            print(f"[attnlimits] results: {study.name} ({preset}): {study.description}", file=sys.stderr, flush=True)
    from attnlimits.infra import shipping

    started = time.perf_counter()
    chosen = list(zip(studies, presets, strict=True))
    say = functools.partial(print, file=sys.stderr, flush=True)
    shards = book_results.shards([(s, p) for s, p in chosen if p == s.preset()])  # only the book's presets ship
    # the studies shipped as whole results-cache entries first: shipping computes what is stale (from an empty
    # cache, timed) and puts every shipped entry into the results cache, where their parts then find them
    whole = [s for s in shards if shipping.ships_entries(s)]
    try:
        if whole:
            written = shipping.ship(whole, n_jobs=args.jobs, say=say if progress else None)
            shipping.restore(whole)
            _print(f"{len(written)} of {len(whole)} entry shards computed and shipped")
        done = book_results.run(chosen, n_jobs=args.jobs, progress=progress, say=say)
    except KeyboardInterrupt:
        print("attnlimits results: interrupted; the entries written before are kept", file=sys.stderr)
        return 130
    for study, preset, where, seconds in done:
        _print(f"{study.name:<13} {preset:<8} {seconds:8.1f} s  {where}")
    _print(f"{len(studies)} studies current in {time.perf_counter() - started:.1f} s")
    if shards:
        t0 = time.perf_counter()
        written = shipping.ship(shards, n_jobs=args.jobs, say=say if progress else None)
        _print(f"{len(written)} shards shipped under {shipping.shipped_root()} in {time.perf_counter() - t0:.1f} s")
    return 0


def _check_results() -> int:
    """``attnlimits results --check``: whether the shipped results are current and intact (0, 1 stale, 2 corrupt)."""
    from attnlimits.infra import shipping
    from attnlimits.reporting import book_results

    shards = book_results.shards()
    report = shipping.check(shards)
    for line in report.lines:
        _print(line)
    words = {0: "current", 1: "STALE: run make results and commit results/ with the code", 2: "CORRUPT or missing"}
    _print(f"{len(shards)} shipped shards under {shipping.shipped_root()}: {words[report.status]}")
    return report.status


def _pin_kernels(manifest: dict) -> int | None:
    """Run the audit again in a process pinned to the kernel path the shipped results were computed on (torch's
    ``ATEN_CPU_CAPABILITY``, read when torch starts), so that its numbers repeat; its exit status, or None when
    this process already runs it (or was pinned already: a CPU without that path audits on its own)."""
    wanted = (manifest.get("recomputed") or {}).get("cpu_capability")
    from attnlimits.infra import shipping

    if wanted is None or wanted == shipping.cpu_capability() or os.environ.get("ATTNLIMITS_AUDIT_PINNED"):
        return None
    env = dict(os.environ, ATEN_CPU_CAPABILITY=wanted.lower(), ATTNLIMITS_AUDIT_PINNED="1")
    print(f"[attnlimits] audit: pinned to the {wanted} kernels the shipped results were computed on", file=sys.stderr)
    return subprocess.run([sys.executable, "-m", "attnlimits.cli", *sys.argv[1:]], env=env).returncode


def _audit_results(args) -> int:
    """``attnlimits results --audit``: recompute a seeded sample of the shipped shards and compare (0 agree, 1 not)."""
    from attnlimits.infra import shipping
    from attnlimits.reporting import book_results

    say = functools.partial(print, file=sys.stderr, flush=True)
    pinned = _pin_kernels(shipping.load_manifest())
    if pinned is not None:
        return pinned
    shards = book_results.shards()
    always = book_results.most_influential()
    options = {"seed": args.seed, "always": always, "every": args.all, "report": args.report, "n_jobs": args.jobs}
    record = shipping.audit(shards, budget=args.budget, say=say, **options)
    bad = [name for name, r in record["shards"].items() if r["failures"]]
    moved = [name for name, r in record["fingerprints"].items() if r != "same"]
    for name in bad:
        for failure in record["shards"][name]["failures"][:5]:
            _print(f"differs: {failure}")
    for name in moved:
        _print(f"fingerprint: {name}: {'; '.join(record['fingerprints'][name])}")
    _print(
        f"audit (seed {record['seed']}): {len(record['shards'])} of {len(shards)} shards recomputed, "
        f"{len(record['shards']) - len(bad)} agree; {len(record['fingerprints']) - len(moved)} of "
        f"{len(record['fingerprints'])} fingerprints the same; {record['seconds']:.0f} s"
        + ("" if args.report is None else f"; {args.report}")
    )
    return 0 if record["ok"] else 1


def _add_results(subparsers) -> None:
    from attnlimits.reporting import book_results

    p = subparsers.add_parser(
        "results",
        help="compute the book's results cache (what `make results` runs); a current entry is read, not recomputed",
        description="Compute every study the book reads into the results cache, in the pipeline's order: "
        + "; ".join(f"{s.name}: {s.description}" for s in book_results.STUDIES.values())
        + ". A study whose entry is current is read back, not recomputed.",
    )
    p.add_argument(
        "--study",
        type=_studies,
        action="append",
        metavar="NAME[,NAME...]",
        help=f"only these studies (repeatable, or comma-separated), run in the pipeline's order: "
        f"{', '.join(book_results.STUDIES)} (default: all)",
    )
    p.add_argument(
        "--preset",
        default=None,
        metavar="NAME",
        help="the preset of every chosen study, each of which must have it (quick: a smoke run of seconds); "
        "default: each study's own (the experiments and the claims: $ATTNLIMITS_EXPERIMENTS_PRESET or paper; "
        "training and alternatives: $ATTNLIMITS_PRESET or reduced; models and long-context: reduced)",
    )
    p.add_argument(
        "--jobs",
        type=_jobs,
        default=1,
        metavar="J",
        help="run the studies' independent parts (each study; each model of the models study) in J worker "
        "processes, longest first, -1 for one per core (default 1: one after the other here); a single part runs its "
        "windows in J threads instead; with --audit, recompute J shards at once (one thread each). The results are "
        "identical for any J",
    )
    action = p.add_mutually_exclusive_group()
    action.add_argument(
        "--check",
        action="store_true",
        help="compute nothing: say whether the shipped results (results/) are current for the code and intact; exit "
        "0 when they are, 1 when some shards are stale (naming what changed: a module, a preset field, a version), "
        "2 when a file is missing or does not match the manifest",
    )
    action.add_argument(
        "--audit",
        action="store_true",
        help="recompute a seeded sample of the shipped shards end to end in an empty cache (at least one of every "
        "study, and the window with the largest influence on a verdict) and compare them with the shipped files; "
        "every window's fingerprint too. Exit 0 when all agree, 1 otherwise",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=360.0,
        metavar="SECONDS",
        help="with --audit: about how many seconds of computation the recomputed shards may take, from the "
        "manifest's recorded times (default 360; with --jobs 2 about half of it passes on 2 cores)",
    )
    p.add_argument(
        "--seed", type=int, default=None, help="with --audit: the sample's seed (default: the checked-out commit)"
    )
    p.add_argument("--all", action="store_true", help="with --audit: recompute every shard (hours)")
    p.add_argument("--report", default=None, metavar="PATH", help="with --audit: write the record as JSON to PATH")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument(
        "--progress", dest="progress", action="store_true", default=True, help="report progress on stderr (default)"
    )
    shown.add_argument("--quiet", dest="progress", action="store_false", help="no progress, only the summary lines")
    p.set_defaults(func=_run_results)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser; each subcommand adds itself with a ``_add_<name>(subparsers)`` helper."""
    parser = argparse.ArgumentParser(
        prog="attnlimits",
        description="Tools of the book 'The Limits of Softmax Attention'.",
    )
    from attnlimits import __version__

    parser.add_argument("--version", action="version", version=f"attnlimits {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_check(subparsers)
    _add_analyze(subparsers)
    _add_results(subparsers)
    _add_models(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the subcommand and return its exit code.

    Invalid arguments make argparse print a usage message and raise ``SystemExit(2)``.
    """
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    args.command_line = shlex.join(["attnlimits", *argv])  # shown in the report of the run
    # argparse (Python < 3.12) takes a bare "--" as an option's value (`--seed=--`) and stores an empty list
    # without calling the option's type: refuse it here, as the type would have.
    for name, value in vars(args).items():
        if isinstance(value, list) and (value == [] or [] in value):
            parser.error(f"argument --{name.replace('_', '-')}: expected one value, got '--'")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
