"""The one gate for what peers send: every field checked to a strict shape on arrival.

Whatever a contact, a joiner or the relay hands over is hostile until it passes here: the inner
envelope of a message, a contact request, the name a joiner picks, the items of a receipt, a
group block (a group message or a change of members), and the header values of opencode-mesh
tasks and blocks; the files a message announces (`keys.fileref`). A value either matches its shape exactly
(full matches: no trailing newline slips past a `$`) or the whole message is refused with
`Invalid`, whose reason names the field; nothing is half used. Fields the gate does not know are
dropped, never passed on, so a sender can add nothing that the receiver would act on.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from durable.mesh_fields import is_task_id
from durable.printable import is_printable, printable
from durable.receipt_states import Receipt
from keys.invalid import Invalid
from keys.names import check_name  # the rule for every name talk keeps, in one place

__all__ = ["MAX_FUTURE_S", "MAX_REASON", "RECEIPT_STATES", "Invalid", "check_header_value", "check_receipts"]

HEX32 = re.compile(r"[0-9a-f]{32}")
# RFC 3339 in UTC as talk writes it: a "Z" offset, optional fraction of up to 9 digits.
TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z")
EARLIEST = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
MAX_FUTURE_S = 3600  # how far ahead of our clock a sender's clock may run
KINDS = ("chat", "receipt", "contact_accepted", "group")
MAX_TEXT = 65536  # the largest padded envelope: a longer text cannot have been sealed by talk
MAX_HOPS_LISTED = 64  # more than any forward chain a peer accepts (admission refuses past 4)
MAX_SEQ = 2**53  # JSON numbers are exact up to here in every language
MAX_HEADER_VALUE = 256
RECEIPT_STATES = tuple(state.value for state in Receipt)
MAX_RECEIPTS = 1000
MAX_REASON = 300
MAX_GROUP_MEMBERS = 64
MAX_GROUP_KEY = 1024  # a Megolm session key is 229 bytes, about 306 in base64; an exported one 220
SESSION_ID = re.compile(r"[A-Za-z0-9+/]{43}")  # a Megolm session id: an Ed25519 key, unpadded base64
WRITERS = ("person", "agent")


def is_hex32(value: object) -> bool:
    return isinstance(value, str) and HEX32.fullmatch(value) is not None


def check_id(value: object, what: str = "id") -> str:
    if not is_hex32(value):
        raise Invalid(f"{what} is not 32 lowercase hex characters")
    return str(value)


def check_ts(value: object, now: float) -> str:
    if not isinstance(value, str) or TS.fullmatch(value) is None:
        raise Invalid("ts is not an RFC 3339 UTC time")
    try:  # by hand: strptime loads the locale machinery, milliseconds on every command
        when = datetime(int(value[0:4]), int(value[5:7]), int(value[8:10]), int(value[11:13]),
                        int(value[14:16]), int(value[17:19]), tzinfo=UTC).timestamp()
    except ValueError as exc:
        raise Invalid("ts is not a real date and time") from exc
    if when < EARLIEST or when > now + MAX_FUTURE_S:
        raise Invalid("ts is before 2024 or over an hour ahead of this clock (is the sender's clock right?)")
    return value


def check_text(value: object) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise Invalid(f"text is not a string of at most {MAX_TEXT} characters")
    return value


def check_hops(value: object) -> list[str]:
    """The fingerprints a forwarded message passed through, oldest first."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_HOPS_LISTED or not all(map(is_hex32, value)):
        raise Invalid("hops is not a list of fingerprints")
    return [str(h) for h in value]


def check_seq(value: object) -> int:
    if type(value) is not int or not 0 < value <= MAX_SEQ:
        raise Invalid("seq is not a positive integer")
    return value


