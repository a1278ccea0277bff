"""A file transfer in progress: what an upload needs to go on after any kill, kept on disk.

One transfer is one message whose files (and long text, its "body") go to the relay first: the
record names the message's id before a byte is uploaded, so however often the upload is resumed,
by the command run again or by the follower, that one id is announced once (the outbox refuses a
second message with an id it holds). Each part keeps its random file id, key and stream header,
how many chunks the relay is known to hold (`next`) and the sealer's state before chunk `next`.

Crash reasoning. The record is replaced atomically and synced (`durable.files.write_json`) after a
part's chunks reach the relay, every `SAVE_EVERY` chunks: a kill loses at most the chunks sent
since, which the relay then already holds (a put is idempotent) or never got; either way the
upload resumes from the record's `next`, sealing from its saved state, and skips sending what
`file_next` says the relay has. The record never runs ahead of the relay, so the stream is never
asked to rewind; when the relay has lost chunks (expired, its store wiped) the part starts over
under a fresh id and key (`follower.send.upload`). The key lives here until the announce is sent
(then the record is deleted): the identity folder is private (0700), as the ratchet's keys are.

    TALK_HOME/<identity>/transfers/ID.json    the record
    TALK_HOME/<identity>/transfers/ID.body    a long text's words, the body part's source
    TALK_HOME/<identity>/transfers/ID.lock    held by whoever uploads it (never two at once)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from durable.digests import sha256
from durable.files import (
    ensure_private_dir,
    erase_file,
    fsync_dir,
    read_json,
    replace_file,
    write_json,
)
from follower.send.stall import Stall
from keys.encoding import b64d, b64e, is_hex32
from keys.fileref import FileRef
from keys.filestream import CHUNK_BYTES, chunk_count

__all__ = ["SAVE_EVERY", "Part", "Transfer", "TransferBook", "command_key", "progress_line"]

# Chunks (8 MiB) between saved records: what a kill may cost in re-sealing (not in re-sending:
# a resume skips what the relay holds); each save costs two fsyncs.
SAVE_EVERY = 32
FOLDER = "transfers"


class Part(NamedTuple):
    """One file of a transfer. `path` is the local source; `name` what the peer is told (None
    for a body)."""

    path: str
    name: str | None
    size: int
    sha256: str
    id: str
    key: bytes
    header: bytes
    state: bytes  # the sealer's state before chunk `next`
    next: int = 0  # chunks the relay holds, as far as this record knows

    @property
    def chunks(self) -> int:
        return chunk_count(self.size)

    @property
    def done(self) -> bool:
        return self.next >= self.chunks

    @property
    def sent_bytes(self) -> int:
        return min(self.size, self.next * CHUNK_BYTES)

    def ref(self) -> FileRef:
        return FileRef(self.id, self.name, self.size, self.sha256, self.key, self.header, CHUNK_BYTES)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "size": self.size, "sha256": self.sha256,
                "id": self.id, "key": b64e(self.key), "header": b64e(self.header),
                "state": b64e(self.state), "next": self.next}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Part:
        return cls(str(obj["path"]), obj["name"], int(obj["size"]), str(obj["sha256"]), str(obj["id"]),
                   b64d(obj["key"]), b64d(obj["header"]), b64d(obj["state"]), int(obj["next"]))


class Transfer(NamedTuple):
    id: str  # the announcing message's id, fixed before any upload
    to: str  # the contact's fingerprint
    name: str  # the contact's name when the send began
    text: str  # the message's text ("" when it went as the body)
    files: tuple[Part, ...]
    body: Part | None
    created: float
    key: str  # what the command asked for (`command_key`): a command run again finds its transfer
    stall: Stall | None = None  # why the follower stopped retrying it (`follower.send.stall`)

    @property
    def parts(self) -> tuple[Part, ...]:
        return self.files + ((self.body,) if self.body is not None else ())

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def sent_bytes(self) -> int:
        return sum(p.sent_bytes for p in self.parts)

    def with_part(self, part: Part) -> Transfer:
        """This transfer with the part of `part`'s path (and name) replaced by it."""
        if self.body is not None and part.name is None:
            return self._replace(body=part)
        return self._replace(files=tuple(part if (p.path, p.name) == (part.path, part.name) else p
                                         for p in self.files))

    def summary(self) -> dict[str, Any]:
        """What `talk outbox` and `talk status` show of it (no key, no path): "uploading", or
        "stalled" with the reason and what to do."""
        row = {"id": self.id, "name": self.name, "state": "uploading", "files": [p.name for p in self.files],
               "body": self.body is not None, "bytes_sent": self.sent_bytes, "bytes": self.size,
               "ts": self.created}
        if self.stall is not None:
            row.update(state="stalled", reason=self.stall.reason, hint=self.stall.hint)
        return row

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "to": self.to, "name": self.name, "text": self.text,
                "files": [p.to_json() for p in self.files],
                "body": None if self.body is None else self.body.to_json(),
                "created": self.created, "key": self.key,
                "stall": None if self.stall is None else self.stall.to_json()}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Transfer:
        body, stall = obj.get("body"), obj.get("stall")
        return cls(str(obj["id"]), str(obj["to"]), str(obj["name"]), str(obj["text"]),
                   tuple(Part.from_json(p) for p in obj["files"]),
                   None if body is None else Part.from_json(body), float(obj["created"]), str(obj["key"]),
                   None if stall is None else Stall.from_json(stall))


