"""The README's Dask route ("Running windows in parallel, and past one machine"), run as written: its block
(``attnlimits.experiments.run(..., n_jobs=-1)`` under ``joblib.parallel_config(backend="dask")``) on a local
``dask.distributed`` cluster writes the same tables as one process, bit for bit.

Dask is a test extra (requirements.txt pins it; ``pip install 'attnlimits[dask]'``), not a dependency of the library:
without it the test is skipped.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import tiny_models

import attnlimits as al
from attnlimits import experiments, models

distributed = pytest.importorskip(
    "dask.distributed", reason="dask[distributed] is not installed (the 'dask' extra; make setup installs it)"
)

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- README example: dask (tests/experiments/test_dask_route.py runs this block) -->"
#: Seconds any one step (the cluster's start, a connection, the close) may take before the client gives up: the
#: test fails instead of hanging on a cluster that does not answer (pytest-timeout stops the rest).
TIMEOUT = 60
SEED = 3
#: The smallest preset the experiments' tests run: two windows, so that the windows go to the cluster, in seconds
#: (the quick preset takes about 8x longer for the same check).
TINY_PRESET = tiny_models.experiments_preset()


@pytest.fixture(scope="module")
def cluster():
    """A local cluster of two worker processes, one thread each, and a client that watches its task stream (the
    README's block connects its own); both closed when the module ends.

    processes=True, as on a real cluster: each worker is a separate interpreter that receives a pickled copy of the
    windows and imports attnlimits (and torch) itself, which is what the README's route relies on. It starts in
    about 3 s on two idle cores (up to about 15 s on busy ones; each worker's first torch import takes a few
    seconds more), well within the test's budget, so the threaded variant (processes=False, which shares the
    calling process's memory and would not exercise the pickling) is not needed.
    """
    local = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, timeout=TIMEOUT
    )
    try:
        watcher = distributed.Client(local, timeout=TIMEOUT, set_as_default=False)
        try:
            watcher.wait_for_workers(2, timeout=TIMEOUT)
            yield local, watcher
        finally:
            watcher.close(timeout=TIMEOUT)
    finally:
        local.close(timeout=TIMEOUT)


@pytest.fixture(scope="module")
def model(tiny_dir):
    """The tiny random Llama, loaded as a user's model is."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return models.load(str(tiny_dir))


def _readme_block() -> str:
    readme = README.read_text(encoding="utf-8")
    assert MARKER in readme, "the README lost its Dask example (or the marker naming this test)"
    return readme.split(f"{MARKER}\n```python\n")[1].split("```")[0]


def _without_wall_times(provenance: dict) -> dict:
    return {k: v for k, v in provenance.items() if k != "seconds"}


@pytest.mark.timeout(4 * TIMEOUT)
def test_the_readme_dask_route_gives_the_tables_of_one_process(cluster, model, text):
    """The README's block, pointed at the local cluster and run on the tiny preset: Algorithms 1-5 (and the sink
    weights) with n_jobs=-1 equal the single-process run, every table exactly and the provenance but for its wall
    times; the windows did run on the workers."""
    import joblib

    local, watcher = cluster
    one = experiments.run(model, text, TINY_PRESET, seed=SEED)

    code = _readme_block()
    for old, new in [
        ('Client("tcp://scheduler:8786")', f"Client({local.scheduler_address!r}, timeout={TIMEOUT})"),
        ('"paper", n_jobs=-1)', "preset, seed=SEED, n_jobs=-1)"),
    ]:
        assert code.count(old) == 1, f"the README's Dask example no longer reads {old!r}"
        code = code.replace(old, new)
    namespace = {"al": al, "joblib": joblib, "model": model, "text": text, "preset": TINY_PRESET, "SEED": SEED}
    try:
        with distributed.get_task_stream(watcher) as tasks:
            exec(compile(code, "README.md (Dask example)", "exec"), namespace)  # noqa: S102 - the project's README
    finally:
        if "client" in namespace:
            namespace["client"].close(timeout=TIMEOUT)
    on_cluster = namespace["res"]

    workers = {task["worker"] for task in tasks.data}
    assert workers, (
        "no task reached the cluster: n_jobs=-1 counts the calling machine's cores (joblib.cpu_count() = "
        f"{joblib.cpu_count()}), and with one core map_layers runs every window in place"
    )
    for name in experiments.TABLES:
        pd.testing.assert_frame_equal(getattr(on_cluster, name), getattr(one, name), check_exact=True, obj=name)
    assert _without_wall_times(on_cluster.provenance) == _without_wall_times(one.provenance)
    assert on_cluster.provenance["seconds"].keys() == one.provenance["seconds"].keys()


@pytest.mark.timeout(4 * TIMEOUT)
def test_shards_shipped_through_the_cluster_are_the_files_of_one_process(cluster, model, text, tmp_path):
    """``attnlimits.infra.shipping.ship`` under joblib's Dask backend computes the shards on the cluster's workers
    (each from an empty results cache of its own) and ships the same files, byte for byte, as one process."""
    import functools

    import joblib

    from attnlimits.experiments import shipped
    from attnlimits.infra import shipping

    local, watcher = cluster

    def shards(cache):
        return [
            shipping.Shard(
                f"experiments/tiny/window-{w}",
                shipped.MODULES,
                {"window": w},
                functools.partial(shipped.window_files, model, text, TINY_PRESET, w, root=str(cache)),
            )
            for w in range(TINY_PRESET.windows)
        ]

    alone, together = tmp_path / "one-process", tmp_path / "cluster"
    assert len(shipping.ship(shards(tmp_path / "cache-one"), alone)) == TINY_PRESET.windows
    client = distributed.Client(local.scheduler_address, timeout=TIMEOUT)
    try:
        with distributed.get_task_stream(watcher) as tasks, joblib.parallel_config(backend="dask"):
            shipping.ship(shards(tmp_path / "cache-cluster"), together, n_jobs=2)
    finally:
        client.close(timeout=TIMEOUT)
    assert {task["worker"] for task in tasks.data}, "no shard was written on the cluster"
    files = sorted(p.relative_to(alone) for p in alone.rglob("*.parquet"))
    assert files and files == sorted(p.relative_to(together) for p in together.rglob("*.parquet"))
    for f in [*files, *sorted(p.relative_to(alone) for p in alone.rglob("window.json"))]:
        assert (alone / f).read_bytes() == (together / f).read_bytes(), f
    one, other = (shipping.load_manifest(r)["shards"] for r in (alone, together))
    assert {k: v["files"] for k, v in one.items()} == {k: v["files"] for k, v in other.items()}
