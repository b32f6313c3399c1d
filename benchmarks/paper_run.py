"""One timed run of the experiments in a fresh process, for ``bench_experiments.py``; prints one JSON record.

    .venv/bin/python benchmarks/paper_run.py {one,both,flops} [--preset NAME] [--windows K] [--jobs J]

- ``one``: the preset end to end on the default model and text (imports, model load, capture, Algorithms 1-5):
  the wall time, the run's seconds per part, the peak RSS.
- ``both``: one capture, then both sink modes (``exclude_sink`` False and True) from it: the wall time end to end,
  the capture's and each mode's seconds.
- ``flops``: the FLOPs of the matmuls of one window's run (``torch.utils.flop_counter.FlopCounterMode``, which
  slows the run several times: one window keeps that affordable, and the caller scales by the window count), the
  machine's float32 ``torch.bmm`` rate at the run's typical shape (every head's weights of the longest window
  times its values), and which BLAS libraries and how many threads run.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time

STARTED = time.perf_counter()  # before torch and attnlimits are imported: the wall time includes the imports

import threadpoolctl  # noqa: E402
import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import attnlimits as al  # noqa: E402


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kilobytes on Linux


def one(model, text, preset, windows: int, jobs: int) -> dict:
    res = al.experiments.run(model, text, preset, windows=windows, progress=False, n_jobs=jobs)
    return {
        "wall": time.perf_counter() - STARTED,
        "seconds": res.provenance["seconds"],
        "rss_gb": _peak_rss_gb(),
        "heads": int(res.sink.shape[0]),
        "model": res.provenance["model"]["model_id"],
    }


def both(model, text, preset, windows: int, jobs: int) -> dict:
    t0 = time.perf_counter()
    caps = al.experiments.capture_windows(model, text, length=preset.max_length, count=windows, progress=False)
    capture = time.perf_counter() - t0
    modes = {}
    for exclude_sink in (False, True):
        t0 = time.perf_counter()
        al.experiments.run(
            model, text, preset, windows=windows, exclude_sink=exclude_sink, captures=caps, progress=False, n_jobs=jobs
        )
        modes[f"exclude_sink={exclude_sink}"] = time.perf_counter() - t0
    return {"wall": time.perf_counter() - STARTED, "capture": capture, "modes": modes, "rss_gb": _peak_rss_gb()}


def bmm_rate(heads: int, length: int, head_dim: int, repeats: int = 7) -> float:
    """GFLOP/s of a float32 ``(heads, L, L) @ (heads, L, head_dim)`` batched matmul, the median of ``repeats``."""
    a, b = torch.rand(heads, length, length), torch.rand(heads, length, head_dim)
    for _ in range(2):  # warm-up: thread pools and caches
        torch.bmm(a, b)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.bmm(a, b)
        times.append(time.perf_counter() - t0)
    return 2 * heads * length * length * head_dim / statistics.median(times) / 1e9


def flops(model, text, preset, windows: int, jobs: int) -> dict:
    t0 = time.perf_counter()
    with FlopCounterMode(display=False) as counter:  # in this process: n_jobs=1, where the counter sees every op
        al.experiments.run(model, text, preset, windows=1, progress=False)
    counted = time.perf_counter() - t0
    facts = al.models.facts(model)
    shape = (facts["n_heads"], preset.max_length, facts["head_dim"])
    return {
        "gflop_per_window": counter.get_total_flops() / 1e9,
        "counted_seconds": counted,
        "shape": shape,
        "gflops": bmm_rate(*shape),
        "blas": [
            {"internal_api": i["internal_api"], "num_threads": i["num_threads"], "prefix": i["prefix"]}
            for i in threadpoolctl.threadpool_info()
        ],
        "torch_threads": torch.get_num_threads(),
    }


MODES = {"one": one, "both": both, "flops": flops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=list(MODES))
    parser.add_argument("--preset", default="paper", help="the experiments' preset (default paper)")
    parser.add_argument("--windows", type=int, default=None, help="windows (default: the preset's)")
    parser.add_argument("--jobs", type=int, default=1, help="n_jobs of the timed runs (default 1)")
    args = parser.parse_args()
    preset = al.experiments.get_preset(args.preset)
    model, text = al.models.load(), al.texts.load()
    windows = preset.windows if args.windows is None else args.windows
    print(json.dumps(MODES[args.mode](model, text, preset, windows, args.jobs)))


if __name__ == "__main__":
    main()
