"""How much faster than the paper's algorithms, and how long the full paper preset takes.

    .venv/bin/python benchmarks/bench_experiments.py [--skip-full | --skip-reduced] [--windows K]
                                                     [--full-repeats R] [--jobs J]

Part 1, in one process and on the same captures: a reduced preset (L <= 256, three layers, two windows; every
algorithm, including Algorithm 3's critical N at every L) run by the literal implementation in
``naive_experiments.py`` (Python loops over heads, rows and every N of the grid; numpy over tokens) and by
``attnlimits.experiments``. Checks that they agree (1e-6 relative, float64), prints the time of each and their
ratio per algorithm, and the ratio for the whole reduced preset. Medians of repeated runs for the fast side; the
slow side runs once.

Part 2, each run in a fresh child process (``paper_run.py``): the full paper preset end to end on the default model
(imports, load, 4 captures, Algorithms 1-5), ``--full-repeats`` times: the median wall time, capture time and
seconds per part, and the largest peak RSS, next to the paper's 18 h 13 min. Then both sink modes from one capture
in one child, beside the one-mode time; then the arithmetic floor: the FLOPs of the run's matmuls (counted by
``FlopCounterMode`` on one window, which it slows several times, and scaled by the window count) at the machine's
float32 ``torch.bmm`` rate, with the BLAS libraries and threads that run. ``--jobs`` is the timed runs' ``n_jobs``.
Part 2 costs ``--full-repeats`` runs of the paper preset, about two more for both sink modes, and the counted
window (one window's share of a run, times the counter's slow-down, which the output prints).

The output ends with the lines that compare runs: ``paper preset: <s> s`` (the median time of the run itself:
capture and Algorithms 1-5, without imports and model load) and ``floor ratio: <run / capture>x`` (how many times
the model's forward passes the whole run costs), unless ``--skip-full``,
then ``speed-up: <literal / library>x`` for the reduced preset, unless ``--skip-reduced``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import naive_experiments as naive  # noqa: E402

import attnlimits as al  # noqa: E402

PAPER_SECONDS = {"alg1": 24 * 60, "alg2": 37 * 60, "alg3": 17 * 3600 + 4 * 60, "alg4": 7 * 60, "alg5": 60}
PAPER = al.experiments.PRESETS["paper"]
#: The book's reduced preset with Algorithm 5 at every T and eps of the paper's grid (the literal reference runs
#: them all) and both of its KS levels.
REDUCED = al.experiments.PRESETS["reduced"].replace(
    alg5_T=PAPER.alg5_T, alg5_eps=PAPER.alg5_eps, ks_levels=PAPER.ks_levels
)
LAYERS = [0, 14, 29]


def _time(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def _agree(ours: pd.DataFrame, ref: pd.DataFrame, keys, values, rel) -> float:
    ours = ours.assign(window=ours.window.astype(str)).sort_values(keys).reset_index(drop=True)
    ref = ref.assign(window=ref.window.astype(str)).sort_values(keys).reset_index(drop=True)
    worst = 0.0
    for col in values:
        a, b = ours[col].to_numpy(float), ref[col].to_numpy(float)
        err = np.abs(a - b) / np.maximum(np.abs(b), 1e-12)
        worst = max(worst, float(err.max()))
    if worst > rel:
        raise SystemExit(f"disagreement: worst relative difference {worst:.3g} > {rel:g} in {values}")
    return worst


def reduced(model, text, windows: int, repeats: int) -> float:
    """Time and check the literal implementation against the library; returns the speed-up on run()'s path."""
    p = REDUCED
    caps = al.experiments.capture_windows(
        model, text, length=p.max_length, count=windows, layers=LAYERS, progress=False
    )
    grid = p.distance_grid()
    rows = []

    def bench(name, ours_fn, naive_fn, compare, run_path="float32"):
        """Ours in float64 (1e-6 agreement) and on the path run() takes (float32 for Algorithms 1-3: 1e-5)."""
        fast, ours = _time(lambda: ours_fn("float64"), repeats)
        fast_run, ours_run = _time(lambda: ours_fn(run_path), repeats)
        start = time.perf_counter()
        ref = naive_fn()
        slow = time.perf_counter() - start
        worst, worst_run = compare(ours, ref, 1e-6), compare(ours_run, ref, 1e-5 if run_path == "float32" else 1e-6)
        rows.append((name, run_path, slow, fast, fast_run, slow / fast, slow / fast_run, worst, worst_run))
        if name == "alg4":  # why run() keeps Algorithm 4 in float64: the float32 path moves N_s/N
            f32 = ours_fn("float32")
            diff = (f32.ns_frac - ours.ns_frac).abs() / ours.ns_frac.abs().clip(lower=1e-12)
            print(f"  Alg. 4 in float32 would differ from float64 by up to {diff.max():.2g} relative in N_s/N")

    bench(
        "alg1+2",
        # the literal reference has the visible counting and the reading E only (the library's table also holds
        # E_mc, E_full and E_perm: its side does more work than the reference's)
        lambda prec: al.experiments.distance_table(caps, grid, precision=prec, countings=("visible",)),
        lambda: naive.distance_table(caps, grid),
        lambda o, r, rel: _agree(o, r, ["window", "layer", "head", "L", "N"], ["d_tilde", "d_max", "E"], rel),
    )

    def crit_compare(ours, ref, rel):
        (scan, critical, _), (ref_scan, ref_critical) = ours, ref
        merged = scan.merge(ref_scan, on=["L", "N"], suffixes=("", "_ref"))
        worst = float((np.abs(merged.p_value - merged.p_value_ref) / merged.p_value_ref.clip(lower=1e-300)).max())
        both = critical.merge(ref_critical, on=["L", "ks_level"], suffixes=("", "_ref"))
        same = (both.critical_N.astype(float) == both.critical_N_ref.astype(float)).mean()
        print(
            f"  Alg. 3: search evaluated {len(scan)} (L, N) pairs, the dense scan {len(ref_scan)}; "
            f"critical N equal to the dense scan's for {same:.0%} of (L, level)"
        )
        if same < 1:
            raise SystemExit("disagreement: the search's critical N differs from the dense scan's")
        return worst

    bench(
        "alg3",
        lambda prec: al.experiments.critical_n(caps, p.alg1_L, p.ks_levels, readings=("E",), precision=prec),
        lambda: naive.critical_scan(caps, p.alg1_L, p.ks_levels),
        crit_compare,
    )
    bench(
        "alg4",
        lambda prec: al.experiments.separability_table(caps, p.alg4_L, p.alg4_N, precision=prec),
        lambda: naive.separability_table(caps, p.alg4_L, p.alg4_N),
        lambda o, r, rel: _agree(o, r, ["window", "layer", "head", "L", "N"], ["ns_frac", "lower", "upper"], rel),
        run_path="float64",
    )
    bench(
        "alg5",
        lambda prec: al.experiments.gradient_table(caps, p.alg5_L, p.alg5_T, p.alg5_eps),
        lambda: naive.gradient_table(caps, p.alg5_L, p.alg5_T, p.alg5_eps),
        lambda o, r, rel: _agree(o, r, ["window", "layer", "head", "T", "eps", "logit_scaling"], ["g"], 1e-6),
        run_path="float64",
    )
    table = pd.DataFrame(
        rows,
        columns=[
            "algorithm",
            "run_path",
            "naive_s",
            "f64_s",
            "run_s",
            "ratio_f64",
            "ratio_run",
            "worst_rel_f64",
            "worst_rel_run",
        ],
    )
    print(
        f"Reduced preset: L <= 256, layers {LAYERS}, {windows} windows (median of {repeats} runs of ours; "
        "run_path: the arithmetic run() uses for that algorithm)"
    )
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"run() path agrees with the literal float64 reference within {table.worst_rel_run.max():.2g} relative")
    print(f"all in float64, the library is {table.naive_s.sum() / table.f64_s.sum():.0f}x faster than the literal code")
    return table.naive_s.sum() / table.run_s.sum()


