"""attnlimits.infra.cache: an entry records the SHA-256 of every file it stores and is never loaded once one of them
changed, went missing or was joined by an unrecorded file. Each study that keeps entries (the experiments, the
training sweep, the alternatives' tables, the long-context study) is run once on the smallest inputs; then each file
of its entry in turn is corrupted, truncated and deleted, and the next call must recompute, say why, and store the
true result again."""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import tiny_models

from attnlimits import experiments, models
from attnlimits.infra import cache, provenance
from attnlimits.models import texts
from attnlimits.studies import alternatives, long_context, training
from attnlimits.studies.long_context import study as long_study


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


# ----------------------------------------------------------------------------------------------------------------
# the entry and its record
# ----------------------------------------------------------------------------------------------------------------
def _save(result, folder: Path) -> None:
    (folder / "sub").mkdir()
    (folder / "a.txt").write_text(result["a"])
    (folder / "sub" / "b.txt").write_text(result["b"])


def _load(folder: Path) -> dict:
    return {"a": (folder / "a.txt").read_text(), "b": (folder / "sub" / "b.txt").read_text()}


class Counter:
    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return {"a": "x", "b": str(self.calls)}


def test_key_json_records_the_key_and_every_files_hash(tmp_path):
    folder = tmp_path / "entry"
    cache.cached(folder, {"seed": 0}, Counter(), _save, _load)
    record = json.loads((folder / "key.json").read_text())
    assert record["key"] == cache.Entry(folder, {}).stored_key() == {"seed": 0}
    assert record["files"] == {name: provenance.sha256_file(folder / name) for name in ("a.txt", "sub/b.txt")}


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda f: (f / "sub" / "b.txt").write_text("2"), "sub/b.txt changed since it was written"),
        (lambda f: (f / "sub" / "b.txt").unlink(), "sub/b.txt is missing"),
        (lambda f: (f / "sub" / "extra.csv").write_text("x"), "sub/extra.csv was not written with the entry"),
        (
            lambda f: (f / "key.json").write_text(json.dumps(json.loads((f / "key.json").read_text())["key"])),
            "records no hashes",  # an entry written before entries recorded their files' hashes
        ),
    ],
    ids=["edited", "deleted", "added", "no-hashes"],
)
def test_an_entry_whose_files_differ_from_its_record_is_recomputed(tmp_path, capsys, damage, why):
    folder, compute = tmp_path / "entry", Counter()
    cache.cached(folder, {"seed": 0}, compute, _save, _load)
    damage(folder)
    with pytest.raises(cache.StaleEntry, match=why):
        cache.Entry(folder, {"seed": 0}).read(_load)
    capsys.readouterr()
    assert cache.cached(folder, {"seed": 0}, compute, _save, _load) == {"a": "x", "b": "2"}
    said = capsys.readouterr().err
    assert compute.calls == 2 and f"recomputing: {folder}" in said and why in said
    assert cache.cached(folder, {"seed": 0}, compute, _save, _load)["b"] == "2"  # stored whole again


def test_a_hidden_file_the_entry_did_not_write_is_ignored(tmp_path):
    folder, compute = tmp_path / "entry", Counter()
    cache.cached(folder, {"seed": 0}, compute, _save, _load)
    (folder / ".DS_Store").write_bytes(b"\0")  # what a file browser leaves
    assert cache.cached(folder, {"seed": 0}, compute, _save, _load)["b"] == "1" and compute.calls == 1


# ----------------------------------------------------------------------------------------------------------------
# every study's entries
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Study:
    """How to fill a study's entry under ``root`` (``call``), and the function its cache calls to compute it
    (``module.attribute``, replaced by a counter to see a recomputation)."""

    call: Callable[[Path], object]
    module: object
    attribute: str


@pytest.fixture(scope="module", autouse=True)
def code_read_once():
    """Each module's code hash computed once for this file: the keys stay those of the code the entries were
    computed with, even when a source is edited while the tests run."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cache, "code_hash", functools.cache(cache.code_hash))
        yield


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A tiny random-init Llama with the offline fallback's tokenizer, loaded by attnlimits.models.load."""
    sizes = dict(seed=2, positions=128, layers=1, heads=2, kv_heads=1, hidden=16, intermediate=32)
    return models.load(str(tiny_models.saved_llama(tmp_path_factory.mktemp("tiny-llama"), **sizes)))


