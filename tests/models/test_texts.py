"""attnlimits.models.texts: the War and Peace downloader against HTTP servers on 127.0.0.1, the cache, the fallback;
the windows cut from a loaded text (attnlimits.models.windows).

No test touches any address but 127.0.0.1: the download URL always points at a server the test started (or at a
closed local port), and the cache lives in a temporary directory.
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from attnlimits.models import texts, windows

PROSE = (
    "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. But I warn you, if you "
    "don't tell me that this means war, if you still try to defend the infamies and horrors perpetrated by that "
    "Antichrist, I will have nothing more to do with you.\n\n"
)


def _book(chars: int = texts.MIN_CHARS + 100_000) -> bytes:
    """A synthetic ebook with the structure of Project Gutenberg's #2600 (header, contents, chapters, licence)."""
    contents = " BOOK ONE: 1805\n CHAPTER I\n CHAPTER II\n BOOK TWO: 1805\n CHAPTER I\n"
    chapters = []
    size, number = 0, 1
    while size < chars:
        chapter = f"CHAPTER {number}\n\n" + PROSE * 40
        chapters.append(chapter)
        size += len(chapter)
        number += 1
    body = "BOOK ONE: 1805\n\n\nCHAPTER I\n\n" + PROSE + "\n".join(chapters)
    text = (
        "\ufeffThe Project Gutenberg eBook of War and Peace\n\nTitle: War and Peace\n\nAuthor: Leo Tolstoy\n\n"
        "*** START OF THE PROJECT GUTENBERG EBOOK WAR AND PEACE ***\n\nWAR AND PEACE\n\nBy Leo Tolstoy/Tolstoi\n\n"
        f"Contents\n\n{contents}\n\n{body}\n\n"
        "*** END OF THE PROJECT GUTENBERG EBOOK WAR AND PEACE ***\n\nSection 1. General Terms of Use ... licence\n"
    )
    return text.encode("utf-8")


BOOK = _book()
SHORT = _book(chars=10_000)