def check_receipts(value: object) -> list[dict[str, Any]]:
    """A receipt's items: each {"ref": message id, "state": one of RECEIPT_STATES, "reason"}, and
    on a refusal of a reused number, "highest": the highest seq the receiver has seen from us (so
    the sender can number past it, `follower.send.seqcounter.move_past`). Receipts without it (from
    earlier versions, or of any other refusal) parse as before."""
    if not isinstance(value, list) or len(value) > MAX_RECEIPTS:
        raise Invalid("receipts is not a list of at most 1000 items")
    items: list[dict[str, Any]] = []
    for item in value:
        if not isinstance(item, dict):
            raise Invalid("a receipt item is not an object")
        reason = item.get("reason", "")
        if item.get("state") not in RECEIPT_STATES or not isinstance(reason, str):
            raise Invalid("a receipt item has an unknown state or a reason that is not text")
        checked: dict[str, Any] = {"ref": check_id(item.get("ref"), "a receipt's ref"),
                                   "state": str(item["state"]), "reason": printable(reason[:MAX_REASON])}
        if "highest" in item:
            highest = item["highest"]
            if type(highest) is not int or not 0 < highest <= MAX_SEQ:
                raise Invalid("a receipt's highest is not a positive integer")
            checked["highest"] = highest
        items.append(checked)
    return items


def check_olm(value: object) -> dict[str, Any]:
    """An Olm message riding the envelope (`keys.ratchet.envelope`): its type (0 pre-key,
    1 normal), its body in base64, and, on a pre-key message, the sender's card as an object
    (checked against the pin by the receiver, `keys.ratchet.card.verify_card`)."""
    if not isinstance(value, dict):
        raise Invalid("olm is not an object")
    kind, body, card = value.get("type"), value.get("body"), value.get("card")
    if type(kind) is not int or kind not in (0, 1):
        raise Invalid("olm's type is not 0 or 1")
    if not isinstance(body, str) or not 0 < len(body) <= 2 * MAX_TEXT:
        raise Invalid("olm's body is not a string of base64")
    if card is not None and not isinstance(card, dict):
        raise Invalid("olm's card is not an object")
    return {"type": kind, "body": body, **({"card": card} if card is not None else {})}


def check_answer(value: object) -> dict[str, Any]:
    """A receipt's answer in the session its sender's pre-key messages started
    (`keys.ratchet.envelope.answer_of`): a normal Olm message, without a card."""
    checked = check_olm(value)
    if checked["type"] != 1 or "card" in checked:
        raise Invalid("answer is not a normal Olm message")
    return checked


def _group_name(value: object) -> str:
    from durable.errors import UserError

    try:
        return check_name(value if isinstance(value, str) else "")
    except UserError as exc:
        raise Invalid("group's name is not a valid name") from exc


