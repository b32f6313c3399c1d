"""The text the experiments read: War and Peace (Project Gutenberg ebook #2600) or an offline fallback.

``load("war-and-peace")`` downloads the ebook once (HTTPS, with a timeout), strips the Project Gutenberg header and
licence footer, checks that the content is the book (title, length, the "BOOK ONE" / "CHAPTER I" markers the windows
start from), and writes the download atomically into the user cache with its SHA-256. Every later use verifies
that hash; a corrupted cache file is re-downloaded, or reported. The hash is recorded on first download rather
than pinned here (Gutenberg revises its files; pin one with ``sha256=`` or ``ATTNLIMITS_WAR_AND_PEACE_SHA256``).

Offline, ``load`` falls back, loudly, to a long English text every Python has: the standard library's
``pydoc_data.topics`` (the reference manual's topic pages). ``load(path)`` reads a local UTF-8 file.

``load("kjv")`` reads a second book of narrative English that needs no network: the King James Version of the
Bible from Debian's package ``bible-kjv`` (``apt-get install bible-kjv``; public domain). Its program ``bible``
prints every verse, Genesis 1:1 to Revelation 22:21, one per line (``Ge1:1 In the beginning ...``, in 0.2 s and
with a timeout); the verse references are removed and each chapter becomes one paragraph, under a plain heading
line per book. The same package gives the same text byte for byte (about 4.1 million characters; its SHA-256
is recorded). Without the program ``load("kjv")`` falls back, loudly, to ``pydoc_data.topics``, or raises
:class:`TextUnavailableError` when ``allow_fallback=False``.

Every text is read from its first chapter on (:attr:`Text.body`); where the windows lie in it is
:mod:`attnlimits.models.windows`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from attnlimits.infra.provenance import cache_dir, say

__all__ = [
    "sha256_of",
    "FALLBACK_NAME",
    "KJV",
    "WAR_AND_PEACE",
    "WAR_AND_PEACE_URL",
    "Text",
    "TextDownloadError",
    "TextProvenance",
    "TextUnavailableError",
    "TextValidationError",
    "download_war_and_peace",
    "first_chapter_start",
    "kjv_prose",
    "load",
    "strip_gutenberg",
]

WAR_AND_PEACE = "war-and-peace"
FALLBACK_NAME = "pydoc-topics"
KJV = "kjv"
KJV_TITLE = "The King James Version of the Bible (Debian package bible-kjv-text)"
#: The program of Debian's package bible-kjv (a name looked up on PATH, or a path) and the data file it reads.
KJV_PROGRAM = "bible"
KJV_DATA = "/usr/lib/bible.data"
#: Every verse of the Bible, as the program names the range.
KJV_RANGE = "Genesis 1:1-Revelation 22:21"
#: The whole Bible as prose is about 4.14 million characters; anything much shorter is not all of it.
KJV_MIN_CHARS = 4_000_000
#: The program's abbreviations of the 66 books, and the names it prints them under (in its formatted output).
_KJV_BOOKS = {
    "Ge": "Genesis", "Exo": "Exodus", "Lev": "Leviticus", "Num": "Numbers", "Deu": "Deuteronomy", "Josh": "Joshua",
    "Jdgs": "Judges", "Ruth": "Ruth", "1Sm": "1 Samuel", "2Sm": "2 Samuel", "1Ki": "1 Kings", "2Ki": "2 Kings",
    "1Chr": "1 Chronicles", "2Chr": "2 Chronicles", "Ezra": "Ezra", "Neh": "Nehemiah", "Est": "Esther", "Job": "Job",
    "Psa": "Psalms", "Prv": "Proverbs", "Eccl": "Ecclesiastes", "SSol": "Song of Solomon", "Isa": "Isaiah",
    "Jer": "Jeremiah", "Lam": "Lamentations", "Eze": "Ezekiel", "Dan": "Daniel", "Hos": "Hosea", "Joel": "Joel",
    "Amos": "Amos", "Obad": "Obadiah", "Jonah": "Jonah", "Mic": "Micah", "Nahum": "Nahum", "Hab": "Habakkuk",
    "Zep": "Zephaniah", "Hag": "Haggai", "Zec": "Zechariah", "Mal": "Malachi", "Mat": "Matthew", "Mark": "Mark",
    "Luke": "Luke", "John": "John", "Acts": "Acts", "Rom": "Romans", "1Cor": "1 Corinthians", "2Cor": "2 Corinthians",
    "Gal": "Galatians", "Eph": "Ephesians", "Phi": "Philippians", "Col": "Colossians", "1Th": "1 Thessalonians",
    "2Th": "2 Thessalonians", "1Tim": "1 Timothy", "2Tim": "2 Timothy", "Titus": "Titus", "Phmn": "Philemon",
    "Heb": "Hebrews", "Jas": "James", "1Pet": "1 Peter", "2Pet": "2 Peter", "1Jn": "1 John", "2Jn": "2 John",
    "3Jn": "3 John", "Jude": "Jude", "Rev": "Revelation",
}  # fmt: skip
_VERSE = re.compile(r"(?P<book>[1-3]?[A-Za-z]+)(?P<chapter>\d+):(?P<verse>\d+)(?: (?P<text>.*))?")
#: Project Gutenberg's plain-text UTF-8 file of ebook #2600 (override with ATTNLIMITS_WAR_AND_PEACE_URL).
WAR_AND_PEACE_URL = "https://www.gutenberg.org/cache/epub/2600/pg2600.txt"
#: The book is about 3.2 million characters; anything much shorter is not the book.
MIN_CHARS = 2_500_000
MAX_BYTES = 20_000_000
_CACHE_NAME = "pg2600"

_START = re.compile(r"^\*\*\* ?START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK[^\n]*$", re.IGNORECASE | re.MULTILINE)
_END = re.compile(r"^\*\*\* ?END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK[^\n]*$", re.IGNORECASE | re.MULTILINE)
_END_LEGACY = re.compile(r"^End of (?:the )?Project Gutenberg'?s? E-?Book[^\n]*$", re.IGNORECASE | re.MULTILINE)
_CHAPTER_ONE = re.compile(r"^[ \t]*chapter[ \t]+(?:i|1|one)\b[^\n]*$", re.IGNORECASE | re.MULTILINE)
_HEADING = re.compile(r"^\s*(?:chapter|book|part|volume|epilogue|first|second|contents)\b", re.IGNORECASE)


class TextDownloadError(OSError):
    """The download failed: HTTP error, timeout, unreachable host, truncated body or unexpected hash."""


class TextValidationError(ValueError):
    """What was downloaded (or cached) is not the expected book."""


class TextUnavailableError(OSError):
    """A text read from a program on this machine (the KJV's ``bible``) is not installed, failed or timed out."""


@dataclass(frozen=True)
class TextProvenance:
    """Where a text came from (printed in every experiment chapter's banner)."""

    name: str
    title: str
    source: str  # "download", "cache", "local", "package" (a Debian package's program) or "fallback"
    reason: str
    location: str
    sha256: str
    n_chars: int
    first_chapter_offset: int

    def as_dict(self) -> dict:
        """The record as a plain dict (for JSON)."""
        return asdict(self)


@dataclass(frozen=True)
class Text:
    """A text plus where its first chapter starts (``body`` is what :func:`attnlimits.models.windows.windows` reads)."""

    text: str
    start: int
    provenance: TextProvenance

    @property
    def body(self) -> str:
        """The text from its first chapter on (what the windows are cut from)."""
        return self.text[self.start :]

    def __str__(self) -> str:
        return self.text

    def __len__(self) -> int:
        return len(self.text)


def _cache_root() -> Path:
    return cache_dir() / "texts"


# ----------------------------------------------------------------------------------------------------------------
# Gutenberg text handling
# ----------------------------------------------------------------------------------------------------------------


def strip_gutenberg(raw: str) -> str:
    """The ebook without Project Gutenberg's header (up to the START line) and licence footer (from the END line)."""
    start = _START.search(raw)
    if start is None:
        raise TextValidationError("no '*** START OF THE PROJECT GUTENBERG EBOOK' line: not a Gutenberg ebook")
    body = raw[start.end() :]
    end = _END.search(body)
    if end is None:
        raise TextValidationError("no '*** END OF THE PROJECT GUTENBERG EBOOK' line: the download is incomplete")
    body = body[: end.start()]
    legacy = _END_LEGACY.search(body)
    if legacy is not None:
        body = body[: legacy.start()]
    return body.strip() + "\n"


def first_chapter_start(text: str) -> int | None:
    """Offset of the first prose line after the first "CHAPTER I" heading that is not a table-of-contents entry.

    A heading whose next non-blank line is another heading (``CHAPTER II``, ``BOOK TWO``...) is a contents entry.
    ``None`` when the text has no such heading.
    """
    for match in _CHAPTER_ONE.finditer(text):
        rest = text[match.end() :]
        stripped = rest.lstrip()
        if not stripped:
            return None
        next_line = stripped.split("\n", 1)[0]
        if not _HEADING.match(next_line):
            return match.end() + (len(rest) - len(stripped))
    return None


def validate_war_and_peace(raw: str) -> str:
    """Check that a download is War and Peace and return its stripped content (or raise TextValidationError)."""
    head = raw[:5000]
    body = strip_gutenberg(raw)
    title_in_header = re.search(r"^Title:\s*War and Peace\s*$", head, re.IGNORECASE | re.MULTILINE)
    title_in_body = re.search(r"^\s*WAR AND PEACE\s*$", body[:2000], re.IGNORECASE | re.MULTILINE)
    if not (title_in_header or title_in_body):
        raise TextValidationError("the download has no 'War and Peace' title line: it is not ebook #2600")
    if len(body) < MIN_CHARS:
        raise TextValidationError(
            f"the download has {len(body):,} characters of text; War and Peace has over {MIN_CHARS:,}: it is truncated"
        )
    if not re.search(r"^\s*BOOK ONE\b", body, re.IGNORECASE | re.MULTILINE):
        raise TextValidationError("the download has no 'BOOK ONE' marker")
    if first_chapter_start(body) is None:
        raise TextValidationError("the download has no 'CHAPTER I' heading followed by prose")
    return body


def _fetch(url: str, timeout: float) -> bytes:
    """GET ``url`` once (no retries): bounded by ``timeout`` per network operation and 3x ``timeout`` overall."""
    request = urllib.request.Request(url, headers={"User-Agent": "attnlimits (https://github.com/attnlimits)"})
    deadline = time.monotonic() + 3 * timeout
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            expected = response.headers.get("Content-Length")
            chunks, size = [], 0
            while block := response.read(1 << 16):
                chunks.append(block)
                size += len(block)
                if size > MAX_BYTES:
                    raise TextDownloadError(f"{url} sent more than {MAX_BYTES:,} bytes: not the ebook")
                if time.monotonic() > deadline:
                    raise TextDownloadError(f"downloading {url} took longer than {3 * timeout:g} s")
    except urllib.error.HTTPError as e:
        raise TextDownloadError(f"{url} answered HTTP {e.code} ({e.reason})") from e
    except TimeoutError as e:
        raise TextDownloadError(f"{url} did not answer within {timeout:g} s") from e
    except urllib.error.URLError as e:
        if isinstance(e.reason, TimeoutError):
            raise TextDownloadError(f"{url} did not answer within {timeout:g} s") from e
        raise TextDownloadError(f"{url} is unreachable ({e.reason})") from e
    except (ConnectionError, OSError) as e:
        if isinstance(e, TextDownloadError):
            raise
        raise TextDownloadError(f"downloading {url} failed ({e})") from e
    data = b"".join(chunks)
    if expected is not None and expected.isdigit() and int(expected) != len(data):
        raise TextDownloadError(f"{url} sent {len(data):,} bytes of the announced {int(expected):,}: truncated")
    return data


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _paths() -> tuple[Path, Path]:
    root = _cache_root()
    return root / f"{_CACHE_NAME}.txt", root / f"{_CACHE_NAME}.json"


def download_war_and_peace(url: str | None = None, *, sha256: str | None = None, timeout: float = 10.0) -> Path:
    """Download ebook #2600, validate it, and store it with its SHA-256 in the cache; return the cached file.

    Nothing is written unless the download is complete, has the expected hash (when ``sha256`` is given) and is
    War and Peace; then the file and its hash record are each replaced atomically.
    """
    url = url or os.environ.get("ATTNLIMITS_WAR_AND_PEACE_URL") or WAR_AND_PEACE_URL
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    data = _fetch(url, timeout)
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and digest != sha256.lower():
        raise TextDownloadError(
            f"{url} sent a file with SHA-256 {digest}, expected {sha256.lower()}; nothing was cached"
        )
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TextValidationError(f"{url} did not send UTF-8 text ({e}); nothing was cached") from e
    validate_war_and_peace(raw)
    text_path, record_path = _paths()
    text_path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "url": url,
        "sha256": digest,
        "bytes": len(data),
        "downloaded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _atomic_write(text_path, data)
    _atomic_write(record_path, json.dumps(record, indent=2).encode())
    return text_path


def _read_cached(sha256: str | None) -> tuple[bytes, dict] | str:
    """The cached download and its record if the hash checks out, else why not (a string)."""
    text_path, record_path = _paths()
    if not text_path.is_file():
        return "not downloaded yet"
    try:
        record = json.loads(record_path.read_text())
        recorded = record["sha256"]
    except (OSError, ValueError, KeyError):
        return f"the cached copy {text_path} has no readable hash record"
    data = text_path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != recorded:
        return f"the cached copy {text_path} is corrupt (SHA-256 {digest[:12]}… ≠ recorded {recorded[:12]}…)"
    if sha256 is not None and digest != sha256.lower():
        return f"the cached copy has SHA-256 {digest[:12]}…, but {sha256.lower()[:12]}… was requested"
    return data, record


# ----------------------------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------------------------


def _fallback_text() -> str:
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key].strip() for key in sorted(topics)) + "\n"


