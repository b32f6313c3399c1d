"""The book's shipped results: what the chapters read, computed once by ``make results``, kept in git under
``results/`` and checked on every commit.

A study's results are made of **shards**, each computed on its own (one window of one run of the experiments):
:class:`Shard` says which modules compute it, from which data and preset, and how to write its files.
``results/manifest.json`` records, for every shard, the key that computed it (the hash of each module's code, the
data's SHA-256, the preset, the options, the versions of the libraries that compute), the SHA-256 of each of its
files, the seconds it took and, for a window, its fingerprint. Practice borrowed from showyourwork (rules keyed
by the hashes of their code and inputs), DVC (``dvc.lock``, ``dvc status``) and QuantEcon's lectures (the
expensive step computed once and reused):

- :func:`ship` writes every shard whose recorded key differs from the key wanted now (``make results``); a shard
  whose key is current is left alone, so a full recompute that changes nothing changes no byte;
- :func:`check` (``attnlimits results --check``): 0 when every shard is current, 1 when some are stale (naming
  the module, preset field or version that changed), 2 when a file is missing or its bytes differ from the
  manifest's;
- :func:`audit` (``attnlimits results --audit``): recomputes a seeded sample of shards end to end, capture
  included, in an empty cache, and compares them with the shipped files under :data:`TOLERANCE`;
- :func:`restore` puts the shards that ship a study's results-cache entries whole (:func:`entry_shard`) back into
  a fresh checkout's results cache.

One concept, one module (over 600 lines): the shipped results and their manifest, from the shard that writes them
through ship, check, restore and audit; each step reads and writes the same manifest records and file layout
(packed entries included), which a split would spread over modules that import each other.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import lzma
import math
import os
import pickle
import platform
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from attnlimits.infra import cache, provenance

__all__ = [
    "MANIFEST",
    "ACROSS_KERNELS",
    "TOLERANCE",
    "Report",
    "Shard",
    "audit",
    "check",
    "choose",
    "compare_json",
    "compare_tables",
    "cpu_capability",
    "entry_shard",
    "fingerprint_differences",
    "load_manifest",
    "read_table",
    "restore",
    "shipped_root",
    "ship",
    "ships_entries",
    "tolerance",
    "versions",
    "write_table",
]

MANIFEST = "manifest.json"
#: The manifest's format; a manifest of another format is refused (exit 2), naming both.
FORMAT = 1


def shipped_root() -> Path:
    """Where the shipped results lie: ``$ATTNLIMITS_SHIPPED``, else the ``results`` folder of the book's checkout,
    else ``shipped`` under attnlimits' cache (a library installed without the book ships nothing)."""
    env = os.environ.get("ATTNLIMITS_SHIPPED")
    if env:
        return Path(env)
    checkout = provenance.book_checkout()
    return checkout / "results" if checkout is not None else provenance.cache_dir() / "shipped"


def versions() -> dict[str, str]:
    """The versions of the libraries whose arithmetic a shard's numbers depend on (a shard's key holds them), read
    from their installed metadata without importing them (importing transformers in a notebook warns on stderr),
    and Python's minor version (its syntax trees, which the code hash reads, change between minor versions)."""
    from importlib.metadata import version

    libraries = ("numpy", "pandas", "pyarrow", "scipy", "torch", "transformers")
    return {
        **{name: version(name) for name in libraries},
        "python": ".".join(platform.python_version_tuple()[:2]),  # the syntax trees the code hash reads
    }


# ----------------------------------------------------------------------------------------------------------------
# shards and their files
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shard:
    """One independently computed unit of a study's shipped results.

    ``name``: its folder under the shipped root (``experiments/pydoc-topics/paper/window-07-of-32``), first part
    its study. ``modules``: the modules whose code (with every module of the library they import) computes its
    files. ``key``: the rest of what it depends on, JSON-able (the data's SHA-256, the preset, the options, the
    seed). ``write(folder)`` writes its files into ``folder`` from the results cache, computing what the cache
    lacks, and returns the seconds the computation took end to end (or None: the time it took to write them);
    under an empty cache (:func:`audit`) it computes everything, capture included. ``fingerprint()``: a
    cheap record of its input (a window's tokens and first layer), compared on every audit, or None.
    ``seconds``: about what it takes from an empty cache before it was ever shipped (the manifest's record is used
    once there is one). ``records``: the names of its files (or of the tables a pickled file holds, of a table's
    columns, of a JSON file's members) that record the machine and the time of the computation (its seconds, its
    peak memory): shipped and checked, never compared by the audit."""

    name: str
    modules: tuple[str, ...]
    key: dict
    write: Callable[[Path], None] = field(compare=False, repr=False)
    fingerprint: Callable[[], dict] | None = field(default=None, compare=False, repr=False)
    seconds: float = 60.0
    records: tuple[str, ...] = ()

    @property
    def study(self) -> str:
        return self.name.split("/")[0]

    def wanted(self, memo: dict | None = None) -> dict:
        """The key this shard would be computed under now: its modules' code hashes, the versions and its key.
        ``memo``: a dict shared by the shards of one check, so that the code is read once for all of them."""
        memo = {} if memo is None else memo
        if self.modules not in memo:
            memo[self.modules] = cache.module_hashes(*self.modules)
        if "versions" not in memo:
            memo["versions"] = versions()
        return {"modules": memo[self.modules], "versions": memo["versions"], **_plain(self.key)}