def _b64(value: object, most: int, what: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= most or B64.fullmatch(value) is None:
        raise Invalid(f"group's {what} is not base64 of at most {most} characters")
    return value


B64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def check_group(value: object) -> dict[str, Any]:
    """A group block (`follower.groups.group_mail`): on a chat message, one Megolm message
    {"id", "name", "gm", "session", "body", "key"? or "export"?, "by"}; on a message of kind "group", a
    control message {"op": "update", "id", "name", "owner", "members", "version"} or
    {"op": "leave", "id"}. Which one a kind must carry, `check_inner` says."""
    if not isinstance(value, dict):
        raise Invalid("group is not an object")
    block: dict[str, Any] = {"id": check_id(value.get("id"), "group's id")}
    op = value.get("op")
    if op == "leave":
        return {"op": op, **block}
    if op == "update":
        members = value.get("members")
        if (not isinstance(members, list) or not 0 < len(members) <= MAX_GROUP_MEMBERS
                or not all(map(is_hex32, members)) or len(set(members)) != len(members)):
            raise Invalid(f"group's members are not 1 to {MAX_GROUP_MEMBERS} distinct fingerprints")
        version = value.get("version")
        if type(version) is not int or not 0 < version <= MAX_SEQ:
            raise Invalid("group's version is not a positive integer")
        return {"op": op, **block, "name": _group_name(value.get("name")),
                "owner": check_id(value.get("owner"), "group's owner"), "members": list(members),
                "version": version}
    if op is not None:
        raise Invalid("group's op is not update or leave")
    session = value.get("session")
    if not isinstance(session, str) or SESSION_ID.fullmatch(session) is None:
        raise Invalid("group's session is not a session id")
    if value.get("by") not in WRITERS:
        raise Invalid("group's by is not person or agent")
    block.update(name=_group_name(value.get("name")), gm=check_id(value.get("gm"), "group's gm"),
                 session=session, body=_b64(value.get("body"), 2 * MAX_TEXT, "body"), by=value["by"])
    if "key" in value and "export" in value:
        raise Invalid("group's message carries both a key and an export; a copy carries one at most")
    for name in ("key", "export"):
        if name in value:
            block[name] = _b64(value[name], MAX_GROUP_KEY, name)
    return block


def check_files(value: object) -> list[dict[str, Any]]:
    from keys.fileref import check_files  # loaded with the first file: most mail carries none

    return check_files(value)


def check_body(value: object) -> dict[str, Any]:
    from keys.fileref import check_body

    return check_body(value)


_EXTRA = {"hops": check_hops, "seq": check_seq, "receipts": check_receipts, "olm": check_olm,
          "answer": check_answer, "group": check_group, "files": check_files, "body": check_body}


def check_inner(data: object, now: float) -> dict[str, Any]:
    """The fields of an opened inner envelope, each checked; unknown fields are dropped.
    Returns {"id", "from", "to", "ts", "kind", "text", "extra": {...}}; raises Invalid."""
    if not isinstance(data, dict):
        raise Invalid("the envelope is not a JSON object")
    if data.get("v") != 1:
        raise Invalid("the envelope is not version 1")
    kind = data.get("kind")
    if kind not in KINDS:
        raise Invalid("kind is not one talk knows")
    extra = _check_extra(data, kind)
    return {"id": check_id(data.get("id")), "from": check_id(data.get("from"), "from"),
            "to": check_id(data.get("to"), "to"), "ts": check_ts(data.get("ts"), now),
            "kind": str(kind), "text": check_text(data.get("text")), "extra": extra}


def check_carried(data: object, kind: str) -> tuple[str, dict[str, Any]]:
    """(text, extra) of a message an Olm message carries in its short form
    (`keys.ratchet.envelope`), checked as `check_inner` checks them: the envelope around it,
    checked already, gives the other fields, the message's `kind` among them. Raises Invalid."""
    if not isinstance(data, dict):
        raise Invalid("the envelope is not a JSON object")
    extra = _check_extra(data, kind)
    return check_text(data.get("text")), extra


def _check_extra(data: dict[str, Any], kind: object) -> dict[str, Any]:
    """The optional fields of an envelope of `kind` (one of KINDS), each checked."""
    extra: dict[str, Any] = {k: check(data[k]) for k, check in _EXTRA.items() if k in data}
    if "task" in data:
        if not is_task_id(data["task"]):
            raise Invalid("task is not a task id")
        extra["task"] = data["task"]
    if ("files" in extra or "body" in extra) and kind != "chat":
        raise Invalid("files or a body ride only a chat message")
    if "body" in extra and data.get("text") != "":
        raise Invalid("a message whose text is in a body carries no text of its own")
    if kind == "receipt" and "receipts" not in extra:
        raise Invalid("a receipt carries no items")
    # A group message rides a chat, a control message is a "group"; an Olm envelope carries its
    # kind outside and its fields inside, checked when it opens.
    if "olm" not in extra and ("group" in extra or kind == "group"):
        control = {"chat": False, "group": True}.get(str(kind))
        if "group" not in extra or ("op" in extra["group"]) is not control:
            raise Invalid("a group block does not fit the message's kind")
    return extra


def salvage_id(data: object) -> str | None:
    """The message id of an envelope the gate refused, if that one field is sound (so the sender
    can be told, by a receipt, which of its messages was refused)."""
    value = data.get("id") if isinstance(data, dict) else None
    return value if is_hex32(value) else None


def usable_box_key(key: bytes) -> bool:
    """Whether an X25519 key agrees on a secret at all: a low-order point (all zeros, say)
    agrees on nothing, so nothing could ever be sealed to it or opened from it."""
    from nacl.exceptions import CryptoError

    from keys.sodium import Box, PrivateKey, PublicKey

    try:
        Box(PrivateKey(b"\x01" * 32), PublicKey(key))
    except (CryptoError, ValueError, TypeError):
        return False
    return True


def check_header_value(value: str) -> str | None:
    """An opencode-mesh header value that may be shown outside the quote, or None."""
    ok = 0 < len(value) <= MAX_HEADER_VALUE and is_printable(value)
    return value if ok else None