def _make(text: str, name: str, title: str, source: str, reason: str, location: str, sha: str) -> Text:
    start = first_chapter_start(text)
    start = 0 if start is None else start
    provenance = TextProvenance(name, title, source, reason, location, sha, len(text), start)
    return Text(text=text, start=start, provenance=provenance)


def _load_fallback(reason: str) -> Text:
    text = _fallback_text()
    sha = hashlib.sha256(text.encode()).hexdigest()
    title = "Python standard library: pydoc_data.topics"
    loaded = _make(text, FALLBACK_NAME, title, "fallback", reason, "pydoc_data.topics", sha)
    say(f"text {title} [fallback, {len(text):,} characters]: {reason}")
    return loaded


def kjv_prose(output: str) -> str:
    """The verse lines of the ``bible`` program (``Ge1:1 In the beginning ...``) as prose: a heading line per book
    (its name), then each chapter as one paragraph of its verses without their references, paragraphs separated by
    a blank line. Raises :class:`TextValidationError` on a line that is not a verse, on a chapter that does not
    start at verse 1 or skips a verse, and on output without verses."""
    paragraphs: list[str] = []
    verses: list[str] = []
    book = chapter = None
    expected = 1
    for number, line in enumerate(output.splitlines(), 1):
        if not line.strip():
            continue
        match = _VERSE.fullmatch(line.rstrip())
        if match is None:
            raise TextValidationError(
                f"line {number} of the KJV program's output is not a verse like 'Ge1:1 In the beginning ...': "
                f"{line[:80]!r}"
            )
        name, ch, verse = match["book"], int(match["chapter"]), int(match["verse"])
        if (name, ch) != (book, chapter):
            if verses:
                paragraphs.append(" ".join(verses))
                verses = []
            if name != book:
                paragraphs.append(_KJV_BOOKS.get(name, name))
            book, chapter, expected = name, ch, 1
        if verse != expected:
            raise TextValidationError(
                f"line {number} of the KJV program's output is {name}{ch}:{verse}, expected {name}{ch}:{expected}"
            )
        expected += 1
        words = (match["text"] or "").split()
        if words:
            verses.append(" ".join(words))
    if verses:
        paragraphs.append(" ".join(verses))
    if not paragraphs:
        raise TextValidationError("the KJV program printed no verses")
    return "\n\n".join(paragraphs) + "\n"


