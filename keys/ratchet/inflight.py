"""What a ratchet message said, sealed, until it settles or minutes pass, to heal a lost session.

A message sent in an Olm session can be decrypted only in that session. When the receiver
loses its sessions (a restored backup, a wiped folder) it refuses the message ("no session")
and the sealed blob the outbox keeps is useless: it was made for the lost session. To send the
message again in a new session the sender needs what the message said, so the inner envelope
of each ratchet message in flight is kept here until the message settles.

File, in the identity folder: `ratchet_inflight.ndjson`, an append log (`durable.ndjson`) of
{"at": WHEN KEPT, "id": MESSAGE ID, "box": SEALED} lines, the inner envelope sealed by SecretBox
under a key derived from the identity's private keys (as the Olm pickles are,
`keys.ratchet.account`), so nothing is kept in clear. One line per send, appended: creating a
file per message cost a forward-secret send more than all its cryptography on a common disk.

Only for a while. The copy is what a thief with the identity folder could read of the message
(that key is in the folder too), and what a thief who also holds the relay could have sent
again by answering "no session" in the receiver's name. So it is kept for `RESEND_WINDOW_S`
after the send and no longer: a receiver whose follower runs refuses a message within seconds,
and a message refused later stays refused, which its sender's outbox says. When a message
settles (a receipt came that no lost session can follow) or its window passes, its line is not
marked but erased: the log is written again without it (`_rewrite`), so its bytes are in no file
of the folder. That happens on the next append or drop after it is due, which is what keeps a
send at one append in the common case: a drop rewrites the log (it is small: only the last
minutes' messages not yet settled), and an append reads the first line's time alone to tell
whether the oldest copy is due. The follower looks the same way every few seconds (`sweep`),
so a copy outlives its window by no more than that while it runs. Bounded too: past twice
`KEEP_BYTES` the log is written again with the newest that fit in `KEEP_BYTES`. Appends and
rewrites hold `ratchet_inflight.lock`, so no append falls into a file a rewrite is replacing; a
reader reads the old file or the new one.

When. A send keeps its copy while the relay stores the message (`Keeping`, the deposit's
`meanwhile`, `follower.relay.client`): the request has left, and the sender would otherwise only
wait for the answer; a request that never left keeps it before the send returns. A copy that
cannot be written (a full disk) is not kept, like one lost to a power loss: the message has gone
by then, and the send must not read as failed (the outbox's appends, synced before the message
leaves, report such a disk). A kill in that instant loses the copy alone, as a power loss does.

Crashes. Nothing here is synced: a line matters only if the machine loses power before the
message settles and its receiver then loses its session too; a line lost or cut short then
reads as not kept, and the message stays refused. Syncing it would double what a send waits on
the disk for, on every forward-secret message, for that double mishap. A rewrite lost to a
power loss leaves the log as it was, erased lines included, until their window passes. A message
sealed again (sent in a new session) is kept again: the newest line of an id is the one read.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from nacl.exceptions import CryptoError

from durable.digests import blake2b
from durable.files import open_private, replace_file
from durable.locks import kept_locked, locked
from durable.ndjson import append_to, json_lines, read_records
from keys.encoding import is_hex32
from keys.envelope import Inner
from keys.identity import Identity
from keys.sodium import SecretBox, crypto_secretbox_easy

__all__ = ["INFLIGHT_FILE", "KEEP_BYTES", "RESEND_WINDOW_S", "Inflight", "Keeping"]

INFLIGHT_FILE = "ratchet_inflight.ndjson"
INFLIGHT_LOCK = "ratchet_inflight.lock"
KEEP_BYTES = 4 * 1024 * 1024
CONTEXT = b"talk-ratchet-inflight-v1"
# How long a sent message can be sent again after its receiver said it lost the session: a
# follower refuses within seconds, a `talk receive` run by hand within minutes. Longer would
# leave more plaintext in reach of a folder thief, and more mail a relay holding stolen keys
# could have sent again.
RESEND_WINDOW_S = 10 * 60
_FIRST_AT = re.compile(rb'\{"at":([0-9]+(?:\.[0-9]+)?),')


class Inflight:
    """The inner envelopes of this identity's ratchet messages sent in the last few minutes that
    have not settled yet."""

    def __init__(self, folder: Path, identity: Identity, keep_bytes: int = KEEP_BYTES,
                 window: float = RESEND_WINDOW_S) -> None:
        self.path = folder / INFLIGHT_FILE
        self._lock = folder / INFLIGHT_LOCK
        self._key = blake2b(CONTEXT, key=identity.secret_bytes(), digest_size=32).digest()
        self._box = SecretBox(self._key)
        self.keep_bytes = keep_bytes
        self.window = window

    def keep(self, inner: Inner, plaintext: bytes) -> None:
        """Keep `plaintext` (the inner envelope of `inner`) until `drop`, or its window passes; a
        message larger than the whole budget is not kept."""
        if not is_hex32(inner.id):
            return
        # The bytes `SecretBox.encrypt` makes, without its wrapping; the line `json_lines` would
        # write, made directly: the id is hex and the box base64, so nothing in it needs escaping.
        nonce = os.urandom(SecretBox.NONCE_SIZE)
        box = base64.b64encode(nonce + crypto_secretbox_easy(plaintext, nonce, self._key))
        line = b'{"at":%.3f,"id":"%s","box":"%s"}\n' % (time.time(), inner.id.encode(), box)
        if len(line) <= self.keep_bytes:
            self._append(line)

    def drop(self, msg_ids: list[str]) -> None:
        """Erase messages that settled (a receipt came that no lost session can follow), and any
        whose window passed, from the log's bytes."""
        ids = {i for i in msg_ids if is_hex32(i)}
        if not ids or not self.path.exists():
            return
        with locked(self._lock):
            records = read_records(self.path)
            if any(r.get("id") in ids for r in records) or self._due(records):
                self._rewrite(records, ids)

    def take(self, msg_id: str) -> Inner | None:
        """The kept message `msg_id`; None if none is kept, its window passed, or it no longer
        opens."""
        kept = _kept(read_records(self.path), time.time() - self.window) if is_hex32(msg_id) else {}
        if msg_id not in kept:
            return None
        box = kept[msg_id][1]
        try:
            return Inner.from_json(json.loads(self._box.decrypt(base64.b64decode(box, validate=True))))
        except (CryptoError, ValueError, binascii.Error):  # the gate's Invalid is a ValueError too
            return None

    def sweep(self) -> None:
        """Erase the copies whose window passed, if there are any: the follower calls this every
        few seconds, so that a copy does not outlive its window for want of a send."""
        try:
            fd = open_private(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            head = os.pread(fd, 32, 0)
        finally:
            os.close(fd)
        if head and self._head_due(head):
            with locked(self._lock):
                self._rewrite(read_records(self.path))

    def _due(self, records: list[dict[str, Any]]) -> bool:
        """Whether the log holds a line that is erased at the next rewrite: one past its window,
        or written without a time (by an earlier version). The oldest line is the first."""
        return bool(records) and _at(records[0]) < time.time() - self.window

    def _head_due(self, head: bytes) -> bool:
        """`_due`, told from the log's first bytes alone (a line's time is its first field)."""
        found = _FIRST_AT.match(head)
        return found is None or float(found[1]) < time.time() - self.window

    def _append(self, data: bytes) -> None:
        with kept_locked(self._lock):  # taken on every send: kept open (`drop`, `sweep` open it anew)
            fd = _kept_log(self.path)
            fcntl.flock(fd, fcntl.LOCK_EX)  # readers take it shared (`read_records`)
            try:
                end = append_to(fd, data) + len(data)
                head = os.pread(fd, 32, 0)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            if end > 2 * self.keep_bytes or self._head_due(head):
                self._rewrite(read_records(self.path))

    def _rewrite(self, records: list[dict[str, Any]], dropped: Collection[str] = ()) -> None:
        """The log again with only the messages still kept, less `dropped`, the newest that fit
        the budget."""
        kept, used = [], 0
        for msg_id, (at, box) in reversed(list(_kept(records, time.time() - self.window).items())):
            if msg_id in dropped:
                continue
            record = {"at": at, "id": msg_id, "box": box}
            used += len(json_lines([record]))
            if used > self.keep_bytes:
                break
            kept.append(record)
        replace_file(self.path, json_lines(kept[::-1]), sync=False)


class Keeping:
    """One message's copy, kept (`Inflight.keep`) on the first call and never again: a send calls
    it while the relay stores the message, and once more before it returns, for a deposit that
    never left. `plaintext` makes the inner envelope's bytes, if no one made them yet."""

    def __init__(self, inflight: Inflight, inner: Inner, plaintext: Callable[[], bytes]) -> None:
        self._inflight = inflight
        self._inner = inner
        self._plaintext: Callable[[], bytes] | None = plaintext

    def __call__(self) -> None:
        plaintext, self._plaintext = self._plaintext, None
        if plaintext is None:
            return
        try:
            self._inflight.keep(self._inner, plaintext())
        except OSError:
            return  # not kept: the message has gone (see When, in the module's docstring)


# The log's descriptor per path, kept open between appends by the process that opened it: a
# send appends on every message. Used only under the log's lock, which every rewrite holds too;
# a rewrite replaces the file, so a descriptor whose file has no name left is opened anew.
_LOGS: dict[Path, tuple[int, int]] = {}


def _kept_log(path: Path) -> int:
    kept = _LOGS.get(path)
    if kept is not None and kept[0] == os.getpid():
        if os.fstat(kept[1]).st_nlink:
            return kept[1]
        os.close(kept[1])
    fd = open_private(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    _LOGS[path] = (os.getpid(), fd)
    return fd


def _at(record: dict[str, Any]) -> float:
    """When a line was kept; 0 for one written without a time, which is then past its window."""
    at = record.get("at")
    return float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else 0.0


def _kept(records: list[dict[str, Any]], since: float) -> dict[str, tuple[float, str]]:
    """{id: (when kept, sealed box)} of the messages kept at or after `since` and not dropped
    since, oldest first."""
    kept: dict[str, tuple[float, str]] = {}
    for record in records:
        if isinstance(record.get("box"), str) and isinstance(record.get("id"), str):
            kept.pop(record["id"], None)  # kept again: now among the newest
            if _at(record) >= since:
                kept[record["id"]] = (_at(record), record["box"])
        elif isinstance(record.get("drop"), list):  # an earlier version's marks
            for msg_id in record["drop"]:
                if isinstance(msg_id, str):
                    kept.pop(msg_id, None)
    return kept
