"""Taking mail: fetch → open → decide → hand on → remember → ack, one message at a time.

A message is acked only after the caller has handed it on and its id is on disk, so a crash
or a dead relay at any point leaves it on the relay; when it comes again the id is known and
it is acked without being handed on twice. Mail that cannot be opened, is sealed by a key no
contact pins, fails the gate (`keys.gate`), or makes its handling fail in any other way is never
handed on: it is acked, kept in the quarantine file with its reason (`follower.receive.quarantine`),
reported, its sender (when known) gets a `refused` receipt, and the rest flows on. Only a fault
of this machine or of the way to the relay (`follower.receive.faults`) stops a message from being acked.

Each message from a contact is then admitted, held or refused by that contact's policy
(`follower.receive.admission`), and its sender gets a receipt saying which. Two kinds of mail
are not for an agent and go their own way: a contact request with one of our invite codes
(`follower.receive.joining`) and a receipt for our own mail, which moves the outbox on and may
send a refused message again (`follower.receive.recovery`). A message with files is parked
until they are in, and its sender's later mail waits behind it (`follower.receive.ordering`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from durable.errors import (
    GroupRefused,
    MalformedMessage,
    ReplayedMessage,
    TamperedMessage,
    UserError,
)
from follower.policy import Policy, PolicyBook, Rule
from follower.receive import admission
from follower.receive import receipts as receipts_mod
from follower.receive.admission import RateWindow, admit, hops_of
from follower.receive.ordering import Route, route, senders_waiting
from follower.receive.outcome import Emit, Outcome, Report
from follower.receive.receipts import ReceiptBatch
from follower.receive.sequence import Judgement, SequenceVerdict, refuse_if_out_of_window, spool_fields
from follower.receive.spool_line import spool_line, task_block
from follower.tasks.ledger import TaskLedger
from keys.envelope import Inner, open_blob, pair_tags
from keys.ratchet.account import RatchetAccount
from keys.ratchet.card import RatchetKeyError, verify_card
from keys.ratchet.envelope import answer_field, answer_of, is_ratchet, olm_part, unwrap
from keys.ratchet.sessions import Busy, Page, RatchetSessions, Unopened
from keys.sodium import PublicKey

# What only some mail needs (groups, contact requests, receipts for our own mail, held or
# refused mail) is imported where it is used: `talk receive` of one chat message, run on every
# agent turn, loads none of it.
if TYPE_CHECKING:
    from follower.receive.joining import Joining
    from follower.receive.recovery import Recovery
    from follower.relay.client import Fetched, RelayClient
    from keys.contacts import Contact, ContactBook
    from keys.groups.sessions import GroupKeys
    from keys.identity import Identity
    from keys.invites import InviteBook, InviteCode

__all__ = ["LINGER_S", "Dedup", "Receiver"]

LINGER_S = 0.002  # the follower's pause before acking a page that was not full
# Relay ids taken lately: a pushed copy of one of them (it came by a fetch first) is dropped
# rather than taken again and answered "duplicate". A few seconds of mail at any rate.
RECENT_IDS = 1024

class Dedup(Protocol):
    """What this identity has taken: ids, and each sender's numbering (`follower.receive.channeldb`)."""

    def __contains__(self, msg_id: object) -> bool: ...

    def add(self, msg_id: str) -> None: ...

    def judge(self, sender: str, inner: Inner, now: float) -> Judgement: ...

    def record(self, sender: str, inner: Inner, now: float) -> Judgement: ...


