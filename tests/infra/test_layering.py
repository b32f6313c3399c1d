"""The library's rooms import only downwards (the order of ``attnlimits.ROOMS``), with no circle between rooms, no
reach into another module's underscore names, no import through a short name and no circle of imports between the
modules of one room.

The results cache keys a study on the modules it imports (:func:`attnlimits.infra.cache.dependencies`), so these
rules are what keep a study's key to the code it computes with: an upward import would pull a higher room into
every key below it, and an import through a short name (``attnlimits.normalizers``) names no source file, so the
module behind it would drop out of the key. Every module is read with :mod:`ast`, its
module-level and function-level imports alike, without importing it.
"""

from __future__ import annotations

import ast
import graphlib
from dataclasses import dataclass
from pathlib import Path

import pytest

import attnlimits

PACKAGE = Path(attnlimits.__file__).parent
ROOT = "attnlimits"


@dataclass(frozen=True)
class Import:
    """One import of a library module: who imports what (a module path), and the line."""

    module: str
    target: str
    names: tuple[str, ...]
    line: int


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, package: Path = PACKAGE) -> bool:
    """True when ``name`` (``attnlimits.a.b``) has a source file: ``a/b.py`` or ``a/b/__init__.py``."""
    folder = package.joinpath(*name.split(".")[1:])
    return (folder / "__init__.py").is_file() or folder.with_suffix(".py").is_file()


def imports(path: Path, package: Path = PACKAGE) -> list[Import]:
    """Every import of an attnlimits module in the file, at any depth. ``from a.b import c`` imports ``a.b.c`` when
    c is a module, else the name c of ``a.b``."""
    module = module_name(path, package)
    here = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [Import(module, a.name, (), node.lineno) for a in node.names if a.name.split(".")[0] == ROOT]
        elif isinstance(node, ast.ImportFrom):
            anchor = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
            where = ".".join(anchor + ([node.module] if node.module else []))
            if where.split(".")[0] != ROOT:
                continue
            names = tuple(a.name for a in node.names)
            submodules = [n for n in names if is_module(f"{where}.{n}", package)]
            found += [Import(module, f"{where}.{n}", (), node.lineno) for n in submodules]
            rest = tuple(n for n in names if n not in submodules)
            if rest or not submodules:
                found.append(Import(module, where, rest, node.lineno))
    return found


def room_of(name: str) -> str | None:
    """The room of a module path (``attnlimits.studies.training`` -> ``studies``); None for the package root."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def library(package: Path = PACKAGE) -> dict[Path, list[Import]]:
    return {path: imports(path, package) for path in sorted(package.rglob("*.py"))}


def upward_imports(package: Path = PACKAGE, rooms=attnlimits.ROOMS) -> list[str]:
    """Each import of a module from a room above the importer's (or from a folder that is no room)."""
    bad = []
    for found in library(package).values():
        for imp in found:
            mine, theirs = room_of(imp.module), room_of(imp.target)
            if mine is None or theirs is None:  # the package root: imports no room, and every room may use it
                continue
            if mine not in rooms or theirs not in rooms:
                bad.append(f"{imp.module}:{imp.line} imports {imp.target}: a room not in attnlimits.ROOMS {rooms}")
            elif rooms.index(theirs) > rooms.index(mine):
                bad.append(f"{imp.module}:{imp.line} ({mine}) imports {imp.target} ({theirs}), a room above it")
    return bad


def room_circle(package: Path = PACKAGE) -> list[str]:
    """A circle of rooms importing one another, or [] when there is none."""
    graph: dict[str, set[str]] = {}
    for found in library(package).values():
        for imp in found:
            mine, theirs = room_of(imp.module), room_of(imp.target)
            if mine and theirs and mine != theirs:
                graph.setdefault(mine, set()).add(theirs)
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        return list(error.args[1])
    return []


