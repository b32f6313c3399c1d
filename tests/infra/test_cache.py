"""attnlimits.infra.cache: the code hash follows the imports; entries read back only under their key, are written
atomically (a writer killed mid-save leaves nothing that reads back), and two processes filling one entry compute
once; every study keys its entries by its own module's code; one results root."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from attnlimits.infra import cache, provenance
from attnlimits.studies import alternatives, training

# ----------------------------------------------------------------------------------------------------------------
# the code hash
# ----------------------------------------------------------------------------------------------------------------
FAKE = {
    "__init__.py": "from fakepkg import heavy\n__version__ = '1'\n",
    "study.py": """
        from fakepkg import core, __version__
        from fakepkg.sub.leaf import f

        class Model:
            from fakepkg import inclass

        def compute():
            import fakepkg.lazy
            from . import rel
            try:
                from .sub import other
            except ImportError:
                pass
        """,
    "core.py": "import math\nfrom fakepkg import util\n",
    "util.py": "X = 1\n",
    "sub/__init__.py": "",
    "sub/leaf.py": "def f():\n    return 1\n",
    "sub/other.py": "",
    "lazy.py": "",
    "rel.py": "",
    "inclass.py": "",
    "heavy.py": "",
    "unused.py": "import fakepkg.study\n",
}
STUDY_NEEDS = [
    "fakepkg.core",
    "fakepkg.inclass",
    "fakepkg.lazy",
    "fakepkg.rel",
    "fakepkg.study",
    "fakepkg.sub",
    "fakepkg.sub.leaf",
    "fakepkg.sub.other",
    "fakepkg.util",
]


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    root = tmp_path / "fakepkg"
    for name, source in FAKE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    return root


def test_dependencies_follow_module_and_function_level_imports(fake_package):
    assert cache.dependencies("fakepkg.study") == STUDY_NEEDS
    assert cache.dependencies("fakepkg.sub.leaf") == ["fakepkg.sub", "fakepkg.sub.leaf"]
    with pytest.raises(ValueError, match="modules"):
        cache.dependencies("fakepkg.nothing")
    with pytest.raises(ValueError, match="modules"):
        cache.dependencies()


def test_code_hash_changes_with_a_dependency_only(fake_package):
    before = cache.code_hash("fakepkg.study")
    for name in ("unused.py", "heavy.py", "__init__.py"):  # not imported by the study, or the top-level package
        (fake_package / name).write_text((fake_package / name).read_text() + "# edited\n")
        assert cache.code_hash("fakepkg.study") == before, name
    (fake_package / "util.py").write_text("X = 2\n")  # imported by core, which the study imports
    assert cache.code_hash("fakepkg.study") != before
    after = cache.code_hash("fakepkg.study")
    (fake_package / "lazy.py").write_text("Y = 1\n")  # imported inside a function
    assert cache.code_hash("fakepkg.study") != after


def test_code_hash_reads_code_not_docstrings_comments_or_name_tables(fake_package):
    """A docstring or comment edited, or a name added to a package's lazy name table, recomputes nothing; a
    statement changed anywhere (a default, a name table outside a package's __init__) does."""
    before = cache.code_hash("fakepkg.study")
    leaf = fake_package / "sub" / "leaf.py"
    leaf.write_text('"""The leaf."""\n\ndef f():  # the one function\n    """One."""\n    return 1\n')
    (fake_package / "sub" / "__init__.py").write_text(
        '"""Sub."""\nNAMES = {"f": "fakepkg.sub.leaf"}\n__all__ = ["f"]\n'
    )
    assert cache.code_hash("fakepkg.study") == before
    assert (
        cache.module_hashes("fakepkg.study")["fakepkg.sub.leaf"]
        == cache.module_hashes("fakepkg.sub.leaf")["fakepkg.sub.leaf"]
    )
    leaf.write_text("def f():\n    return 2\n")
    assert cache.code_hash("fakepkg.study") != before
    leaf.write_text("def f():\n    return 1\n")
    (fake_package / "sub" / "__init__.py").write_text("LIMIT = 3\n")  # a statement of the package, not a name table
    assert cache.code_hash("fakepkg.study") != before
    (fake_package / "sub" / "__init__.py").write_text("")
    (fake_package / "util.py").write_text("NAMES = {'x': 1}\n")  # a module's own table is code
    assert cache.code_hash("fakepkg.study") != before
    assert cache.code_of(b"x = 1") != cache.code_of(b"x = '1'")


def test_study_hashes_cover_the_code_they_run():
    runs = cache.dependencies("attnlimits.experiments.runs")
    for needed in (
        "attnlimits.core.rowstats",
        "attnlimits.core.normalizers",
        "attnlimits.models.capturing",
        "attnlimits.models.texts",
    ):
        assert needed in runs
    assert "attnlimits.reporting.book_claims" not in runs and "attnlimits.cli" not in runs
    assert "attnlimits.core.normalizers" in cache.dependencies("attnlimits.studies.training")
    assert "attnlimits.core.normalizers" in cache.dependencies("attnlimits.studies.alternatives")
    assert "attnlimits.experiments.paper_claims" in cache.dependencies("attnlimits.reporting.book_claims")


# ----------------------------------------------------------------------------------------------------------------
# entries
# ----------------------------------------------------------------------------------------------------------------
def _save(result, folder: Path) -> None:
    (folder / "a.txt").write_text(result["a"])
    (folder / "b.txt").write_text(result["b"])


def _load(folder: Path) -> dict:
    return {"a": (folder / "a.txt").read_text(), "b": (folder / "b.txt").read_text()}


class Counter:
    def __init__(self, value="x"):
        self.calls, self.value = 0, value

    def __call__(self):
        self.calls += 1
        return {"a": self.value, "b": str(self.calls)}


def test_an_entry_is_read_back_under_its_key_only(tmp_path):
    folder, compute = tmp_path / "model" / "text" / "paper", Counter()
    first = cache.cached(folder, {"grid": (1, 2), "seed": 0}, compute, _save, _load)
    again = cache.cached(folder, {"grid": [1, 2], "seed": 0}, compute, _save, _load)  # a tuple reads back as a list
    assert first == again == {"a": "x", "b": "1"} and compute.calls == 1
    assert json.loads((folder / "key.json").read_text())["key"] == {"grid": [1, 2], "seed": 0}
    other = cache.cached(folder, {"grid": [1, 2], "seed": 1}, compute, _save, _load)
    assert other["b"] == "2" and compute.calls == 2  # a changed key recomputes and replaces the entry
    assert cache.Entry(folder, {"grid": [1, 2], "seed": 1}).read(_load) == other
    with pytest.raises(cache.StaleEntry, match="seed"):
        cache.Entry(folder, {"grid": [1, 2], "seed": 0}).read(_load)
    assert sorted(p.name for p in folder.parent.iterdir()) == ["paper", "paper.lock"]  # no leftovers
    with pytest.raises(TypeError, match="key"):
        cache.cached(folder, {"x": object()}, compute, _save, _load)


@pytest.mark.parametrize(
    "damage",
    [
        lambda f: (f / "key.json").write_text('{"seed": '),  # truncated key
        lambda f: (f / "key.json").unlink(),
        lambda f: (f / "b.txt").unlink(),  # a missing file
        lambda f: (f / "key.json").write_text("[1, 2]"),
    ],
)
def test_a_corrupt_entry_is_recomputed(tmp_path, damage):
    folder, compute = tmp_path / "entry", Counter()
    cache.cached(folder, {"seed": 0}, compute, _save, _load)
    damage(folder)
    assert cache.cached(folder, {"seed": 0}, compute, _save, _load)["b"] == "2"
    assert cache.cached(folder, {"seed": 0}, compute, _save, _load)["b"] == "2"  # and stored whole again


def _python(script: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *map(str, args)], stdout=subprocess.PIPE, text=True
    )


