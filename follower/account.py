"""One identity's client side: its keys, its relay, its books, and what it does with them.

An `Account` is built in one place from an identity record, a relay URL and a way to read the
passphrase, which is read only when the private keys are first needed (listing contacts needs
none). The commands, the follower daemon, the demo and the MCP server all act through it;
talk's commands only choose which identity (`talk.context`), parse and print.

The path of one message. `talk send bob hi` starts in talk/__main__.py, which hands the words
to talk/fastlane.py (or, for the forms it leaves alone, to typer's talk/cli.py); both call
talk/mail.py, which opens the account (talk/context.py) and calls `Account.send` here. From
then on every call goes down, never back to talk: follower/send/sendrate.py counts the send
against the contact's rate (the rule is follower/policy.py's), follower/send/outbound.py deposits what
an earlier send left queued and then sends this one — numbered by follower/send/seqcounter.py,
sealed by keys/envelope.py, recorded first in follower/send/outbox.py (durable's files and locks) —
and follower/relay/client.py's `RelayClient.deposit` posts the blob to the relay. talk/mail.py
prints the `Sent` that comes back.

Importing this module costs no more than the relay client: everything else is imported by
the method that needs it, because `talk send` and `talk receive` run on every agent turn.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from durable.errors import UserError
from follower.relay.client import RelayClient
from keys.contacts import ContactBook
from keys.identity import Identity
from keys.invites import InviteBook
from keys.keystore import IdentityRecord, has_kem, unlock

if TYPE_CHECKING:
    from follower.groups.group_mail import GroupMail
    from follower.receive.inbound import Dedup, Receiver
    from follower.receive.outcome import Emit, Report
    from follower.receive.receipts import ReceiptBatch
    from follower.send.outbox import Outbox
    from follower.send.upload import Tick
    from keys.contacts import Contact
    from keys.invites import InviteCode
    from spool_writer.record import SpoolRecord

__all__ = ["Account", "Sent"]

QUEUED = "queued"
UPLOADING = "uploading"  # a file transfer the relay did not take in full yet: the follower goes on


class Sent(NamedTuple):
    """What became of one message sent: `state` is "stored" (the relay has it), "queued" (it
    goes later, with the same id; `warning` says so) or, after a wait, the state reached."""

    id: str
    to: str
    state: str
    task: str | None = None
    hops: list[str] | None = None
    warning: str | None = None

    @property
    def queued(self) -> bool:
        return self.state == QUEUED

    def report(self) -> dict[str, Any]:
        """{"id", "to", "state"}, plus "task" and "hops" when given (what `talk send --json` prints)."""
        extra = {k: v for k, v in (("hops", self.hops), ("task", self.task)) if v}
        return {"id": self.id, "to": self.to, "state": self.state, **extra}


def _warnings(*lines: str | None) -> str | None:
    """The warnings of one send on lines of their own; None when there are none."""
    return "\n".join(w for w in lines if w) or None


def _no_passphrase() -> bytes | None:
    return None


class Account:
    """One identity on one relay. `passphrase` is called at most once, on the first use of the
    private keys; `unlocked` skips it for an identity already in memory. `sessions` makes the
    relay client open an owner session (the follower's long-lived client).

    A plain class, as `Sent` is a NamedTuple: a dataclass costs about a millisecond to build at
    import, and this module is on the path of every `talk send`."""

    def __init__(self, record: IdentityRecord, relay: str,
                 passphrase: Callable[[], bytes | None] = _no_passphrase, *,
                 unlocked: Identity | None = None, sessions: bool = False) -> None:
        self.record = record
        self.relay = relay
        self.passphrase = passphrase
        self.unlocked = unlocked
        self.sessions = sessions

    def __repr__(self) -> str:
        return f"Account({self.record.name!r}, {self.relay!r})"

    @property
    def folder(self) -> Path:
        return self.record.folder

    @property
    def name(self) -> str:
        return self.record.name

    def identity(self) -> Identity:
        """The private keys, unlocked on first use.

        Raises:
            UserError: the passphrase is missing or wrong, or the identity file is damaged.
        """
        if self.unlocked is None:
            upgrading = not has_kem(self.record)
            self.unlocked = self._held() or unlock(self.record, self.passphrase())
            if upgrading:
                self._publish_kem()
        return self.unlocked

    def _publish_kem(self) -> None:
        """Publish the keys again once the first unlock since the upgrade gave this identity its
        KEM key (`keys.keystore`), so contacts can pin it; best effort: `talk publish` and each
        follower start publish them too."""
        import contextlib

        from durable.errors import TalkError

        assert self.unlocked is not None
        with contextlib.suppress(TalkError, OSError):
            self.client.publish(self.unlocked.bundle())

    def _held(self) -> Identity | None:
        """A protected identity's keys opened by the key its follower holds after `talk unlock`
        (follower.daemon.keyagent), sparing the KDF; None if no follower holds one that opens them."""
        if not self.record.protected:
            return None
        from follower.daemon.keyagent import ask
        from keys.encoding import b64d
        from keys.keystore import unlock_with_key

        reply = ask(self.folder, {"op": "key"})
        try:
            return unlock_with_key(self.record, b64d(reply["key"], 32)) if reply and "key" in reply else None
        except (UserError, ValueError):
            return None  # a key that does not open the file (it changed since): unlock as always

    @cached_property
    def client(self) -> RelayClient:
        return RelayClient(self.relay, sessions=self.sessions)

    @cached_property
    def contacts(self) -> ContactBook:
        return ContactBook(self.folder)

    @cached_property
    def invites(self) -> InviteBook:
        return InviteBook(self.folder)

    @cached_property
    def groups(self) -> GroupMail:
        from follower.groups.group_mail import GroupMail

        return GroupMail(self.folder, self.name, self.record.fingerprint, self.contacts, self.client,
                         self.outbox, self.identity)

    @cached_property
    def outbox(self) -> Outbox:
        from follower.send.outbox import Outbox

        return Outbox(self.folder)

    def receiver(self, seen: Dedup | None = None, *, handed_state: str = "delivered",
              batch_acks: bool = False, linger_s: float = 0.0,
              page: Callable[[], AbstractContextManager[None]] | None = None,
              receipts: ReceiptBatch | None = None) -> Receiver:
        """The one builder of this identity's `Receiver` (its options are described there). With no
        `seen`, the identity's channel store (`follower.receive.channeldb`) remembers what was taken.

        Raises:
            UserError: the private keys cannot be unlocked.
        """
        import contextlib

        from follower.receive.inbound import Receiver
        from follower.receive.receipts import ReceiptBatch

        if seen is None:
            from follower.receive.channeldb import ChannelDB

            seen = ChannelDB(self.folder)
        return Receiver(self.identity(), self.client, self.contacts, self.invites, seen,
                     batch_acks=batch_acks, linger_s=linger_s, handed_state=handed_state,
                     page=page or contextlib.nullcontext,
                     receipts=ReceiptBatch() if receipts is None else receipts)

    def publish(self) -> None:
        """Publish this identity's keys on the relay (again, after a relay move or reset).

        Raises:
            RelayError: the relay failed or refused.
            (and what `identity` raises)
        """
        self.client.publish(self.identity().bundle())

    def add(self, fingerprint: str, name: str) -> Contact:
        """Pin the peer whose keys the relay serves for `fingerprint`, as `name`.

        Raises:
            UserError: the name is malformed, or the fingerprint is a contact already.
            NotFound: the relay has no keys for it.
            PinMismatch: the relay's keys do not hash to the fingerprint.
        """
        from follower.send.outbound import add_contact

        return add_contact(self.contacts, self.client, fingerprint, name)

    def verify(self, name: str) -> Contact:
        """Check contact `name`'s keys on the relay against the pin and record the check; the
        contact as it now stands (its `verified_at` set). It widens no policy.

        Raises:
            NotFound: no such contact.
            PinMismatch: the relay serves other keys; nothing is recorded.
        """
        from follower.send.outbound import verify_contact

        return verify_contact(self.contacts, self.client, self.contacts.get(name))

    def invite(self, days: float) -> InviteCode:
        """A new single-use invite code, open on the relay for `days`.

        Raises:
            RelayError: the relay failed or refused.
            (and what `identity` raises)
        """
        from follower.send.outbound import create_invite

        return create_invite(self.identity(), self.client, self.invites, days)

    def revoke_invite(self, code: str) -> dict[str, Any]:
        """Close open invite `code` on the relay and mark it revoked; its stored record.

        Raises:
            InviteError: no such invite here, or it is no longer open.
        """
        import time

        from durable.errors import InviteError
        from keys.invites import InviteState, parse_code, state_of

        record = self.invites.find(code)
        state = state_of(record, time.time())
        if state is not InviteState.OPEN:
            raise InviteError(f"this invite is already {state.value}; nothing to revoke")
        tag = parse_code(code).tag
        self.client.revoke_invite(self.identity(), tag)
        self.invites.set_state(tag, InviteState.REVOKED)
        return record

    def join(self, code: str, name: str | None = None) -> Contact:
        """Use invite `code`: pin the inviter (checked against the code) and deposit our sealed
        contact request; the inviter, as pinned (named `name` if given).

        Raises:
            InviteError: the code is malformed, ours, expired, used or revoked.
            UserError: the name is taken by another contact.
            (and what `add` raises for the inviter's keys)
        """
        from follower.send.outbound import join

        return join(self.identity(), self.client, self.contacts, code, name)

    def send(self, name: str, text: str, *, task: bool = False, mode: str = "one-shot",
             hops: list[str] | None = None) -> Sent:
        """Send `text` to contact `name`, as an opencode-mesh task with a new id if `task`.

        What earlier sends left queued goes first. A relay that cannot take the message now is
        no failure: it stays queued under its id (state "queued", with a warning to show), and
        sending it again would deliver it twice.

        Raises:
            NotFound: no such contact, or the relay has no mailbox for it.
            UserError: the text is empty, the minute's send rate to this contact is spent, or
                the task is malformed.
            RelayError: the relay refused the message for good (the outbox marks it dropped).
            (and what `identity` raises)
        """
        import time

        from follower.policy import PolicyBook
        from follower.send.sendrate import spend

        if not text.strip():
            raise UserError("the message is empty; give the text to send (or - to read it from stdin)")
        contact = self.contacts.get(name)
        body, task_id = text, None
        if task:
            task_id, body = self._task_envelope(text, mode)
        spend(self.folder, contact, PolicyBook(self.folder).rule(contact).send_per_min, time.time())
        contact, pinned = self._post_quantum(contact)
        msg_id, state, warning = self._deposit(contact, body, task=task_id, hops=hops or None)
        warning = _warnings(pinned, warning)
        if task_id is not None:
            from follower.tasks.ledger import TaskLedger

            TaskLedger(self.folder).record("task", "out", contact.fingerprint, contact.name,
                                           {"task": task_id, "mode": mode, "text": text}, msg_id)
        return Sent(msg_id, contact.name, state, task_id, hops or None, warning)

    def send_files(self, name: str, text: str, paths: list[str], tick: Tick | None = None) -> Sent:
        """Send `text` with the files at `paths` (and a text too long for one message as its
        body): the files are sealed and uploaded first, then one message announces them
        (`follower.send.upload`). The same call again, after a kill or a relay failure, resumes
        the same transfer and never sends its message twice; `tick` hears of the bytes sent.

        A relay that cannot take the files now is no failure: the transfer stays recorded, the
        follower finishes it (state "uploading", with a warning to show).

        Raises:
            NotFound: no such contact.
            UserError: nothing to send, a path that is not a readable regular file, too many files.
            RelayError: the relay refused a file for good (over its limit, say).
        """
        import time

        from durable.errors import RelayError
        from follower.policy import PolicyBook
        from follower.send import outbound, upload
        from follower.send.sendrate import spend
        from follower.send.transfer import TransferBook

        if not paths and not text.strip():
            raise UserError("the message is empty; give the text or a --file to send")
        contact, pinned = self._post_quantum(self.contacts.get(name))
        book = TransferBook(self.folder)
        per_min = PolicyBook(self.folder).rule(contact).send_per_min
        transfer, new = upload.begin(book, contact, paths, text,
                                     admit=lambda: spend(self.folder, contact, per_min, time.time()))
        outbound.send_queued(self.client, self.outbox)
        try:
            upload.complete(self.identity(), self.client, contact, self.outbox, book, transfer.id, tick,
                            resumed=not new)
        except outbound.Queued as queued:
            return Sent(queued.msg_id, contact.name, QUEUED, warning=_warnings(pinned, (
                f"the relay did not take {queued.msg_id} now ({queued.cause}); its files are up, and it is "
                "queued and goes with the follower, or with your next `talk send`: do not send it again")))
        except RelayError as exc:
            if not outbound.retryable(exc):
                raise
            return Sent(transfer.id, contact.name, UPLOADING, warning=_warnings(pinned, (
                f"the relay did not take the files now ({exc}); the follower finishes the upload and "
                "then sends the message, or run this command again: do not send it another way")))
        return Sent(transfer.id, contact.name, "stored", warning=pinned)

    def _post_quantum(self, contact: Contact) -> tuple[Contact, str | None]:
        """`contact` with its post-quantum key pinned, if the relay now serves one it signed, and
        the note saying so (`follower.send.kem_keys`); one lookup per contact per hour at most."""
        if contact.kem_key is not None:
            return contact, None
        from follower.send.kem_keys import refresh_kem

        return refresh_kem(self.contacts, self.client, contact)

    def _task_envelope(self, text: str, mode: str) -> tuple[str, str]:
        from durable.errors import UserError
        from follower.tasks import mesh

        task_id = mesh.new_task_id(self.name)
        try:
            return task_id, mesh.task_envelope(self.name, task_id, text, mode)
        except ValueError as exc:
            raise UserError(f"cannot send this task: {exc}") from exc

    def _deposit(self, contact: Contact, body: str, **extra: Any) -> tuple[str, str, str | None]:
        """(id, state, warning) of one message sealed, kept in the outbox and deposited."""
        from follower.send import outbound

        extra = {k: v for k, v in extra.items() if v is not None}
        outbound.send_queued(self.client, self.outbox)  # what an earlier send left queued goes first
        try:
            inner = outbound.send(self.identity(), self.client, contact, body, outbox=self.outbox, **extra)
        except outbound.Queued as queued:
            # Not an error: the message is kept and will arrive once, with this id. A caller that
            # sent it again would make two; so the answer is success, with a warning.
            msg_id = queued.msg_id
            return msg_id, QUEUED, (
                f"the relay did not take {msg_id} now ({queued.cause}); it is queued and goes with "
                "the follower, or with your next `talk send` or `talk receive`: do not send it again")
        return inner.id, "stored", None

    def _send_queued(self) -> None:
        """What an earlier send left queued goes now. One stat says whether anything is: only
        then are the outbox and the sending machinery loaded (`talk receive` runs on every turn)."""
        from follower.send.queue_mark import anything_queued

        if anything_queued(self.folder):
            from follower.send.outbound import send_queued

            send_queued(self.client, self.outbox)

    def wait(self, msg_id: str, wanted: str, timeout: float) -> str:
        """Block until the receipts for sent message `msg_id` say it got as far as `wanted`
        ("stored", "spooled" or "delivered"); returns the state reached. With no follower
        running, this fetches the receipts itself (see `follower.send.waiting`).

        Raises:
            UserError: `wanted` is no state to wait for, or the recipient refused the message.
            TimedOut: `timeout` passed first, or the relay failed while waiting; the message was
                sent all the same, and the error says so with its id.
        """
        from durable.errors import RelayError, TimedOut
        from follower.daemon.liveness import running_pid
        from follower.send.waiting import check_wanted, wait_for

        check_wanted(wanted)
        # With a follower running, it takes the receipts; else this fetches them itself.
        take = None if running_pid(self.folder) else self.receiver().receive_receipts
        try:
            return wait_for(self.outbox, self.client, take, self.identity, msg_id, wanted, timeout)
        except (TimedOut, RelayError) as exc:
            # Sent all the same: a failure here must not read as "not sent" to a caller that retries.
            raise TimedOut(f"{exc} (message {msg_id} was sent: do not send it again)") from exc

    def receive(self, emit: Emit, peers: list[str] | None = None) -> Report:
        """Take the mail waiting on the relay (from `peers`, else every contact), keep each new
        message in the receive log (`follower.history.receivelog`, what `talk show` reads beside the
        spool), hand it to `emit`, then ack it. What earlier sends left queued goes first. The
        report's notes and refusals are for the person who ran it; refusals were quarantined.

        Raises:
            UserError: a follower is running for this identity (it takes the mail into the spool).
            NotFound: a peer is no contact.
            RelayError: the relay failed; what was not acked stays there for next time.
        """
        from durable.errors import UserError
        from follower.daemon.liveness import running_pid
        from follower.history.receivelog import ReceiveLog
        from follower.receive.channeldb import ChannelDB, SpoolDedup, last_spooled, receiving

        pid = running_pid(self.folder)
        if pid:
            raise UserError(
                f"a follower (pid {pid}) is taking {self.name}'s mail into the spool; read it with "
                "`talk log`, or stop the follower with `talk stop` to use `talk receive`")
        chosen = [self.contacts.get(p) for p in peers] if peers else None
        self.identity()
        self._send_queued()
        log = ReceiveLog(self.folder)

        def kept(record: dict[str, Any]) -> None:
            log.add(record)  # before it is printed, so before its ack (see follower.history.receivelog)
            emit(record)

        # One reader at a time: a second `talk receive` waits, then finds taken what the first took.
        with receiving(self.folder):
            store = ChannelDB(self.folder)
            try:
                seen = SpoolDedup(store, last_spooled(self.folder).__contains__)
                report = self.receiver(seen, handed_state="delivered").receive(kept, chosen)
            finally:
                store.close()
            self._take_files(kept, report)
        if self.client.republished_at is not None:
            report.notes.append("the relay had lost your keys (its store may have restarted empty); "
                                "they were published again, so your contacts can write to you")
        return report

    def _take_files(self, kept: Callable[[dict[str, Any]], None], report: Report) -> None:
        """The files of the messages parked (by this take or an earlier one cut short), taken
        here and now: no follower takes them (`follower.receive.parking`)."""
        import os

        parked = self.folder / "files" / "parked"  # `follower.files.parked.Parked.folder`, not imported:
        if not parked.is_dir() or not os.listdir(parked):  # `talk receive` runs on every agent turn
            return
        from durable.errors import LocalFileRefused, RelayError
        from follower.receive.parking import file_taker

        taker = file_taker(self.identity(), self.folder, self.client, self.contacts, kept, "delivered")
        try:
            taker.take_all()
        except (RelayError, OSError, LocalFileRefused) as exc:  # the mail taken stands; files resume
            report.notes.append(f"a message's files are still on their way ({exc}); run `talk receive` "
                                "again to go on where they stopped")
        report.delivered += taker.handed
        report.refused += taker.refused

    def take_receipts(self) -> str | None:
        """Fetch the receipts waiting for this identity (only those: chat mail stays for whoever
        reads it), unless a follower does that already. Never raises for the relay: returns a
        note when the outbox may be behind, else None."""
        import contextlib

        from durable.errors import TalkError
        from follower.daemon.state import FollowStatus, running_pid
        from follower.receive.channeldb import ChannelDB

        if running_pid(self.folder):
            st = FollowStatus.load(self.folder)
            if st is None or st.last_contact is None:
                return "receipts: the follower takes them; it has not reached the relay yet"
            return None  # the follower takes them as they come
        try:
            with contextlib.closing(ChannelDB(self.folder)) as store:
                self.receiver(store).receive_receipts()
        except TalkError as exc:
            return f"receipts not fetched ({exc}); states as last heard (--offline skips the fetch)"
        return None

    def reply(self, task: str, status: str, summary: str, artifacts: list[str],
              to: str | None = None) -> Sent:
        """Answer received task `task` with a result block (status done, partial or failed),
        and note it in the task ledger.

        Raises:
            NotFound: no such task was received (from `to`, when given).
            UserError: several contacts sent that task id (name one with `to`), or the block
                is malformed.
            RelayError: the relay refused the answer for good.
        """
        from durable.errors import NotFound, UserError
        from follower.tasks import mesh
        from follower.tasks.ledger import TaskLedger

        ledger = TaskLedger(self.folder)
        asked = [r for r in ledger.find(task) if r["asked_by"] == "peer"]
        if to is not None:
            asked = [r for r in asked if to in (r["name"], r["peer"])]
        if not asked:
            raise NotFound(f"no received task {task!r}; `talk tasks` lists them")
        if len(asked) > 1:
            raise UserError(f"task {task!r} came from several contacts; pick one with --to NAME")
        contact = self.contacts.get(asked[0]["peer"])
        try:
            block = mesh.result_block(task, status, summary, artifacts)
        except ValueError as exc:
            raise UserError(f"cannot reply: {exc}") from exc
        msg_id, state, warning = self._deposit(contact, block, task=task)
        fields = {"task": task, "status": status, "summary": summary, "artifacts": artifacts}
        ledger.record("result", "out", contact.fingerprint, contact.name, fields, msg_id)
        return Sent(msg_id, contact.name, state, task, warning=warning)

    def forward(self, record: SpoolRecord, name: str) -> Sent:
        """Pass a received message (its spool line) on to contact `name`, its sender added to
        its hop list; sent as `send` sends.

        Raises:
            UserError: the message has passed the most hops peers accept.
            (and what `send` raises)
        """
        from durable.errors import UserError
        from follower.receive.admission import MAX_HOPS

        hops = [*record.get("hops", []), str(record["from"])]
        if len(hops) > MAX_HOPS:
            raise UserError(f"not forwarded: this message has already passed {len(hops) - 1} hops; "
                            f"peers refuse more than {MAX_HOPS}")
        text = f"(forwarded from {record.get('name', record['from'])}) {record.get('text', '')}"
        return self.send(name, text, hops=hops)

    def held_ids(self, which: str) -> list[str]:
        """The held messages `which` names: "all", an id, or an unambiguous prefix of one.

        Raises:
            UserError: `which` is no id, or a prefix of several.
            NotFound: no held message has that id.
        """
        from follower.held import HeldBox

        return HeldBox(self.folder).pick(which)

    def release(self, ids: list[str]) -> int:
        """Move held messages into the spool, where the agents' doors take them; each sender
        gets a "spooled" receipt. Returns how many senders could not be told now (they learn
        it on their resend).

        Raises:
            UserError: the private keys cannot be unlocked (after the messages moved).
        """
        return self._settle_held(ids, "spooled")

    def drop(self, ids: list[str]) -> int:
        """Delete held messages unread by any agent; each sender gets a "dropped" receipt.
        Returns how many senders could not be told now (they learn it on their resend).

        Raises:
            UserError: the private keys cannot be unlocked (after the messages were deleted).
        """
        return self._settle_held(ids, "dropped")

    def _settle_held(self, ids: list[str], state: str) -> int:
        import time

        from follower.held import HeldBox
        from follower.policy import PolicyBook
        from follower.receive.receipts import ReceiptBatch
        from spool_writer.spool import Spool, utc_stamp

        box = HeldBox(self.folder)
        entries = box.entries(ids)
        ids = [i for i in ids if i in entries]  # released or dropped meanwhile: nothing to do
        batch = ReceiptBatch()
        spool = Spool(self.folder / "spool") if state == "spooled" else None
        trust = PolicyBook(self.folder)
        released = utc_stamp(time.time())
        for msg_id in ids:
            record = entries[msg_id]["record"]
            if spool is not None:
                # It arrived when it was held, and keeps that time; the release is noted beside it.
                # First: a crash before the removal below leaves a copy, not a loss.
                arrived = utc_stamp(float(entries[msg_id]["held_at"]))
                spool.deliver(cast("SpoolRecord", {**record, "released": released}), received=arrived)
            contact = self.contacts.by_fingerprint(str(record.get("from")))
            if contact is not None:
                batch.add(contact, msg_id, state, "" if state == "spooled" else "dropped by the recipient")
                trust.note(contact, f"held {state}", message=msg_id)
        box.remove(ids)
        return batch.flush(self.identity(), self.client)

    def purge_unknown(self) -> tuple[int, int]:
        """Delete the mail the relay holds for us under channels we never read (what a stranger
        who knows the fingerprint can leave there). The tags we do read go along, so the relay
        registers them first and a new contact's first message stays. Returns (deleted, tags kept).

        Raises:
            RelayError: the relay failed or refused.
        """
        import contextlib

        from follower.receive.channeldb import ChannelDB

        with contextlib.closing(ChannelDB(self.folder)) as store:
            receiver = self.receiver(store)
            channels, invites = receiver.routes(None)
            tags = [*channels, *invites, *receiver.receipt_routes()]
        return self.client.purge_unknown(self.identity(), tags), len(tags)
