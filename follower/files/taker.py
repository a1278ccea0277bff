"""Taking parked messages' files: download, check, place, then hand the message on.

For each parked message (`follower.files.parked`), in the order they came, every file is downloaded
(`follower.files.download`) and placed in the downloads folder under a safe name
(`follower.files.names`), a long body is read back as the message's text, and only then is the
message handed on, its spool line carrying "files": [{"path", "name", "size", "sha256"}] (or
held, when a policy held it). Then its chunks are acked away at the relay, its sender gets the
receipt a handed-on message earns, and the parked record goes with its keys.

Each step is noted in the parked record before the next, so a kill anywhere resumes: a download
from its last saved point, a placing under the name it chose, a hand-on deduplicated by the
spool (by message id), an ack or an erase done again. A file that fails (`DownloadFailed`) ends
the message: noted as refused, its chunks acked away, the message kept in the quarantine with the
reason and its sender told by a `refused` receipt. A fault of this machine or of the relay
(OSError, RelayError, LocalFileRefused) propagates: the message stays parked and is tried again,
its sender's later mail parked behind it (`follower.receive.ordering`) with it; a message with no
files, parked only to wait so, is handed on as it came.

This runs beside the delivery of other mail, never in its way: the follower runs it on a thread
of its own (`follower.daemon.daemon`), `talk receive` after the mail it took.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from durable.errors import LocalFileRefused, RelayError
from follower.files.download import DownloadFailed, download, missing_chunk
from follower.files.names import DOWNLOADS, place, safe_name
from follower.files.parked import Parked, ParkedMessage
from keys.fileref import MAX_BODY, FileRef
from keys.identity import Identity
from keys.invalid import Invalid

__all__ = ["DEFAULT_MAX_FILE_BYTES", "Deliver", "FileRelay", "FileTaker", "max_file_bytes"]

log = logging.getLogger("talk.files")
DEFAULT_MAX_FILE_BYTES = 512 * 1024 * 1024  # as the relay's default per file
Deliver = Callable[[dict[str, Any]], None]
# (message id, sender's fingerprint, file ids, reason): keep a refused message (the quarantine).
Keep = Callable[[str, str, list[str], str], None]
# (sender's fingerprint, message id, state, reason): the sender's receipt, best effort.
Tell = Callable[[str, str, str, str], None]


def max_file_bytes() -> int:
    """The largest file this side takes: TALK_MAX_FILE_BYTES, else the default."""
    from durable.settings import env_float

    return int(env_float("TALK_MAX_FILE_BYTES", DEFAULT_MAX_FILE_BYTES))


class FileRelay(Protocol):
    """What the taker asks of the relay (`follower.relay.client.RelayClient` has it)."""

    def get_chunk(self, owner: Identity, file_id: str, index: int) -> bytes: ...

    def ack_files(self, owner: Identity, file_ids: list[str]) -> int: ...


class FileTaker:
    """`deliver` hands a finished message on (the spool, or `talk receive`'s printer);
    `handed_state` is the receipt that earns ("spooled" or "delivered"); `keep` and `tell` are
    the receiver's quarantine and receipts (`follower.receive.parking` wires them)."""

    def __init__(self, identity: Identity, folder: Path, client: FileRelay, deliver: Deliver,
                 handed_state: str, keep: Keep, tell: Tell) -> None:
        self.identity = identity
        self.folder = folder
        self.client = client
        self.deliver = deliver
        self.handed_state = handed_state
        self.keep = keep
        self.tell = tell
        self.parked = Parked(folder)
        self.downloads = folder / DOWNLOADS
        self.handed = 0  # messages handed on (or held) by this taker
        self.refused: list[str] = []  # the reasons of those it refused

    def take_all(self) -> int:
        """Take every parked message, each sender's in the order they came; how many were handed
        on or refused.

        Raises:
            OSError, RelayError, LocalFileRefused: a fault of this machine or of the relay (the
                first, once the others' are taken): the message it stopped stays parked, and so
                does its sender's later mail (`follower.receive.ordering`); other senders' goes on.
        """
        taken = 0
        stopped: dict[object, Exception] = {}  # by sender
        for message in self.parked.waiting():
            sender = message.data.get("from")
            if sender in stopped:
                continue
            try:
                self.take(message)
            except (OSError, RelayError, LocalFileRefused) as exc:
                stopped[sender] = exc
                continue
            taken += 1
        if stopped:
            raise next(iter(stopped.values()))
        return taken

    def take(self, message: ParkedMessage) -> None:
        reason = message.data.get("refused")
        if not isinstance(reason, str):
            try:
                record = self.finished(message)
            except (DownloadFailed, Invalid, KeyError, TypeError, ValueError) as exc:
                reason = f"a file of message {message.id} was refused: {exc}"
                message.data["refused"] = reason
                self.parked.save(message)
            else:
                self.hand_on(message, record)
                return
        self.refuse(message, reason)

    def finished(self, message: ParkedMessage) -> dict[str, Any]:
        """The message's spool line, once every file of it is in.

        Raises:
            DownloadFailed: a file cannot be taken; Invalid, KeyError, TypeError, ValueError: the
                parked record is damaged.
        """
        record = dict(message.data["record"])
        if not message.announces_files:  # it waited behind its sender's earlier mail: as it came
            return record
        record["files"] = [self.file(message, ref) for ref in message.files()]
        body = message.body()
        if body is not None:
            record["text"] = self.body_text(message, body)
        return record

    def file(self, message: ParkedMessage, ref: FileRef) -> dict[str, Any]:
        path = message.placed(ref.id)
        if path is None:
            partial = self.parked.partial_path(ref)
            chosen = message.choosing(ref.id)
            # A chosen name comes after a whole, checked download: only the placing is left.
            if chosen is None or not (partial.exists() or (self.downloads / chosen).exists()):
                self.fetch(message, ref, partial)
            landed = place(partial, self.downloads, safe_name(ref.name or ""), chosen,
                           lambda name: self.parked.note(message, "choosing", ref.id, name))
            path = str(landed)
            self.parked.note(message, "placed", ref.id, path)
        return {"path": path, "name": safe_name(ref.name or ""), "size": ref.size, "sha256": ref.sha256}

    def body_text(self, message: ParkedMessage, ref: FileRef) -> str:
        if ref.size > MAX_BODY:  # the gate refused such a message already (`keys.fileref`)
            raise DownloadFailed(f"a message's text of {ref.size:,} bytes is over the {MAX_BODY:,} allowed")
        partial = self.parked.partial_path(ref)
        self.fetch(message, ref, partial)
        try:
            return partial.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DownloadFailed("a message's text is not UTF-8") from exc

    def fetch(self, message: ParkedMessage, ref: FileRef, partial: Path) -> None:
        self.parked.ensure()

        def chunk(index: int) -> bytes:
            try:
                return self.client.get_chunk(self.identity, ref.id, index)
            except RelayError as exc:
                raise missing_chunk(exc, index) from exc

        download(ref, chunk, partial, message.progress(ref.id),
                 lambda progress: self.parked.note_progress(message, ref.id, progress), max_file_bytes())

    def hand_on(self, message: ParkedMessage, record: dict[str, Any]) -> None:
        """Hand the message on (or hold it, as its sender's policy said), then ack its chunks
        away, answer its sender and forget its keys."""
        hold = message.data.get("hold")
        state, reason = self.handed_state, ""
        if isinstance(hold, str):
            state, reason = self.hold(record, hold)
        else:
            self.deliver(record)
        self.handed += 1
        if message.announces_files:
            self.client.ack_files(self.identity, [ref.id for ref in message.refs()])
        if message.data.get("answer"):
            self.tell(message.sender, message.id, state, reason)
        self.parked.erase(message)

    def hold(self, record: dict[str, Any], reason: str) -> tuple[str, str]:
        """Keep the message aside, as `follower.receive.inbound` holds one; past its sender's cap,
        refuse it instead, and its files go (nothing else would ever point to them)."""
        from follower.held import HeldBox, HeldFull

        try:
            HeldBox(self.folder).hold(record, reason)
        except HeldFull as exc:
            for entry in record["files"]:
                Path(entry["path"]).unlink(missing_ok=True)
            return "refused", str(exc)
        return "held", reason

    def refuse(self, message: ParkedMessage, reason: str) -> None:
        """Quarantine the message, tell its sender, and leave nothing of it: its chunks acked
        away, the files of it already placed removed (no message would ever point to them)."""
        ids = [f["id"] for f in [*message.data.get("files", []), message.data.get("body")]
               if isinstance(f, dict) and isinstance(f.get("id"), str)]
        if ids:
            self.client.ack_files(self.identity, ids)
        placed = message.data.get("placed")
        for path in placed.values() if isinstance(placed, dict) else ():
            if isinstance(path, str) and Path(path).parent == self.downloads:
                Path(path).unlink(missing_ok=True)
        self.keep(message.id, message.sender, ids, reason)
        self.refused.append(reason)
        log.warning("refused: %s", reason)
        if message.data.get("answer"):
            self.tell(message.sender, message.id, "refused", reason)
        self.parked.erase(message)
