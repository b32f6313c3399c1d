"""The README's install and running commands, the packaging metadata and the documented settings, kept honest.

Cheap forms of what a reader does: every `.venv/bin/X` the README names exists and `jupyter lab` starts far enough
to print its version; every `make X` it names is a target; requirements.txt pins exact versions; pyproject.toml
declares exactly the third-party modules the library imports; the README documents every ATTNLIMITS_ variable the
library or a chapter reads; the repository address is the same in the README and in _config.yml.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LIB = ROOT / "lib" / "attnlimits"
BIN = Path(sys.executable).parent  # the virtual environment the tests run in (.venv/bin under make)


def readme_commands() -> list[str]:
    """The command lines of the README's bash blocks, without their comments."""
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    lines = (line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines())
    return [line for line in lines if line]


def test_readme_executables_are_installed():
    programs = {line.split()[0] for line in readme_commands() if line.startswith(".venv/bin/")}
    assert {".venv/bin/jupyter", ".venv/bin/pytest", ".venv/bin/jupytext", ".venv/bin/attnlimits"} <= programs
    missing = [p for p in sorted(programs) if not (BIN / Path(p).name).is_file()]
    assert not missing, f"the README runs {missing}, which `make setup` does not install in {BIN}"


def test_readme_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, flags=re.M))
    named = {line.split()[1] for line in readme_commands() if line.startswith("make ")}
    named |= set(re.findall(r"`make ([\w-]+)`", README))
    assert named, "the README names no make target"
    assert named <= targets, f"README names make targets the Makefile lacks: {sorted(named - targets)}"


def test_jupyter_lab_starts():
    # `.venv/bin/jupyter lab chapters/...` in the README: the lab application must be installed and importable.
    pinned = re.search(r"^jupyterlab==(\S+)$", (ROOT / "requirements.txt").read_text(), flags=re.M)
    assert pinned, "requirements.txt must pin jupyterlab (the README opens chapters with `jupyter lab`)"
    out = subprocess.run([BIN / "jupyter", "lab", "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == pinned.group(1)
    assert (BIN / "jupyter-lab").is_file()


def test_requirements_are_exact_pins():
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    pins = [line for line in lines if line and not line.startswith("#")]
    loose = [line for line in pins if not re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[\w.+!-]+", line)]
    assert not loose, f"requirements.txt must pin exact versions: {loose}"
    names = [re.split("==", p)[0].lower().replace("_", "-") for p in pins]
    assert len(names) == len(set(names)), "a package is pinned twice"


def _third_party_imports() -> set[str]:
    modules = set()
    for path in LIB.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return {m for m in modules if m not in sys.stdlib_module_names and m != "attnlimits"}


def test_pyproject_declares_what_the_library_imports():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {re.split(r"[<>=!~ \[;]", d)[0].lower().replace("_", "-") for d in declared}
    distributions = importlib.metadata.packages_distributions()
    imported = {}
    for module in _third_party_imports():
        dists = distributions.get(module)
        assert dists, f"lib imports {module!r}, which no installed distribution provides"
        imported[module] = dists[0].lower().replace("_", "-")
    undeclared = {m: d for m, d in imported.items() if d not in declared}
    assert not undeclared, f"pyproject.toml does not declare what lib imports: {undeclared}"
    unused = declared - set(imported.values())
    assert not unused, f"pyproject.toml declares packages that lib never imports: {sorted(unused)}"


def test_the_transformer_lens_extra_is_declared_and_pinned_within_it():
    from packaging.specifiers import SpecifierSet

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (requirement,) = extras["transformer-lens"]
    name, spec = re.fullmatch(r"([\w-]+)(.*)", requirement).groups()
    pinned = re.search(rf"^{name}==(\S+)$", (ROOT / "requirements.txt").read_text(), flags=re.M)
    assert pinned, f"requirements.txt must pin {name}: the book's build runs its tests"
    assert pinned.group(1) in SpecifierSet(spec), f"the pinned {name} {pinned.group(1)} is outside {spec}"
    assert f"pip install 'attnlimits[{name}]'" in README


def test_readme_documents_every_environment_variable():
    read = set()  # by the library and by the chapters
    for path in [*LIB.rglob("*.py"), *(ROOT / "chapters").glob("*.py")]:
        read |= set(re.findall(r"environ(?:\.get)?\(\s*[\"'](ATTNLIMITS_\w+)", path.read_text(encoding="utf-8")))
        read |= set(re.findall(r"environ\[[\"'](ATTNLIMITS_\w+)", path.read_text(encoding="utf-8")))
        # a variable named once as a constant (``PRESET_VARIABLE = "ATTNLIMITS_..."``) and read through it
        read |= set(re.findall(r"^\w*VARIABLE = [\"'](ATTNLIMITS_\w+)", path.read_text(encoding="utf-8"), flags=re.M))
    assert {"ATTNLIMITS_MODEL", "ATTNLIMITS_TEXT", "ATTNLIMITS_CACHE", "ATTNLIMITS_FIGURES"} <= read
    table = set(re.findall(r"^\| `(ATTNLIMITS_\w+)` \|", README, flags=re.M))
    assert read == table, f"README table lacks {sorted(read - table)}; lists unread {sorted(table - read)}"


def test_repository_address_is_the_same_in_readme_and_config():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    url = config["repository"]["url"]
    addresses = set(re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", README))
    assert addresses == {url}, f"README names {addresses}; _config.yml repository.url is {url}"


@pytest.mark.parametrize("path", ["_ext/offline_mathjax.py", "_ext/unique_scripts.py"])
def test_book_extensions_are_configured(path):
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["local_extensions"][Path(path).stem] == "_ext"
