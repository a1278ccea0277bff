"""Uploading a transfer's files and announcing them: the engine behind `talk send --file`.

    begin     hash each file (one streaming pass: size and sha256), draw its random id and key,
              fix the announcing message's id, and record it all (`follower.send.transfer`)
    upload    seal each file's chunks in order and put them on the relay, saving the record every
              few chunks; on a resume, ask the relay how far it got and go on from there
    complete  under the transfer's lock: the uploads, then the message with "files" (and "body"),
              by the normal send path, under the id fixed at the start; then forget the record

Memory stays flat: a file is read one chunk at a time, never whole.

A resumed part is hashed again first: re-sealing other bytes from a saved stream state would
reuse its nonces, so a file that changed since the send began starts over under a new id and
key (the relay forgets the old chunks at the TTL).

The chunks go under the sender's channel tag for the recipient (`keys.envelope.channel_tag`),
the tag its mail to them goes under: one the recipient's fetches have registered, so the files
count against the owner's quota, not the small one for strangers' tags (`relay.file_store`).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from durable.backoff import Backoff
from durable.digests import sha256
from durable.errors import MessageTooLarge, RelayError, SourceGone, UserError
from durable.locks import locked
from durable.message_ids import short
from follower.send.stall import look, stall_for
from follower.send.transfer import SAVE_EVERY, Part, Transfer, TransferBook, command_key
from keys.encoding import token_hex
from keys.envelope import channel_tag
from keys.fileref import MAX_BODY, MAX_FILES
from keys.filestream import CHUNK_BYTES, KEY_BYTES, Sealer
from keys.sodium import PublicKey

if TYPE_CHECKING:
    from follower.relay.client import RelayClient
    from follower.send.outbox import Outbox
    from keys.contacts import Contact
    from keys.identity import Identity

__all__ = ["LONG_TEXT", "MOST_TEXT", "Tick", "Uploader", "begin", "complete", "file_digest", "long_text",
           "upload"]

HASH_BLOCK = 1024 * 1024
# A text longer than this, once JSON-encoded, goes as a sealed body: with the other fields it
# would not fit one ratchet message (`follower.send.ratchet_send.MAX_RATCHET_PLAIN`, ~48 KB).
LONG_TEXT = 32 * 1024
# A message's text at most, body or not (the receiver's gate allows no more): it is read whole
# into the recipient agent's inbox. Anything longer is a file.
MOST_TEXT = MAX_BODY
RATE_RETRIES = 8  # 429s waited out on one chunk before the upload is left to the follower
RATE_BACKOFF = Backoff(0.25, 4.0)

Tick = Callable[[int, int], None]  # (bytes of the transfer sent, bytes in all)


class Uploader(Protocol):
    """What an upload uses of `follower.relay.client.RelayClient`."""

    def put_chunk(self, fp: str, tag: str, file_id: str, index: int, blob: bytes) -> None: ...

    def file_next(self, fp: str, file_id: str) -> int: ...


def long_text(text: str) -> bool:
    import json

    return len(json.dumps(text, ensure_ascii=False).encode()) > LONG_TEXT


@contextmanager
def _source(path: str) -> Iterator[int]:
    """A regular file's descriptor: a folder, device or pipe is never read (it could be endless)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK)
    except OSError as exc:
        raise SourceGone(f"cannot read {path}: {exc.strerror}; check the path") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SourceGone(f"{path} is not a regular file; only files can be sent")
        os.set_blocking(fd, True)
        yield fd
    finally:
        os.close(fd)


def file_digest(path: str) -> tuple[int, str]:
    """(size, sha256 hex) of a regular file, read in blocks."""
    digest, size = sha256(), 0
    with _source(path) as fd:
        while block := os.read(fd, HASH_BLOCK):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def _new_part(path: str, name: str | None, size: int, sha256: str) -> Part:
    key = os.urandom(KEY_BYTES)
    sealer = Sealer(key)
    return Part(path, name, size, sha256, token_hex(16), key, sealer.header, sealer.state(), 0)


def begin(book: TransferBook, contact: Contact, paths: list[str], text: str,
          admit: Callable[[], None] = lambda: None) -> tuple[Transfer, bool]:
    """The unfinished transfer this same command began before, else a new one, recorded once
    `admit()` let it through (a send rate's count: a resume is not counted again); and whether
    it is new.

    Raises:
        UserError: no such file, not a regular file, too many files.
        MessageTooLarge: a text over MOST_TEXT bytes.
    """
    if len(paths) > MAX_FILES:
        raise UserError(f"at most {MAX_FILES} files go with one message; send the rest in another")
    if len(text.encode()) > MOST_TEXT:
        raise MessageTooLarge(f"the message is {len(text.encode()):,} bytes; the limit is {MOST_TEXT:,}: "
                              "shorten it, or send it as a --file")
    full = list(dict.fromkeys(os.path.abspath(p) for p in paths))  # a file named twice goes once
    key = command_key(contact.fingerprint, full, text)
    with locked(book.begin_lock()):
        found = book.find(key)
        if found is not None:
            return found, False
        return _recorded(book, contact, full, text, key, admit), True


def _recorded(book: TransferBook, contact: Contact, full: list[str], text: str, key: str,
              admit: Callable[[], None]) -> Transfer:
    admit()
    files = tuple(_new_part(p, Path(p).name, *file_digest(p)) for p in full)
    transfer = Transfer(token_hex(16), contact.fingerprint, contact.name, text, files, None, time.time(), key)
    if long_text(text):
        body = book.write_body(transfer.id, text)
        transfer = transfer._replace(text="", body=_new_part(str(body), None, *file_digest(str(body))))
    book.save(transfer)
    return transfer