def _plain(value):
    return json.loads(json.dumps(value, sort_keys=True, default=lambda v: v.as_dict()))


def write_table(table: pd.DataFrame, path) -> Path:
    """Write ``table`` as Parquet (zstd), byte for byte the same for the same table and library versions: no index,
    no timestamps, one row group."""
    path = Path(path)
    table.reset_index(drop=True).to_parquet(
        path, engine="pyarrow", compression="zstd", compression_level=19, index=False, row_group_size=len(table) + 1
    )
    return path


def read_table(path) -> pd.DataFrame:
    """A table written by :func:`write_table`, read by pyarrow (the engine that wrote it)."""
    import pyarrow.parquet

    return pyarrow.parquet.read_table(path).to_pandas()


def load_manifest(root=None) -> dict:
    """The manifest of the shipped results under ``root`` (:func:`shipped_root` by default): ``{"format", "shards",
    "recomputed"}``; an empty one where there is none. A manifest that cannot be read raises ValueError."""
    path = Path(shipped_root() if root is None else root) / MANIFEST
    if not path.is_file():
        return {"format": FORMAT, "shards": {}, "recomputed": None}
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable manifest ({err})") from None
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: manifest format {manifest.get('format')!r}, this library reads {FORMAT}")
    return manifest


def _save_manifest(root: Path, manifest: dict) -> None:
    tmp = root / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    tmp.replace(root / MANIFEST)


def _files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): provenance.sha256_file(p) for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _produce(shard: Shard, folder: Path) -> float:
    """Write ``shard``'s files into the empty ``folder``; the seconds its computation took: what ``write``
    returns (the results cache's record of the computation, when the files were written from the cache), else
    the time it took here."""
    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    reported = shard.write(folder)
    return float(reported) if reported is not None else time.perf_counter() - t0


# ----------------------------------------------------------------------------------------------------------------
# a study's results-cache entries, shipped whole
# ----------------------------------------------------------------------------------------------------------------
#: The suffix of a shipped entry's files: each is compressed with xz (LZMA, a fixed preset: the same file gives the
#: same bytes), all but the entry's ``key.json``, which is shipped as it is.
PACKED = ".xz"
_PRESET = 6


def entry_shard(
    name: str, modules: Sequence[str], key: dict, compute: Callable[[Path], object], *, seconds=60.0, records=()
) -> Shard:
    """A shard that ships a study's results-cache entries whole (a study small enough for it: chapter 32's training
    sweep, chapter 33's tables, chapter 35's long contexts). ``compute(root)`` computes them into the empty results
    cache ``root`` (a study's ``results(..., root=root)``); every entry it writes there (a folder holding
    ``key.json``) ships under the shard's folder at its path under ``root``, each file compressed (:data:`PACKED`).
    Shipping measures the computation from an empty cache and puts the entries into the results cache too;
    :func:`restore` puts them back into a fresh checkout's results cache, where the study reads them as its own.
    ``modules``, ``key``, ``seconds`` and ``records``: as :class:`Shard`'s."""
    write = functools.partial(_write_entries, compute, name)
    return Shard(name, tuple(modules), key, write, None, seconds, tuple(records))


def ships_entries(shard: Shard) -> bool:
    """Whether ``shard`` ships results-cache entries whole (:func:`entry_shard`)."""
    return isinstance(shard.write, functools.partial) and shard.write.func is _write_entries


def _write_entries(compute: Callable[[Path], object], name: str, folder: Path) -> float:
    """``compute`` in an empty results cache, each entry it wrote packed into ``folder`` (at its path under the
    cache; an entry whose path is the shard's ``name`` at the folder's top) and installed into the results cache;
    the seconds the computation took."""
    with tempfile.TemporaryDirectory(prefix="attnlimits-entry-") as scratch:
        scratch = Path(scratch)
        t0 = time.perf_counter()
        compute(scratch)
        seconds = time.perf_counter() - t0
        entries = sorted(record.parent for record in scratch.rglob(cache.KEY_FILE))
        if not entries:
            raise ValueError(f"{name}: the computation wrote no results-cache entry")
        for entry in entries:
            rel = entry.relative_to(scratch)
            within = Path(".") if rel.as_posix() == name else rel
            _pack(entry, folder / within)
            _install(folder / within, provenance.results_root() / rel)
    return seconds


