"""Megolm sessions per group: ours to send with, and each member's to read theirs.

File `group_sessions/<group id>.json` in the identity folder:

    {"v": 1, "out"?: {"pickle", "id", "members": [FP...], "holders": [FP...], "sent": N, "at": T},
     "firsts"?: [[<session id>, PICKLE], ...],
     "in": {"<sender fp>/<session id>": PICKLE, ...}, "in_order"?: ["<sender fp>/<session id>", ...]}

"out" is this identity's outbound `vodozemac.GroupSession` for the group, its id, the members it
was started for, the members known to hold its key (the key goes with the next copy to any
other), how many messages it encrypted and when it started. "firsts" keeps, for our current
session and the last `IN_KEPT` it replaced, an inbound session made from its key at index 0:
from it `key_at` exports the key from any message on, so a copy a member refused for want of
the key can be sent again with the key from that very message (`export`), where the key of the
outbound session, which only ratchets forward, would start later. The cost: whoever steals
this identity's state reads what it sent in those sessions, as a member's stolen state reads
what it was sent. "in" holds the inbound sessions other members shared, each bound to the
sender that shared it: a session id is only ever looked up under the sender of the message
naming it, and taken only with a message whose words name that sender as their writer
(`keys.groups.text`), which only the session's maker can write: no member can speak in
another's session, nor hold another's session as its own. Every pickle is sealed under the Olm
account's pickle key, as the Olm sessions are (`keys.ratchet.sessions`). "in_order" lists them
as they came; only the last `IN_KEPT` of each sender are kept, so the file, rewritten on every
group message, does not grow with the group's history: a message that arrives after its sender
has rotated `IN_KEPT` times since is refused for want of its key, and its sender told.

Rotation: the outbound session is dropped (a new one starts with the next message) when the
members differ from those it was started for, when the caller says membership changed
(`rotate`), after `ROTATE_AFTER` messages or after `ROTATE_AFTER_S`. A member who is removed
therefore never gets a key that reads later messages.

Every reader of the identity (receive, follower, MCP) holds `<group id>.lock` from loading a
group's sessions to saving them. `encrypt` saves the advanced session before it returns the
ciphertext, so no message index is used twice whatever is killed afterwards; a kill after
the save loses only an index. `decrypt` changes the file only to add a session, or to move one
to an earlier start with its own sender's key or export, both idempotent: a message taken
again imports the same key.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TypeVar

import vodozemac

from durable.errors import GroupRefused, UserError
from durable.files import ensure_private_dir, read_json, write_json
from durable.locks import locked
from keys.encoding import b64d, b64e, is_hex32
from keys.groups.text import GroupText
from keys.ratchet.account import RatchetAccount

__all__ = [
    "GROUP_SESSIONS_DIR", "IN_KEPT", "NO_GROUP_KEY", "ROTATE_AFTER", "ROTATE_AFTER_S", "Encrypted",
    "GroupKeys", "message_index",
]

GROUP_SESSIONS_DIR = "group_sessions"
ROTATE_AFTER = 100
ROTATE_AFTER_S = 7 * 86400.0
IN_KEPT = 8  # inbound sessions kept per sender
NO_GROUP_KEY = "no group key"  # a refusal's reason starts so: the sender sends the key again
S = TypeVar("S", vodozemac.GroupSession, vodozemac.InboundGroupSession)


class Encrypted(NamedTuple):
    """One group message, encrypted once: `key` (the session key at this message's index) goes
    to each member in `lacking`."""

    session_id: str
    body: str
    key: str
    lacking: frozenset[str]


class GroupKeys:
    """The Megolm sessions of the identity whose account `account` holds, in every group."""

    def __init__(self, account: RatchetAccount) -> None:
        self.folder = account.folder / GROUP_SESSIONS_DIR
        self._key = account.pickle_key

    @contextlib.contextmanager
    def _changing(self, group_id: str) -> Iterator[dict[str, Any]]:
        """The group's stored state, under its lock; saved when the block ends without an error."""
        if not is_hex32(group_id):  # it names a file: nothing else may reach the path
            raise UserError(f"{group_id!r} is not a group id of 32 hex characters")
        path = self.folder / f"{group_id}.json"
        ensure_private_dir(self.folder, "group sessions folder")
        with locked(path.with_suffix(".lock")):
            stored = read_json(path, None) or {"v": 1, "in": {}}
            if not isinstance(stored, dict) or stored.get("v") != 1:
                raise UserError(f"{path} is not a group session file of version 1; move it aside and "
                                "new group sessions are started")
            yield stored
            write_json(path, stored, compact=True)

    def encrypt(self, group_id: str, members: list[str], plaintext: bytes,
                now: float | None = None) -> Encrypted:
        """`plaintext` in our outbound session for the group (a new one when it is due), for
        `members` (the others); the members not yet holding its key are named in `lacking`,
        and are counted as holding it from here on (their copies carry it)."""
        now = time.time() if now is None else now
        with self._changing(group_id) as stored:
            out = stored.get("out")
            if out is None or _due(out, members, now):
                fresh = vodozemac.GroupSession()
                out = {"pickle": fresh.pickle(self._key), "id": fresh.session_id, "members": sorted(members),
                       "holders": [], "sent": 0, "at": now}
                first = vodozemac.InboundGroupSession(fresh.session_key)
                # ours and the last IN_KEPT it replaces, as a member keeps its last IN_KEPT of ours
                stored["firsts"] = [*stored.get("firsts", []), [fresh.session_id, first.pickle(self._key)]
                                    ][-(IN_KEPT + 1):]
            session = self._opened(vodozemac.GroupSession.from_pickle, out["pickle"])
            key = session.session_key.to_base64()
            body = b64e(session.encrypt(plaintext).to_bytes())
            lacking = frozenset(members) - set(out["holders"])
            stored["out"] = {**out, "pickle": session.pickle(self._key), "sent": out["sent"] + 1,
                             "holders": sorted({*out["holders"], *members})}
        return Encrypted(session.session_id, body, key, lacking)

    def rotate(self, group_id: str) -> None:
        """Membership changed: the next message starts a new outbound session."""
        with self._changing(group_id) as stored:
            stored.pop("out", None)

    def lacking(self, group_id: str, session_id: str, member: str) -> None:
        """`member` said it has no key for our session `session_id`: its next copy carries it."""
        with self._changing(group_id) as stored:
            out = stored.get("out")
            if out is not None and out["id"] == session_id:
                out["holders"] = [h for h in out["holders"] if h != member]

    def key_at(self, group_id: str, session_id: str, index: int) -> str | None:
        """Our session `session_id`'s key from its message `index` on (an exported session key,
        base64); None if that session is not kept here (replaced more than `IN_KEPT` times since,
        or started before its first was kept)."""
        with self._changing(group_id) as stored:
            kept = {sid: pickle for sid, pickle in stored.get("firsts", [])}
        if session_id not in kept or not 0 <= index < 2**32:
            return None
        first = self._opened(vodozemac.InboundGroupSession.from_pickle, kept[session_id])
        exported = first.export_at(index)
        return None if exported is None else exported.to_base64()

    def outbound_id(self, group_id: str) -> str | None:
        """The id of our current outbound session in the group, if there is one."""
        with self._changing(group_id) as stored:
            out = stored.get("out")
            return None if out is None else str(out["id"])

    def has_inbound(self, group_id: str, sender: str, session_id: str) -> bool:
        with self._changing(group_id) as stored:
            return f"{sender}/{session_id}" in stored["in"]

    def decrypt(self, group_id: str, sender: str, session_id: str, body: str, key: str | None,
                export: str | None = None) -> GroupText:
        """The words of `sender`'s group message in its session `session_id`, importing `key`
        or `export` first when given (each must be that very session's key: a `key` comes with
        the first copy a member gets, an `export` with a refused copy sent again). Either is held
        when none is, or in place of the held one when it starts earlier, so a later copy cannot
        move the session's first readable index, and a first copy the relay held back is still
        read after a later one was sent again: within its own slot a sender can only widen what
        its members read of what it sent them, never narrow it. Nothing is kept unless the
        message opens and its words name `sender` as their writer (`GroupText.read`): only a
        session's maker can write that in it, so a key another member passes on never fills a
        slot.

        Raises:
            GroupRefused: a key for another session, no key for this session here (the reason
                starts with NO_GROUP_KEY), a session id another sender shared, a message that
                does not decrypt, or words another member wrote.
        """
        with self._changing(group_id) as stored:
            inbound = stored["in"]
            owners = {k.split("/", 1)[0] for k in inbound if k.split("/", 1)[1] == session_id}
            if owners - {sender}:
                raise GroupRefused(f"a group message from {sender[:8]} names a session another member shared")
            slot = f"{sender}/{session_id}"
            for given, load in ((key, _from_key), (export, _from_export)):
                if given is not None:
                    self._hold_earliest(stored, sender, slot, self._imported(load, given, session_id))
            if slot not in inbound:
                raise GroupRefused(f"{NO_GROUP_KEY}: session {session_id} of group {group_id}")
            session = self._opened(vodozemac.InboundGroupSession.from_pickle, inbound[slot])
            try:
                message = vodozemac.MegolmMessage.from_bytes(b64d(body))
                plaintext = session.decrypt(message).plaintext
            except (ValueError, TypeError) as exc:
                raise GroupRefused(f"a group message from {sender[:8]} does not decrypt in its session "
                                   f"({exc}): altered, or sent before the key this side holds") from exc
            said = GroupText.read(plaintext, group_id, sender)  # before the block saves a key
            inbound[slot] = session.pickle(self._key)
        return said

    def _hold_earliest(self, stored: dict[str, Any], sender: str, slot: str,
                       imported: vodozemac.InboundGroupSession) -> None:
        """Hold `imported` in `slot` if it is empty, or if the held session starts later."""
        held = stored["in"].get(slot)
        if held is not None:
            known = self._opened(vodozemac.InboundGroupSession.from_pickle, held).first_known_index
            if imported.first_known_index >= known:
                return
        stored["in"][slot] = imported.pickle(self._key)
        if held is None:
            _keep_last(stored, sender, slot)

    def _imported(self, load: Callable[[str], vodozemac.InboundGroupSession], key: str,
                  session_id: str) -> vodozemac.InboundGroupSession:
        try:
            session = load(key)
        except ValueError as exc:
            raise GroupRefused(f"a group message carries a session key that does not decode ({exc})") from exc
        if session.session_id != session_id:
            raise GroupRefused("a group message carries the key of another session than the one it names")
        return session

    def _opened(self, load: Callable[[str, bytes], S], pickle: str) -> S:
        """A stored session; damage (or another identity's key) is this machine's fault, never
        the message's, so it is a UserError, not a refusal.

        Raises:
            UserError: the pickle does not open under this identity's key.
        """
        try:
            return load(pickle, self._key)
        except ValueError as exc:
            raise UserError(f"a group session in {self.folder} cannot be opened ({exc}); move its "
                            "file aside and new sessions are started") from exc


def _from_key(key: str) -> vodozemac.InboundGroupSession:
    return vodozemac.InboundGroupSession(vodozemac.SessionKey(key))


def _from_export(key: str) -> vodozemac.InboundGroupSession:
    return vodozemac.InboundGroupSession.import_session(vodozemac.ExportedSessionKey(key))


def message_index(body: str) -> int | None:
    """The index of the Megolm message `body` (base64) in its session; None if it is none."""
    try:
        return vodozemac.MegolmMessage.from_bytes(b64d(body)).message_index()
    except (ValueError, TypeError):
        return None


def _keep_last(stored: dict[str, Any], sender: str, slot: str) -> None:
    """Note `slot`, just imported, as `sender`'s newest inbound session, and drop that sender's
    oldest past `IN_KEPT` (those of a file written before the order was kept count as oldest)."""
    inbound: dict[str, str] = stored["in"]
    noted = [s for s in stored.get("in_order", []) if s in inbound and s != slot]
    order = [*sorted(set(inbound) - set(noted) - {slot}), *noted, slot]
    theirs = [s for s in order if s.split("/", 1)[0] == sender]
    for old in theirs[:-IN_KEPT]:
        del inbound[old]
        order.remove(old)
    stored["in_order"] = order


def _due(out: dict[str, Any], members: list[str], now: float) -> bool:
    """Whether our outbound session must give way to a new one."""
    return (sorted(members) != out["members"] or out["sent"] >= ROTATE_AFTER
            or now - float(out["at"]) >= ROTATE_AFTER_S)
