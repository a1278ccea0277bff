"""talk.columns: what each column says, plain rows that line up, hostile text made harmless."""

from __future__ import annotations

from typing import Any

from follower.history.timeline import Direction, Line
from talk.columns import STYLES, as_json, cells, plain_row, who_width
from tests.unit.samples import FP_A, hexid

ATTACK = "\x1b]0;pwned\x07\x1b[2J"


def line(**over: Any) -> Line:
    base: dict[str, Any] = {"id": hexid(1), "direction": Direction.IN, "name": "alice", "fingerprint": FP_A,
                            "at": 1704067200.0, "kind": "chat", "text": "hello"}
    return Line(**{**base, **over})


def test_received_mail_is_new_or_held_and_sent_mail_shows_its_state() -> None:
    assert cells(line()).state == ""
    assert cells(line(unread=True)).state == "new"
    assert cells(line(held=True, unread=True)).state == "held, new"
    out = cells(line(direction=Direction.OUT, state="delivered"))
    assert (out.state, out.who, out.state_style) == ("delivered", "to alice", "delivered")
    assert cells(line(unread=True)).state_style == "new" and "new" in STYLES


def test_the_note_says_task_and_status_an_unusual_kind_and_why_mail_stopped() -> None:
    assert cells(line(kind="result", task="a-1", task_status="done")).note == "result a-1: done"
    assert cells(line(kind="task", task="a-1")).note == "task a-1"
    assert cells(line(kind="contact_accepted")).note == "contact_accepted"
    refused = line(direction=Direction.OUT, state="refused", reason="policy: refuse")
    assert cells(refused).note == "policy: refuse"
    assert cells(line(direction=Direction.OUT, state="spooled", reason="in the spool")).note == ""
    assert cells(line(held=True, reason="over the rate")).note == "over the rate"


def test_a_preview_is_the_first_line_or_the_gist_and_full_is_everything() -> None:
    assert cells(line(text="one\ntwo")).text == "one …"
    assert cells(line(text="\none\n")).text == "one"
    assert cells(line(text="[opencode-mesh v1]\n---\ncount", gist="count")).text == "count"
    assert cells(line(text="one\ntwo", gist="count"), full=True).text == "one\ntwo"


def test_plain_rows_line_up_and_whole_texts_indent_under_text() -> None:
    width = who_width(["alice", "bo"])
    rows = [plain_row(cells(line()), width), plain_row(cells(line(name="bo", unread=True)), width),
            plain_row(cells(line(text="a\nb", kind="task", task="t-1")), width)]
    assert len({row.index("hello") for row in rows[:2]}) == 1
    assert [row[19:21] + row[33:35] for row in rows] == ["    "] * 3  # after the time and the short id
    assert rows[2].endswith("[task t-1] a …")
    full = plain_row(cells(line(text="first\nsecond"), full=True), width).split("\n")
    assert full[1] == " " * full[0].index("first") + "second"


def test_no_cell_lets_a_control_character_through() -> None:
    hostile = line(text=f"hi {ATTACK}\nmore {ATTACK}", name=f"eve{ATTACK}", kind=ATTACK, task=ATTACK,
                   task_status=ATTACK, reason=ATTACK, held=True, gist="")
    for full in (False, True):
        row = plain_row(cells(hostile, full), 20)
        assert "\x1b" not in row and "\x07" not in row
        assert "\\x1b]0;pwned\\x07\\x1b[2J" in row
    assert "\x1b" not in cells(line(direction=Direction.OUT, state=ATTACK)).state
    assert cells(line(id="ab\x9b2J")).short == "ab\\x9b2J"  # C1 CSI: a spool id may hold it


def test_json_has_every_field_scripts_need_with_the_whole_text() -> None:
    obj = as_json(line(text="a\nb", unread=True, task="t-1", task_status="open"))
    assert obj == {"id": hexid(1), "short": hexid(1)[:12], "dir": "in", "name": "alice", "fingerprint": FP_A,
                   "ts": "2024-01-01T00:00:00Z", "kind": "chat", "state": None, "reason": "",
                   "task": "t-1", "task_status": "open", "held": False, "unread": True, "text": "a\nb",
                   "files": []}


def test_a_received_files_path_size_and_hash_show_in_the_note_and_the_json() -> None:
    from follower.history.timeline import FileNote

    note = FileNote("/home/a/downloads/x\x1b.txt", 1234, "c" * 64)
    got = line(files=(note,))
    assert "file /home/a/downloads/x\\x1b.txt (1,234 bytes, sha256 " + "c" * 64 + ")" in cells(got).note
    assert as_json(got)["files"] == [{"path": note.path, "size": 1234, "sha256": "c" * 64}]