def _run_kjv(timeout: float) -> tuple[str, str]:
    """Run the ``bible`` program once for every verse; return its standard output and what it read (the data file,
    else the program). Raises :class:`TextUnavailableError` when it is missing, fails or outlives ``timeout``."""
    program = shutil.which(KJV_PROGRAM)
    if program is None:
        raise TextUnavailableError(
            f"the King James Version needs the program {KJV_PROGRAM!r} of Debian's package bible-kjv, which is not "
            "installed (apt-get install bible-kjv)"
        )
    args = [program, "-f"]  # -f: one verse per line, with its reference, never wrapped
    data = Path(KJV_DATA)
    if data.is_file():
        args += ["-p", str(data.parent), "-d", data.name]
    args.append(KJV_RANGE)
    try:
        with subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd="/",
            start_new_session=True,
        ) as process:
            try:
                out, err = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired as e:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except OSError:
                    process.kill()
                process.wait()
                raise TextUnavailableError(f"{program} printed no whole Bible within {timeout:g} s") from e
    except OSError as e:
        if isinstance(e, TextUnavailableError):
            raise
        raise TextUnavailableError(f"{program} could not be run ({e})") from e
    if process.returncode != 0:
        detail = err.decode("utf-8", "replace").strip()[:200]
        detail = f": {detail}" if detail else ""
        raise TextUnavailableError(f"{program} exited with status {process.returncode}{detail}")
    if len(out) > MAX_BYTES:
        raise TextValidationError(f"{program} printed more than {MAX_BYTES:,} bytes: not the KJV")
    try:
        return out.decode("utf-8"), str(data if data.is_file() else program)
    except UnicodeDecodeError as e:
        raise TextValidationError(f"{program} did not print UTF-8 text ({e})") from e


