"""attnlimits.infra.shipping: shards shipped once change no byte when recomputed unchanged; --check tells current
(0) from stale (1, naming the module, preset field or version) from corrupt (2, naming the file); the audit
recomputes a seeded sample and fails on a value moved by 1e-6 of itself, naming file, column and row."""

from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from attnlimits.infra import shipping
from attnlimits.infra.shipping import Shard

FAKE = {
    "__init__.py": "",
    "study.py": "from fakeship import util\n\ndef table(window):\n    return util.values(window)\n",
    "util.py": textwrap.dedent(
        """
        import numpy as np
        import pandas as pd

        def values(window):
            rng = np.random.default_rng(window)
            decision = [True, False, True, False, True]
            return pd.DataFrame({"N": np.arange(1, 6), "value": rng.random(5) * 3, "decision": decision})
        """
    ),
}


@pytest.fixture
def fake(tmp_path, monkeypatch):
    root = tmp_path / "fakeship"
    root.mkdir()
    for name, source in FAKE.items():
        (root / name).write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("fakeship")]:
        del sys.modules[name]
    return root


def _shards(windows=(0, 1, 2), preset=None):
    preset = preset or {"name": "tiny", "windows": len(windows)}

    def writer(w):
        def write(folder):
            import importlib

            study = importlib.import_module("fakeship.study")
            shipping.write_table(study.table(w), folder / "rows.parquet")

        return write

    shards = [
        Shard(f"toy/window-{w}", ("fakeship.study",), {"preset": preset, "window": w}, writer(w), seconds=1.0)
        for w in windows
    ]
    other = Shard("other/only", ("fakeship.util",), {"preset": preset}, writer(9), seconds=1.0)
    return [*shards, other]


