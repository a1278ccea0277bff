"""Message ids through the real CLI: the 12 characters `talk log` and `talk outbox` show are
enough for `talk forward` and `talk status`; an ambiguous, unknown or malformed id is one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool
from tests.conftest import Agent, wait_for


def spool_records(agent: Agent, name: str) -> list[dict[str, Any]]:
    inbox = agent.home / name / "spool" / "inbox.ndjson"
    return [json.loads(line) for line in inbox.read_text().splitlines()] if inbox.exists() else []


def record(msg_id: str, text: str) -> SpoolRecord:
    return {"id": msg_id, "from": "a" * 32, "name": "alice", "text": text,
            "ts": "2026-01-01T00:00:00Z", "kind": "chat"}


def fails_in_one_line(agent: Agent, *args: str) -> str:
    r = agent.run(*args)
    assert r.code == 1, (args, r.code, r.err)
    assert r.err.strip().count("\n") == 0 and "Traceback" not in r.err, (args, r.err)
    return r.err


def test_forward_and_status_take_the_short_ids_the_lists_show(pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    bob.ok("follow", "--peer", "alice")
    try:
        sent = alice.ok("send", "bob", "pass this on", "--json").json()["id"]
        wait_for(lambda: sent in {r["id"] for r in spool_records(bob, "bob")}, 20, "the spool line")
        [line] = [x for x in bob.ok("log").out.splitlines() if "pass this on" in x]
        shown = line.split()[2]
        assert shown == sent[:12], line
        forwarded = bob.ok("forward", shown, "alice", "--json").json()
        assert forwarded["to"] == "alice" and len(forwarded["id"]) == 32
    finally:
        bob.run("stop")
    [row] = [x for x in bob.ok("outbox").out.splitlines() if "forwarded from alice" in x]
    short = row.split()[2]
    assert short == forwarded["id"][:12]
    assert bob.ok("status", short, "--json").json()["id"] == forwarded["id"]
    assert bob.ok("status", short[:6], "--json").json()["id"] == forwarded["id"]
    assert bob.ok("status", short.upper()).out.startswith(forwarded["id"])


def test_an_ambiguous_unknown_or_malformed_id_is_one_clear_line(pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    spool = Spool(bob.home / "bob" / "spool")
    for n in (1, 2):
        spool.deliver(record(f"abcdef0{n}" + "0" * 24, f"message {n}"))
    err = fails_in_one_line(bob, "forward", "abcdef", "alice")
    assert "ambiguous: abcdef matches 2 messages; give more characters" in err
    assert bob.ok("log").out.count("abcdef0") == 2  # the ids `talk log` shows tell them apart
    err = fails_in_one_line(bob, "forward", "ffffff", "alice")
    assert "no received message ffffff" in err and "talk log" in err
    err = fails_in_one_line(bob, "status", "abcdef01")
    assert "no sent message abcdef01" in err and "talk outbox" in err
    err = fails_in_one_line(bob, "held", "accept", "abcdef01", "--yes")
    assert "no held message abcdef01" in err and "talk held" in err
    for bad in ("abc", "zzzzzzzz", "\x1b[2J" + "a" * 8, "a" * 40):
        for args in (("forward", bad, "alice"), ("status", bad), ("held", "drop", bad, "--yes")):
            r = bob.run(*args)
            assert r.code == 1 and "is not a message id" in r.err and "Traceback" not in r.err, (args, r.err)
            assert "\x1b" not in r.err
    assert alice.ok("outbox", "--json").json() == []  # nothing was sent by any of it


def test_a_held_message_released_later_keeps_the_time_it_arrived(pair: tuple[Agent, Agent]) -> None:
    """Held mail is released hours later: `talk log` shows when it came, not when it was let in."""
    from datetime import datetime

    from durable.files import read_json, write_json
    from spool_writer.spool import utc_stamp

    alice, bob = pair
    bob.ok("policy", "alice", "hold", "--yes")
    sent = alice.ok("send", "bob", "wait for me", "--json").json()["id"]
    assert "held a message from alice" in bob.ok("receive").err
    [held] = bob.ok("held", "--json").json()
    assert held["id"] == sent
    # Three hours pass before anyone looks: the held entry is dated back rather than slept on.
    [box] = (bob.home / "bob" / "held").glob(f"*/{sent}.*.json")
    entry = read_json(box, {})
    arrived = entry["held_at"] - 3 * 3600
    entry["held_at"] = arrived
    write_json(box, entry)
    bob.ok("held", "accept", sent[:12], "--yes")
    [line] = spool_records(bob, "bob")
    assert line["id"] == sent and line["received"] == utc_stamp(arrived)
    assert line["released"] > line["received"]  # the release is kept beside it
    [shown] = [x for x in bob.ok("log").out.splitlines() if "wait for me" in x]
    assert shown.startswith(datetime.fromtimestamp(arrived).strftime("%Y-%m-%d %H:%M:%S")), shown


def test_talk_log_names_damaged_lines_and_shows_the_rest(bob: Agent, tmp_path: Path) -> None:
    spool = Spool(bob.home / "bob" / "spool")
    spool.deliver(record("1" * 32, "first good"))
    inbox = spool.layout.inbox
    hostile = [b"not json at all\n", b"[1, 2, 3]\n",
               json.dumps({**record("2" * 32, "x"), "text": 5, "from": ["a"]}).encode() + b"\n",
               json.dumps({"id": "3" * 32}).encode() + b"\n",
               json.dumps({**record("4" * 32, "y"), "received": {"at": 1}}).encode() + b"\n",
               b'{"id": "' + b"5" * 32 + b'", "text": "torn']  # a write cut short, sealed below
    with inbox.open("ab") as f:
        f.write(b"".join(hostile))
    spool.deliver(record("6" * 32, "last good \x1b[2Jafter\u202e"))
    r = bob.run("log")
    assert r.code == 0 and "Traceback" not in r.err, r.err
    out = r.out.splitlines()
    assert len(out) == 2 and "first good" in out[0] and "last good" in out[1], out
    assert all(f"  {c * 12}  alice: " in line for c, line in zip("16", out, strict=True))
    assert "?" not in r.out and "\x1b" not in r.out and "\u202e" not in r.out and "\\x1b[2J" in r.out
    notes = r.err.splitlines()
    assert notes == [f"talk: damaged line {n} in {inbox} (skipped): {why}" for n, why in [
        (2, "not JSON (a write cut short?)"), (3, "not a JSON object"), (4, "from, text not text"),
        (5, "lacks from, name, text, ts, kind"), (6, "received not text"),
        (7, "not JSON (a write cut short?)")]], notes
