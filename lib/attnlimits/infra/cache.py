"""The results cache of every study: one entry per computed result, keyed by everything that produced it.

A study (the experiments, the training sweep of chapter 32, the alternative normalisers of chapter 33, the long
contexts of chapter 35) keeps each result in an entry folder under :func:`attnlimits.infra.provenance.results_root`
with a readable name (``<root>/<model>/<text>/<preset>[-options]`` for the experiments, ``<root>/training/<preset>``,
``<root>/alternatives/<name>-<data>``, ``<root>/<model>/<text>/long-<preset>``). Beside the result's own files
the entry holds ``key.json``: what produced it (``"key"``) and the SHA-256 of every file the entry stores
(``"files"``: relative paths, sub-folders included). A read returns the stored result only when that key equals
the key wanted now and every file still has its recorded hash. The key covers:

- the data: the model's and the text's SHA-256 (or a fingerprint of the arrays a function was given);
- the grids and options: the preset's :meth:`~attnlimits.infra.presets.StudyPreset.as_dict`, the options, the seed;
- the code: :func:`code_hash` of the module whose function computes the result, which covers that module and
  every attnlimits module it imports, transitively (a fix in ``normalizers.py`` recomputes every study that uses
  it; an edit to ``report.py`` recomputes none), each read as its syntax tree without comments and docstrings
  (:func:`code_of`: an edited docstring recomputes nothing);
- the torch version.

Not covered: other installed packages than torch, the machine, and code reached otherwise than by an import
statement. :func:`cached` is the one way to fill an entry: the result is saved into a temporary sibling folder,
``key.json`` last, and renamed into place, all under a :class:`filelock.FileLock` on the sibling ``<entry>.lock``;
so an interrupted run leaves nothing that reads back, and of two processes filling one entry the second waits,
then reads what the first wrote.

A corrupt entry is never loaded: an unreadable ``key.json``, a recorded file that is missing or whose bytes changed
(edited, truncated), or a file that was not written with the entry makes it stale (:class:`StaleEntry`, naming the
file and why), and :func:`cached` recomputes it, saying why on stderr. Hidden files (a name starting with ``.``,
such as a file browser's ``.DS_Store``) that the entry did not record are ignored. An entry that records no hashes
(written before entries recorded them) is stale too. Hashing streams each file once; loading reads it again.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import pickle
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

from attnlimits.infra.provenance import say, sha256_file

__all__ = [
    "Entry",
    "StaleEntry",
    "cached",
    "code_hash",
    "code_of",
    "dependencies",
    "load_current",
    "module_hashes",
    "study_key",
    "write_text",
]

KEY_FILE = "key.json"

#: What a corrupt entry raises when its files are read (a missing or truncated file, a bad table or pickle).
_CORRUPT = (OSError, ValueError, KeyError, IndexError, EOFError, pickle.UnpicklingError)


# ----------------------------------------------------------------------------------------------------------------
# the code a result depends on
# ----------------------------------------------------------------------------------------------------------------
def _package_dir(root: str) -> Path:
    spec = importlib.util.find_spec(root)  # a top-level name: found without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"modules: {root!r} is not an importable package")
    return Path(list(spec.submodule_search_locations)[0])


def _source(base: Path, module: str) -> Path | None:
    """The file of ``module`` (``a.b`` under the package folder ``base``): ``a/b.py`` or ``a/b/__init__.py``."""
    parts = module.split(".")[1:]
    folder = base.joinpath(*parts)
    for path in (folder / "__init__.py", folder.with_suffix(".py")):
        if parts and path.is_file():
            return path
    return None


_PARSED: dict[str, list] = {}


def _import_statements(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of the file, at any depth (inside functions, classes, if/try/with blocks); a source
    is parsed once per process."""
    source = path.read_bytes()
    memo = hashlib.sha256(source).hexdigest()
    if memo not in _PARSED:
        found, todo = [], list(ast.parse(source, filename=str(path)).body)
        while todo:  # statements only: an import is never inside an expression
            node = todo.pop()
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                todo.extend(getattr(node, field, None) or [])
        _PARSED[memo] = found
    return _PARSED[memo]