def _entries(root: Path, name: str) -> list[tuple[Path, Path]]:
    """The entries a shipped shard holds: ``(folder in the shard, path under the results cache)``; an entry at the
    shard's top lies at the shard's own path."""
    out = []
    for record in sorted((root / name).rglob(cache.KEY_FILE)):
        within = record.parent.relative_to(root / name)
        out.append((record.parent, Path(name) if within == Path(".") else within))
    return out


def _pack(entry: Path, target: Path) -> None:
    """An entry's files into ``target``: ``key.json`` as it is, every other file compressed (:data:`PACKED`)."""
    for path in sorted(p for p in entry.rglob("*") if p.is_file() and not p.name.startswith(".")):
        out = target / path.relative_to(entry)
        out.parent.mkdir(parents=True, exist_ok=True)
        if path.name == cache.KEY_FILE:
            shutil.copyfile(path, out)
        else:
            out.with_name(out.name + PACKED).write_bytes(lzma.compress(path.read_bytes(), preset=_PRESET))


def _unpacked(path: Path) -> bytes:
    return lzma.decompress(path.read_bytes()) if path.name.endswith(PACKED) else path.read_bytes()


def _install(packed: Path, target: Path) -> bool:
    """A shipped entry (``packed``) unpacked into the results-cache folder ``target``, under the entry's lock, unless
    ``target`` already holds an entry of the same key; whether it was installed. The entry's ``key.json`` records
    each file's SHA-256: the study checks them when it reads the entry."""
    shipped_key = (packed / cache.KEY_FILE).read_bytes()
    entry = cache.Entry(target, {})
    with entry.lock():
        try:
            if entry.stored_key() == json.loads(shipped_key)["key"]:
                return False
        except cache.StaleEntry:
            pass
        tmp = target.with_name(f".{target.name}.restored")
        shutil.rmtree(tmp, ignore_errors=True)
        for path in sorted(p for p in packed.rglob("*") if p.is_file()):
            out = tmp / path.relative_to(packed)
            out = out.with_name(out.name.removesuffix(PACKED))
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(_unpacked(path))
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    return True


def restore(shards: Sequence[Shard], root=None, *, say: Callable[[str], None] | None = None) -> list[str]:
    """Put every shipped entry of ``shards`` (:func:`entry_shard`) that is current for the code and intact into the
    results cache (:func:`attnlimits.infra.provenance.results_root`), where a study reads it as if it had computed
    it; an entry the cache holds under the same key is left alone, a stale or damaged shard is skipped (the study
    computes it). Returns the results-cache folders written. Seconds for the book's shards: no model is loaded."""
    root = Path(shipped_root() if root is None else root)
    try:
        recorded = load_manifest(root)["shards"]
    except ValueError:
        return []
    written, memo = [], {}
    for shard in shards:
        entry = recorded.get(shard.name)
        if entry is None or not any(Path(f).name == cache.KEY_FILE for f in entry["files"]):
            continue
        if entry["key"] != shard.wanted(memo) or _damaged(root, shard.name, entry):
            continue
        for packed, rel in _entries(root, shard.name):
            if _install(packed, provenance.results_root() / rel):
                written.append(str(rel))
                if say is not None:
                    say(f"[attnlimits] results: {rel} restored from {shard.name}")
    return written


