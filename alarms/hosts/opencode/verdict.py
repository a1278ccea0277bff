"""Whether opencode took a posted prompt into a run, judged once the session is idle.

opencode's 204 to `prompt_async` comes before the message is stored, and a run decides to end
on what it read before its last step: a message stored after that read, while the run winds
down, joins a run that is ending and stays unanswered until the next prompt (the intermittent
"prompt_async does not wake the session"). Once the session is idle, its newest messages tell:

- our message is not stored: MISSING;
- it is the newest user message and no assistant message answers it: STRANDED;
- otherwise TAKEN: a run answered it, or a later user message came and the run that answered
  that one read ours too (opencode runs each step on the whole history).

MISSING and STRANDED are healed by posting the same prompt again: opencode stores a message
under the caller's ids as an upsert, so the second post changes no history and shows the
model nothing twice, and it starts the run that was missing. Posting a TAKEN prompt again
would be harmless too (the run ends at once), but is never needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

__all__ = ["WINDOW", "PromptVerdict", "verdict"]

WINDOW = 50  # newest messages read: a run makes one assistant message per model request


class PromptVerdict(StrEnum):
    TAKEN = "taken"
    STRANDED = "stranded"
    MISSING = "missing"


def verdict(message_id: str, stored: bool, newest: Sequence[dict[str, Any]]) -> PromptVerdict:
    """What became of message `message_id`, from the `info` of the session's newest messages."""
    if not stored:
        return PromptVerdict.MISSING
    users = [m.get("id") for m in newest if m.get("role") == "user"]
    if not users or users[-1] != message_id:
        return PromptVerdict.TAKEN  # a later user message, or ours is older than the window
    answered = any(m.get("role") == "assistant" and m.get("parentID") == message_id for m in newest)
    return PromptVerdict.TAKEN if answered else PromptVerdict.STRANDED
