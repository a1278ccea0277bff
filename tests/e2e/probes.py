"""What the e2e tests read off an agent: the ids in its spools, the mail waiting for it at
the relay, its status report, the id of what it sent, the texts it receives, and whether an
error is one line."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

from tests.conftest import Agent, RelayProcess


def spool_ids(agent: Agent, name: str) -> Counter[str]:
    """Every message id in every spool file of an identity (all sessions, inbox, generations)."""
    ids: Counter[str] = Counter()
    root = agent.home / name / "spool"
    for path in root.rglob("*.ndjson*"):
        if path.name.endswith(".cursor"):
            continue
        for line in path.read_text().splitlines():
            if line.strip():
                ids[json.loads(line)["id"]] += 1
    return ids


def relay_mail_count(relay: RelayProcess, agent: Agent) -> int:
    """Mail waiting in `agent`'s mailbox (the receipts its follower sends wait in the senders')."""
    fp = agent.ok("id", "--json").json()["fingerprint"]
    with sqlite3.connect(relay.mailbox_db()) as db:
        return int(db.execute("SELECT COUNT(*) FROM mail WHERE fp = ?", (fp,)).fetchone()[0])


def status(agent: Agent, user: str) -> dict[str, object]:
    report: dict[str, object] = agent.ok("status", "-u", user, "--json").json()
    return report


def sent(agent: Agent, name: str, text: str, to: str) -> str:
    """`talk send`'s id for `text` sent to `to` (`name` is the sender's, for the reader)."""
    msg_id: str = agent.ok("send", to, text, "--json").json()["id"]
    return msg_id


def texts(agent: Agent) -> list[str]:
    """The texts one `talk receive` delivers."""
    return [m["text"] for m in agent.ok("receive").lines()]


def one_line(err: str) -> None:
    """A failed command's stderr: one `talk: error:` line, never a traceback."""
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("talk: error: "), err