class _Handler(BaseHTTPRequestHandler):
    routes = {"/pg2600.txt": BOOK, "/short.txt": SHORT, "/other.txt": b"Title: Anna Karenina\n" * 200_000}

    def do_GET(self):  # noqa: N802
        if self.path == "/truncated.txt":
            self.send_response(200)
            self.send_header("Content-Length", str(len(BOOK)))
            self.end_headers()
            self.wfile.write(BOOK[: len(BOOK) // 2])
            return
        data = self.routes.get(self.path)
        if data is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """A fresh cache per test, and a download URL that can only reach 127.0.0.1 (a closed port by default)."""
    monkeypatch.setenv("ATTNLIMITS_CACHE", str(tmp_path / "cache"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setenv("ATTNLIMITS_WAR_AND_PEACE_URL", f"http://127.0.0.1:{closed}/pg2600.txt")
    monkeypatch.delenv("ATTNLIMITS_WAR_AND_PEACE_SHA256", raising=False)
    monkeypatch.delenv("ATTNLIMITS_TEXT", raising=False)


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _cache_files(tmp_path):
    root = tmp_path / "cache" / "texts"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_download_strip_validate_and_cache(server, tmp_path, capsys):
    text = texts.load("war-and-peace", url=f"{server}/pg2600.txt")
    p = text.provenance
    assert p.source == "download" and p.sha256 == hashlib.sha256(BOOK).hexdigest()
    assert "START OF THE PROJECT" not in text.text and "General Terms" not in text.text
    assert text.text.startswith("WAR AND PEACE")
    assert text.body.startswith("“Well, Prince") or text.body.startswith("Well, Prince")
    assert _cache_files(tmp_path) == ["pg2600.json", "pg2600.txt"]
    assert "[download" in capsys.readouterr().out
    # later uses come from the verified cache, without the network (the URL now points at a closed port)
    again = texts.load("war-and-peace")
    assert again.provenance.source == "cache" and again.text == text.text


def test_http_404(server, tmp_path):
    with pytest.raises(texts.TextDownloadError, match="HTTP 404"):
        texts.load("war-and-peace", url=f"{server}/missing.txt", allow_fallback=False)
    assert _cache_files(tmp_path) == []


def test_server_that_never_answers_times_out(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts, never answers
    try:
        started = time.perf_counter()
        with pytest.raises(texts.TextDownloadError, match="did not answer within 0.5 s"):
            texts.load(
                "war-and-peace",
                url=f"http://127.0.0.1:{listener.getsockname()[1]}/pg2600.txt",
                timeout=0.5,
                allow_fallback=False,
            )
        assert time.perf_counter() - started < 5
    finally:
        listener.close()
    assert _cache_files(tmp_path) == []


def test_wrong_hash_leaves_nothing_in_the_cache(server, tmp_path):
    with pytest.raises(texts.TextDownloadError, match="expected 0000"):
        texts.load("war-and-peace", url=f"{server}/pg2600.txt", sha256="0" * 64, allow_fallback=False)
    assert _cache_files(tmp_path) == []


@pytest.mark.parametrize(
    ("path", "error", "message"),
    [
        ("/short.txt", texts.TextValidationError, "truncated"),
        ("/other.txt", texts.TextValidationError, "START OF THE PROJECT GUTENBERG"),
        ("/truncated.txt", texts.TextDownloadError, "truncated|failed"),
    ],
)
def test_invalid_content_is_rejected(server, tmp_path, path, error, message):
    with pytest.raises(error, match=message):
        texts.load("war-and-peace", url=f"{server}{path}", allow_fallback=False)
    assert _cache_files(tmp_path) == []


def test_corrupted_cache_is_detected_and_downloaded_again(server, tmp_path, capsys):
    url = f"{server}/pg2600.txt"
    texts.load("war-and-peace", url=url)
    cached = tmp_path / "cache" / "texts" / "pg2600.txt"
    cached.write_bytes(cached.read_bytes()[:-10] + b"corrupted!")
    capsys.readouterr()
    fresh = texts.load("war-and-peace", url=url)
    assert "corrupt" in capsys.readouterr().out and fresh.provenance.source == "download"
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == hashlib.sha256(BOOK).hexdigest()
    # corrupt again, now offline: reported clearly (or, when allowed, the fallback with a notice)
    cached.write_bytes(b"corrupted")
    with pytest.raises(texts.TextDownloadError, match="corrupt"):
        texts.load("war-and-peace", allow_fallback=False)
    assert texts.load("war-and-peace").provenance.source == "fallback"


def test_offline_falls_back_with_a_notice(capsys):
    text = texts.load()
    out = capsys.readouterr().out
    assert text.provenance.source == "fallback" and "OFFLINE FALLBACK" in out
    assert text.provenance.name == texts.FALLBACK_NAME and len(text) > 400_000
    assert text.provenance.sha256 == hashlib.sha256(text.text.encode()).hexdigest()
    with pytest.raises(texts.TextDownloadError, match="unreachable|refused"):
        texts.load("war-and-peace", allow_fallback=False)


def test_local_files(tmp_path):
    good = tmp_path / "book.txt"
    good.write_text("Contents\nCHAPTER I\nCHAPTER II\n\nCHAPTER I\n\nIt was a dark night.\nCHAPTER II\nMore.\n")
    text = texts.load(good)
    assert text.provenance.source == "local" and text.body.startswith("It was a dark night.")
    with pytest.raises(FileNotFoundError, match="no such file"):
        texts.load(tmp_path / "absent.txt")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8"):
        texts.load(tmp_path / "latin1.txt")
    (tmp_path / "empty.txt").write_text("  \n")
    with pytest.raises(ValueError, match="empty"):
        texts.load(tmp_path / "empty.txt")


class _WordTokenizer:
    """A stand-in tokenizer: one id per whitespace-separated word (enough to test the window logic exactly)."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [len(word) for word in text.split()]}


def test_windows_are_consecutive_and_match_whole_text_tokenisation(server):
    text = texts.load("war-and-peace", url=f"{server}/pg2600.txt")
    tok = _WordTokenizer()
    w = windows.windows(tok, text, 100, 7)
    assert w.shape == (7, 100) and w.dtype == torch.long
    whole = tok(text.body)["input_ids"]
    assert w.flatten().tolist() == whole[:700]
    with pytest.raises(ValueError, match=r"only [\d,]+ tokens"):
        windows.windows(tok, "CHAPTER I\n\nfew words here", 10, 1)
    with pytest.raises(ValueError, match="length must be an integer ≥ 1"):
        windows.windows(tok, text, 0, 1)
    with pytest.raises(ValueError, match="count must be an integer ≥ 1"):
        windows.windows(tok, text, 10, 1.5)


@pytest.fixture(scope="module")
def fallback_model():
    """The offline fallback model from the user's attnlimits cache (module scope: set up before `isolated`)."""
    import attnlimits.models as models

    return models.load("fallback")


def test_windows_with_a_real_tokenizer_equal_whole_text_tokenisation(fallback_model):
    text = texts.load("pydoc-topics")
    w = windows.windows(fallback_model, text, 256, 3)
    whole = fallback_model.tokenizer(text.body, add_special_tokens=False)["input_ids"]
    assert w.flatten().tolist() == whole[: 3 * 256]
    with pytest.raises(ValueError, match="tokens from the start of its first chapter"):
        windows.windows(fallback_model, text, 100_000, 10)
