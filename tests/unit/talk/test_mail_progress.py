"""talk.mail's upload progress: one rewritten line on a terminal's stderr, nothing off a terminal."""

from __future__ import annotations

import io

import pytest

from talk.mail import _ticker


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_goes_to_a_terminal_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    now = [100.0]
    tick = _ticker("bob", lambda: now[0])
    assert tick is not None
    tick(0, 4_000_000)
    now[0] += 0.05
    tick(1_000_000, 4_000_000)  # within a tenth of a second of the last: not drawn again
    now[0] += 0.1
    tick(2_000_000, 4_000_000)
    tick(4_000_000, 4_000_000)  # the end is always drawn, and ends the line
    lines = screen.getvalue().split("\r")[1:]
    assert lines == ["sending to bob: 0.0 of 4.0 MB (0%)", "sending to bob: 2.0 of 4.0 MB (50%)",
                     "sending to bob: 4.0 of 4.0 MB (100%)\n"]


def test_no_progress_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert _ticker("bob") is None


def test_a_text_under_the_sure_line_is_never_long() -> None:
    """`talk send` skips loading the long-text check for a text this short: no JSON escaping
    (six bytes a character at most) can take it over the line."""
    from follower.send.upload import LONG_TEXT, long_text
    from talk.mail import LONG_TEXT_SURE

    assert LONG_TEXT_SURE * 6 <= LONG_TEXT
    assert not long_text("\x00" * LONG_TEXT_SURE)
