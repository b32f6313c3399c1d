"""Progress on stderr and the parallel map over windows and layers that every study's loop goes through."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

import torch

__all__ = ["check_jobs", "layer_items", "map_layers", "progress_bar"]


def progress_bar(items, desc: str, progress: bool | str | None):
    """``items``, reporting progress on stderr as ``progress`` asks.

    - ``True``: a tqdm bar; ``False``: nothing;
    - ``None`` (the library's default): a tqdm bar when stderr is a terminal, else nothing, so tests and notebook
      builds stay quiet;
    - ``"lines"`` (what ``attnlimits analyze`` passes): a tqdm bar when stderr is a terminal, else plain lines
      such as ``[attnlimits] capture 2/4`` after every item, or after every tenth of a longer loop (at most about
      ten lines per loop), so that a log file shows a long run is alive.

    ``items`` must have a length.
    """
    if progress not in (True, False, None, "lines"):
        raise ValueError(f"progress: must be True, False, None or 'lines', got {progress!r}")
    terminal = sys.stderr.isatty()
    if progress == "lines" and not terminal:
        total = len(items)
        step = max(1, (total + 9) // 10)

        def lines():
            for done, item in enumerate(items, 1):
                yield item
                if done % step == 0 or done == total:
                    print(f"[attnlimits] {desc} {done}/{total}", file=sys.stderr, flush=True)

        return lines()
    if not (terminal if progress in (None, "lines") else progress):
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, leave=False)


def layer_items(windows: Sequence, progress, desc) -> Iterator[tuple]:
    pairs = [(w, layer) for w in windows for layer in w.layer_ids]
    yield from progress_bar(pairs, desc, progress)


def check_jobs(n_jobs) -> int:
    """``n_jobs`` as a worker count: an integer >= 1, or -1 for every core (joblib's convention)."""
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or not (n_jobs >= 1 or n_jobs == -1):
        raise ValueError(f"n_jobs: must be an integer >= 1, or -1 for every core, got {n_jobs!r}")
    if n_jobs == -1:
        import joblib

        return joblib.cpu_count()
    return n_jobs


class _Sized:
    """An iterable with a known length (what :func:`progress_bar` needs) around a generator."""

    def __init__(self, items, length: int):
        self.items, self.length = items, length

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return self.length


def map_layers(windows: Sequence, fn, desc: str, progress=None, n_jobs: int = 1) -> list:
    """``[fn(w, layer) for every window w and each of its layers]``, in that order.

    With ``n_jobs > 1`` the windows run in parallel through :class:`joblib.Parallel` (threads unless
    ``joblib.parallel_config`` chooses another backend: loky processes, or a Dask or Ray cluster), each worker
    doing one window's layers; torch's threads are split between the workers meanwhile, and processes limit
    their own. The results are the same as with one job: each window's work is the same computation either way.
    Progress is reported per (window, layer) with one job and per window with several.
    """
    n_jobs = check_jobs(n_jobs)
    if n_jobs == 1 or len(windows) == 1:
        return [fn(w, layer) for w, layer in layer_items(windows, progress, desc)]
    from joblib import Parallel, delayed

    def one_window(w):
        return [fn(w, layer) for layer in w.layer_ids]

    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads // min(n_jobs, len(windows))))
    try:
        parallel = Parallel(n_jobs=n_jobs, prefer="threads", return_as="generator")
        done = parallel(delayed(one_window)(w) for w in windows)
        per_window = list(progress_bar(_Sized(done, len(windows)), desc, progress))
    finally:
        torch.set_num_threads(threads)
    return [out for outs in per_window for out in outs]
