"""alarms.hosts.claude.monitor: a poll with an inbox holds the mail while the session waits on its
person, and hands it on, once, at the first poll after the answer; the hooks hold it too."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from alarms.hosts.claude.inbox import InboxDoor
from alarms.hosts.claude.monitor import InboxWriter
from alarms.mailbox import SessionMail
from spool_writer.spool import Spool, received_now
from tests.conftest import wait_for
from tests.unit.alarms.hosts.claude.inbox_stand_in import StandInInbox, record


@pytest.fixture
def host() -> Iterator[int]:
    """A process standing in for the Claude Code process that holds what the inbox took."""
    proc = subprocess.Popen(["sleep", "300"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def inbox(tmp_path: Path) -> Iterator[StandInInbox]:
    stand_in = StandInInbox(tmp_path / "in.sock")
    try:
        yield stand_in
    finally:
        stand_in.close()


def set_status(config: Path, pid: int, status: str, waiting_for: str | None = None) -> None:
    path = config / "sessions" / f"{pid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"pid": pid, "status": status, **({"waitingFor": waiting_for} if waiting_for else {})}
    path.write_text(json.dumps(data))


def test_mail_waits_in_the_spool_while_a_prompt_is_open_and_goes_once_after(
    folder: Path, tmp_path: Path, host: int, inbox: StandInInbox,
) -> None:
    config = tmp_path / "claude-config"
    mail = SessionMail(folder, "s-held")
    mail.register("claude", host)
    set_status(config, host, "waiting", "permission prompt")
    msg = record(f"while you answer {uuid.uuid4().hex}")
    Spool(folder / "spool").deliver({**msg, "received": received_now()})
    poll = InboxWriter(mail, InboxDoor(str(inbox.path), None), host, {"CLAUDE_CONFIG_DIR": str(config)})
    for _ in range(3):
        poll()
    assert inbox.lines == [] and mail.waiting() == 1  # held: cursor unmoved, nothing claimed
    assert not mail.layout.handed.exists()
    set_status(config, host, "busy")  # answered: the tool runs
    poll()
    wait_for(lambda: len(inbox.lines) == 1, 10, "the frame")
    assert msg["id"] in inbox.lines[0]["message"]["content"] and mail.waiting() == 0
    poll()
    assert len(inbox.lines) == 1  # once


def test_a_hook_with_an_inbox_leaves_the_mail_while_a_prompt_is_open(
    folder: Path, tmp_path: Path, host: int, inbox: StandInInbox, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from alarms.hosts.claude.hook import handle

    config = tmp_path / "claude-config"
    for name, value in {"TALK_HOME": str(folder.parent), "TALK_USER": folder.name, "CLAUDE_PID": str(host),
                        "CLAUDE_CONFIG_DIR": str(config),
                        "CLAUDE_CODE_MESSAGING_SOCKET": str(inbox.path)}.items():
        monkeypatch.setenv(name, value)
    mail = SessionMail(folder, "s-hook-held")
    mail.register("claude", host)
    set_status(config, host, "waiting", "permission prompt")  # another call's prompt is open
    Spool(folder / "spool").deliver({**record("after your answer"), "received": received_now()})
    assert handle("PostToolUse", mail.sid) == []
    assert inbox.lines == [] and mail.waiting() == 1
    set_status(config, host, "busy")
    assert handle("PostToolUse", mail.sid) == []  # written to the inbox, nothing printed
    wait_for(lambda: len(inbox.lines) == 1, 10, "the frame")
    assert mail.waiting() == 0
