"""The API reference page (chapters/api.md) documents every public module of the library."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lib" / "attnlimits"
PAGE = ROOT / "chapters" / "api.md"
NOT_AN_API = {"cli"}  # the command line, documented by `attnlimits --help` and the README


def _public_modules() -> set[str]:
    modules = {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_")}
    modules |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    return modules - NOT_AN_API


def test_every_public_module_has_a_section_with_its_members():
    page = PAGE.read_text()
    documented = set(re.findall(r"^\.\. automodule:: attnlimits\.(\w+)\n   :members:", page, re.MULTILINE))
    missing, stale = _public_modules() - documented, documented - _public_modules()
    assert not missing, f"add a section for each of {sorted(missing)} to chapters/api.md (as for the others)"
    assert not stale, f"chapters/api.md documents modules that no longer exist: {sorted(stale)}"
    for module in documented:
        assert f"## `attnlimits.{module}`" in page


def test_every_module_of_a_package_is_a_link_target():
    page = PAGE.read_text()
    for package in (p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        for module in package.glob("*.py"):
            if not module.stem.startswith("_"):
                name = f"attnlimits.{package.name}.{module.stem}"
                assert f".. py:module:: {name}" in page or f".. automodule:: {name}\n" in page, module