def _load_kjv(allow_fallback: bool, timeout: float) -> Text:
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    try:
        output, location = _run_kjv(timeout)
        text = kjv_prose(output)
        first = _KJV_BOOKS["Ge"] + "\n\n"
        if not text.startswith(first):
            raise TextValidationError(f"the KJV program's output does not start with Genesis 1:1: {output[:80]!r}")
        if len(text) < KJV_MIN_CHARS:
            raise TextValidationError(
                f"the KJV program printed {len(text):,} characters of prose; the whole Bible has over "
                f"{KJV_MIN_CHARS:,}: it is incomplete"
            )
    except (TextUnavailableError, TextValidationError) as e:
        if not allow_fallback:
            raise type(e)(f"the King James Version could not be read: {e}") from e
        return _load_fallback(
            f"the King James Version could not be read ({e}); install Debian's package bible-kjv "
            "(apt-get install bible-kjv) to read it; OFFLINE FALLBACK"
        )
    sha = hashlib.sha256(text.encode()).hexdigest()
    reason = f"every verse ({KJV_RANGE}) printed by bible -f from {location}; references removed, a chapter a paragraph"
    provenance = TextProvenance(KJV, KJV_TITLE, "package", reason, location, sha, len(text), len(first))
    say(f"text {KJV_TITLE} [package, {len(text):,} characters]: {reason}")
    return Text(text=text, start=len(first), provenance=provenance)


