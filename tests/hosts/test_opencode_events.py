"""The opencode alarm follows the session's busy/idle events: mail joins a running run, wakes an
idle session, and a batch opencode left unanswered is posted again, each exactly once.

The pure parts first; then the real opencode (the pinned 1.18.33) against the fake model, whose
`bash` tool call (RUN_TOOL) keeps a run busy until the test opens a gate file, so mail can be
sent in the middle of a run without any timing window.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms.framing import frame
from alarms.hosts.opencode.api import OpencodeClient
from alarms.hosts.opencode.outbox import PromptOutbox, accepted, new_prompt
from alarms.hosts.opencode.status import SessionDoorFiles, session_doors
from spool_writer.cursor import CursorReader
from spool_writer.layout import SpoolLayout
from tests.conftest import wait_for
from tests.hosts.fake_model import FakeModel, Request
from tests.hosts.opencode import Rig, alarm, marker

TOOL_DONE = "TOOL-DONE-OUTPUT"

# --- the real opencode ----------------------------------------------------------------------


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    """The file whose creation ends the fake model's tool call."""
    return tmp_path / "tool-gate"


@pytest.fixture
def fake_model(gate: Path) -> Iterator[FakeModel]:
    """The rig's fake model, answering RUN_TOOL with a `bash` call that waits for the gate."""
    with FakeModel(tool_command=f"while [ ! -e {gate} ]; do sleep 0.05; done; echo {TOOL_DONE}") as model:
        yield model


def busy(r: Rig) -> bool:
    return OpencodeClient(r.opencode.url).busy(r.sid)


def stored(r: Rig, text: str) -> bool:
    return any(text in t for t in r.opencode.user_texts(r.sid))


def row(r: Rig) -> dict[str, Any]:
    [found] = [x for x in session_doors(r.bob.home / "bob") if x["session"] == r.sid]
    return found


def settled_and_idle(r: Rig) -> bool:
    """The alarm has judged every batch it posted taken, and the session is idle: nothing more
    will reach the model unless new mail comes."""
    now = row(r)
    return now["outbox"] == 0 and now["unsettled"] == 0 and now["waiting"] == 0 and not busy(r)


def start_tool_run(r: Rig) -> Request:
    """A user prompt whose run calls the gated tool: busy until the gate opens."""
    OpencodeClient(r.opencode.url).prompt_async(r.sid, {"parts": [{"type": "text", "text": "go RUN_TOOL"}]})
    call = r.model.wait_for("RUN_TOOL", 60)
    wait_for(lambda: busy(r), 30, "the session to be busy")
    return call


def chat(r: Rig) -> list[Request]:
    return [q for q in r.model.requests if q["path"].startswith("/v1/chat")]


def roles(request: Request) -> list[str]:
    return [str(m.get("role")) for m in request["body"]["messages"] if m.get("role") != "system"]


@pytest.mark.hosts
def test_mail_sent_mid_run_is_in_the_next_request_of_that_run_exactly_once(rig: Rig, gate: Path) -> None:
    call = start_tool_run(rig)
    text = marker("MID-RUN")
    rig.send(text)
    wait_for(lambda: stored(rig, text), 30, "opencode to store the mail while the tool runs")
    assert busy(rig) and rig.model.count(text) == 0, "the run should still be in its tool call"
    assert row(rig)["run"] == "busy" and row(rig)["events"] is True
    gate.touch()
    seen = rig.model.wait_for(text, 60)
    after = [q for q in chat(rig) if q["n"] > call["n"]]
    assert after[0]["n"] == seen["n"], "the mail was not in the first request after the tool call"
    # The same run: that request carries the tool's output and the mail after it, and the step
    # before it ended in a tool call (opencode ends a run only on a step that calls no tool).
    assert roles(seen)[-3:] == ["assistant", "tool", "user"], roles(seen)
    assert any(TOOL_DONE in t for t in seen["texts"]) and text in seen["last_user_text"]
    wait_for(lambda: settled_and_idle(rig), 60, "the alarm to see the mail taken")
    rig.delivered_once(text)


@pytest.mark.hosts
def test_mail_to_an_idle_session_wakes_it_exactly_once(rig: Rig) -> None:
    wait_for(lambda: settled_and_idle(rig), 60, "the warm-up run to end")
    wait_for(lambda: row(rig)["run"] == "idle" and row(rig)["events"] is True, 30,
             "the alarm to see the session idle on opencode's event stream")
    before = len(rig.model.requests)
    text = marker("IDLE-WAKE")
    rig.send(text)
    seen = rig.model.wait_for(text, 60)
    assert seen["n"] == before + 1, rig.model.summary()  # the wake's first request carries it
    wait_for(lambda: settled_and_idle(rig) and row(rig)["taken"] >= 2, 60, "the alarm to see it taken")
    rig.delivered_once(text)


@pytest.mark.hosts
def test_a_batch_opencode_stored_unanswered_or_never_stored_is_posted_again_once(rig: Rig) -> None:
    """The two ways a 204 misleads, made on purpose with the alarm stopped: the message stored
    but no run reads it (as when it lands while a run winds down), or never stored at all."""
    folder = rig.bob.home / "bob"
    layout = SpoolLayout(folder / "spool")
    reader = CursorReader(layout.session_file(rig.sid), layout.cursor_file(rig.sid))
    outbox = PromptOutbox(SessionDoorFiles(folder, rig.sid).outbox)
    wait_for(lambda: settled_and_idle(rig), 60, "the warm-up run to end")
    alarm(rig.bob, "stop", "opencode")
    for label, store in (("STRANDED", True), ("NEVER-STORED", False)):
        text = marker(label)
        rig.send(text)
        wait_for(lambda t=text: rig.spooled(t), 20, f"{label} in bob's spool")  # type: ignore[misc]
        state = outbox.fill(reader, lambda rs: new_prompt(rs, frame(rs), int(time.time() * 1000)))
        assert state.pending is not None
        if store:  # noReply stores the message and starts no run
            OpencodeClient(rig.opencode.url).prompt_async(rig.sid, {**state.pending.body(), "noReply": True})
            wait_for(lambda t=text: stored(rig, t), 20, "opencode to store it")  # type: ignore[misc]
        outbox.save(accepted(state))  # what the alarm saves after opencode's 204
        assert not busy(rig) and rig.model.count(text) == 0
        rig.start_alarm()
        rig.model.wait_for(text, 60)
        wait_for(lambda: settled_and_idle(rig), 60, "the alarm to see it taken")
        rig.delivered_once(text)
        alarm(rig.bob, "stop", "opencode")


@pytest.mark.hosts
def test_kill_9_of_the_alarm_during_a_run_loses_and_repeats_nothing(rig: Rig, gate: Path) -> None:
    call = start_tool_run(rig)
    texts = [marker(f"KILLED-MID-RUN-{i}") for i in range(6)]
    rig.send_killing_the_alarm(texts)
    wait_for(lambda: all(stored(rig, t) for t in texts), 60, "opencode to store every message")
    assert busy(rig) and all(rig.model.count(t) == 0 for t in texts), "the run should still be in its tool"
    gate.touch()
    for text in texts:
        rig.model.wait_for(text, 60)
    wait_for(lambda: settled_and_idle(rig), 90, "the alarm to see every batch taken")
    for text in texts:
        rig.delivered_once(text)
    after_tool = min(q["n"] for q in chat(rig) if q["n"] > call["n"])
    assert all(rig.model.first_seen(t)["n"] == after_tool for t in texts), rig.model.summary()  # type: ignore[index]
