"""What a Copilot CLI session is doing, from the events its server sends, and whether mail may go in.

Measured on Copilot CLI 1.0.102 (`copilot --ui-server`), through `session.send`:

- idle, `mode: "enqueue"` starts a turn whose user message is the prompt;
- in a turn, `mode: "immediate"` joins the turn at its next model request without aborting it,
  but a shell command running then, or starting while the message waits (the model was
  streaming its call), is moved to the background ("moved to background by the user") and the
  model is told to wait for the user. No event says in time whether the model's reply will be a
  tool call, so the door sends nothing in a turn: mail waits for the turn's end, or for the
  hooks (`talk install copilot`), which hand it on after each tool call without disturbing it;
- a permission prompt open in the TUI stays open under a prompt sent then ("[pending]"), and
  the command it asked about, once allowed, is at once moved to the background: so mail waits
  while one is open (`permission.requested` to `permission.completed`, or the server lists one);
- while the folder-trust question of a first start is open, a prompt runs a turn at once, before
  the user said whether Copilot may read the folder: so mail waits until the folder is trusted
  (its persisted trust, `session.permissions.folderTrust.isTrusted`) or the user answered (the TUI
  then reloads its MCP servers: a `session.info` of type "mcp") or typed a prompt.

`Activity.seen` folds events in; `next_send` decides. Both pure.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Activity", "Send", "next_send"]


class Send(enum.Enum):
    HOLD = "hold"  # not now
    ENQUEUE = "enqueue"  # the session is idle: the prompt starts a turn


BUSY = frozenset({"user.message", "assistant.turn_start"})
IDLE = frozenset({"assistant.idle", "session.idle"})


@dataclass
class Activity:
    trusted: bool = False
    busy: bool = False
    tools: set[str] = field(default_factory=set)  # toolCallIds running
    asking: set[str] = field(default_factory=set)  # permission requestIds open
    prompts: list[str] = field(default_factory=list)  # user messages' text, newest last

    def seen(self, kind: str, data: dict[str, Any]) -> None:
        """Fold one `session.event` (its `type` and `data`) in."""
        if kind in BUSY:
            self.busy = True
        elif kind in IDLE:
            self.busy, self.tools = False, set()
        if kind == "user.message":
            self.prompts = [*self.prompts[-31:], str(data.get("content", ""))]
        elif kind == "tool.execution_start":
            self.tools.add(str(data.get("toolCallId", "")))
        elif kind == "tool.execution_complete":
            self.tools.discard(str(data.get("toolCallId", "")))
        elif kind == "permission.requested":
            self.asking.add(str(data.get("requestId", "")))
        elif kind == "permission.completed":
            self.asking.discard(str(data.get("requestId", "")))
        elif kind == "session.info" and data.get("infoType") == "mcp":
            self.trusted = True

    def user_typed(self, ours: set[str]) -> None:
        """A prompt that is not one talk sent means the user is at the keyboard: any first-start
        question has been answered."""
        if any(p not in ours for p in self.prompts):
            self.trusted = True

    def showed(self, markers: list[str]) -> bool:
        """Whether a user message carrying every marker has reached the session."""
        return any(all(m in p for m in markers) for p in self.prompts)


def next_send(activity: Activity, prompts_open: bool) -> Send:
    """Whether mail may enter now; `prompts_open`: the server lists a pending permission request."""
    if not activity.trusted or prompts_open or activity.asking or activity.tools or activity.busy:
        return Send.HOLD
    return Send.ENQUEUE