def module_circles(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Per room, a circle of its own modules importing one another (at module or function level), for each room
    that has one. The direct imports are read here: :func:`attnlimits.infra.cache.dependencies` gives a module's
    whole closure, parent packages included (a package's ``__init__`` runs before its modules, so every module of a
    package that imports its modules would sit in a circle with it)."""
    graphs: dict[str, dict[str, set[str]]] = {}
    for found in library(package).values():
        for imp in found:
            room = room_of(imp.module)
            if room and room == room_of(imp.target) and imp.target != imp.module:
                graphs.setdefault(room, {}).setdefault(imp.module, set()).add(imp.target)
    circles = {}
    for room, graph in graphs.items():
        try:
            tuple(graphlib.TopologicalSorter(graph).static_order())
        except graphlib.CycleError as error:
            circles[room] = list(error.args[1])
    return circles


def private_reaches(package: Path = PACKAGE) -> list[str]:
    """Each underscore name one module takes from another: ``from m import _x`` or ``m._x`` on an imported m."""
    bad = []
    for path, found in library(package).items():
        module = module_name(path, package)
        for imp in found:
            private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
            if private and imp.target != module:
                bad.append(f"{module}:{imp.line} imports {private} from {imp.target}")
        bound = set()  # local names bound to another attnlimits module
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Import):
                bound |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == ROOT}
            elif isinstance(node, ast.ImportFrom):
                bound |= {a.asname or a.name for a in node.names if any(i.target.endswith(f".{a.name}") for i in found)}
        for node in ast.walk(ast.parse(path.read_bytes())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                bad.append(f"{module}:{node.lineno} reads {node.value.id}.{node.attr}")
    return bad


def short_name_of(name: str) -> str | None:
    """The short name (``attnlimits.SHORTCUTS``) the module path ``name`` goes through, or None."""
    short = [f"{ROOT}.{s}" for s in attnlimits.SHORTCUTS if name == f"{ROOT}.{s}" or name.startswith(f"{ROOT}.{s}.")]
    return (short or [None])[0]


def aliased_imports(package: Path = PACKAGE) -> list[str]:
    """Each import through a short name (``attnlimits.normalizers``, also as ``from attnlimits import normalizers``
    or ``attnlimits.normalizers`` on the package), or of a path with no source file."""
    bad = []
    for path, found in library(package).items():
        module = module_name(path, package)
        for imp in found:
            for name in [imp.target, *(f"{imp.target}.{n}" for n in imp.names if imp.target == ROOT)]:
                if short_name_of(name):
                    bad.append(f"{imp.module}:{imp.line} imports {name} through {short_name_of(name)}")
            if not is_module(imp.target, package):
                bad.append(f"{imp.module}:{imp.line} imports {imp.target}, which has no source file")
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == ROOT:
                if short_name_of(f"{ROOT}.{node.attr}"):
                    bad.append(f"{module}:{node.lineno} reads {ROOT}.{node.attr}, a short name")
    return bad


def test_the_library_is_read_whole():
    modules = {module_name(p) for p in library()}
    assert {"attnlimits.core.normalizers", "attnlimits.studies.long_context.study", "attnlimits.cli"} <= modules
    assert {room_of(m) for m in modules} - {None} == set(attnlimits.ROOMS), "every room is a folder or cli.py"


def test_a_room_imports_only_its_own_room_and_the_rooms_below_it():
    assert not upward_imports(), "\n".join(upward_imports())


def test_no_circle_between_rooms():
    assert not room_circle(), f"the rooms {room_circle()} import one another in a circle"


def test_no_circle_between_the_modules_of_a_room():
    circles = module_circles()
    assert not circles, "\n".join(f"{room}: {' -> '.join(circle)}" for room, circle in circles.items())


def test_no_module_reaches_into_another_modules_underscore_names():
    assert not private_reaches(), "\n".join(private_reaches())


def test_no_library_module_imports_through_a_short_name():
    assert not aliased_imports(), "\n".join(aliased_imports())


# ---- each check fails on a library that breaks its rule (a copy of the package with one bad file added) ----------
@pytest.fixture
def broken(tmp_path):
    """A small copy of the package's layout, to which a test adds one offending module."""
    package = tmp_path / ROOT
    for room in ("core", "infra", "models"):
        (package / room).mkdir(parents=True)
        (package / room / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "core" / "normalizers.py").write_text("def softmax(x):\n    return x\n\n_SECRET = 1\n")
    (package / "infra" / "cache.py").write_text("from attnlimits.core import normalizers\n")
    return package


def test_the_checks_pass_the_small_copy(broken):
    rooms = ("core", "infra", "models")
    assert not upward_imports(broken, rooms) and not room_circle(broken) and not module_circles(broken)
    assert not private_reaches(broken) and not aliased_imports(broken)


def test_an_upward_import_inside_a_function_and_the_circle_it_makes_are_found(broken):
    (broken / "core" / "bounds.py").write_text("def f():\n    from attnlimits.infra import cache\n")
    assert upward_imports(broken, ("core", "infra", "models")) == [
        "attnlimits.core.bounds:2 (core) imports attnlimits.infra.cache (infra), a room above it"
    ]
    assert sorted(set(room_circle(broken))) == ["core", "infra"]


def test_a_circle_inside_a_room_is_found_also_through_a_function_level_import(broken):
    (broken / "infra" / "a.py").write_text("from attnlimits.infra import cache\n")
    (broken / "infra" / "b.py").write_text("from attnlimits.infra import a\n")
    assert not module_circles(broken)  # a chain, no circle
    (broken / "infra" / "cache.py").write_text(
        "from attnlimits.core import normalizers\n\n\ndef f():\n    from attnlimits.infra.b import g\n"
    )
    circle = module_circles(broken)["infra"]
    assert circle[0] == circle[-1] and sorted(set(circle)) == [f"attnlimits.infra.{m}" for m in ("a", "b", "cache")]
    assert set(module_circles(broken)) == {"infra"} and not room_circle(broken)


def test_an_underscore_name_is_found_imported_or_read(broken):
    (broken / "models" / "a.py").write_text("from attnlimits.core.normalizers import _SECRET\n")
    (broken / "models" / "b.py").write_text("from attnlimits.core import normalizers\nnormalizers._SECRET\n")
    assert private_reaches(broken) == [
        "attnlimits.models.a:1 imports ['_SECRET'] from attnlimits.core.normalizers",
        "attnlimits.models.b:2 reads normalizers._SECRET",
    ]


def test_a_path_without_a_file_and_a_short_name_are_found(broken):
    (broken / "models" / "a.py").write_text(
        "import attnlimits.cache\nfrom attnlimits import normalizers\nattnlimits.texts.load()\n"
    )
    assert aliased_imports(broken) == [
        "attnlimits.models.a:1 imports attnlimits.cache, which has no source file",
        "attnlimits.models.a:2 imports attnlimits.normalizers through attnlimits.normalizers",
        "attnlimits.models.a:3 reads attnlimits.texts, a short name",
    ]


#: The most lines a library module may have without saying in its docstring why it is one concept.
LONGEST = 600
#: How a longer module's docstring says so.
ONE_CONCEPT = "One concept, one module"


def long_modules_without_a_reason(package: Path = PACKAGE) -> list[str]:
    """Modules over :data:`LONGEST` lines whose docstring does not say why they are one concept."""
    out = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        if source.count("\n") > LONGEST and ONE_CONCEPT not in (ast.get_docstring(ast.parse(source)) or ""):
            out.append(f"{path.relative_to(package)} ({source.count(chr(10))} lines)")
    return out


def test_a_module_over_600_lines_says_why_it_is_one_concept(tmp_path):
    assert long_modules_without_a_reason() == [], "split the module, or say in its docstring why it is one concept"
    (tmp_path / "long.py").write_text('"""A module."""\n' + "x = 1\n" * LONGEST)
    (tmp_path / "reasoned.py").write_text(f'"""A module. {ONE_CONCEPT}: why."""\n' + "x = 1\n" * LONGEST)
    assert long_modules_without_a_reason(tmp_path) == [f"long.py ({LONGEST + 1} lines)"]
