"""attnlimits.models.texts: the King James Version, printed by the program of Debian's package bible-kjv.

The tests of the parsing, the fallback, the errors and the timeout run a fake ``bible`` script that each test writes
into its temporary directory; the tests of the whole Bible run the real program and are skipped without it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time

import pytest

from attnlimits.models import texts

#: Verse lines as ``bible -f`` prints them (stray spaces included), and the prose they make.
VERSES = (
    "Ge1:1 In the beginning God created the heaven and the earth.\n"
    "Ge1:2 And the earth was without form,  and void. \n"
    "Ge2:1 Thus the heavens and the earth were finished.\n"
    "Exo1:1 Now these are the names.\n"
    "SSol1:1 The song of songs, which is Solomon's.\n"
    "1Cor13:1 Though I speak with the tongues of men and of angels.\n"
)
PROSE = (
    "Genesis\n\n"
    "In the beginning God created the heaven and the earth. And the earth was without form, and void.\n\n"
    "Thus the heavens and the earth were finished.\n\n"
    "Exodus\n\nNow these are the names.\n\n"
    "Song of Solomon\n\nThe song of songs, which is Solomon's.\n\n"
    "1 Corinthians\n\nThough I speak with the tongues of men and of angels.\n"
)
#: A verse reference left in the text ("Ge1:1", "1Cor13:1") or any chapter:verse pair.
REFERENCE = re.compile(r"\b[1-3]?[A-Za-z]*\d+:\d+")

REAL_BIBLE = shutil.which(texts.KJV_PROGRAM)
needs_bible = pytest.mark.skipif(
    REAL_BIBLE is None,
    reason="the program 'bible' (/usr/bin/bible) is absent: Debian's package bible-kjv is not installed "
    "(apt-get install bible-kjv)",
)


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLIMITS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ATTNLIMITS_TEXT", raising=False)


def fake_bible(tmp_path, body: str = "", *, output: str = VERSES) -> str:
    """Write an executable ``bible`` into tmp_path/bin that records its arguments and prints ``output`` (after
    running the shell commands ``body``); return its path."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    program = folder / "bible"
    program.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' \"$@\" > '{tmp_path / 'args.txt'}'\n"
        f"{body}\n"
        "cat <<'END_OF_VERSES'\n"
        f"{output}"
        "END_OF_VERSES\n"
    )
    program.chmod(0o755)
    return str(program)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """The fake program in place of the real one, and a minimum length its few verses meet."""
    monkeypatch.setattr(texts, "KJV_PROGRAM", fake_bible(tmp_path))
    monkeypatch.setattr(texts, "KJV_MIN_CHARS", 0)
    return tmp_path


# ----------------------------------------------------------------------------------------------------------------
# The parsing
# ----------------------------------------------------------------------------------------------------------------


def test_prose_removes_references_and_joins_each_chapter():
    assert texts.kjv_prose(VERSES) == PROSE
    assert not REFERENCE.search(PROSE)


def test_prose_keeps_an_unknown_book_abbreviation_as_its_heading():
    assert texts.kjv_prose("Foo1:1 A verse.\nFoo1:2 Another.\n\n") == "Foo\n\nA verse. Another.\n"


@pytest.mark.parametrize(
    ("output", "match"),
    [
        ("Genesis 1\n\n  1 In the beginning God created the heaven and the earth.\n", "not a verse"),
        ("Ge1:1 In the beginning.\nCannot open data file bible.data\n", "line 2 .* not a verse"),
        ("Ge1:1 In the beginning.\nGe1:3 And God said.\n", r"Ge1:3, expected Ge1:2"),
        ("Ge2:2 And on the seventh day.\n", r"Ge2:2, expected Ge2:1"),
        ("", "no verses"),
        ("\n\n", "no verses"),
    ],
)
def test_prose_refuses_what_is_not_verses_in_order(output, match):
    with pytest.raises(texts.TextValidationError, match=match):
        texts.kjv_prose(output)


# ----------------------------------------------------------------------------------------------------------------
# load("kjv") with a fake program
# ----------------------------------------------------------------------------------------------------------------


def test_load_runs_the_program_for_every_verse(fake, capsys):
    text = texts.load(texts.KJV, allow_fallback=False)
    assert text.text == PROSE
    assert text.body.startswith("In the beginning God created") and text.start == len("Genesis\n\n")
    p = text.provenance
    assert (p.name, p.title, p.source) == ("kjv", texts.KJV_TITLE, "package")
    assert p.sha256 == hashlib.sha256(PROSE.encode()).hexdigest() == texts.sha256_of(text)
    assert (p.n_chars, p.first_chapter_offset) == (len(PROSE), text.start)
    args = (fake / "args.txt").read_text().splitlines()
    assert args[0] == "-f" and args[-1] == texts.KJV_RANGE == "Genesis 1:1-Revelation 22:21"
    assert "[package," in capsys.readouterr().out
    assert texts.load(texts.KJV, allow_fallback=False).provenance.sha256 == p.sha256