def _imports(module: str, path: Path, base: Path) -> set[str]:
    """The modules of ``module``'s own package that its source imports anywhere (module or function level)."""
    root = module.split(".")[0]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def add(name: str) -> None:
        parts = name.split(".")
        for i in range(2, len(parts) + 1):  # a.b.c imports a.b too (a itself is never followed)
            found.add(".".join(parts[:i]))

    for node in _import_statements(path):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == root:
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                where = ".".join(anchor + ([node.module] if node.module else []))
            else:
                where = node.module or ""
            if where.split(".")[0] != root:
                continue
            add(where)
            for alias in node.names:  # from a.b import c: c may be a submodule of a.b
                if _source(base, f"{where}.{alias.name}") is not None:
                    add(f"{where}.{alias.name}")
    return {name for name in found if _source(base, name) is not None}


def dependencies(*modules: str) -> list[str]:
    """The named modules and every module of their package they import, transitively, sorted.

    Found by parsing the sources with :mod:`ast`, not by importing them: ``import p.a.b`` and ``from p.a.b import
    f`` depend on ``p.a.b`` and on the subpackage ``p.a`` (its ``__init__`` runs; so does a named module's);
    ``from p import x`` on ``p.x`` when x is a submodule. The top-level ``p/__init__.py`` is not followed
    (attnlimits' imports every submodule on demand and computes nothing).
    """
    if not modules:
        raise ValueError("modules: name at least one module, e.g. 'attnlimits.studies.training'")
    todo, seen, bases = list(modules), {}, {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        root = name.split(".")[0]
        base = bases.setdefault(root, _package_dir(root))
        path = _source(base, name)
        if path is None:
            raise ValueError(f"modules: {name!r} is not a module inside a package (e.g. 'attnlimits.studies.training')")
        seen[name] = path
        parents = {name.rsplit(".", i)[0] for i in range(1, name.count("."))}  # their __init__ runs first
        todo.extend((_imports(name, path, base) | parents) - set(seen))
    return sorted(seen)


def code_hash(*modules: str) -> str:
    """SHA-256 of the code of the named modules and of every module they import (:func:`dependencies`), each
    module's code as :func:`module_hashes` reads it."""
    digest = hashlib.sha256()
    for name, sha in module_hashes(*modules).items():
        digest.update(name.encode() + b"\0" + sha.encode() + b"\0")
    return digest.hexdigest()


def module_hashes(*modules: str) -> dict[str, str]:
    """``{module: SHA-256 of its code}`` for the named modules and every module they import (:func:`dependencies`).

    A module's code is its syntax tree without comments and docstrings (:func:`code_of`): a docstring or comment
    edited recomputes nothing, a changed statement recomputes what depends on it."""
    out = {}
    for name in dependencies(*modules):
        path = _source(_package_dir(name.split(".")[0]), name)
        out[name] = hashlib.sha256(code_of(path.read_bytes(), package=path.name == "__init__.py")).hexdigest()
    return out


#: The lazy name tables of a package's ``__init__`` (:func:`attnlimits.lazy`): they import nothing when the
#: package is imported, so adding a name to them changes no computation.
_NAME_TABLES = ("NAMES", "MODULES", "__all__")


def code_of(source: bytes, *, package: bool = False) -> bytes:
    """The code of a module's ``source``, as its hash reads it: the dump of its syntax tree without docstrings
    (comments are not in the tree); in a package's ``__init__`` (``package``) also without the top-level
    assignments of its lazy name tables (:data:`_NAME_TABLES`)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    if package:
        tree.body = [node for node in tree.body if not _name_table(node)]
    return ast.dump(tree, include_attributes=False).encode()


def _name_table(node: ast.stmt) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return bool(targets) and all(isinstance(t, ast.Name) and t.id in _NAME_TABLES for t in targets)


# ----------------------------------------------------------------------------------------------------------------
# entries
# ----------------------------------------------------------------------------------------------------------------
def _as_dict(value):
    if callable(getattr(value, "as_dict", None)):  # a preset (attnlimits.infra.presets.StudyPreset) stands for its data
        return value.as_dict()
    raise TypeError(f"{type(value).__name__} is not JSON-able")


def _plain(key: dict) -> dict:
    """``key`` as it reads back from JSON (tuples become lists, a preset its ``as_dict()``), so that a stored key
    compares equal."""
    if not isinstance(key, dict):
        raise TypeError(f"key: must be a dict of JSON-able values, got {type(key).__name__}")
    try:
        return json.loads(json.dumps(key, sort_keys=True, default=_as_dict))
    except (TypeError, ValueError) as e:
        raise TypeError(f"key: must hold JSON-able values only ({e})") from None


def study_key(module: str | tuple[str, ...], **parts) -> dict:
    """The key of a result computed by ``module``'s code (a module name, or a tuple of them): ``parts`` (data
    hashes, preset, options, seed) plus ``code_sha256`` (:func:`code_hash` of the module(s)) and the torch
    version."""
    import torch

    modules = (module,) if isinstance(module, str) else tuple(module)
    return _plain({**parts, "code_sha256": code_hash(*modules), "torch": torch.__version__})


class StaleEntry(ValueError):
    """An entry that is missing, incomplete, unreadable, keyed otherwise than wanted, or whose files differ from
    those it recorded."""


def _stored_files(folder: Path) -> list[str]:
    """The files of an entry folder but ``key.json``: paths relative to it (``/``-separated, sub-folders included),
    sorted."""
    files = (path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    return sorted(name for name in files if name != KEY_FILE)


def _hidden(name: str) -> bool:
    return any(part.startswith(".") for part in name.split("/"))


class Entry:
    """One cached result: the folder ``folder`` holding its files and ``key.json``, wanted under ``key``."""

    def __init__(self, folder, key: dict):
        self.folder = Path(folder)
        self.key = _plain(key)

    def __repr__(self) -> str:
        return f"Entry({str(self.folder)!r})"

    def lock(self) -> FileLock:
        """The lock of this entry, on the sibling file ``<folder>.lock`` (held while the entry is filled)."""
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(self.folder.with_name(self.folder.name + ".lock"))

    def _record(self) -> tuple[dict, dict[str, str]]:
        """What ``key.json`` records: the key and the SHA-256 of each stored file; :class:`StaleEntry` when there is
        no complete, readable record."""
        path = self.folder / KEY_FILE
        try:
            record = json.loads(path.read_text())
        except FileNotFoundError:
            raise StaleEntry(f"{self.folder} holds no complete entry (no {KEY_FILE})") from None
        except (OSError, ValueError) as e:
            raise StaleEntry(f"{path} is unreadable ({e})") from None
        if isinstance(record, dict) and "files" not in record:
            raise StaleEntry(f"{path} records no hashes of the entry's files (written before entries recorded them)")
        if not isinstance(record, dict) or not isinstance(record.get("key"), dict):
            raise StaleEntry(f"{path} holds no key")
        files = record["files"]
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise StaleEntry(f"{path} holds no hashes of the entry's files")
        return record["key"], files

    def stored_key(self) -> dict:
        """The key the entry was written under; :class:`StaleEntry` when there is no complete, readable entry."""
        return self._record()[0]

    def _check_files(self, files: dict[str, str]) -> None:
        """:class:`StaleEntry` naming each file that is missing, whose SHA-256 differs from the recorded one in
        ``files`` (relative path to hash), or that was not recorded (hidden files aside)."""
        problems = []
        for name, digest in sorted(files.items()):
            path = self.folder / name
            if not path.is_file():
                problems.append(f"{name} is missing")
            elif sha256_file(path) != digest:
                problems.append(f"{name} changed since it was written ({path.stat().st_size} bytes, SHA-256 differs)")
        problems += [
            f"{name} was not written with the entry"
            for name in _stored_files(self.folder)
            if name not in files and not _hidden(name)
        ]
        if problems:
            raise StaleEntry(f"{self.folder} is corrupt: " + "; ".join(problems))

    def read(self, load: Callable[[Path], Any]) -> Any:
        """``load(folder)`` when the stored key equals the wanted one and every file has its recorded SHA-256;
        :class:`StaleEntry` otherwise, or when the entry's files do not load."""
        stored, files = self._record()
        if stored != self.key:
            changed = sorted(k for k in set(stored) | set(self.key) if stored.get(k) != self.key.get(k))
            raise StaleEntry(f"{self.folder} was computed under another key ({KEY_FILE} differs in {changed})")
        self._check_files(files)
        try:
            return load(self.folder)
        except _CORRUPT as e:
            raise StaleEntry(f"{self.folder} does not load ({type(e).__name__}: {e})") from None

    def write(self, result: Any, save: Callable[[Any, Path], Any]) -> None:
        """Store ``result``: ``save(result, folder)`` into a temporary sibling, then ``key.json`` (the key and the
        SHA-256 of every file saved), then renamed into place (an old entry is moved aside first, then removed).
        Call it holding :meth:`lock`."""
        parent, name = self.folder.parent, self.folder.name
        for leftover in [*parent.glob(f".{name}.new-*"), *parent.glob(f".{name}.old-*")]:
            shutil.rmtree(leftover, ignore_errors=True)  # what an interrupted writer left (the lock is ours now)
        tmp = _sibling(self.folder, "new")
        tmp.mkdir(parents=True)
        try:
            save(result, tmp)
            files = {name: sha256_file(tmp / name) for name in _stored_files(tmp)}
            record = {"key": self.key, "files": files}
            (tmp / KEY_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
            old = _sibling(self.folder, "old") if self.folder.exists() else None
            if old is not None:
                self.folder.rename(old)
            tmp.rename(self.folder)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _sibling(path: Path, what: str) -> Path:
    """A fresh hidden sibling of ``path``: ``.<name>.<what>-<random>``."""
    return path.with_name(f".{path.name}.{what}-{uuid.uuid4().hex[:12]}")


def cached(
    folder, key: dict, compute: Callable[[], Any], save: Callable[[Any, Path], Any], load: Callable[[Path], Any]
):
    """The result stored in the entry ``folder`` under ``key``, else ``compute()``, stored with ``save(result,
    folder)`` and returned. ``load(folder)`` reads a stored result back. Safe across processes: the entry is
    filled under its lock, and a process that waited for it reads what the other wrote."""
    entry = Entry(folder, key)
    try:
        return entry.read(load)
    except StaleEntry:
        pass
    with entry.lock():
        try:
            return entry.read(load)
        except StaleEntry as why:
            if entry.folder.exists():  # an entry only appears whole (renamed into place): this one was damaged
                say(f"recomputing: {why}", warn=True)
        result = compute()
        entry.write(result, save)
    return result


def load_current(folder, module: str | tuple[str, ...], load: Callable[[Path], Any]) -> Any:
    """``load(folder)`` of an entry whose other key parts are not at hand (a reader with no model loaded): only its
    code (:func:`code_hash` of ``module``, a name or a tuple of names as in :func:`study_key`) and torch version
    are checked against this checkout's; :class:`StaleEntry` when they differ or the entry is incomplete."""
    entry = Entry(folder, {})
    stored = entry.stored_key()
    entry.key = {**stored, **study_key(module)}
    return entry.read(load)


def write_text(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a temporary sibling renamed over it): a reader sees the old file or
    the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(path, "new")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
