"""Small values the unit tests share: fingerprints, message ids, a pinned contact, spool lines."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from keys.contacts import Contact, Source, pinned_contact
from keys.identity import Identity
from spool_writer.layout import SpoolLayout
from spool_writer.record import SpoolRecord

FP_A = "a" * 32
FP_B = "b" * 32
FP_C = "c" * 32


def hexid(n: int) -> str:
    """A distinct 32-hex message id; ids of nearby n share no 6-character prefix."""
    return f"{n:06x}" + "0" * 26


def secret_forms(identity: Identity) -> list[bytes]:
    """The ways a file could hold an identity's private bytes in clear."""
    seed, box = bytes(identity.signing_key), bytes(identity.box_secret)
    forms = []
    kem = [identity.kem_seed, identity.stored_bytes()] if identity.kem_seed is not None else []
    for raw in (seed, box, identity.secret_bytes(), *kem):
        forms += [raw, raw.hex().encode(), base64.b64encode(raw), base64.urlsafe_b64encode(raw)]
        forms.append(base64.b64encode(raw).rstrip(b"="))
    return forms


def contact(name: str = "bob", source: Source = Source.INVITED) -> Contact:
    return pinned_contact(name, Identity.generate(name).bundle(), source)


def spool_message(msg_id: str, sender: str = FP_A) -> SpoolRecord:
    return {"id": msg_id, "from": sender, "name": "alice", "text": f"text of {msg_id}",
            "ts": "2024-01-01T00:00:00Z", "kind": "chat"}


def handed_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def handed_states(layout: SpoolLayout, msg_id: str) -> list[str]:
    """The receipt states the hand-over log recorded for one message, oldest first."""
    return [line["state"] for line in handed_lines(layout.handed) if line["id"] == msg_id]