def _bytes(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_ship_writes_each_shard_once_and_a_recompute_changes_no_byte(fake, tmp_path):
    root = tmp_path / "results"
    shards = _shards()
    assert shipping.ship(shards, root) == [s.name for s in shards]
    manifest = json.loads((root / "manifest.json").read_text())
    assert set(manifest["shards"]) == {s.name for s in shards}
    entry = manifest["shards"]["toy/window-1"]
    assert set(entry["files"]) == {"rows.parquet"} and entry["key"]["window"] == 1
    assert "fakeship.util" in entry["key"]["modules"] and "torch" in entry["key"]["versions"]
    before = _bytes(root)
    assert shipping.ship(shards, root) == []  # everything current: nothing written
    assert _bytes(root) == before
    shutil_tree = root / "toy" / "window-1"
    for p in shutil_tree.iterdir():  # written again from scratch: the same bytes
        p.unlink()
    shutil_tree.rmdir()
    assert shipping.ship(shards, root) == ["toy/window-1"]
    manifest_after = json.loads((root / "manifest.json").read_text())
    assert manifest_after["shards"]["toy/window-1"]["files"] == entry["files"]
    assert shipping.check(shards, root).status == 0


def test_check_names_the_module_the_preset_field_and_the_version_that_changed(fake, tmp_path, monkeypatch):
    root = tmp_path / "results"
    shards = _shards()
    shipping.ship(shards, root)
    assert shipping.check(shards, root).status == 0
    (fake / "util.py").write_text((fake / "util.py").read_text() + "\nSCALE = 2\n")
    report = shipping.check(shards, root)
    assert report.status == 1
    assert all("module fakeship.util changed" in line for line in report.lines) and len(report.lines) == 4
    (fake / "util.py").write_text(FAKE["util.py"])
    (fake / "util.py").write_text(FAKE["util.py"] + '\n"""A docstring-like string edits no code."""\n')
    report = shipping.check(_shards(preset={"name": "tiny", "windows": 4}), root)
    assert report.status == 1 and "preset.windows 3 -> 4" in report.lines[0], report.lines
    real = shipping.versions()
    monkeypatch.setattr(shipping, "versions", lambda: {**real, "torch": "9.9.9"})
    report = shipping.check(shards, root)
    assert report.status == 1 and f"torch {real['torch']} -> 9.9.9" in report.lines[0]
    assert shipping.ship(shards, root) == [s.name for s in shards]  # make results recomputes the stale shards
    assert shipping.check(shards, root).status == 0


def test_check_calls_a_missing_or_changed_file_corrupt_and_a_missing_manifest_too(fake, tmp_path):
    root = tmp_path / "results"
    shards = _shards()
    shipping.ship(shards, root)
    path = root / "toy" / "window-0" / "rows.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    report = shipping.check(shards, root)
    assert report.status == 2 and any(
        "toy/window-0/rows.parquet does not match the manifest" in x for x in report.lines
    )
    path.unlink()
    report = shipping.check(shards, root)
    assert report.status == 2 and any("toy/window-0/rows.parquet is missing" in x for x in report.lines)
    shipping.ship(shards, root)  # repaired
    (root / "toy" / "window-2" / "stray.txt").write_text("x")
    report = shipping.check(shards, root)
    assert report.status == 2 and any("stray.txt is not in the manifest" in x for x in report.lines)
    assert shipping.check(shards[:2], tmp_path / "nothing").status == 2
    (root / "toy" / "window-2" / "stray.txt").unlink()
    report = shipping.check(shards[:1] + shards[2:], root)
    assert report.status == 1 and any("toy/window-1 is shipped but no longer part" in x for x in report.lines)
    report = shipping.check([*shards, *_shards(windows=(7,))[:1]], root)
    assert report.status == 1 and any("toy/window-7 is not shipped" in x for x in report.lines)


def _move_one_value(root, relative, column, row, factor):
    """Move one shipped value by ``factor`` of itself and record the file's new hash, as if it had been shipped so
    (only a recomputation can tell)."""
    path = root / relative
    table = shipping.read_table(path)
    table.loc[row, column] = table.loc[row, column] * (1 + factor)
    shipping.write_table(table, path)
    manifest = json.loads((root / "manifest.json").read_text())
    shard, file = relative.rsplit("/", 1)
    manifest["shards"][shard]["files"][file] = shipping.provenance.sha256_file(path)
    (root / "manifest.json").write_text(json.dumps(manifest))


def test_the_audit_recomputes_and_fails_on_a_value_moved_by_one_millionth(fake, tmp_path):
    root = tmp_path / "results"
    shards = _shards()
    shipping.ship(shards, root)
    report = tmp_path / "audit.json"
    record = shipping.audit(shards, root, every=True, report=report, seed=3)
    assert record["ok"] and set(record["shards"]) == {s.name for s in shards}
    assert json.loads(report.read_text())["seed"] == 3
    assert record["shards"]["toy/window-0"]["largest"]["rows.parquet"]["value"] == 0.0
    _move_one_value(root, "toy/window-1/rows.parquet", "value", 3, 1e-6)
    assert shipping.check(shards, root).status == 0  # the manifest agrees with the files: only the audit can tell
    record = shipping.audit(shards, root, every=True)
    assert not record["ok"]
    failures = record["shards"]["toy/window-1"]["failures"]
    assert len(failures) == 1 and "toy/window-1/rows.parquet" in failures[0]
    assert "column value, row 3" in failures[0] and "N=4" in failures[0], failures
    assert not record["shards"]["toy/window-0"]["failures"]


def test_on_another_kernel_path_the_audit_holds_each_table_to_its_measured_tolerance(fake, tmp_path, monkeypatch):
    root = tmp_path / "results"
    shards = _shards()
    shipping.ship(shards, root)
    recorded = json.loads((root / "manifest.json").read_text())["recomputed"]["cpu_capability"]
    assert recorded == shipping.cpu_capability()
    _move_one_value(root, "toy/window-1/rows.parquet", "value", 3, 1e-6)
    assert shipping.tolerance("rows.parquet", same_kernels=False) == shipping.TOLERANCE  # no measured tolerance
    assert shipping.tolerance("distance.parquet", same_kernels=False)["rtol"] == shipping.ACROSS_KERNELS["distance"]
    monkeypatch.setattr(shipping, "cpu_capability", lambda: "ANOTHER")
    record = shipping.audit(shards, root, every=True)
    assert record["kernels"] == {"shipped": recorded, "here": "ANOTHER", "same": False}
    assert not record["ok"]  # rows.parquet has no looser tolerance: the 1e-6 still fails
    monkeypatch.setitem(shipping.ACROSS_KERNELS, "rows", 1e-5)
    assert shipping.audit(shards, root, every=True)["ok"]  # within the table's tolerance across kernels


def test_the_audit_sample_is_seeded_holds_every_study_and_the_named_shards_and_fits_the_budget(fake, tmp_path):
    shards = _shards(windows=range(10))
    manifest = {"shards": {s.name: {"seconds": 10.0} for s in shards}}
    a = shipping.choose(shards, manifest, budget=35, seed=1)
    assert a == shipping.choose(shards, manifest, budget=35, seed=1)
    assert {s.study for s in a} == {"toy", "other"} and len(a) == 3
    assert [s.name for s in shipping.choose(shards, manifest, budget=0, seed=1, always=["toy/window-7"])][0] == (
        "toy/window-7"
    )
    draws = {tuple(s.name for s in shipping.choose(shards, manifest, budget=35, seed=k)) for k in range(20)}
    assert len(draws) > 5  # another seed, other shards


def test_compare_tables_holds_floats_to_the_tolerance_and_the_rest_exactly():
    a = pd.DataFrame({"k": [1, 2], "x": [1.0, np.nan], "word": ["reproduced", "inconclusive"]})
    largest, failures = shipping.compare_tables(a, a.copy(), rtol=1e-9, atol=0)
    assert not failures and largest["x"] == 0.0
    b = a.assign(x=[1.0 + 1e-10, np.nan])
    assert not shipping.compare_tables(a, b, rtol=1e-9, atol=0)[1]
    assert shipping.compare_tables(a, b.assign(x=[1.0, 0.0]), rtol=1e-9, atol=0)[1]  # NaN against a number
    failures = shipping.compare_tables(a, a.assign(word=["reproduced", "not reproduced"]), rtol=1, atol=1)[1]
    assert len(failures) == 1 and "column word, row 1 (k=2)" in failures[0]
    assert shipping.compare_tables(a, a.assign(k=[1, 3]), rtol=1, atol=1)[1]
    assert shipping.compare_tables(a, a[["k", "x"]], rtol=1, atol=1)[1]
    assert shipping.TOLERANCE["rtol"] < 1e-6  # a value moved by 1e-6 of itself fails
    n = pd.DataFrame({"critical_N": pd.array([5, None, 7], dtype="Int64")})  # no N reached: <NA>
    assert not shipping.compare_tables(n, n.copy(), rtol=0, atol=0)[1]
    assert (
        len(shipping.compare_tables(n, n.assign(critical_N=pd.array([5, 6, 7], dtype="Int64")), rtol=0, atol=0)[1]) == 1
    )


def test_fingerprints_compare_tokens_exactly_and_numbers_to_their_rounding():
    rec = {"tokens_sha256": "ab", "qk": [1.0, 2.0]}
    assert shipping.fingerprint_differences(rec, {"tokens_sha256": "ab", "qk": [1.00001, 2.0]}) == []
    assert shipping.fingerprint_differences(rec, {"tokens_sha256": "cd", "qk": [1.0, 2.0]})
    assert shipping.fingerprint_differences(rec, {"tokens_sha256": "ab", "qk": [1.1, 2.0]})


# ------------------------------------------------------------------------------------------------------------------
# a study's results-cache entries shipped whole
# ------------------------------------------------------------------------------------------------------------------
def _entry_shard(calls=None, value=1.5):
    """A study that caches one entry (a CSV table and a JSON record holding its seconds) through the results
    cache, shipped whole."""
    from attnlimits.infra import cache

    def compute(root):
        if calls is not None:
            calls.append(root)

        def save(result, folder):
            result.to_csv(folder / "table.csv", index=False)
            (folder / "record.json").write_text(json.dumps({"rows": len(result), "seconds": result.seconds.iloc[0]}))

        seconds = float(len(calls or []))  # the machine's time: a column and a JSON member the audit skips
        table = pd.DataFrame({"N": [1, 2, 3], "value": [value, 2.0 * value, np.nan], "seconds": seconds})
        key = cache.study_key("fakeship.study", preset={"name": "tiny"})
        return cache.cached(root / "toy" / "entry", key, lambda: table, save, lambda f: pd.read_csv(f / "table.csv"))

    return shipping.entry_shard("entries/tiny", ("fakeship.study",), {"preset": "tiny"}, compute, records=("seconds",))


def test_an_entry_shard_ships_its_entry_packed_and_restores_it_into_an_empty_cache(fake, tmp_path, monkeypatch):
    from attnlimits.infra import cache

    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path / "cache"))
    calls = []
    shard = _entry_shard(calls)
    assert shipping.ships_entries(shard) and not shipping.ships_entries(_shards()[0])
    root = tmp_path / "results"
    shipping.ship([shard], root)
    files = set(json.loads((root / "manifest.json").read_text())["shards"]["entries/tiny"]["files"])
    assert files == {"toy/entry/key.json", "toy/entry/table.csv.xz", "toy/entry/record.json.xz"}
    assert calls and calls[0] != tmp_path / "cache"  # computed in an empty cache of its own, then installed
    # a fresh checkout: an empty results cache, filled from the shipped entry without computing
    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path / "fresh"))
    assert shipping.restore([shard], root) == ["toy/entry"]
    assert shipping.restore([shard], root) == []  # already there under the same key: left alone
    entry = tmp_path / "fresh" / "toy" / "entry"
    key = cache.study_key("fakeship.study", preset={"name": "tiny"})
    back = cache.Entry(entry, key).read(lambda f: pd.read_csv(f / "table.csv"))  # checks every file's SHA-256
    assert back.value.iloc[1] == 3.0
    # a stale shard (its code changed) is not restored: the study computes it
    (fake / "study.py").write_text(FAKE["study.py"] + "\nSTALE = 1\n")
    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path / "other"))
    assert shipping.restore([shard], root) == []