# ----------------------------------------------------------------------------------------------------------------
# make results: ship what is stale
# ----------------------------------------------------------------------------------------------------------------
def ship(shards: Sequence[Shard], root=None, *, n_jobs: int = 1, say: Callable[[str], None] | None = None) -> list[str]:
    """Write every shard of ``shards`` that is not current under ``root`` (:func:`shipped_root` by default) and
    record it in the manifest; drop the manifest's shards of the same studies that ``shards`` no longer holds (and
    their folders). Returns the names of the shards written. A shard is current when its recorded key equals
    :meth:`Shard.wanted` and its files are those recorded; a current shard is not touched (no byte changes).

    ``n_jobs`` (an integer >= 1, or -1 for one per core) writes the stale shards in that many workers through
    joblib: processes by default, or the backend ``joblib.parallel_config`` sets (a Dask cluster, say); the files
    do not depend on it. The manifest is saved after every shard, so an interrupted run keeps what it finished, and
    read again under a lock each time, so that ships of different studies can run at once."""
    import joblib

    root = Path(shipped_root() if root is None else root)
    root.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(root)
    recorded = manifest["shards"]
    stale, memo = [], {}
    for shard in shards:
        wanted = shard.wanted(memo)
        entry = recorded.get(shard.name)
        if entry is None or entry["key"] != wanted or _damaged(root, shard.name, entry):
            stale.append((shard, wanted))
    written = []
    tasks = (joblib.delayed(_produce_in)(shard, _scratch(root, shard)) for shard, _ in stale)
    workers = joblib.Parallel(n_jobs=min(n_jobs, len(stale)) if n_jobs > 0 else n_jobs, return_as="generator")
    for (shard, wanted), (seconds, fingerprint) in zip(stale, workers(tasks) if stale else (), strict=True):
        target = root / shard.name
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        _scratch(root, shard).replace(target)
        record = {"key": wanted, "files": _files(target), "seconds": round(seconds, 1), "fingerprint": fingerprint}
        with _manifest_lock(root):  # another ship (of other studies) may have saved it since: read it again
            manifest = load_manifest(root)
            manifest["shards"][shard.name] = record
            _save_manifest(root, manifest)
        written.append(shard.name)
        if say is not None:
            say(f"[attnlimits] results: shipped {shard.name} in {seconds:.1f} s")
    names, studies = {s.name for s in shards}, {s.study for s in shards}
    with _manifest_lock(root):
        manifest = load_manifest(root)
        recorded = manifest["shards"]
        for name in [n for n in recorded if n not in names and n.split("/")[0] in studies]:
            _remove(root, name, recorded.pop(name))
            written.append(name)
        if written:
            manifest["recomputed"] = _this_recompute()
            _save_manifest(root, manifest)
    return written


def _remove(root: Path, name: str, entry: dict) -> None:
    """A shard no longer shipped: its recorded files, then its folders left empty (never a folder that another
    shard's files lie in: a shard's folder may hold others', ``training/reduced`` those of ``training/reduced/x``)."""
    for file in entry.get("files", {}):
        (root / name / file).unlink(missing_ok=True)
    folders = sorted(
        {p for f in entry.get("files", {}) for p in (root / name / f).parents}, key=lambda p: -len(p.parts)
    )
    for folder in folders:
        if folder.is_relative_to(root / name) and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def _manifest_lock(root: Path):
    """The lock under which the manifest is read and saved again (two ``ship`` of different studies at once): a
    file in the system's temporary folder named after ``root``, so that nothing but results lies in ``root``."""
    from filelock import FileLock

    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return FileLock(Path(tempfile.gettempdir()) / f"attnlimits-manifest-{name}.lock")


def _scratch(root: Path, shard: Shard) -> Path:
    """Where a shard is written before it is moved into place (a crash leaves no half-written shard behind)."""
    return root / f".{shard.name.replace('/', '--')}.tmp"


def _produce_in(shard: Shard, folder: Path) -> tuple[float, dict | None]:
    """A shard's files written into ``folder`` (emptied first) and its fingerprint: what a worker does."""
    shutil.rmtree(folder, ignore_errors=True)
    seconds = _produce(shard, folder)
    return seconds, None if shard.fingerprint is None else shard.fingerprint()


def _this_recompute() -> dict:
    """When, on which code and which machine the shipped results were last recomputed."""
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "code": _git_commit(),
        "machine": f"{platform.machine()}, {_cpu_name()}, {os.cpu_count()} cores",
        "cpu_capability": cpu_capability(),
    }


def _git_commit() -> str | None:
    checkout = provenance.book_checkout()
    if checkout is None:
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


# ----------------------------------------------------------------------------------------------------------------
# --check
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Report:
    """What :func:`check` found: ``status`` 0 (every shard current), 1 (some stale) or 2 (a file missing or
    corrupt, or no readable manifest), and one line per problem."""

    status: int = 0
    lines: list[str] = field(default_factory=list)

    def add(self, status: int, line: str) -> None:
        self.status = max(self.status, status)
        self.lines.append(line)


def _damaged(root: Path, name: str, entry: dict) -> list[str]:
    """What is wrong with a shipped shard's files: missing, changed, or not recorded."""
    folder = root / name
    problems = []
    for file, digest in sorted(entry.get("files", {}).items()):
        path = folder / file
        if not path.is_file():
            problems.append(f"{name}/{file} is missing")
        elif provenance.sha256_file(path) != digest:
            problems.append(f"{name}/{file} does not match the manifest (its SHA-256 differs)")
    if folder.is_dir():
        extra = sorted(set(_files(folder)) - set(entry.get("files", {})))
        problems += [f"{name}/{file} is not in the manifest" for file in extra]
    return problems


