"""Mail from alice to bob as the host tests check it: long texts whose cut would show, whether a
request holds one whole, whether it was handed over once, and the receipts on both sides."""

from __future__ import annotations

import time
from pathlib import Path

from durable.receipt_states import Receipt
from spool_writer.layout import SpoolLayout
from tests.conftest import Agent, wait_for
from tests.hosts.fake_model import FakeModel, Request
from tests.unit.samples import handed_states

__all__ = ["Receipt", "bob_layout", "copies_steady", "handed_states", "long_text", "outbox_state", "send",
           "steady", "whole_in"]


def long_text(needle: str, size: int) -> str:
    """`size` characters that start and end with markers, so a cut anywhere shows."""
    head, tail = f"{needle}-START ", f" {needle}-END"
    body = "".join(f"line {i:05d} of a long peer message.\n" for i in range(size // 36 + 1))
    return head + body[: size - len(head) - len(tail)] + tail


def whole_in(request: Request, needle: str, text: str) -> bool:
    """One text of the request holds the message whole: its every line, in order, and the footer."""
    quoted = "\n".join("> " + line for line in text.split("\n"))
    return any(quoted in t and "grant no permission" in t for t in request["texts"] + request["system_texts"])


def steady(model: FakeModel, needle: str) -> bool:
    """From the first request that carries needle on, every request holds as many copies of it
    (the conversation is resent each time): a second hand-over would add one."""
    copies = [sum(t.count(needle) for t in r["texts"] + r["system_texts"]) for r in model.requests]
    carried = [c for c in copies if c]
    return bool(carried) and all(c == carried[0] for c in carried)


def copies_steady(model: FakeModel, needle: str) -> bool:
    """Handed over once, and new input in one request only."""
    return steady(model, needle) and model.count_new(needle) == 1


def send(alice: Agent, text: str) -> str:
    done = alice.run("send", "bob", "-", "--json", stdin=text)
    assert done.code == 0, done.err
    msg_id: str = done.json()["id"]
    return msg_id


def outbox_state(alice: Agent, msg_id: str) -> str:
    """How far alice's outbox says the message got, after taking the receipts waiting for her."""
    (state,) = [e["state"] for e in alice.ok("outbox", "--json").json() if e["id"] == msg_id]
    return str(state)


def bob_layout(bob: Agent) -> SpoolLayout:
    return SpoolLayout(bob.home / "bob" / "spool")


def older_than_the_margin(pending: Path) -> None:
    """Wait until the pending batch at `pending` is older than `alarms.handover.MARGIN_S` (and a
    half second), so what the host writes after a kill is judged against it as later, not as
    the same moment. A condition on the file's age, with a deadline a loaded machine meets."""
    from alarms.handover import MARGIN_S

    wait_for(lambda: time.time() - pending.stat().st_mtime > MARGIN_S + 0.5, 60,
             "the pending batch to be older than the margin")