def test_the_audit_compares_an_entry_shards_tables_but_not_what_records_the_machine(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path / "cache"))
    root = tmp_path / "results"
    shipping.ship([_entry_shard([])], root)
    # the recomputation's record of its seconds differs (a records field): it agrees
    record = shipping.audit([_entry_shard([1, 2, 3])], root, every=True)
    assert record["ok"], record["shards"]
    # a value moved by one millionth of itself: it fails, naming the file, the column and the row
    record = shipping.audit([_entry_shard([], value=1.5 * (1 + 1e-6))], root, every=True)
    failures = record["shards"]["entries/tiny"]["failures"]
    assert not record["ok"] and any("table.csv.xz" in f and "column value, row 0" in f for f in failures), failures


def test_compare_json_holds_numbers_to_the_tolerance_and_skips_the_named_members():
    shipped = {"a": 1.0, "b": [1, "x", {"seconds": 3.0, "c": 2.0}], "seconds": 10.0}
    fresh = {"a": 1.0 + 1e-12, "b": [1, "x", {"seconds": 9.0, "c": 2.0}], "seconds": 11.0}
    assert shipping.compare_json(shipped, fresh, rtol=1e-9, atol=0, skip=("seconds",)) == []
    moved = {**fresh, "b": [1, "y", {"seconds": 9.0, "c": 2.1}]}
    assert shipping.compare_json(shipped, moved, rtol=1e-9, atol=0, skip=("seconds",)) == [
        "b[1]: shipped 'x', recomputed 'y'",
        "b[2].c: shipped 2.0, recomputed 2.1",
    ]
    assert shipping.compare_json(shipped, fresh, rtol=1e-9, atol=0) == [
        "b[2].seconds: shipped 3.0, recomputed 9.0",
        "seconds: shipped 10.0, recomputed 11.0",
    ]


