"""Messages whose files are on their way: kept durably, with their keys, until the files are in.

A message that announces files (`keys.fileref`) is taken from the relay like any other (opened,
judged, acked), but is not handed on yet: the receiver parks it here, one file per message,
`files/parked/<message id>.json` in the identity folder (0600 in a 0700 folder, written whole
and synced before the message is acked):

    {"record": the spool line to hand on once the files are in, "from": fingerprint,
     "hold": a policy's reason to hold it, or null, "answer": whether its sender gets receipts,
     "files": [FileRef JSON], "body": FileRef JSON | null,
     "progress": {file id: {"chunk", "offset", "state"}}, "choosing": {file id: name},
     "placed": {file id: path}, "parked": epoch, "order": n}

A message its sender sent after a parked one is parked too, with no files ("files": [], "body":
null), so it reaches the agent after it (`follower.receive.ordering`). "order" numbers the parked
messages as they came (one more than the highest parked), which is the order they are taken in.

The file keys and the saved stream states open the chunks, so this file is the only place they
are kept, and `erase` removes it once the message is handed on or refused: a folder copied
afterwards holds nothing that opens a file already taken (the chunks are acked away at the relay
as well). Partial files live beside it in `files/partial`, named by file id, never readable as a
download.
"""

from __future__ import annotations

import base64
import re
import time
from pathlib import Path
from typing import Any, NamedTuple

from durable.errors import LocalFileRefused
from durable.files import (
    ensure_private_dir,
    erase_file,
    fsync_dir,
    read_json,
    sweep_temp_files,
    write_json,
)
from follower.files.download import Progress
from keys.fileref import FileRef
from keys.invalid import Invalid

__all__ = ["Parked", "ParkedMessage"]

FOLDER = "files"
HEX32 = re.compile(r"[0-9a-f]{32}")


def is_hex32(value: str) -> bool:
    return HEX32.fullmatch(value) is not None


class ParkedMessage(NamedTuple):
    id: str
    data: dict[str, Any]

    @property
    def sender(self) -> str:
        return str(self.data["from"])

    def files(self) -> list[FileRef]:
        return [FileRef.from_json(f) for f in self.data["files"]]

    @property
    def order(self) -> tuple[float, float, str]:
        """Where it stands among the parked: as it came (a record from before "order": first)."""
        order, parked = self.data.get("order"), self.data.get("parked")
        return (order if isinstance(order, (int, float)) else 0,
                parked if isinstance(parked, (int, float)) else 0, self.id)

    @property
    def announces_files(self) -> bool:
        """False for a message parked only to wait behind its sender's earlier one."""
        return bool(self.data.get("files")) or self.data.get("body") is not None

    def body(self) -> FileRef | None:
        body = self.data.get("body")
        return None if body is None else FileRef.from_json(body, named=False, what="body")

    def refs(self) -> list[FileRef]:
        body = self.body()
        return [*self.files(), *([body] if body is not None else [])]

    def progress(self, file_id: str) -> Progress | None:
        saved = self.data.get("progress", {}).get(file_id)
        if not isinstance(saved, dict):
            return None
        return Progress(int(saved["chunk"]), int(saved["offset"]), base64.b64decode(saved["state"]))

    def placed(self, file_id: str) -> str | None:
        path = self.data.get("placed", {}).get(file_id)
        return path if isinstance(path, str) else None

    def choosing(self, file_id: str) -> str | None:
        name = self.data.get("choosing", {}).get(file_id)
        return name if isinstance(name, str) else None


class Parked:
    def __init__(self, identity_folder: Path) -> None:
        self.root = identity_folder / FOLDER
        self.folder = self.root / "parked"
        self.partial = self.root / "partial"

    def ensure(self) -> None:
        for folder in (self.root, self.folder, self.partial):
            ensure_private_dir(folder, "files folder")

    def park(self, record: dict[str, Any], sender: str, files: list[FileRef], body: FileRef | None,
             hold: str | None, answer: bool) -> None:
        """Keep a message with its files' keys until they are in (durable when this returns)."""
        self.ensure()
        after = max((m.order[0] for m in self.waiting()), default=0)
        data = {"record": record, "from": sender, "hold": hold, "answer": answer,
                "files": [f.to_json() for f in files], "body": body.to_json() if body else None,
                "progress": {}, "choosing": {}, "placed": {}, "parked": time.time(), "order": int(after) + 1}
        write_json(self._path(str(record["id"])), data, compact=True)

    def waiting(self) -> list[ParkedMessage]:
        """The parked messages, in the order they came; a damaged one is left where it is (`talk status`
        counts it), never in the way of the others."""
        if not self.folder.is_dir():
            return []
        found = []
        for path in self.folder.glob("*.json"):
            msg_id = path.stem
            if not is_hex32(msg_id):
                continue
            try:
                data = read_json(path, None, erasable=True)  # `erase` may be erasing it
            except LocalFileRefused:  # damaged (written whole, so only by the disk): not taken
                continue
            if isinstance(data, dict):
                found.append(ParkedMessage(msg_id, data))
        return sorted(found, key=lambda m: m.order)

    def ids(self) -> set[str]:
        return {p.stem for p in self.folder.glob("*.json")} if self.folder.is_dir() else set()

    def save(self, message: ParkedMessage) -> None:
        write_json(self._path(message.id), message.data, compact=True)

    def note_progress(self, message: ParkedMessage, file_id: str, progress: Progress) -> None:
        message.data.setdefault("progress", {})[file_id] = {
            "chunk": progress.chunk, "offset": progress.offset,
            "state": base64.b64encode(progress.state).decode()}
        self.save(message)

    def note(self, message: ParkedMessage, field: str, file_id: str, value: str) -> None:
        message.data.setdefault(field, {})[file_id] = value
        self.save(message)

    def partial_path(self, ref: FileRef) -> Path:
        return self.partial / ref.id

    def erase(self, message: ParkedMessage) -> None:
        """Forget the message and its keys, and whatever partial files it left."""
        for ref in _refs_or_none(message):
            self.partial_path(ref).unlink(missing_ok=True)
        erase_file(self._path(message.id))  # the bytes of the keys go, not only the name
        # A writer killed mid-save left its temporary copy, keys and all (`replace_file`).
        sweep_temp_files(self.folder)
        fsync_dir(self.folder)

    def _path(self, msg_id: str) -> Path:
        if not is_hex32(msg_id):
            raise Invalid("a parked message's id is not 32 lowercase hex characters")
        return self.folder / f"{msg_id}.json"


def _refs_or_none(message: ParkedMessage) -> list[FileRef]:
    try:
        return message.refs()
    except (Invalid, KeyError, TypeError):
        return []