def test_the_program_is_found_on_path_and_named_by_attnlimits_text(monkeypatch, tmp_path):
    fake_bible(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")  # before the real one
    monkeypatch.setattr(texts, "KJV_MIN_CHARS", 0)
    monkeypatch.setenv("ATTNLIMITS_TEXT", "kjv")
    text = texts.load(allow_fallback=False)
    assert text.provenance.name == "kjv" and text.text == PROSE


def test_a_missing_program_falls_back_loudly(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(texts, "KJV_PROGRAM", str(tmp_path / "no-such-bible"))
    text = texts.load(texts.KJV)
    assert (text.provenance.name, text.provenance.source) == (texts.FALLBACK_NAME, "fallback")
    out = capsys.readouterr().out
    assert "OFFLINE FALLBACK" in out and "bible-kjv" in out and "apt-get install bible-kjv" in out
    assert "apt-get install bible-kjv" in text.provenance.reason


def test_a_missing_program_is_an_error_without_fallback(monkeypatch, tmp_path):
    monkeypatch.setattr(texts, "KJV_PROGRAM", str(tmp_path / "no-such-bible"))
    with pytest.raises(texts.TextUnavailableError, match=r"apt-get install bible-kjv"):
        texts.load(texts.KJV, allow_fallback=False)


def test_a_failing_program_is_reported(monkeypatch, tmp_path):
    monkeypatch.setattr(texts, "KJV_PROGRAM", fake_bible(tmp_path, "echo 'Cannot open data file' >&2; exit 3"))
    with pytest.raises(texts.TextUnavailableError, match=r"status 3: Cannot open data file"):
        texts.load(texts.KJV, allow_fallback=False)
    assert texts.load(texts.KJV).provenance.source == "fallback"


def test_a_hanging_program_is_stopped_by_the_timeout(monkeypatch, tmp_path):
    monkeypatch.setattr(texts, "KJV_PROGRAM", fake_bible(tmp_path, "sleep 30"))
    started = time.monotonic()
    with pytest.raises(texts.TextUnavailableError, match=r"within 0.5 s"):
        texts.load(texts.KJV, allow_fallback=False, timeout=0.5)
    assert time.monotonic() - started < 10
    with pytest.raises(ValueError, match="timeout must be > 0"):
        texts.load(texts.KJV, timeout=0)


def test_output_that_is_not_the_whole_bible_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(texts, "KJV_PROGRAM", fake_bible(tmp_path))
    with pytest.raises(texts.TextValidationError, match=r"incomplete"):
        texts.load(texts.KJV, allow_fallback=False)  # the real minimum length: a few verses are not the Bible
    monkeypatch.setattr(texts, "KJV_MIN_CHARS", 0)
    monkeypatch.setattr(texts, "KJV_PROGRAM", fake_bible(tmp_path, output=VERSES.split("\n", 3)[3]))
    with pytest.raises(texts.TextValidationError, match=r"does not start with Genesis 1:1"):
        texts.load(texts.KJV, allow_fallback=False)
    assert texts.load(texts.KJV).provenance.source == "fallback"


def test_the_error_for_a_bad_name_lists_kjv():
    with pytest.raises(ValueError, match=r"'war-and-peace', 'pydoc-topics', 'kjv' or a file path"):
        texts.load("  ")
    with pytest.raises(FileNotFoundError, match=r"'kjv'"):
        texts.load("no-such-text")


# ----------------------------------------------------------------------------------------------------------------
# The real program
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kjv():
    return texts.load(texts.KJV, allow_fallback=False)


@needs_bible
def test_the_whole_bible_is_long_prose_from_genesis_to_revelation(kjv):
    assert len(kjv) > 4_000_000 and kjv.provenance.n_chars == len(kjv)
    assert kjv.text.startswith("Genesis\n\nIn the beginning God created the heaven and the earth.")
    assert kjv.body.startswith("In the beginning") and kjv.provenance.first_chapter_offset == kjv.start
    assert kjv.text.endswith("The grace of our Lord Jesus Christ be with you all. Amen.\n")
    assert not REFERENCE.search(kjv.text)
    paragraphs = kjv.text.split("\n\n")
    books = [p for p in paragraphs if p in texts._KJV_BOOKS.values()]
    assert books == list(texts._KJV_BOOKS.values())  # all 66 books, in order, each named once
    assert len(paragraphs) - len(books) == 1189  # the chapters of the KJV
    assert all("\n" not in p for p in paragraphs[:-1])


@needs_bible
def test_the_bible_is_the_same_text_on_every_load(kjv):
    p = kjv.provenance
    assert (p.name, p.title, p.source) == ("kjv", "The King James Version of the Bible (Debian package bible-kjv-text)",
                                           "package")  # fmt: skip
    assert p.location in ("/usr/lib/bible.data", REAL_BIBLE)
    assert p.sha256 == hashlib.sha256(kjv.text.encode()).hexdigest()
    again = texts.load(texts.KJV, allow_fallback=False)
    assert again.provenance.sha256 == p.sha256 and again.text == kjv.text