def key_differences(recorded: dict, wanted: dict) -> list[str]:
    """What changed between a shard's recorded key and the key wanted now, in words: each module whose code
    changed (or that it now imports, or no longer does), each version, each other field (a preset's, by its own
    field name)."""
    out = []
    old, new = recorded.get("modules", {}), wanted.get("modules", {})
    out += [f"module {m} changed" for m in sorted(set(old) & set(new)) if old[m] != new[m]]
    out += [f"module {m} is now imported" for m in sorted(set(new) - set(old))]
    out += [f"module {m} is no longer imported" for m in sorted(set(old) - set(new))]
    old, new = recorded.get("versions", {}), wanted.get("versions", {})
    out += [
        f"{lib} {old.get(lib)} -> {new.get(lib)}" for lib in sorted(set(old) | set(new)) if old.get(lib) != new.get(lib)
    ]
    rest = {k for k in set(recorded) | set(wanted) if k not in ("modules", "versions")}
    for k in sorted(rest):
        out += _field_differences(k, recorded.get(k), wanted.get(k))
    return out


def _field_differences(name: str, old, new) -> list[str]:
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            d for k in sorted(set(old) | set(new)) for d in _field_differences(f"{name}.{k}", old.get(k), new.get(k))
        ]
    return [f"{name} {json.dumps(old)} -> {json.dumps(new)}"]


def check(shards: Sequence[Shard], root=None) -> Report:
    """Whether the shipped results under ``root`` are current for the code and intact (what ``attnlimits results
    --check`` prints): every shard of ``shards`` recorded under the key wanted now, every recorded file present with
    its recorded SHA-256, no shard shipped that ``shards`` does not hold. Loads no model: the keys are hashes of
    code and of files."""
    root = Path(shipped_root() if root is None else root)
    report = Report()
    try:
        manifest = load_manifest(root)
    except ValueError as err:
        report.add(2, str(err))
        return report
    if not (root / MANIFEST).is_file():
        report.add(2, f"{root / MANIFEST} is missing: nothing is shipped (make results writes it)")
        return report
    recorded, memo = manifest["shards"], {}
    for shard in shards:
        entry = recorded.get(shard.name)
        if entry is None:
            report.add(1, f"stale: {shard.name} is not shipped")
            continue
        for problem in _damaged(root, shard.name, entry):
            report.add(2, f"corrupt: {problem}")
        changes = key_differences(entry["key"], shard.wanted(memo))
        if changes:
            report.add(1, f"stale: {shard.name}: {'; '.join(changes)}")
    names = {s.name for s in shards}
    for name in sorted(set(recorded) - names):
        report.add(1, f"stale: {name} is shipped but no longer part of the book's design")
    return report


# ----------------------------------------------------------------------------------------------------------------
# --audit
# ----------------------------------------------------------------------------------------------------------------
#: How a recomputed table must agree with the shipped one when it is recomputed on the kernel path the shipped
#: results were computed with (the audit pins torch's ``ATEN_CPU_CAPABILITY`` to the manifest's): every number
#: repeats then, so floats agree to ``rtol`` (libraries' own rounding aside) and integers, booleans and text
#: (critical N, decisions, verdict words) exactly. A shipped value moved by 1e-6 of itself fails.
TOLERANCE = {"rtol": 1e-9, "atol": 1e-12}
#: The relative tolerance per shipped table when the audit runs on another kernel path (a CPU without the recorded
#: one): the largest differences measured between AVX2 and AVX-512 on one whole window of the book's design, times
#: ten. The top-N selection meets near-ties, so a head's d~ moves by up to 3e-5 (its window's median by 2e-6);
#: N_s/N counts tokens across a radius (its quantiles by 4e-5); Algorithm 5's g at T <= 0.003 is decided by
#: near-ties too (a window's median head g moved by 20 %). The critical N and the KS p-values did not move.
ACROSS_KERNELS = {"distance": 1e-4, "separability": 1e-3, "sink": 1e-5, "gradient": 1.0}