def test_an_entry_at_the_shards_own_path_lies_flat_and_dropping_a_parent_shard_keeps_its_children(
    fake, tmp_path, monkeypatch
):
    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path / "cache"))
    root = tmp_path / "results"
    parent = _shards(windows=(0,))[0]
    parent = Shard("toy", parent.modules, parent.key, parent.write)  # a shard whose folder will hold another's
    shipping.ship([parent], root)
    flat = _entry_shard([])
    flat = shipping.entry_shard("toy/entry", flat.modules, flat.key, flat.write.args[0], records=("seconds",))
    shipping.ship([flat], root)  # the study "toy" no longer holds the shard "toy": it is dropped
    files = json.loads((root / "manifest.json").read_text())["shards"]
    assert list(files) == ["toy/entry"]
    assert sorted(files["toy/entry"]["files"]) == ["key.json", "record.json.xz", "table.csv.xz"]  # flat
    assert not (root / "toy" / "rows.parquet").exists() and (root / "toy" / "entry" / "key.json").is_file()
    assert shipping.check([flat], root).status == 0
    monkeypatch.setenv("ATTNLIMITS_RESULTS", str(tmp_path / "fresh"))
    assert shipping.restore([flat], root) == ["toy/entry"]  # back at its path under the results cache
    assert (tmp_path / "fresh" / "toy" / "entry" / "table.csv").is_file()


def test_a_packed_table_without_columns_is_compared_by_its_bytes(tmp_path):
    """A window of chapter 35 other than the first checks no exactness: its table has no columns. The audit compares
    such a file by its bytes instead of failing to parse it, and a real table in its place is told apart."""
    import lzma

    def packed(name, text):
        path = tmp_path / name
        path.write_bytes(lzma.compress(text.encode()))
        return path

    empty = pd.DataFrame().to_csv(index=False)
    a, b = packed("a.csv.xz", empty), packed("b.csv.xz", empty)
    assert shipping._compare_file(a, b, (), True) == ({}, [])
    full = packed("c.csv.xz", "x\n1\n")
    assert shipping._compare_file(a, full, (), True)[1] == ["its bytes differ"]
