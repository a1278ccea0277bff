"""What a ratchet message said, kept sealed until it settles, so a lost session can be healed.

A message sent in an Olm session can be decrypted only in that session. When the receiver
loses its sessions (a restored backup, a wiped folder) it refuses the message ("no session")
and the sealed blob the outbox keeps is useless: it was made for the lost session. To send the
message again in a new session the sender needs what the message said, so the inner envelope
of each ratchet message in flight is kept here until the message settles.

Files, in the identity folder: `ratchet_inflight/<message id>.bin`, each the inner envelope
sealed by SecretBox under a key derived from the identity's private keys (as the Olm pickles
are, `keys.ratchet_account`), so it is exactly as protected as the identity; nothing is kept in
clear. The folder is bounded by `KEEP_BYTES`: past it the oldest are dropped first, and such a
message, if its receiver then loses its session, stays refused as before. Checking the budget
reads the whole folder, which a burst of sends fills with hundreds of files, so a file smaller
than `KEEP_BYTES / SMALL_SHARE` checks it only one time in `CHECK_ONE_IN` (by its message id,
which is random): the folder may pass the budget by the small files kept since the last
check, fifteen on average, each under 1/256 of it.

Crashes. A file is created under its message's name, written with one write and not synced:
it matters only if the sender is killed in that write, or the machine loses power before the
message settles, and its receiver then loses its session too. A file lost or cut short then
(one that no longer opens reads as not kept) leaves the message refused, as past the budget.
A temporary file renamed into place and synced would more than double what this costs a
forward-secret send, on every message, for that double mishap. A message sealed again (sent
in a new session) says what it said the first time, so a file already kept is left as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from nacl import secret
from nacl.exceptions import CryptoError

from durable.files import ensure_private_dir, open_private, read_private
from keys.encoding import is_hex32
from keys.envelope import Inner
from keys.identity import Identity

__all__ = ["CHECK_ONE_IN", "INFLIGHT_DIR", "KEEP_BYTES", "SMALL_SHARE", "Inflight"]

INFLIGHT_DIR = "ratchet_inflight"
KEEP_BYTES = 4 * 1024 * 1024
SMALL_SHARE = 256
CHECK_ONE_IN = 16
CONTEXT = b"talk-ratchet-inflight-v1"


class Inflight:
    """The inner envelopes of this identity's ratchet messages that have not settled yet."""

    def __init__(self, folder: Path, identity: Identity, keep_bytes: int = KEEP_BYTES) -> None:
        self.folder = folder / INFLIGHT_DIR
        key = hashlib.blake2b(CONTEXT, key=identity.secret_bytes(), digest_size=32).digest()
        self._box = secret.SecretBox(key)
        self.keep_bytes = keep_bytes

    def _path(self, msg_id: str) -> Path | None:
        return self.folder / f"{msg_id}.bin" if is_hex32(msg_id) else None

    def keep(self, inner: Inner, plaintext: bytes) -> None:
        """Keep `plaintext` (the inner envelope of `inner`) until `drop`; a message larger than
        the whole budget is not kept."""
        path = self._path(inner.id)
        sealed = bytes(self._box.encrypt(plaintext))
        if path is None or len(sealed) > self.keep_bytes:
            return
        ensure_private_dir(self.folder, "ratchet in-flight folder")
        if len(sealed) * SMALL_SHARE >= self.keep_bytes or int(inner.id, 16) % CHECK_ONE_IN == 0:
            self._make_room(len(sealed))
        try:
            fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return
        with os.fdopen(fd, "wb") as f:
            f.write(sealed)

    def _make_room(self, wanted: int) -> None:
        # Every forward-secret send passes here, and a burst keeps thousands of files before
        # their receipts come: one scandir and one stat per file, no Path per name.
        with os.scandir(self.folder) as entries:
            kept = [(e.stat(), e.path) for e in entries
                    if e.name.endswith(".bin") and not e.name.startswith(".")]
        files = sorted(((st.st_mtime, st.st_size, path) for st, path in kept), key=lambda f: f[0])
        used = sum(size for _, size, _ in files)
        for _, size, path in files:
            if used + wanted <= self.keep_bytes:
                return
            Path(path).unlink(missing_ok=True)
            used -= size

    def take(self, msg_id: str) -> Inner | None:
        """The kept message `msg_id`; None if none is kept or it no longer opens."""
        path = self._path(msg_id)
        if path is None or not path.exists():
            return None
        try:
            return Inner.from_json(json.loads(self._box.decrypt(read_private(path))))
        except (CryptoError, ValueError):  # the gate's Invalid is a ValueError too
            return None

    def drop(self, msg_ids: list[str]) -> None:
        """Forget messages that settled (a receipt came that no lost session can follow)."""
        for msg_id in msg_ids:
            path = self._path(msg_id)
            if path is not None:
                path.unlink(missing_ok=True)
