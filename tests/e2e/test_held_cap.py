"""Held mail under attack: a contact whose mail is held writes on and on.

Real relay, real `talk` processes and followers. The contact's excess is refused with a
receipt that says why, what stays held is bounded and takes about the room of what was sent,
and another contact's mail still goes straight through.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from keys.contacts import ContactBook
from tests.conftest import Agent, RelayProcess, befriend, make_agent, wait_for

CAP = 4
SENT = 7


def state(agent: Agent, msg_id: str) -> dict[str, str]:
    row = agent.ok("status", msg_id, "--json").json()
    return {"state": str(row["state"]), "reason": str(row.get("reason") or "")}


def test_a_held_contact_past_its_cap_is_refused_and_others_still_get_through(
    tmp_path: Path, relay: RelayProcess,
) -> None:
    bob = make_agent(tmp_path, relay, "bob", None)
    alice = make_agent(tmp_path, relay, "alice", None)
    carol = make_agent(tmp_path, relay, "carol", None)
    befriend(bob, alice)
    befriend(bob, carol)
    bob.extra_env = {"TALK_HELD_MAX": str(CAP), "TALK_DEPOSIT_JITTER": "0.05,0.2", "TALK_HOLD_HOURS": "1"}
    bob.ok("policy", "alice", "hold", "--yes")
    bob.ok("follow")
    alice.ok("follow", "--peer", "bob")  # takes alice's receipts
    try:
        # Text that a \\u-escaping store would keep two to three times over.
        texts = [f"{i}: " + "長い文章🙂" * 3000 for i in range(SENT)]
        sent = [alice.ok("send", "bob", text, "--json").json()["id"] for text in texts]
        wait_for(lambda: all(state(alice, m)["state"] in ("held", "refused") for m in sent), 60,
                 "a held or refused receipt for each message")
        states = [state(alice, m) for m in sent]
        held = [m for m, s in zip(sent, states, strict=True) if s["state"] == "held"]
        refused = [s for s in states if s["state"] == "refused"]
        assert len(held) == CAP and len(refused) == SENT - CAP
        assert all(f"at most {CAP}" in s["reason"] and "send it again" in s["reason"] for s in refused)

        # What is held is bounded and compact: one file per message, about the size of its text.
        listed = bob.ok("held", "--json").json()
        assert sorted(h["id"] for h in listed) == sorted(held)
        alice_fp = ContactBook(bob.home / "bob").get("alice").fingerprint
        files = list((bob.home / "bob" / "held" / alice_fp).glob("*.json"))
        assert len(files) == CAP
        text_bytes = sum(len(texts[sent.index(m)].encode()) for m in held)
        assert sum(f.stat().st_size for f in files) < 1.1 * text_bytes
        assert not (bob.home / "bob" / "held.json").exists()

        # Another contact's mail is not queued behind alice's: it is spooled at once.
        start = time.monotonic()
        quick = carol.ok("send", "bob", "still here", "--json").json()["id"]
        wait_for(lambda: quick in bob.ok("show", "carol", "--json").out, 15, "carol's message spooled")
        assert time.monotonic() - start < 15

        # Releasing makes room again: alice's next message is held, not refused.
        bob.ok("held", "accept", "all", "--yes")
        again = alice.ok("send", "bob", "after the release", "--json").json()["id"]
        wait_for(lambda: state(alice, again)["state"] == "held", 30, "the next message held")
    finally:
        bob.run("stop")
        alice.run("stop")


def test_mail_held_by_an_older_version_is_listed_released_and_dropped(pair: tuple[Agent, Agent]) -> None:
    """An identity upgraded with mail in the old one-file box: `talk held` still lists it,
    and accept and drop still work on it (through the real CLI)."""
    alice, bob = pair
    bob.ok("policy", "alice", "hold", "--yes")
    sent = [alice.ok("send", "bob", f"from before {i}", "--json").json()["id"] for i in range(2)]
    assert "held a message from alice" in bob.ok("receive").err
    # Put both back as an older version kept them: one held.json, escaped, indented.
    box = bob.home / "bob"
    files = sorted((box / "held").glob("*/*.json"))
    old = {}
    for path in files:
        entry = json.loads(path.read_text())
        old[entry["record"]["id"]] = entry
        path.unlink()
    (box / "held.json").write_text(json.dumps(old, indent=2, sort_keys=True))
    (box / "held.json").chmod(0o600)
    listed = bob.ok("held", "--json").json()
    assert sorted(h["id"] for h in listed) == sorted(sent)
    assert all(h["text"].startswith("from before") for h in listed)

    bob.ok("held", "accept", sent[0][:8], "--yes")
    spooled = [json.loads(line) for line in (box / "spool" / "inbox.ndjson").read_text().splitlines()]
    assert [r["id"] for r in spooled] == [sent[0]]
    assert not (box / "held.json").exists()  # the rest moved into files on the way
    assert [h["id"] for h in bob.ok("held", "--json").json()] == [sent[1]]
    bob.ok("held", "drop", "all", "--yes")
    assert bob.ok("held", "--json").json() == []
    assert "no held mail" in bob.ok("held").out