def progress_line(summary: dict[str, Any]) -> str:
    """A transfer's `summary` as one line for a person: how far the upload got."""
    what = ", ".join(str(name) for name in summary["files"]) or "a long text"
    if summary["state"] == "stalled":
        return (f"stalled {summary['id'][:12]} to {summary['name']} at {summary['bytes_sent'] / 1e6:.1f} of "
                f"{summary['bytes'] / 1e6:.1f} MB ({what}): {summary['reason']}; {summary['hint']}")
    return (f"uploading {summary['id'][:12]} to {summary['name']}: {summary['bytes_sent'] / 1e6:.1f} of "
            f"{summary['bytes'] / 1e6:.1f} MB ({what})")


def command_key(to: str, paths: list[str], text: str) -> str:
    """One string for (recipient, files, text): the same command run again has the same key."""
    digest = sha256()
    for piece in (to, *paths, text):
        digest.update(len(piece.encode()).to_bytes(8, "big") + piece.encode())
    return digest.hexdigest()


class TransferBook:
    """The transfers of one identity that have not announced their message yet."""

    def __init__(self, identity_folder: Path) -> None:
        self.folder = identity_folder / FOLDER

    def _path(self, transfer_id: str, suffix: str) -> Path:
        if not is_hex32(transfer_id):
            raise ValueError(f"not a transfer id: {transfer_id!r}")
        return self.folder / f"{transfer_id}.{suffix}"

    def lock_path(self, transfer_id: str) -> Path:
        ensure_private_dir(self.folder, "transfers folder")
        return self._path(transfer_id, "lock")

    def begin_lock(self) -> Path:
        """Held while a command looks for its transfer and records a new one: two runs of the
        same command at once then find one transfer, and its message goes once."""
        ensure_private_dir(self.folder, "transfers folder")
        return self.folder / "begin.lock"

    def body_path(self, transfer_id: str) -> Path:
        return self._path(transfer_id, "body")

    def save(self, transfer: Transfer) -> None:
        ensure_private_dir(self.folder, "transfers folder")
        write_json(self._path(transfer.id, "json"), transfer.to_json(), compact=True)

    def get(self, transfer_id: str) -> Transfer | None:
        data = read_json(self._path(transfer_id, "json"), None, erasable=True)  # `finish` may be erasing it
        return None if data is None else Transfer.from_json(data)

    def pending(self) -> Iterator[Transfer]:
        """Every transfer not finished, oldest first."""
        if not self.folder.is_dir():
            return
        found = [t for t in (self.get(p.stem) for p in self.folder.glob("*.json") if is_hex32(p.stem))
                 if t is not None]
        yield from sorted(found, key=lambda t: t.created)

    def find(self, key: str) -> Transfer | None:
        """The unfinished transfer the same command began, if any."""
        return next((t for t in self.pending() if t.key == key), None)

    def finish(self, transfer_id: str) -> None:
        """Forget a transfer whose message is sent (the outbox has it now); its key goes with it.
        Called under the transfer's lock: whoever waits on that lock then finds no record."""
        for suffix in ("json", "body"):  # the bytes of the keys (and the long text) go, not only the names
            erase_file(self._path(transfer_id, suffix))
        for tmp in self.folder.glob(f".{transfer_id}.*.tmp"):  # a killed writer's copy holds the key too
            erase_file(tmp)
        self._path(transfer_id, "lock").unlink(missing_ok=True)
        if self.folder.is_dir():
            fsync_dir(self.folder)

    def write_body(self, transfer_id: str, text: str) -> Path:
        """Keep a long text where its upload can read it again after a kill."""
        ensure_private_dir(self.folder, "transfers folder")
        path = self.body_path(transfer_id)
        replace_file(path, text.encode())
        return path
