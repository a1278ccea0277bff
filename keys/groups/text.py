"""What a group's Megolm message encrypts, and the check that binds it to the member who wrote it.

    {"group": <group id>, "from": <writer's fingerprint>, "gm": <group message id>, "text": TEXT}

Only the member that made a Megolm session can write in it: each message is signed by the
session's own Ed25519 key, which never leaves its maker (a member holding the session's key can
read, but not write). So the writer's fingerprint, sealed inside, says whose session it is, and
a member who passes another's key and message on as its own is caught: the words inside name
someone else. `keys.groups.sessions` reads each message with `GroupText.read` before it keeps a
key it came with, so a key passed on by anyone but its maker is never kept.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from durable.bounded_json import parse_json
from durable.errors import GroupRefused
from keys import gate
from keys.encoding import is_hex32
from keys.envelope import MAX_PADDED

__all__ = ["GroupText"]


class GroupText(NamedTuple):
    group: str
    sender: str
    gm: str
    text: str

    def encode(self) -> bytes:
        return json.dumps({"group": self.group, "from": self.sender, "gm": self.gm, "text": self.text},
                          ensure_ascii=False, separators=(",", ":")).encode()

    @classmethod
    def read(cls, plaintext: bytes, group_id: str, sender: str) -> GroupText:
        """The words of `sender`'s message in group `group_id`, once they say so themselves.

        Raises:
            GroupRefused: not of the shape above, for another group, or written by another
                member (its maker's words, passed on by `sender`).
        """
        try:
            data: Any = parse_json(plaintext, MAX_PADDED)  # a member's bytes: bounded
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            said = cls(data.get("group", ""), data.get("from", ""), data["gm"], gate.check_text(data["text"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise GroupRefused(f"a group message from {sender[:8]} holds no valid text ({exc})") from exc
        if not all(map(is_hex32, (said.group, said.sender, said.gm))):
            raise GroupRefused(f"a group message from {sender[:8]} names no group, writer or message id "
                               "of 32 hex characters inside (an older talk? it must update)")
        if said.sender != sender:
            raise GroupRefused(f"a group message from {sender[:8]} is {said.sender[:8]}'s, in "
                               f"{said.sender[:8]}'s session: a member may not pass another's words on")
        if said.group != group_id:
            raise GroupRefused(f"a group message from {sender[:8]} was written for another group")
        return said
