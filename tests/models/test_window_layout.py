"""attnlimits.models.windows.windows lays its windows out spread over the whole text (or consecutively from its start):
window i of ``total`` at text token ``i * (n - length) // (total - 1)``; any piece ``first..first + count - 1`` is a
piece of the same layout; a text too short for the layout is refused; the captures record their windows' offsets."""

from __future__ import annotations

import pytest
import tiny_models
import torch

from attnlimits import experiments, models
from attnlimits.models import texts, windows


class _NumberTokenizer:
    """A stand-in tokenizer: word ``w<k>`` is token k (so a window's ids say where in the text it lies)."""

    bos_token_id = 9999  # never prepended by default: any other word is token 0

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [int(word[1:]) if word[1:].isdigit() else 0 for word in text.split()]}


def _text(words: int) -> str:
    lines = [" ".join(f"w{k}" for k in range(start, min(start + 10, words))) for start in range(0, words, 10)]
    return "\n".join(lines)


def test_spread_windows_lie_evenly_from_the_first_to_the_last_full_window():
    tok, n = _NumberTokenizer(), 1000
    ids, starts = windows.windows(tok, _text(n), 10, 7, total=7, return_starts=True)
    assert starts == [i * (n - 10) // 6 for i in range(7)] and starts[0] == 0 and starts[-1] == n - 10
    assert ids.shape == (7, 10) and ids.dtype == torch.long
    for row, start in zip(ids.tolist(), starts, strict=True):
        assert row == list(range(start, start + 10))
    # a piece of the layout is the layout's windows
    piece, piece_starts = windows.windows(tok, _text(n), 10, 3, first=2, total=7, return_starts=True)
    assert piece_starts == starts[2:5] and torch.equal(piece, ids[2:5])
    # one window of a layout of one starts at 0, as the first consecutive window does
    one, one_start = windows.windows(tok, _text(n), 10, 1, total=1, return_starts=True)
    assert one_start == [0] and torch.equal(one, windows.windows(tok, _text(n), 10, 1))


def test_consecutive_windows_tile_the_start_of_the_text():
    tok = _NumberTokenizer()
    ids, starts = windows.windows(tok, _text(500), 10, 3, first=2, return_starts=True)
    assert starts == [20, 30, 40] and ids.flatten().tolist() == list(range(20, 50))
    assert torch.equal(ids, windows.windows(tok, _text(500), 10, 5)[2:])


def test_bos_windows_count_the_text_tokens_after_the_bos():
    tok, n = _NumberTokenizer(), 300
    ids, starts = windows.windows(tok, _text(n), 11, 4, total=4, bos=True, return_starts=True)
    assert starts == [i * (n - 10) // 3 for i in range(4)]
    assert (ids[:, 0] == 9999).all()
    for row, start in zip(ids[:, 1:].tolist(), starts, strict=True):
        assert row == list(range(start, start + 10))


def test_a_layout_the_text_cannot_hold_is_refused():
    tok = _NumberTokenizer()
    windows.windows(tok, _text(100), 10, 1, total=10)  # exactly ten windows fit, without overlap
    with pytest.raises(ValueError, match=r"windows: the text has only 100 tokens .* 11 windows of 10 tokens need 110"):
        windows.windows(tok, _text(100), 10, 1, total=11)
    with pytest.raises(ValueError, match=r"windows: the text has only 100 tokens"):
        windows.windows(tok, _text(100), 10, 11)
    with pytest.raises(ValueError, match="total: windows 3..4 lie beyond a layout of 4 windows"):
        windows.windows(tok, _text(100), 10, 2, first=3, total=4)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="total must be None"):
            windows.windows(tok, _text(100), 10, 1, total=bad)
    with pytest.raises(ValueError, match="first must be an integer"):
        windows.windows(tok, _text(100), 10, 1, first=-1)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return tiny_models.saved_llama(tmp_path_factory.mktemp("tiny-llama-layout"), seed=2, positions=64)


@pytest.fixture(scope="module")
def text():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        return texts.load("pydoc-topics")


def test_captures_record_their_window_and_offset(tiny_dir, text, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = models.load(str(tiny_dir))
    ids, starts = windows.windows(model, text, 32, 2, first=1, total=4, return_starts=True)
    caps = experiments.capture_windows(model, text, length=32, count=2, first_window=1, total=4)
    assert [c.index for c in caps] == [1, 2] and [c.start for c in caps] == starts
    assert all(torch.equal(c.input_ids[0].cpu(), row) for c, row in zip(caps, ids, strict=True))
    # without a total the windows are spread over first_window + count windows
    alone = experiments.capture_windows(model, text, length=32, count=3)
    assert [c.start for c in alone] == windows.windows(model, text, 32, 3, total=3, return_starts=True)[1]
    assert alone[-1].start > 100 * 32  # the last window lies at the end of the text, not after the first two


def test_shuffled_windows_hold_the_same_tokens_in_a_seeded_order():
    tok, n = _NumberTokenizer(), 1000
    plain = windows.windows(tok, _text(n), 10, 4, total=4)
    shuffled = windows.windows(tok, _text(n), 10, 4, total=4, shuffle=3)
    assert all(sorted(a) == sorted(b) for a, b in zip(plain.tolist(), shuffled.tolist(), strict=True))
    assert not torch.equal(plain, shuffled)
    assert torch.equal(shuffled, windows.windows(tok, _text(n), 10, 4, total=4, shuffle=3))  # seeded
    assert not torch.equal(shuffled, windows.windows(tok, _text(n), 10, 4, total=4, shuffle=4))
    # window i is shuffled the same in any piece of the layout that reads it
    assert torch.equal(windows.windows(tok, _text(n), 10, 2, first=2, total=4, shuffle=3), shuffled[2:])
    with_bos = windows.windows(tok, _text(n), 10, 2, total=2, bos=True, shuffle=3)
    assert (with_bos[:, 0] == tok.bos_token_id).all()  # the BOS stays first
    with pytest.raises(ValueError, match="shuffle: must be None"):
        windows.windows(tok, _text(n), 10, 1, shuffle=-1)
