"""follower.held: the box of held mail; each message kept once, picked by id or unique prefix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from durable.errors import NotFound, UserError
from durable.files import write_json
from follower.held import HELD_DIR, HELD_FILE, HELD_MAX, HELD_MAX_ENV, HeldBox, HeldFull, over_cap
from tests.unit.samples import FP_A, FP_B, FP_C, hexid


def held_record(msg_id: str) -> dict[str, Any]:
    return {"id": msg_id, "from": FP_B, "name": "bob", "text": "hi", "ts": "t", "kind": "chat"}


def test_hold_keeps_a_message_once(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    assert box.hold(held_record(FP_A), "held until the recipient accepts it")
    assert not box.hold({**held_record(FP_A), "text": "resent"}, "again")
    held = box.all()
    assert list(held) == [FP_A]
    assert held[FP_A]["record"]["text"] == "hi"
    assert held[FP_A]["reason"] == "held until the recipient accepts it"


def test_all_of_an_empty_box_is_empty(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    assert box.all() == {}
    assert box.pick("all") == []


def test_pick_all_an_id_or_a_unique_prefix(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    one, two, other = "abcdef01" + "0" * 24, "abcdef02" + "0" * 24, "123456" + "0" * 26
    for msg in (one, two, other):
        box.hold(held_record(msg), "r")
    assert sorted(box.pick("all")) == sorted([one, two, other])
    assert box.pick(two) == [two]
    assert box.pick("abcdef01") == [one]
    assert box.pick("123456") == [other]


def test_pick_refuses_ambiguous_short_or_unknown_names(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    for msg in ("abcdef01" + "0" * 24, "abcdef02" + "0" * 24, "123456" + "0" * 26):
        box.hold(held_record(msg), "r")
    with pytest.raises(NotFound, match="talk held"):
        box.pick("ffffff")
    with pytest.raises(UserError, match="ambiguous: abcdef matches 2"):
        box.pick("abcdef")
    for which in ("12345", "", "all-of-them"):
        with pytest.raises(UserError, match="not a message id"):
            box.pick(which)


def test_remove_returns_what_was_there_and_ignores_the_rest(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    box.hold(held_record(FP_A), "r1")
    box.hold(held_record(FP_B), "r2")
    taken = box.remove([FP_A, FP_C])
    assert [t["record"]["id"] for t in taken] == [FP_A]
    assert taken[0]["reason"] == "r1"
    assert list(box.all()) == [FP_B]
    assert box.remove([FP_A]) == []


def test_expired_lists_what_was_held_longer_than_the_hours(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    box.hold(held_record(FP_A), "r")
    held_at = float(box.all()[FP_A]["held_at"])
    assert box.expired(held_at + 24 * 3600 - 1, 24.0) == []
    assert box.expired(held_at + 24 * 3600, 24.0) == [FP_A]
    assert box.expired(held_at + 3600, 0.5) == [FP_A]




# ---------------------------------------------------------------- the cap, the storage, old boxes


def from_sender(n: int, sender: str = FP_B, text: str = "hi") -> dict[str, Any]:
    return {**held_record(hexid(n)), "from": sender, "text": text}


def test_a_sender_past_its_cap_is_refused_and_others_still_held(tmp_path: Path) -> None:
    box = HeldBox(tmp_path, most=3)
    assert all(box.hold(from_sender(n), "r") for n in range(3))
    with pytest.raises(HeldFull, match=r"already holds 3 of your messages \(at most 3\)"):
        box.hold(from_sender(3), "r")
    assert not box.hold(from_sender(0), "r")  # held already: a resend is no new message
    assert box.hold(from_sender(4, sender=FP_C), "r")  # another sender has its own cap
    box.remove([hexid(0)])
    assert box.hold(from_sender(3), "r")  # a release makes room
    assert sorted(box.ids()) == sorted(hexid(n) for n in (1, 2, 3, 4))


def test_a_sender_past_its_bytes_is_refused(tmp_path: Path) -> None:
    assert over_cap(1, 900, 200, most=10, most_bytes=1000) is not None
    assert over_cap(1, 700, 200, most=10, most_bytes=1000) is None
    assert over_cap(10, 0, 1, most=10) is not None


def test_the_cap_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HELD_MAX_ENV, "7")
    assert HeldBox(tmp_path).most == 7
    for junk in ("0", "-3", "many"):
        monkeypatch.setenv(HELD_MAX_ENV, junk)
        assert HeldBox(tmp_path).most == HELD_MAX


def test_held_mail_takes_about_the_room_of_its_text(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    text = "日本語の長い文章と🙂絵文字" * 2000  # what \\u escapes would store 2 to 3 times over
    box.hold(from_sender(1, text=text), "held until the recipient accepts it")
    [path] = (tmp_path / HELD_DIR / FP_B).glob("*.json")
    assert path.stat().st_size < len(text.encode()) + 400
    assert box.all()[hexid(1)]["record"]["text"] == text


def test_expiry_reads_the_files_times(tmp_path: Path) -> None:
    box = HeldBox(tmp_path)
    box.hold(from_sender(1), "r")
    [path] = (tmp_path / HELD_DIR / FP_B).glob("*.json")
    assert abs(path.stat().st_mtime - float(box.all()[hexid(1)]["held_at"])) < 1e-6
    path.write_bytes(b"")  # even an unreadable entry expires: expiry reads no message
    os.utime(path, (1000.0, 1000.0))
    assert box.expired(1000.0 + 3600, 1.0) == [hexid(1)]


def legacy_box(folder: Path, ids: list[str], held_at: float = 1_000_000.0) -> None:
    """A box as versions before one file per message wrote it."""
    write_json(folder / HELD_FILE, {i: {"record": held_record(i), "reason": "old", "held_at": held_at}
                                    for i in ids})


def test_mail_held_by_an_older_version_is_read_released_and_expired(tmp_path: Path) -> None:
    legacy_box(tmp_path, [hexid(1), hexid(2), hexid(3)])
    box = HeldBox(tmp_path)
    assert sorted(box.ids()) == [hexid(1), hexid(2), hexid(3)]
    assert box.all()[hexid(1)]["reason"] == "old"
    assert box.pick(hexid(2)[:8]) == [hexid(2)]
    assert sorted(box.expired(1_000_000.0 + 3600, 1.0)) == [hexid(1), hexid(2), hexid(3)]
    assert [e["record"]["id"] for e in box.remove([hexid(2)])] == [hexid(2)]
    assert not (tmp_path / HELD_FILE).exists()  # moved into files by the first change
    assert sorted(box.ids()) == [hexid(1), hexid(3)]
    assert box.expired(1_000_000.0 + 3599, 1.0) == []  # the old times are kept
    assert sorted(box.expired(1_000_000.0 + 3600, 1.0)) == [hexid(1), hexid(3)]
    assert not box.hold(held_record(hexid(1)), "again")  # held once, whichever version held it


def test_a_move_cut_short_shows_each_message_once_and_finishes(tmp_path: Path) -> None:
    legacy_box(tmp_path, [hexid(1), hexid(2)])
    box = HeldBox(tmp_path)
    data = json.dumps({"record": held_record(hexid(1)), "reason": "old", "held_at": 5.0}).encode()
    first = tmp_path / HELD_DIR / FP_B / f"{hexid(1)}.{len(data)}.json"
    box._write(first, data, 5_000_000_000)  # killed after the first file
    assert sorted(box.ids()) == [hexid(1), hexid(2)]
    assert len(box.all()) == 2
    assert box.hold(held_record(hexid(3)), "new")
    assert not (tmp_path / HELD_FILE).exists()
    assert sorted(box.ids()) == [hexid(1), hexid(2), hexid(3)]


HOLDER = """
import sys
from pathlib import Path
from follower.held import HeldBox
box = HeldBox(Path(sys.argv[1]), most=1000)
for n in range(int(sys.argv[2])):
    if box.hold({"id": f"{n:06x}" + "0" * 26, "from": "b" * 32, "name": "bob", "text": "x" * 5000,
                 "ts": "t", "kind": "chat"}, "r"):
        print(n, flush=True)
"""


def test_killed_at_any_point_a_hold_keeps_each_message_once(tmp_path: Path) -> None:
    """Kill -9 a process holding messages, each time once it has held a few more (the kill
    lands somewhere in the writes of the next); what it held is whole, nothing is held twice,
    and holding the whole run again completes it."""
    total = 60
    for fresh_before_kill in (1, 2, 3, 1, 2, 3, 1):
        child = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), str(total)],
                                 stdout=subprocess.PIPE)
        assert child.stdout is not None
        for _ in range(fresh_before_kill):
            child.stdout.readline()
        child.kill()
        child.wait()
        child.stdout.close()
        box = HeldBox(tmp_path, most=1000)
        assert len(box.all()) == len(box.ids())  # every file a whole entry
    box = HeldBox(tmp_path, most=1000)
    before = set(box.ids())
    assert len(before) >= 13
    fresh = [box.hold(held_record(hexid(n)), "r") for n in range(total)]
    assert sum(fresh) == total - len(before)
    assert sorted(box.ids()) == sorted(hexid(n) for n in range(total))
    assert not [p for p in (tmp_path / HELD_DIR / FP_B).iterdir() if p.name.endswith(".tmp")]