def cpu_capability() -> str:
    """The kernel path torch runs on this machine ("AVX512", "AVX2", "DEFAULT", ...)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def tolerance(file: str, same_kernels: bool) -> dict:
    """The tolerance for one shipped file: :data:`TOLERANCE` on the shipped results' kernel path, else its table's
    :data:`ACROSS_KERNELS` (and :data:`TOLERANCE` for the tables not listed there)."""
    if same_kernels:
        return TOLERANCE
    rtol = ACROSS_KERNELS.get(Path(file).stem.split(".")[0])
    return TOLERANCE if rtol is None else {"rtol": rtol, "atol": TOLERANCE["atol"]}


def compare_tables(shipped: pd.DataFrame, fresh: pd.DataFrame, *, rtol: float, atol: float) -> tuple[dict, list]:
    """``({column: largest difference}, failures)`` between a shipped table and its recomputation: the same
    columns, rows and types; floats within ``atol + rtol * |shipped|`` (a NaN only where the other is NaN), other
    columns exactly. Each failure names the column and the row (its index and, where the table has them, its key
    columns' values)."""
    failures = []
    if list(shipped.columns) != list(fresh.columns):
        return {}, [f"columns differ: shipped {list(shipped.columns)}, recomputed {list(fresh.columns)}"]
    if len(shipped) != len(fresh):
        return {}, [f"rows differ: shipped {len(shipped)}, recomputed {len(fresh)}"]
    largest = {}
    keys = [c for c in shipped.columns if not pd.api.types.is_float_dtype(shipped[c])]
    for column in shipped.columns:
        a, b = shipped[column], fresh[column]
        if pd.api.types.is_float_dtype(a) and pd.api.types.is_float_dtype(b):
            x, y = a.to_numpy(float), b.to_numpy(float)
            both_nan = np.isnan(x) & np.isnan(y)
            diff = np.where(both_nan, 0.0, np.abs(x - y))
            diff = np.where(np.isnan(diff), np.inf, diff)
            largest[column] = float(diff.max()) if len(diff) else 0.0
            bad = np.flatnonzero(diff > atol + rtol * np.abs(np.nan_to_num(x)))
        else:
            na_a, na_b = a.isna().to_numpy(), b.isna().to_numpy()
            both = ~na_a & ~na_b
            same = na_a & na_b  # a missing value (a critical N no window reached) only where the other is missing
            same[both] = a[both].astype(object).to_numpy() == b[both].astype(object).to_numpy()
            largest[column] = 0.0 if same.all() else math.inf
            bad = np.flatnonzero(~same)
        for i in bad[:3]:
            where = ", ".join(f"{k}={shipped[k].iloc[i]}" for k in keys if k != column)
            failures.append(f"column {column}, row {i} ({where}): shipped {a.iloc[i]!r}, recomputed {b.iloc[i]!r}")
    return largest, failures


def fingerprint_differences(recorded: dict | None, now: dict | None, rtol: float = 1e-4) -> list[str]:
    """How a window's fingerprint now differs from the recorded one: its tokens' hash exactly, its first layer's
    q.k within ``rtol`` (the fingerprint's numbers are rounded, and read in float32)."""
    if recorded is None or now is None:
        return [] if recorded == now else ["fingerprint recorded but not computed now, or the other way"]
    out = []
    for name in sorted(set(recorded) | set(now)):
        a, b = recorded.get(name), now.get(name)
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            x, y = np.array(a, float), np.array(b, float)
            if not np.allclose(x, y, rtol=rtol, atol=rtol):
                out.append(f"{name} moved by up to {float(np.max(np.abs(x - y))):.3g}")
        elif a != b:
            out.append(f"{name} differs ({a!r} recorded, {b!r} now)")
    return out


def _default_seed() -> int:
    """The checked-out commit as a number (a re-run audits the same shards, the next commit others); 0 outside a
    git checkout."""
    commit = _git_commit()
    return int(commit[:12], 16) if commit else 0


def choose(shards: Sequence[Shard], manifest: dict, budget: float, seed: int, always: Sequence[str] = ()) -> list:
    """The shards an audit recomputes: those named in ``always``, then one of every study, then more, in a seeded
    random order, while the manifest's recorded seconds fit in ``budget`` (a study's first shard is taken even past
    it: every study is audited)."""
    rng = random.Random(seed)
    order = list(shards)
    rng.shuffle(order)
    by_name = {s.name: s for s in shards}
    chosen = [by_name[n] for n in always if n in by_name]

    def cost(shard):
        return float(manifest["shards"].get(shard.name, {}).get("seconds", shard.seconds))

    spent = sum(cost(s) for s in chosen)
    for study in sorted({s.study for s in shards}):
        if not any(s.study == study for s in chosen):
            first = next(s for s in order if s.study == study)
            chosen.append(first)
            spent += cost(first)
    for shard in order:
        if shard not in chosen and spent + cost(shard) <= budget:
            chosen.append(shard)
            spent += cost(shard)
    return chosen


def audit(
    shards: Sequence[Shard],
    root=None,
    *,
    budget: float = 360.0,
    seed: int | None = None,
    always: Sequence[str] = (),
    every: bool = False,
    report=None,
    say: Callable[[str], None] | None = None,
    n_jobs: int = 1,
) -> dict:
    """Recompute a sample of the shipped shards end to end and compare them with the shipped files.

    The sample (:func:`choose`): the shards named in ``always`` (the window with the largest leave-one-window-out
    influence on a verdict, say), one of every study, and more drawn with ``seed`` (default: the checked-out commit)
    while the manifest's recorded seconds fit in ``budget``; ``every``: all of them. Each is recomputed into a
    temporary folder under an empty results cache (capture included), and each of its tables compared with the
    shipped one (:func:`compare_tables`) under :data:`TOLERANCE` when this machine runs the kernel path the shipped
    results were computed on (``attnlimits results --audit`` pins it where the CPU has it), else under
    :data:`ACROSS_KERNELS`; every shard's fingerprint is recomputed and
    compared too (cheap: a window's tokens and first layer). Writes the record to ``report`` (a path; None: no
    file): seed, shards, the largest difference per file and column, failures, seconds. Returns it; its ``"ok"``
    says whether everything agreed. ``n_jobs``: shards recomputed at once, each in a worker process of one thread
    (the budget counts their seconds of computation, so 2 jobs take about half of it on 2 cores)."""
    root = Path(shipped_root() if root is None else root)
    manifest = load_manifest(root)
    seed = _default_seed() if seed is None else int(seed)
    chosen = list(shards) if every else choose(shards, manifest, budget, seed, always)
    started = time.perf_counter()
    shipped_on = (manifest.get("recomputed") or {}).get("cpu_capability")
    same = shipped_on is None or shipped_on == cpu_capability()
    record = {
        "seed": seed,
        "budget": budget,
        "kernels": {"shipped": shipped_on, "here": cpu_capability(), "same": same},
        "tolerance": TOLERANCE if same else {"rtol by table": ACROSS_KERNELS, "else": TOLERANCE},
        "shards": {},
        "fingerprints": {},
        "ok": True,
    }
    for shard in shards:
        if shard.fingerprint is None:
            continue
        recorded = manifest["shards"].get(shard.name, {}).get("fingerprint")
        problems = fingerprint_differences(recorded, shard.fingerprint())
        record["fingerprints"][shard.name] = problems or "same"
        record["ok"] &= not problems
    import joblib

    with tempfile.TemporaryDirectory(prefix="attnlimits-audit-") as scratch:
        # an empty results cache: everything recomputed, capture included
        task = joblib.delayed(_audit_in)
        tasks = (task(s, root, manifest, Path(scratch), same, n_jobs > 1) for s in chosen)
        jobs = min(n_jobs, len(chosen)) if n_jobs > 0 else n_jobs
        workers = joblib.Parallel(n_jobs=max(1, jobs) if jobs > 0 else jobs, return_as="generator")
        for shard, out in zip(chosen, workers(tasks) if chosen else (), strict=True):
            record["shards"][shard.name] = out
            record["ok"] &= not out["failures"]
            if say is not None:
                verdict = "agrees" if not out["failures"] else f"DIFFERS ({len(out['failures'])} problems)"
                say(f"[attnlimits] audit: {shard.name} recomputed in {out['seconds']:.1f} s: {verdict}")
    record["seconds"] = round(time.perf_counter() - started, 1)
    if report is not None:
        Path(report).write_text(json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
    return record


def _audit_in(shard: Shard, root: Path, manifest: dict, scratch: Path, same: bool, one_thread: bool) -> dict:
    """:func:`_audit_one` under the empty results cache ``scratch/cache`` (one torch thread in a worker process)."""
    previous = os.environ.get("ATTNLIMITS_RESULTS")
    os.environ["ATTNLIMITS_RESULTS"] = str(scratch / "cache")
    if one_thread:
        import torch

        torch.set_num_threads(1)
    try:
        return _audit_one(shard, root, manifest, scratch / "shards", same)
    finally:
        if previous is None:
            os.environ.pop("ATTNLIMITS_RESULTS", None)
        else:
            os.environ["ATTNLIMITS_RESULTS"] = previous


def _audit_one(shard: Shard, root: Path, manifest: dict, scratch: Path, same: bool) -> dict:
    entry = manifest["shards"].get(shard.name)
    out = {"largest": {}, "failures": [], "seconds": None}
    if entry is None:
        out["failures"].append("not shipped")
        return out
    out["failures"] += _damaged(root, shard.name, entry)
    folder = scratch / shard.name
    out["seconds"] = round(_produce(shard, folder), 1)
    fresh_files = _files(folder)
    for file in sorted(set(entry["files"]) | set(fresh_files)):
        if file not in fresh_files or file not in entry["files"]:
            out["failures"].append(
                f"{shard.name}/{file}: {'not recomputed' if file not in fresh_files else 'not shipped'}"
            )
            continue
        if Path(file).name.removesuffix(PACKED) in shard.records:
            out["largest"][file] = "not compared: it records the machine and the time"
            continue
        largest, failures = _compare_file(root / shard.name / file, folder / file, shard.records, same)
        out["largest"][file] = largest
        out["failures"] += [f"{shard.name}/{file}: {f}" for f in failures]
    return out


def _compare_file(shipped: Path, fresh: Path, records: Sequence[str], same: bool) -> tuple[dict, list]:
    """``({column: largest difference}, failures)`` between a shipped file and its recomputation, by its kind: a
    table (Parquet, or a packed CSV) by :func:`compare_tables`; a packed pickle's tables each so, but those named in
    ``records``; a results-cache entry's ``key.json`` by its key (its files' SHA-256 move with their last bits); a
    packed JSON file by :func:`compare_json`; anything else byte for byte."""
    name = shipped.name.removesuffix(PACKED)
    if shipped.suffix == ".parquet":
        return compare_tables(read_table(shipped), read_table(fresh), **tolerance(name, same))
    if name == cache.KEY_FILE:
        a, b = (json.loads(p.read_text())["key"] for p in (shipped, fresh))
        return {}, [] if a == b else ["the entries' keys differ"]
    a, b = _unpacked(shipped), _unpacked(fresh)
    if name.endswith(".csv"):
        try:
            x, y = (pd.read_csv(io.BytesIO(v)) for v in (a, b))
        except pd.errors.EmptyDataError:  # a table without columns (nothing checked there): its bytes decide
            return {}, [] if a == b else ["its bytes differ"]
        return compare_tables(_results_only(x, records), _results_only(y, records), **tolerance(name, same))
    if name.endswith(".json"):
        return {}, compare_json(json.loads(a), json.loads(b), **tolerance(name, same), skip=records)
    if name.endswith(".pkl"):
        x, y = pickle.loads(a), pickle.loads(b)  # noqa: S301 -- the book's own files, checked against the manifest
        if isinstance(x, dict) and isinstance(y, dict) and set(x) == set(y):
            largest, failures = {}, []
            for table in sorted(set(x) - set(records)):
                if isinstance(x[table], pd.DataFrame) and isinstance(y[table], pd.DataFrame):
                    pair = (_results_only(t[table], records) for t in (x, y))
                    got, bad = compare_tables(*pair, **tolerance(table, same))
                    largest.update({f"{table}.{c}": v for c, v in got.items()})
                    failures += [f"table {table}: {f}" for f in bad]
                elif not _same_value(x[table], y[table]):
                    failures.append(f"table {table} differs")
            return largest, failures
    return {}, [] if a == b else ["its bytes differ"]


def _results_only(table: pd.DataFrame, records: Sequence[str]) -> pd.DataFrame:
    """``table`` without its columns named in ``records`` (the machine's times, not results)."""
    return table.drop(columns=[c for c in records if c in table.columns])


def _same_value(a, b) -> bool:
    try:
        return bool(a == b)
    except ValueError:  # arrays compare element-wise
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def compare_json(shipped, fresh, *, rtol: float, atol: float, skip: Sequence[str] = (), where: str = "") -> list[str]:
    """Where two JSON values differ: numbers within ``atol + rtol * |shipped|``, everything else exactly, the
    members named in ``skip`` not at all (at any depth: what records the machine and the time); each failure names
    its path (``a.b[2]``)."""
    same = {"rtol": rtol, "atol": atol, "skip": skip}
    if isinstance(shipped, dict) and isinstance(fresh, dict):
        keys = [k for k in set(shipped) | set(fresh) if k not in skip]
        missing = sorted(k for k in keys if k not in shipped or k not in fresh)
        if missing:
            return [f"{where or 'the top level'}: members differ ({missing})"]
        return [
            f
            for k in sorted(keys)
            for f in compare_json(shipped[k], fresh[k], **same, where=f"{where}.{k}".lstrip("."))
        ]
    if isinstance(shipped, list) and isinstance(fresh, list) and len(shipped) == len(fresh):
        pairs = enumerate(zip(shipped, fresh, strict=True))
        return [f for i, (x, y) in pairs for f in compare_json(x, y, **same, where=f"{where}[{i}]")]
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (shipped, fresh))
    if numbers and (abs(shipped - fresh) <= atol + rtol * abs(shipped) or (shipped != shipped and fresh != fresh)):
        return []
    return [] if shipped == fresh else [f"{where}: shipped {shipped!r}, recomputed {fresh!r}"]


def digest(data: bytes) -> str:
    """SHA-256 of ``data`` (a fingerprint's token ids)."""
    return hashlib.sha256(data).hexdigest()