def _studies(model) -> dict[str, Study]:
    text = texts.load("pydoc-topics")
    sweep = training.get_preset("reduced").replace(
        seeds=(0,), steps=2, batch=2, L=8, N_fixed=2, temperatures=(1.0,), fractions=(0.25,), lengths=(8,),
        normalizers=("softmax",), pool=8, test=8,
    )  # fmt: skip
    synthetic = alternatives.get_preset("reduced").replace(
        synthetic_L=(8, 16), heads=2, rows=2, n_points=3, T_grid=(1.0,)
    )
    long = long_context.get_preset("quick").replace(lengths=(32,), rows=4, g_rows=4, alg4_N=(1,), T=(1.0,))
    return {
        "experiments": Study(
            lambda root: experiments.results(model, text, "quick", root=root), experiments.runs, "run"
        ),
        "training": Study(  # one piece of the sweep: each is an entry of its own
            lambda root: training.job_results(sweep, training.jobs(sweep)[0][0], root=root),
            training.study,
            "_piece",
        ),
        "alternatives": Study(
            lambda root: alternatives.results(preset=synthetic, root=root),
            alternatives.study,
            "synthetic_tables",
        ),
        "long_context": Study(
            lambda root: long_context.results(model, text, long, root=root), long_study, "window_run"
        ),
    }


@dataclass
class Filled:
    """A study's entry as first written: the study, its results root and entry folder, a copy of the entry, the
    result the study computed and the one read back from the entry."""

    study: Study
    root: Path
    folder: Path
    pristine: Path
    computed: object
    stored: object

    @property
    def files(self) -> list[str]:
        return sorted(p.relative_to(self.pristine).as_posix() for p in self.pristine.rglob("*") if p.is_file())

    def restore(self) -> None:
        shutil.rmtree(self.folder)
        shutil.copytree(self.pristine, self.folder)


@pytest.fixture(scope="module", params=["experiments", "training", "alternatives", "long_context"])
def filled(request, tmp_path_factory, tiny_model) -> Filled:
    study = _studies(tiny_model)[request.param]
    root = tmp_path_factory.mktemp(request.param)
    computed = study.call(root)
    (key,) = root.rglob("key.json")
    pristine = tmp_path_factory.mktemp("pristine") / "entry"
    shutil.copytree(key.parent, pristine)
    return Filled(study, root, key.parent, pristine, computed, study.call(root))


def _parts(result) -> dict:
    return result if isinstance(result, dict) else {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}


def _assert_same(result, expected) -> None:
    got, want = _parts(result), _parts(expected)
    assert list(got) == list(want)
    for name, value in want.items():
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(got[name], value, obj=name)
        else:
            assert got[name] == value, name


def _corrupt(path: Path) -> None:
    """Change one digit (the last): the file still parses, and reads back other numbers."""
    data = bytearray(path.read_bytes())
    at = max((i for i, b in enumerate(data) if chr(b).isdigit()), default=None)
    if at is None:
        data += b"0"
    else:
        data[at] = ord(str((int(chr(data[at])) + 1) % 10))
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


DAMAGES = {
    "corrupt": (_corrupt, "changed since it was written"),
    "truncate": (_truncate, "changed since it was written"),
    "delete": (Path.unlink, "is missing"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_each_damaged_file_of_a_study_entry_is_recomputed(filled, damage, monkeypatch, capsys):
    harm, why = DAMAGES[damage]
    assert "key.json" in filled.files and len(filled.files) >= 2
    calls, compute = [], getattr(filled.study.module, filled.study.attribute)

    @functools.wraps(compute)  # its name is part of some keys
    def counted(*args, **kwargs):
        calls.append(1)
        return filled.computed

    monkeypatch.setattr(filled.study.module, filled.study.attribute, counted)
    root = filled.root
    for name in filled.files:
        filled.restore()
        _assert_same(filled.study.call(root), filled.stored)  # a whole entry is read back, not computed
        assert not calls, name
        harm(filled.folder / name)
        capsys.readouterr()
        result = filled.study.call(root)
        said = capsys.readouterr().err
        assert len(calls) == 1, f"{damage} {name}: not recomputed"
        assert result is filled.computed, name
        assert "recomputing: " in said and name in said, f"{damage} {name}: {said!r}"
        if name != "key.json":
            assert f"{name} {why}" in said, f"{damage} {name}: {said!r}"
        for stored in filled.files:  # the result is stored whole again
            assert (filled.folder / stored).read_bytes() == (filled.pristine / stored).read_bytes(), stored
        _assert_same(filled.study.call(root), filled.stored)
        assert len(calls) == 1, name
        calls.clear()