CHILD = Path(__file__).resolve().parent / "paper_run.py"


def _child(mode: str, preset: str, windows: int, jobs: int) -> dict:
    """The JSON record of one ``paper_run.py`` run in a fresh process."""
    argv = [sys.executable, str(CHILD), mode, "--preset", preset, "--windows", str(windows), "--jobs", str(jobs)]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{' '.join(argv[1:])} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _blas(info: list[dict]) -> str:
    """threadpoolctl's pools, one entry per distinct library (numpy and scipy may each load the same one)."""
    pools = dict.fromkeys(f"{i['internal_api']} {i['num_threads']} threads ({i['prefix']})" for i in info)
    return ", ".join(pools)


def full(preset: str, windows: int, repeats: int, jobs: int) -> tuple[float, float]:
    """Part 2; returns the median time of the run itself (capture and Algorithms 1-5, without the imports and the
    model load) and its median capture time, from the one-mode runs."""
    runs = [_child("one", preset, windows, jobs) for _ in range(repeats)]
    wall = statistics.median(r["wall"] for r in runs)
    parts = {k: round(statistics.median(r["seconds"][k] for r in runs), 3) for k in runs[0]["seconds"]}
    rec, each = runs[0], ", ".join(f"{r['wall']:.1f}" for r in runs)
    print(
        f"Full {preset} preset on {rec['model']} ({rec['heads']} head-windows, n_jobs={jobs}), end to end including "
        f"imports and model load, median of {repeats}: {wall:.1f} s ({wall / 60:.1f} min; runs "
        f"{each} s), peak RSS {max(r['rss_gb'] for r in runs):.2f} GB"
    )
    if preset == "paper":
        paper = sum(PAPER_SECONDS.values())
        print(f"  the paper: {paper / 3600:.2f} h for 144 heads ({paper / wall:.0f}x)")
    print("  time per part (s, medians):", json.dumps(parts))
    both = _child("both", preset, windows, jobs)
    print(
        f"Both sink modes from one capture, end to end: {both['wall']:.1f} s ({both['wall'] / wall:.2f}x the "
        f"one-mode time; capture {both['capture']:.1f} s, "
        + ", ".join(f"{mode} {s:.1f} s" for mode, s in both["modes"].items())
        + f"), peak RSS {both['rss_gb']:.2f} GB"
    )
    fl = _child("flops", preset, windows, jobs)
    gflop = fl["gflop_per_window"] * windows
    heads, length, head_dim = fl["shape"]
    floor = gflop / fl["gflops"]
    print(
        f"floor: {gflop:.1f} GFLOP at {fl['gflops']:.1f} GFLOP/s = {floor:.1f} s, beside the wall time {wall:.1f} s "
        f"({wall / floor:.1f}x the floor)"
    )
    print(
        f"  FLOPs of the matmuls of one window's run (FlopCounterMode; {fl['counted_seconds']:.1f} s counted, "
        f"{fl['counted_seconds'] / (parts['total'] / windows):.1f}x one window's share of a run) x {windows} windows; "
        f"rate of a float32 torch.bmm ({heads}, {length}, {length}) @ ({heads}, {length}, {head_dim}), median of 7"
    )
    print(f"  BLAS/threads: {_blas(fl['blas'])}; torch.get_num_threads() {fl['torch_threads']}")
    print(
        f"per window: {parts['total'] / windows:.1f} s, of which the capture floor (the forward pass) "
        f"{parts['capture'] / windows:.1f} s and the matmul floor {floor / windows:.1f} s"
    )
    return parts["total"], parts["capture"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    skip = parser.add_mutually_exclusive_group()
    skip.add_argument("--skip-full", action="store_true", help="only the reduced-preset comparison (part 1)")
    skip.add_argument("--skip-reduced", action="store_true", help="only the full-preset runs (part 2)")
    parser.add_argument(
        "--windows", type=int, default=None, help="windows of the full run (default: the preset's own count)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the fast side of part 1 (default 3)")
    parser.add_argument("--full-repeats", type=int, default=3, help="runs of the full preset (default 3)")
    parser.add_argument(
        "--jobs", type=int, default=-1, help="n_jobs of the full preset's timed runs (default -1: every core)"
    )
    parser.add_argument("--preset", default="paper", help=argparse.SUPPRESS)  # a small preset tries part 2 quickly
    args = parser.parse_args()
    speed_up = None
    if not args.skip_reduced:
        model, text = al.models.load(), al.texts.load()
        speed_up = reduced(model, text, windows=2, repeats=args.repeats)
        print(f"peak RSS of the comparison: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
    if not args.skip_full:
        windows = args.windows or al.experiments.get_preset(args.preset).windows
        run_wall, capture = full(args.preset, windows, args.full_repeats, args.jobs)
        print(f"{args.preset} preset: {run_wall:.1f} s")
        print(f"floor ratio: {run_wall / capture:.1f}x")
    if speed_up is not None:
        print(f"speed-up: {speed_up:.0f}x")


if __name__ == "__main__":
    main()
