"""What a ratchet message said, kept sealed until it settles, so a lost session can be healed.

A message sent in an Olm session can be decrypted only in that session. When the receiver
loses its sessions (a restored backup, a wiped folder) it refuses the message ("no session")
and the sealed blob the outbox keeps is useless: it was made for the lost session. To send the
message again in a new session the sender needs what the message said, so the inner envelope
of each ratchet message in flight is kept here until the message settles.

File, in the identity folder: `ratchet_inflight.ndjson`, an append log (`durable.ndjson`) of
{"id": MESSAGE ID, "box": SEALED} lines, the inner envelope sealed by SecretBox under a key
derived from the identity's private keys (as the Olm pickles are, `keys.ratchet_account`), so
it is exactly as protected as the identity and nothing is kept in clear; and {"drop": [ID,
...]} lines for messages that settled. One line per send, appended: creating a file per message
cost a forward-secret send more than all its cryptography on a common disk. Bounded: past twice
`KEEP_BYTES` the log is rewritten with the messages still kept, the newest that fit in
`KEEP_BYTES`; the oldest go first, and such a message, if its receiver then loses its session,
stays refused as before. Appends and the rewrite hold `ratchet_inflight.lock`, so no append
falls into a file the rewrite is replacing; a reader reads the old file or the new one.

Crashes. A line is not synced: it matters only if the machine loses power before the message
settles and its receiver then loses its session too; a line lost or cut short then reads as
not kept, and the message stays refused. Syncing it would double what a send waits on the disk
for, on every forward-secret message, for that double mishap. A message sealed again (sent in
a new session) is kept again: the newest line of an id is the one read.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from nacl import secret
from nacl.exceptions import CryptoError

from durable.files import open_private, replace_file
from durable.locks import locked
from durable.ndjson import append_to, json_lines, read_records
from keys.encoding import is_hex32
from keys.envelope import Inner
from keys.identity import Identity

__all__ = ["INFLIGHT_FILE", "KEEP_BYTES", "Inflight"]

INFLIGHT_FILE = "ratchet_inflight.ndjson"
INFLIGHT_LOCK = "ratchet_inflight.lock"
KEEP_BYTES = 4 * 1024 * 1024
CONTEXT = b"talk-ratchet-inflight-v1"


class Inflight:
    """The inner envelopes of this identity's ratchet messages that have not settled yet."""

    def __init__(self, folder: Path, identity: Identity, keep_bytes: int = KEEP_BYTES) -> None:
        self.path = folder / INFLIGHT_FILE
        self._lock = folder / INFLIGHT_LOCK
        key = hashlib.blake2b(CONTEXT, key=identity.secret_bytes(), digest_size=32).digest()
        self._box = secret.SecretBox(key)
        self.keep_bytes = keep_bytes

    def keep(self, inner: Inner, plaintext: bytes) -> None:
        """Keep `plaintext` (the inner envelope of `inner`) until `drop`; a message larger than
        the whole budget is not kept."""
        line = json_lines([{"id": inner.id, "box": base64.b64encode(self._box.encrypt(plaintext)).decode()}])
        if is_hex32(inner.id) and len(line) <= self.keep_bytes:
            self._append(line)

    def drop(self, msg_ids: list[str]) -> None:
        """Forget messages that settled (a receipt came that no lost session can follow)."""
        ids = [i for i in msg_ids if is_hex32(i)]
        if ids and self.path.exists():
            self._append(json_lines([{"drop": ids}]))

    def take(self, msg_id: str) -> Inner | None:
        """The kept message `msg_id`; None if none is kept or it no longer opens."""
        box = _kept(read_records(self.path)).get(msg_id) if is_hex32(msg_id) else None
        if box is None:
            return None
        try:
            return Inner.from_json(json.loads(self._box.decrypt(base64.b64decode(box, validate=True))))
        except (CryptoError, ValueError, binascii.Error):  # the gate's Invalid is a ValueError too
            return None

    def _append(self, data: bytes) -> None:
        with locked(self._lock):
            fd = open_private(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # readers take it shared (`read_records`)
                end = append_to(fd, data) + len(data)
            finally:
                os.close(fd)
            if end > 2 * self.keep_bytes:
                self._rewrite()

    def _rewrite(self) -> None:
        """The log again with only the messages still kept, the newest that fit the budget."""
        kept, used = [], 0
        for msg_id, box in reversed(list(_kept(read_records(self.path)).items())):
            record = {"id": msg_id, "box": box}
            used += len(json_lines([record]))
            if used > self.keep_bytes:
                break
            kept.append(record)
        replace_file(self.path, json_lines(kept[::-1]), sync=False)


def _kept(records: list[dict[str, Any]]) -> dict[str, str]:
    """{id: sealed box} of the messages kept and not dropped since, oldest first."""
    kept: dict[str, str] = {}
    for record in records:
        if isinstance(record.get("box"), str) and isinstance(record.get("id"), str):
            kept.pop(record["id"], None)  # kept again: now among the newest
            kept[record["id"]] = record["box"]
        elif isinstance(record.get("drop"), list):
            for msg_id in record["drop"]:
                if isinstance(msg_id, str):
                    kept.pop(msg_id, None)
    return kept