class Receiver:
    """`handed_state` is the receipt a handed-on message earns: "spooled" when the caller
    writes to the spool (a door later reports "delivered"), "delivered" when it prints the
    message to whoever ran `talk receive`. `page` wraps the handling of each fetched page,
    before it is acked (the follower's makes the page durable there: one sync per page,
    `follower.daemon.daemon.Follower.page`). (A plain class: see `follower`'s docstring.)"""

    def __init__(self, identity: Identity, client: RelayClient, contacts: ContactBook, invites: InviteBook,
                 seen: Dedup, batch_acks: bool = False, linger_s: float = 0.0,
                 handed_state: str = "delivered",
                 page: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
                 rates: RateWindow | None = None, receipts: ReceiptBatch | None = None) -> None:
        self.identity = identity
        self.client = client
        self.contacts = contacts
        self.invites = invites
        self.seen = seen
        self.batch_acks = batch_acks
        self.linger_s = linger_s
        self.handed_state = handed_state
        self.page = page
        self.rates = RateWindow() if rates is None else rates
        self.receipts = ReceiptBatch() if receipts is None else receipts
        self._tags: dict[bytes, tuple[str, str]] = {}
        # The Olm messages of the page being taken, opened and not yet committed (`_take_page`).
        self._opened: Page | None = None
        self._recent: dict[str, None] = {}  # ordered: oldest first
        self.on_park: Callable[[], None] = lambda: None  # a message was parked: wake its files' taker
        self.receipts.answer = self.answer_session

    def __repr__(self) -> str:
        return f"Receiver({self.identity.name!r}, {self.client!r})"

    def tags_to_us(self, contact: Contact) -> tuple[str, str]:
        """(chat tag, receipt tag) of mail from `contact` to us. Each costs a key agreement and
        a follower asks on every drain; a tag follows from the keys alone, so it never goes stale."""
        tags = self._tags.get(contact.box_key)
        if tags is None:
            tags = self._tags[contact.box_key] = pair_tags(
                self.identity.box_secret, PublicKey(contact.box_key), self.identity.fingerprint)
        return tags

    @property
    def folder(self) -> Path:
        return self.contacts.folder

    def routes(self, peers: list[Contact] | None) -> tuple[dict[str, Contact], dict[str, InviteCode]]:
        """The tags to fetch: the chosen contacts' channels to us, plus our live invites."""
        chosen = self.contacts.all() if peers is None else peers
        channels = {self.tags_to_us(c)[0]: c for c in chosen}
        invites = {code.tag: code for code in self.invites.live(time.time())}
        return channels, invites

    def receipt_routes(self) -> dict[str, Contact]:
        """Receipts may come from anyone we wrote to, followed or not."""
        return {self.tags_to_us(c)[1]: c for c in self.contacts.all()}

    def receive(self, emit: Emit, peers: list[Contact] | None = None, limit: int = 100,
                pushed: list[Fetched] | None = None) -> Report:
        """Take all waiting mail. With `batch_acks`, a page is acked by the next fetch (one
        request per page instead of one per message); otherwise each message is acked at once,
        so a one-shot `talk receive` cut off mid-way leaves only the unacked rest behind.

        `pushed`: messages the push stream carried (`follower.relay.push`), taken first, without
        fetching them; those under tags not read here or taken lately are left out. They are
        acked as fetched ones are, so this needs `batch_acks`."""
        report = Report()
        channels, invites = self.routes(peers)
        receipts = self.receipt_routes()
        tags = [*channels, *invites, *receipts]
        if not tags:
            return report
        first = self.fresh_pushed(pushed or [], set(tags)) if self.batch_acks else []
        try:
            self._receive(emit, tags, invites, receipts, limit, report, first)
        finally:
            self.receipts.flush(self.identity, self.client)
        return report

    def receive_receipts(self) -> Report:
        """Only the receipts for our own mail (what `talk send --wait` reads with no follower)."""
        report = Report()
        receipts = self.receipt_routes()
        if receipts:
            self._receive(lambda record: None, list(receipts), {}, receipts, 100, report)
        return report

    def fresh_pushed(self, pushed: list[Fetched], tags: set[str]) -> list[Fetched]:
        """The pushed messages to take: under the tags read here, once each, none taken lately."""
        fresh: dict[str, Fetched] = {}
        for item in pushed:
            if item.tag in tags and item.id not in self._recent:
                fresh.setdefault(item.id, item)
        return list(fresh.values())

    def _remember(self, ids: list[str]) -> None:
        for msg_id in ids:
            self._recent[msg_id] = None
        while len(self._recent) > RECENT_IDS:
            del self._recent[next(iter(self._recent))]

    def _receive(self, emit: Emit, tags: list[str], invites: dict[str, InviteCode],
                 receipts: dict[str, Contact], limit: int, report: Report,
                 first: list[Fetched] | None = None) -> None:
        handled: set[str] = set()
        taken: list[str] = []
        more = True
        while more or taken:
            if first:  # pushed: the fetch that acks them asks for whatever else waits
                mail, first = first, None
            else:
                mail, more = self.client.fetch(self.identity, tags, limit, ack=taken)
            taken = []
            rest = [m for m in mail if m.id not in handled]
            fresh = bool(rest)
            while rest:
                done = self._take_page(rest, invites, receipts, emit, report)
                rest = rest[len(done):]
                handled.update(done)
                self._remember(done)
                if self.batch_acks:
                    taken += done
                else:
                    self.client.ack(self.identity, done)
            if not fresh and not taken:
                break  # the relay keeps serving what we acked: stop rather than spin
            if taken and not more and self.linger_s:
                # What came is handed on already; pausing before the fetch that acks it lets the
                # next page gather under load (one request for many messages, not one each).
                time.sleep(self.linger_s)

    def _take_page(self, items: list[Fetched], invites: dict[str, InviteCode],
                   receipts: dict[str, Contact], emit: Emit, report: Report) -> list[str]:
        """Take `items` (only the first, without `batch_acks`); the ids taken, durable and
        committed, ready to ack.

        The page is made durable (`page`), then the session store commits the ratchet steps of
        every Olm message in it (`keys.ratchet.sessions`, whose order this is), and only then is
        anything acked. The page ends early, before an item, when that item needs a session lock
        the page may not wait for (`Busy`): the next page takes it first. `Busy` comes before an
        item opens anything (a message's opening is its first step that touches the sessions),
        so an item it stops is taken whole by the next page."""
        done: list[str] = []
        with self.sessions.page() as opened:
            self._opened = opened
            try:
                with self.page():
                    for item in items:
                        try:
                            outcome = self.take(item, invites, receipts, emit, report)
                        except Busy:
                            if not done:  # a page that holds nothing waits instead: never here
                                raise
                            break
                        done.append(item.id)
                        report.delivered += outcome is Outcome.DELIVERED
                        report.duplicates += outcome is Outcome.DUPLICATE
                        report.held += outcome is Outcome.HELD
                        report.receipts += outcome is Outcome.RECEIPT
                        report.parked += outcome is Outcome.PARKED
                        if not self.batch_acks:
                            break
                opened.commit()
            finally:
                self._opened = None
        return done

    def take(self, item: Fetched, invites: dict[str, InviteCode], receipts: dict[str, Contact],
             emit: Emit, report: Report) -> Outcome:
        """How `item` ended. Anything its handling raises that `blames_message` puts on it ends it
        in quarantine (acked); a machine fault propagates, and nothing is acked."""
        try:
            if item.tag in invites:
                return self.take_request(item, invites[item.tag], emit, report)
            if item.tag in receipts:
                return self.take_receipt(item, receipts[item.tag])
            return self.take_message(item, emit, report)
        except Exception as exc:
            from follower.receive.faults import blames_message, refusal_reason

            if not blames_message(exc):
                raise
            reason = refusal_reason(exc)
            self.quarantine(item, exc, reason, answer=item.tag not in receipts)
            report.refused.append(reason)
            return Outcome.REFUSED

    def quarantine(self, item: Fetched, exc: Exception, reason: str, answer: bool) -> None:
        """Keep a refused blob with its reason; tell its sender, when the sender is known."""
        from follower.receive.quarantine import Quarantine
        from keys.contacts import Contact

        sender = exc.sender if isinstance(exc, MalformedMessage) else None
        msg_id = exc.msg_id if isinstance(exc, MalformedMessage) else None
        known = sender if isinstance(sender, Contact) else None
        Quarantine(self.folder).keep(item.id, item.tag, item.blob, reason,
                                     known.fingerprint if known else None, msg_id)
        if answer and known is not None and msg_id is not None:
            highest = exc.highest if isinstance(exc, ReplayedMessage) else None
            self.receipts.add(known, msg_id, "refused", reason, highest)

    def open(self, item: Fetched) -> tuple[Contact, Inner]:
        return open_blob(item.blob, self.identity.box_secret, self.identity.fingerprint,
                         self.contacts.with_box_key, lambda c: c.fingerprint, self.identity.kem_seed)

    def open_ratchet(self, contact: Contact, outer: Inner) -> Inner | None:
        """The message an Olm envelope from `contact` carries, opened in the page's sessions and
        held there until the page is durable (`_take_page` commits it); None: a duplicate.

        Raises:
            Busy: the sessions with `contact` (or the account) are held elsewhere: not now.
            TamperedMessage: a card the pinned key did not sign, a pre-key message without one,
                or a message no session opens (the refusal names it, so its sender is told:
                `UNOPENED` if sessions with the sender are held, else `NO_SESSION`).
            gate.Invalid: the message it carried fails the gate.
        """
        part = olm_part(outer)
        curve = b""
        card = None
        if part.card is not None:
            try:
                checked = verify_card(part.card, contact.fingerprint, contact.sign_key)
                curve, card = checked.curve25519, checked.to_json()  # kept without any field added
            except RatchetKeyError as exc:
                raise TamperedMessage(f"a ratchet message from {contact.name} carries a card its "
                                      f"pinned key did not sign ({exc}) and was refused") from exc
        elif part.message.to_pre_key() is not None:
            raise TamperedMessage(f"a ratchet pre-key message from {contact.name} carries no card")
        assert self._opened is not None, "a ratchet message is opened within a page (`_take_page`)"
        try:
            opening = self._opened.open(contact.fingerprint, curve, outer.id, part.message, card)
        except (Unopened, TamperedMessage) as exc:
            # The refusal's reason starts with its cause: the receiver holds no session with us
            # that opens the message, or holds one but the message opened in none, nor in a chain
            # kept for late mail (`keys.ratchet.late`); what the sender then does is
            # `follower.send.resending`'s.
            from follower.send.resending import Cause

            cause = Cause.UNOPENED if isinstance(exc, Unopened) else Cause.NO_SESSION
            raise MalformedMessage(f"{cause.value}: {exc}", contact, outer.id) from exc
        if opening.duplicate:
            return None
        if part.message.to_pre_key() is not None:
            self.receipts.answer_session(contact)  # its sender stays on pre-key messages until then
        return unwrap(outer, opening.plaintext)

    def answer_session(self, contact: Contact) -> dict[str, Any] | None:
        """A receipt's answer to `contact` in the session used last with it: the one its pre-key
        messages started, unless this side started its own since (then none: `answer_field`).
        Made once the page that opened them is committed (receipts go after it), and saved, synced,
        before it leaves (the first send after a receive turns the ratchet: `keys.ratchet.sessions`).
        None when there is none to give; never an error, which would cost the receipt."""
        from follower.send.ratchet_send import ratchet_enabled

        if not ratchet_enabled():
            return None  # nothing is sealed in a session then, not even an answer
        try:
            return answer_field(self.sessions.encrypt(contact.fingerprint, b""))
        except (UserError, OSError):  # no session any more (NotFound), or a damaged or full disk
            return None

    def _not_while_holding(self, what: str) -> None:
        """Session locks are taken per open file: one this process's page holds, taken again
        here (a send, `forget`), would wait for the page, and so forever. End the page first.

        Raises:
            Busy: the page holds session locks.
        """
        if self._opened is not None and self._opened.holding:
            raise Busy(f"{what} waits for the next page")

    @cached_property
    def policies(self) -> PolicyBook:
        return PolicyBook(self.folder)  # one book: it rereads its file only when that changed

    @cached_property
    def sessions(self) -> RatchetSessions:
        return RatchetSessions(RatchetAccount(self.folder, self.identity))

    @cached_property
    def group_keys(self) -> GroupKeys:
        from keys.groups.sessions import GroupKeys

        return GroupKeys(RatchetAccount(self.folder, self.identity))

    @cached_property
    def joining(self) -> Joining:
        from follower.receive.joining import Joining

        return Joining(self.identity, self.client, self.contacts, self.invites)

    @cached_property
    def recovery(self) -> Recovery:
        from follower.receive.recovery import Recovery

        return Recovery(self.identity, self.client, self.folder, self.sessions, self.group_keys,
                        self._not_while_holding)

    def take_receipt(self, item: Fetched, expected: Contact) -> Outcome:
        """A receipt for our own mail, from the peer it was sent to: `follower.receive.recovery`
        moves the outbox on and sends again what a refusal brings back."""
        contact, inner = self.open(item)
        if contact.fingerprint != expected.fingerprint or inner.kind != receipts_mod.KIND:
            raise TamperedMessage("a message on a receipt channel is not a receipt from that peer")
        self.recovery.take(contact, inner)
        answer = answer_of(inner)
        if answer is not None:
            # After the receipt acts: what it sends again must not find the page holding the
            # session's lock. Not waited for when other locks are held: it is a hint, and the
            # peer answers again as it opens the next pre-key message, which this side still sends.
            assert self._opened is not None, "a receipt is taken within a page (`_take_page`)"
            with contextlib.suppress(Busy):
                self._opened.confirm(contact.fingerprint, inner.id, answer)
        return Outcome.RECEIPT

    def take_message(self, item: Fetched, emit: Emit, report: Report) -> Outcome:
        contact, inner = self.open(item)
        if inner.kind == receipts_mod.KIND:  # never on a chat channel; never answered
            raise TamperedMessage(f"a receipt from {contact.name} came on a chat channel and was dropped")
        # Receipts answer what people and agents write, and group changes (kept in the outbox until
        # answered); automatic notes (a contact accepted) need none.
        answer = inner.kind in ("chat", "group")
        try:
            return self.take_opened(contact, inner, answer, emit, report)
        except Exception as exc:
            from follower.receive.faults import blames_message, refusal_reason

            named = isinstance(exc, MalformedMessage) and exc.msg_id is not None
            if named or not answer or not blames_message(exc):
                raise
            # From here on the sender and the id are known: whatever went wrong, the sender is told.
            raise MalformedMessage(f"a message from {contact.name} was refused: {refusal_reason(exc)}",
                                   contact, inner.id) from exc

    def take_opened(self, contact: Contact, inner: Inner, answer: bool, emit: Emit,
                    report: Report) -> Outcome:
        """Take a message opened and from `contact`: judge, hand on or hold, remember, answer."""
        now = time.time()
        ratchet = is_ratchet(inner)
        if ratchet:
            opened = self.open_ratchet(contact, inner)
            if opened is None:  # the session store knows its id: no ratchet step, no second hand-over
                if self.seen.judge(contact.fingerprint, inner, now).verdict is not SequenceVerdict.DUPLICATE:
                    self.seen.record(contact.fingerprint, inner, now)  # what a kill left unrecorded
                if answer:
                    self.receipts.add(contact, inner.id, "duplicate", "already received")
                return Outcome.DUPLICATE
            inner = opened
        order = self.seen.judge(contact.fingerprint, inner, now)
        if order.verdict is SequenceVerdict.DUPLICATE:
            if answer:
                self.receipts.add(contact, inner.id, "duplicate", "already received")
            return Outcome.DUPLICATE
        try:
            refuse_if_out_of_window(order, contact.name)
        except MalformedMessage as exc:
            exc.sender, exc.msg_id = contact, inner.id  # so its sender hears of the refusal
            if ratchet and isinstance(exc, ReplayedMessage) and self._opened is not None:
                # Its sender numbers past what we saw and sends it again under this id: that copy
                # must open (`follower.send.resending`); the quarantine keeps the record of this one.
                self._opened.let_go(contact.fingerprint, inner.id)
            raise
        rule = self.policies.rule(contact)
        group: dict[str, Any] = {}
        if "group" in inner.extra:
            from follower.groups import group_inbound

            try:
                if inner.kind == "group":
                    return self.take_control(contact, inner, rule, report, now)
                inner, group = group_inbound.open_group_message(self.folder, contact, inner,
                                                                self.group_keys)
            except GroupRefused as exc:
                self.seen.record(contact.fingerprint, inner, now)  # it came: not missing
                exc.sender, exc.msg_id = contact, inner.id
                raise
        hops = hops_of(inner.extra.get("hops"))
        if hops is None:
            raise TamperedMessage(f"a message from {contact.name} carries a malformed hop list")
        verdict = admit(rule, hops, self.rates.over(contact.fingerprint, rule.receive_per_min, now))
        if verdict.action is Policy.REFUSE:
            self.seen.record(contact.fingerprint, inner, now)  # it came: not missing, not judged twice
            self.receipts.add(contact, inner.id, "refused", verdict.reason)
            report.notes.append(f"refused a message from {contact.name}: {verdict.reason}")
            if "files" in inner.extra or "body" in inner.extra:
                self.drop_files(inner)
            return Outcome.DECLINED
        if group:
            verdict = self.loop_check(group, contact, verdict, report)
        block = task_block(inner)
        # The ledger hears of a task, result or question before it is held or handed on: a crash
        # in between shows the message again, and the task then reads as a retry (one retry too
        # many at worst, never a task the ledger missed).
        retry = TaskLedger(self.folder).received(contact.fingerprint, contact.name, block, inner.id)
        record = {**spool_line(contact, inner, rule, hops, block, retry), **group, **spool_fields(order)}
        files = not group and ("files" in inner.extra or "body" in inner.extra)  # `parking.announces_files`
        waiting = contact.fingerprint in senders_waiting(self.folder)
        way = route(files, verdict.action is Policy.HOLD, waiting)
        if way in (Route.PARK, Route.BEHIND):  # behind: parked without files, after its sender's parked mail
            return self.park(contact, inner, record, verdict, answer, now)
        if way is Route.HOLD:
            return self.hold(contact, inner, record, verdict.reason, report, now)
        self.rates.count(contact.fingerprint, now)
        emit(record)
        self.seen.record(contact.fingerprint, inner, now)
        if answer:
            self.receipts.add(contact, inner.id, self.handed_state)
        return Outcome.DELIVERED

    def park(self, contact: Contact, inner: Inner, record: dict[str, Any], verdict: admission.Admission,
             answer: bool, now: float) -> Outcome:
        """Keep a message that announces files until they are in (`follower.receive.parking`),
        or one that waits behind its sender's parked mail (`follower.receive.ordering`); held or
        handed on then, its receipt sent then. Taken here: acked like any other."""
        from follower.receive.parking import park

        hold = verdict.reason if verdict.action is Policy.HOLD else None
        park(self.folder, contact.fingerprint, inner, record, hold, answer)
        if hold is None:
            self.rates.count(contact.fingerprint, now)
        self.seen.record(contact.fingerprint, inner, now)
        self.on_park()
        return Outcome.PARKED

    def drop_files(self, inner: Inner) -> None:
        """The chunks of a refused message's files, acked away at once rather than left to fill
        the mailbox's file quota until they expire; best effort (the relay expires them anyway)."""
        from durable.errors import RelayError
        from follower.receive.parking import file_ids

        with contextlib.suppress(RelayError):
            self.client.ack_files(self.identity, file_ids(inner))

    def hold(self, contact: Contact, inner: Inner, record: dict[str, Any], reason: str, report: Report,
             now: float) -> Outcome:
        """Keep the message aside; past its sender's cap of held mail, refuse it instead, with
        a receipt that says why (`follower.held`), so held mail cannot grow without bound."""
        from follower.held import HeldBox, HeldFull

        try:
            HeldBox(self.folder).hold(record, reason)
        except HeldFull as exc:
            self.seen.record(contact.fingerprint, inner, now)  # it came: not missing, not judged twice
            self.receipts.add(contact, inner.id, "refused", str(exc))
            report.notes.append(f"refused a message from {contact.name}: {exc}")
            return Outcome.DECLINED
        self.seen.record(contact.fingerprint, inner, now)
        self.receipts.add(contact, inner.id, "held", reason)
        report.notes.append(f"held a message from {contact.name}: {reason}")
        return Outcome.HELD

    def loop_check(self, group: dict[str, Any], contact: Contact, verdict: admission.Admission,
                   report: Report) -> admission.Admission:
        """The loop guard's word on `contact`'s group message about to be handed on: held while
        that member is held in the group here (the others' mail flows on); the note that makes
        the hold tells a person (`follower.groups.loop_guard`)."""
        from follower.groups import loop_guard

        guard = loop_guard.LoopGuard(self.folder)
        by = loop_guard.claimed_author(group["by"])
        decision = guard.note(group["group_id"], contact.fingerprint, by, loop_guard.Direction.RECEIVED)
        if decision is loop_guard.Decision.TRIPPED:
            count = guard.state(group["group_id"], contact.fingerprint).count
            report.notes.append(loop_guard.notice(group["group"], contact.name, count))
        if decision is loop_guard.Decision.HELD and verdict.action is not Policy.HOLD:
            return admission.Admission(Policy.HOLD, loop_guard.held_reason(group["group"], contact.name))
        return verdict

    def take_control(self, contact: Contact, inner: Inner, rule: Rule, report: Report, now: float) -> Outcome:
        """A group control message: it changes the book, and is never shown as chat.

        Raises:
            GroupRefused: the group's rule, or the contact's policy, refuses it.
        """
        if rule.policy is Policy.REFUSE:
            raise GroupRefused(f"a group change from {contact.name}, whose mail this side refuses")
        from follower.groups import group_inbound

        report.notes.append(group_inbound.take_control(self.folder, self.identity.fingerprint, contact, inner,
                                         self.group_keys))
        self.seen.record(contact.fingerprint, inner, now)
        self.receipts.add(contact, inner.id, self.handed_state)
        return Outcome.CONTROL

    def take_request(self, item: Fetched, code: InviteCode, emit: Emit, report: Report) -> Outcome:
        """A joiner's contact request, taken by `follower.receive.joining` (it answers in a new
        session, so never while this page holds session locks)."""
        self._not_while_holding("a contact request, answered in a new session")
        return self.joining.take(item, code, self.seen, emit, report)