def _wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


SLOW_SAVE = """
    import sys, time, pathlib
    from attnlimits.infra import cache
    folder, saving = map(pathlib.Path, sys.argv[1:3])

    def save(result, entry):
        (entry / "a.txt").write_text(result["a"])
        saving.write_text("half saved")
        time.sleep(120)
        (entry / "b.txt").write_text(result["b"])

    cache.cached(folder, {"seed": 0}, lambda: {"a": "x", "b": "y"}, save, lambda f: None)
"""


def test_a_writer_killed_mid_save_leaves_nothing_that_reads_back(tmp_path):
    folder, saving = tmp_path / "entry", tmp_path / "saving"
    writer = _python(SLOW_SAVE, folder, saving)
    try:
        _wait_for(saving)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    assert list(tmp_path.glob(".entry.new-*")), "the writer was not killed mid-save"
    with pytest.raises(cache.StaleEntry):
        cache.Entry(folder, {"seed": 0}).read(_load)
    compute = Counter()
    assert cache.cached(folder, {"seed": 0}, compute, _save, _load) == {"a": "x", "b": "1"}
    assert compute.calls == 1 and not list(tmp_path.glob(".entry.*"))  # the leftover is cleaned up


FILL = """
    import os, sys, time, pathlib
    from attnlimits.infra import cache
    folder, count, started, other = map(pathlib.Path, sys.argv[1:5])

    def compute():
        with count.open("a") as f:
            f.write("computed\\n")
        deadline = time.monotonic() + 60
        while not other.exists() and time.monotonic() < deadline:  # the other process is running too
            time.sleep(0.05)
        time.sleep(1.0)
        return {"a": f"computed by {os.getpid()}", "b": "-"}

    def save(result, entry):
        (entry / "a.txt").write_text(result["a"])
        (entry / "b.txt").write_text(result["b"])

    def load(entry):
        return {"a": (entry / "a.txt").read_text(), "b": (entry / "b.txt").read_text()}

    started.write_text("started")
    print(cache.cached(folder, {"seed": 0}, compute, save, load)["a"])
"""


