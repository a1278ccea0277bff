"""The real opencode (the pinned 1.18.33) asking its person for a permission when peer mail
arrives: the door posts nothing while the permission is open (alarms/hosts/opencode/events.py),
so the request stays as opencode asked it, and the mail comes once, after the answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from alarms.hosts.opencode.api import OpencodeClient
from tests.conftest import wait_for
from tests.hosts.fake_model import FakeModel
from tests.hosts.opencode import Rig, marker

# Many of the door's polls, and longer than opencode took to store an unheld post (well under 1 s).
HELD_S = 5.0


@pytest.fixture
def opencode_settings() -> dict[str, Any]:
    return {"permission": {"bash": "ask"}}


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    """The rig's fake model, answering RUN_TOOL with a `bash` call that leaves a file behind."""
    with FakeModel(tool_command="touch tool-ran && echo TOOL_RAN") as model:
        yield model


def open_permissions(client: OpencodeClient, sid: str) -> list[dict[str, Any]]:
    listed = client.request("GET", "/permission").json()
    return [p for p in listed if p.get("sessionID") == sid]


def held_through(r: Rig, client: OpencodeClient, asked: list[dict[str, Any]], text: str,
                 seconds: float) -> None:
    """For `seconds`: the same permission open, the mail neither stored in opencode nor seen."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert open_permissions(client, r.sid) == asked
        assert not any(text in t for t in r.opencode.user_texts(r.sid)) and not r.model.find(text)
        time.sleep(0.2)


@pytest.mark.parametrize("reply", ["once", "reject"])
@pytest.mark.hosts
def test_mail_waits_while_opencode_asks_for_a_permission_and_comes_once_after_the_answer(
    rig: Rig, reply: str,
) -> None:
    client = OpencodeClient(rig.opencode.url)
    ran = rig.opencode.project / "tool-ran"
    client.prompt_async(rig.sid, {"parts": [{"type": "text", "text": "go RUN_TOOL"}]})
    asked = wait_for(lambda: open_permissions(client, rig.sid), 60, "opencode to ask for the bash call")
    text = marker("DURING-PERMISSION")
    rig.send(text)
    wait_for(lambda: rig.spooled(text), 60, "the mail in bob's spool")
    held_through(rig, client, asked, text, HELD_S)
    client.request("POST", f"/permission/{asked[0]['id']}/reply", {"reply": reply})  # the person answers
    seen = rig.model.wait_for(text, 60)
    assert ran.exists() == (reply == "once")
    if reply == "reject":  # the refusal stands: the mail starts a run of its own after it
        assert any("rejected permission" in t for t in seen["texts"]), rig.model.summary()
    wait_for(lambda: not OpencodeClient(rig.opencode.url).busy(rig.sid), 60, "the session to settle")
    rig.delivered_once(text)