def load(
    name_or_path: str | os.PathLike | None = None,
    *,
    allow_fallback: bool = True,
    url: str | None = None,
    sha256: str | None = None,
    timeout: float = 10.0,
) -> Text:
    """Load War and Peace (``"war-and-peace"``, the default or ``$ATTNLIMITS_TEXT``), the offline fallback
    (``"pydoc-topics"``), the King James Version (``"kjv"``) or a local UTF-8 file; print one line saying what was
    loaded and why.

    War and Peace comes from the cache after its first download; a cache whose hash no longer matches is
    re-downloaded. The King James Version is printed by the program of Debian's package bible-kjv (``timeout``
    bounds it too). When the text cannot be had, ``allow_fallback`` decides between the fallback text and an error.
    """
    if name_or_path is None:
        name_or_path = os.environ.get("ATTNLIMITS_TEXT") or WAR_AND_PEACE
    requested = os.fspath(name_or_path)
    if not isinstance(requested, str) or not requested.strip():
        raise ValueError(
            f"name_or_path must be {WAR_AND_PEACE!r}, {FALLBACK_NAME!r}, {KJV!r} or a file path, got {name_or_path!r}"
        )
    if requested == FALLBACK_NAME:
        return _load_fallback(f"{FALLBACK_NAME!r} was requested")
    if requested == KJV:
        return _load_kjv(allow_fallback, timeout)
    if requested != WAR_AND_PEACE:
        return _load_local(Path(requested).expanduser())

    sha256 = sha256 or os.environ.get("ATTNLIMITS_WAR_AND_PEACE_SHA256") or None
    cached = _read_cached(sha256)
    if isinstance(cached, tuple):
        data, record = cached
        source = "cache"
        when = record.get("downloaded", "?")
        reason = f"cached copy of {record.get('url', 'ebook #2600')} (downloaded {when}), SHA-256 verified"
    else:
        why_not_cached = cached
        if why_not_cached != "not downloaded yet":
            say(f"War and Peace: {why_not_cached}; downloading it again")
        try:
            path = download_war_and_peace(url, sha256=sha256, timeout=timeout)
        except (TextDownloadError, TextValidationError) as e:
            if not allow_fallback:
                detail = "" if why_not_cached == "not downloaded yet" else f" ({why_not_cached})"
                raise type(e)(f"War and Peace is not in the cache{detail} and could not be downloaded: {e}") from e
            return _load_fallback(f"War and Peace could not be downloaded ({e}); OFFLINE FALLBACK")
        loaded = _read_cached(sha256)
        if isinstance(loaded, str):  # pragma: no cover - written and verified a moment ago
            raise TextDownloadError(f"the fresh download of War and Peace does not verify: {loaded}")
        data, record = loaded
        source = "download"
        reason = f"downloaded from {record['url']} and cached in {path}"
    raw = data.decode("utf-8-sig")
    text = validate_war_and_peace(raw)
    title = "War and Peace (Project Gutenberg ebook #2600)"
    loaded_text = _make(text, WAR_AND_PEACE, title, source, reason, str(_paths()[0]), record["sha256"])
    say(f"text War and Peace [{source}, {len(text):,} characters]: {reason}")
    return loaded_text


def _load_local(path: Path) -> Text:
    if not path.exists():
        raise FileNotFoundError(
            f"name_or_path={str(path)!r}: no such file (known texts: {WAR_AND_PEACE!r}, {FALLBACK_NAME!r}, {KJV!r})"
        )
    if not path.is_file():
        raise ValueError(f"name_or_path={str(path)!r} is not a file")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text ({e})") from e
    if not text.strip():
        raise ValueError(f"{path} is empty")
    sha = hashlib.sha256(data).hexdigest()
    loaded = _make(text, path.stem, path.name, "local", f"read from {path.resolve()}", str(path.resolve()), sha)
    say(f"text {path.name} [local, {len(text):,} characters]")
    return loaded


def sha256_of(text: Text | str) -> str:
    """The SHA-256 of a text: its recorded hash, or the hash of a plain string's UTF-8 bytes."""
    return text.provenance.sha256 if hasattr(text, "provenance") else hashlib.sha256(str(text).encode()).hexdigest()
