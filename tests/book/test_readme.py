"""The README's table of the library's rooms names every room of lib/attnlimits, and only those."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lib" / "attnlimits"
README = ROOT / "README.md"


def rooms_on_disk() -> set[str]:
    """The rooms of the library: its sub-packages, and the command line (``cli.py``)."""
    rooms = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    return rooms | ({"cli"} if (PACKAGE / "cli.py").is_file() else set())


def rooms_in_readme(text: str) -> list[str]:
    """The first column of the README's table whose header row starts with ``| Room |``."""
    table = re.search(r"^\| Room \|.*\n\| ---.*\n((?:\|.*\n)+)", text, re.MULTILINE)
    assert table, "the README has no table of the library's rooms (a header row starting with '| Room |')"
    return [re.match(r"\| `(\w+)` \|", row).group(1) for row in table.group(1).splitlines()]


def test_the_readme_table_names_every_room_and_only_rooms():
    named = rooms_in_readme(README.read_text(encoding="utf-8"))
    missing, stale = rooms_on_disk() - set(named), set(named) - rooms_on_disk()
    assert not missing, f"add a row for each of {sorted(missing)} to the README's table of rooms"
    assert not stale, f"the README's table of rooms names rooms that do not exist: {sorted(stale)}"
    assert len(named) == len(set(named)), f"the README's table names a room twice: {named}"


def test_the_table_parser_reads_rows_and_refuses_a_readme_without_the_table():
    text = "intro\n\n| Room | What | Chapters |\n| --- | --- | --- |\n| `core` | a | 1 |\n| `cli` | b | c |\n\nafter\n"
    assert rooms_in_readme(text) == ["core", "cli"]
    with pytest.raises(AssertionError, match="no table"):
        rooms_in_readme("no table here\n")
