"""The ``attnlimits`` command.

    attnlimits check [--json] [--trials N] [--seed S] [--only ID[,ID...]]...

runs every registered numerical check of :mod:`attnlimits.checks` (or, with ``--only``, the checks with those
ids, e.g. ``cor3-printed``) and prints one row per bound (or, with ``--json``, a list of records
``{id, bound, statement, trials, violations, worst_ratio, verdict, expected}``). The exit status is 0 exactly when
every bound behaves as the book says: zero violations for the bounds it proves, at least one for the bound it
refutes (Corollary 3 as printed); otherwise 1. Bad arguments, and unknown ids, exit with status 2.

Subcommands are registered in :func:`build_parser` through :func:`_add_check`-style helpers, each setting
``func`` to a handler ``(args) -> int``, so later issues can add ``attnlimits run alg1`` or ``attnlimits diagnose``.
``main(argv)`` returns the exit code instead of exiting, so tests call it in-process; ``python -m attnlimits.cli``
works too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

__all__ = ["build_parser", "main"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
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
    from attnlimits import checks

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
    p.add_argument("--trials", type=_positive_int, default=2000, metavar="N",
                   help="random trials per check (integer >= 1; default 2000)")
    p.add_argument("--seed", type=_seed, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--only", action="append", metavar="ID",
                   help="run only the check with this id (repeatable, or comma-separated: "
                   "--only cor3-printed,thm2-upper); an unknown id lists the valid ones")
    p.set_defaults(func=_run_check)


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
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the subcommand and return its exit code.

    Invalid arguments make argparse print a usage message and raise ``SystemExit(2)``.
    """
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