def test_two_processes_filling_one_entry_compute_once(tmp_path):
    folder, count = tmp_path / "entry", tmp_path / "count"
    one = _python(FILL, folder, count, tmp_path / "one", tmp_path / "two")
    two = _python(FILL, folder, count, tmp_path / "two", tmp_path / "one")
    outputs = [p.communicate(timeout=120)[0].strip() for p in (one, two)]
    assert one.returncode == two.returncode == 0
    assert outputs[0] == outputs[1] and outputs[0].startswith("computed by ")
    assert count.read_text().splitlines() == ["computed"]


def test_load_current_checks_the_code_only(tmp_path, monkeypatch):
    folder = tmp_path / "entry"
    key = cache.study_key("attnlimits.studies.training", model_sha256="abc", seed=0)
    assert key["code_sha256"] == cache.code_hash("attnlimits.studies.training") and "torch" in key
    cache.cached(folder, key, Counter(), _save, _load)
    assert cache.load_current(folder, "attnlimits.studies.training", _load)["a"] == "x"
    with pytest.raises(cache.StaleEntry, match="code_sha256"):
        cache.load_current(folder, "attnlimits.core.normalizers", _load)
    with pytest.raises(cache.StaleEntry, match="no complete entry"):
        cache.load_current(tmp_path / "absent", "attnlimits.studies.training", _load)


def test_write_text_replaces_the_file_whole(tmp_path):
    path = cache.write_text(tmp_path / "sub" / "manifest.json", "old")
    cache.write_text(path, "new")
    assert path.read_text() == "new" and [p.name for p in path.parent.iterdir()] == ["manifest.json"]


# ----------------------------------------------------------------------------------------------------------------
# the studies
# ----------------------------------------------------------------------------------------------------------------
def test_each_study_keys_its_entries_by_its_own_code(tmp_path, monkeypatch):
    seen = {}

    def record(folder, key, compute, save, load):
        seen[Path(folder).relative_to(tmp_path).parts[0]] = (Path(folder), key)
        return None

    monkeypatch.setattr(cache, "cached", record)
    piece = training.jobs("reduced")[0][0]
    training.job_results("reduced", piece, root=tmp_path)
    alternatives.results(preset="quick", root=tmp_path)
    folder, key = seen["training"]
    assert folder == tmp_path / "training" / "reduced" / piece and key["job"] == piece
    assert key["preset"] == json.loads(json.dumps(training.get_preset("reduced").as_dict()))
    assert key["code_sha256"] == cache.code_hash("attnlimits.studies.training.study")
    folder, key = seen["alternatives"]
    assert folder.parent == tmp_path / "alternatives" and folder.name.startswith("synthetic-")
    assert key["code_sha256"] == cache.code_hash("attnlimits.studies.alternatives") and key["fn"] == "synthetic_tables"


@pytest.mark.parametrize("value", [None, ""])
def test_unset_or_empty_results_variable_means_the_default_root(monkeypatch, value):
    from attnlimits import experiments

    if value is None:
        monkeypatch.delenv("ATTNLIMITS_RESULTS", raising=False)
    else:
        monkeypatch.setenv("ATTNLIMITS_RESULTS", value)
    default = Path(__file__).resolve().parents[2] / ".cache" / "results"
    assert provenance.results_root() == default
    assert experiments.results_folder(object(), "some text", "quick").parents[2] == default
    monkeypatch.setenv("ATTNLIMITS_RESULTS", "/somewhere/else")
    assert experiments.results_folder(object(), "some text", "quick").parents[2] == Path("/somewhere/else")