def _still_same(part: Part) -> Part:
    """`part`, or, when its file changed since it was hashed, a new part for the file as it is."""
    if part.done:
        return part
    size, sha256 = file_digest(part.path)
    if (size, sha256) == (part.size, part.sha256):
        return part
    return _new_part(part.path, part.name, size, sha256)


def _put(client: Uploader, fp: str, tag: str, part: Part, index: int, blob: bytes) -> None:
    for attempt in range(1, RATE_RETRIES + 1):
        try:
            client.put_chunk(fp, tag, part.id, index, blob)
            return
        except RelayError as exc:
            if exc.status != 429 or attempt == RATE_RETRIES:
                raise
            time.sleep(RATE_BACKOFF.delay(attempt))


def upload(client: Uploader, fp: str, tag: str, part: Part, save: Callable[[Part], None],
           tick: Callable[[int], None]) -> Part:
    """Put `part`'s chunks the relay lacks, from where the record says; returns the part done.
    `save` gets the part every `SAVE_EVERY` chunks, once those are on the relay; `tick` the
    bytes of the part sent so far.

    Raises:
        UserError: the file shrank while it was read.
        RelayError: the relay refused a chunk or cannot be reached (the record keeps the place).
    """
    held = client.file_next(fp, part.id)
    if held < part.next:  # the relay lost chunks it had: a new id and key, from the start
        part = _new_part(part.path, part.name, part.size, part.sha256)
        save(part)
        held = 0
    sealer = Sealer(part.key, part.state)
    with _source(part.path) as fd:
        os.lseek(fd, part.next * CHUNK_BYTES, os.SEEK_SET)
        for index in range(part.next, part.chunks):
            plain = _read(fd, min(CHUNK_BYTES, part.size - index * CHUNK_BYTES))
            if len(plain) != min(CHUNK_BYTES, part.size - index * CHUNK_BYTES):
                raise UserError(f"{part.path} changed while it was sent; send it again")
            blob = sealer.seal(plain, index == part.chunks - 1)
            if index >= held:
                _put(client, fp, tag, part, index, blob)
            done = index + 1
            if done % SAVE_EVERY == 0 or done == part.chunks:
                part = part._replace(next=done, state=sealer.state())
                save(part)
            tick(min(part.size, done * CHUNK_BYTES))
    return part


def _read(fd: int, size: int) -> bytes:
    parts, got = [], 0
    while got < size:
        block = os.read(fd, size - got)
        if not block:
            break
        parts.append(block)
        got += len(block)
    return b"".join(parts)


def complete(identity: Identity, client: RelayClient, contact: Contact, outbox: Outbox,
             book: TransferBook, transfer_id: str, tick: Tick | None = None,
             wait: bool = True, resumed: bool = True) -> str | None:
    """Upload what is left of a transfer and send its message, once; returns the message's id,
    or None when another process holds the transfer (`wait` False) or already finished it.
    `resumed` False (a transfer this process has just begun, its files just hashed) skips
    hashing them again.

    Raises:
        outbound.Queued: the files are up, the message is in the outbox and goes later.
        RelayError, UserError: the upload stopped; the record keeps its place for a resume.
    """
    from follower.send import outbound

    try:
        with locked(book.lock_path(transfer_id), wait=wait):
            transfer = book.get(transfer_id)
            if transfer is None:
                return None
            if transfer.id not in outbox.entries():  # a kill after the send, before the record went
                if transfer.stall is not None:  # tried again: by the command run again, or a source back
                    transfer = transfer._replace(stall=None)
                    book.save(transfer)
                try:
                    transfer = _uploaded(client, contact, identity, book, transfer, tick, resumed)
                except (UserError, RelayError) as exc:
                    _stall(book, transfer_id, exc)
                    raise
                try:
                    outbound.send(identity, client, contact, transfer.text, outbox=outbox,
                                  msg_id=transfer.id, **announced(transfer))
                finally:
                    if transfer.id in outbox.entries():  # stored, queued or refused: it is the outbox's
                        book.finish(transfer.id)
            book.finish(transfer.id)
            return transfer.id
    except BlockingIOError:
        return None


def _stall(book: TransferBook, transfer_id: str, exc: Exception) -> None:
    """Mark the transfer stalled when `exc` will not pass by retrying (`follower.send.stall`)."""
    transfer = book.get(transfer_id)  # as the upload last saved it
    if transfer is None:
        return
    cancel = f"cancel it: talk outbox --cancel {short(transfer_id)}"
    stall = stall_for(exc, [look(p.path) for p in transfer.parts], time.time(), cancel)
    if stall is not None:
        book.save(transfer._replace(stall=stall))


def announced(transfer: Transfer) -> dict[str, Any]:
    """The fields the message carries for its files (`keys.fileref`): "files", and "body"."""
    extra: dict[str, Any] = {}
    if transfer.files:
        extra["files"] = [p.ref().to_json() for p in transfer.files]
    if transfer.body is not None:
        extra["body"] = transfer.body.ref().to_json()
    return extra


def _uploaded(client: RelayClient, contact: Contact, identity: Identity, book: TransferBook,
              transfer: Transfer, tick: Tick | None, resumed: bool) -> Transfer:
    tag = channel_tag(identity.box_secret, PublicKey(contact.box_key), contact.fingerprint)
    total = transfer.size
    for original in transfer.parts:
        part = _still_same(original) if resumed else original
        if part is not original:
            transfer = transfer.with_part(part)
            book.save(transfer)
        if part.done:
            continue
        before = transfer.sent_bytes - part.sent_bytes

        def save(new: Part) -> None:
            nonlocal transfer
            transfer = transfer.with_part(new)
            book.save(transfer)

        def told(sent: int, before: int = before) -> None:
            if tick is not None:
                tick(before + sent, total)

        upload(client, contact.fingerprint, tag, part, save, told)
    return transfer
