"""Deciding what an arriving message is, from what was already seen of its sender.

Every message a sender puts on its chat channel to us carries `seq`, the next number of a
counter the sender keeps per contact, inside the sealed envelope: the relay can neither read
nor change it. What the receiver keeps per sender is `Channel`: the highest seq seen and the
seqs below it that have not come (`Gap`s, as ranges, so a huge jump costs one row, not one per
number). Everything at or below `highest` that is not in a gap has been seen. From that and
the message's id and date, `judge` decides:

    DUPLICATE  the id was seen before (a resend, a crash before the ack, a relay replaying a blob)
    STALE      dated more than WINDOW_S ago or more than FUTURE_S ahead: older than any id we
               still remember, so it cannot be told from a replay
    REPLAY     a seq already seen, under another id: the relay cannot forge that, so the sender
               reused a number (a restored backup) or the message is not what it claims
    NEW        next in order, or above it; `skipped` says how many it showed to be missing
    LATE       a seq from a gap: it came out of order and fills (part of) the gap

A message without seq (from a client older than this field) is judged by id and date alone.
It is accepted rather than refused because the seq is sealed with the rest of the envelope: a
relay cannot strip it to evade the order checks, so accepting seq-less mail weakens only what
the sender itself chose not to send.

A gap is given up once it is older than WINDOW_S: anything that could still fill it would be
dated before the gap was noticed, so it would be refused as stale anyway.

Nothing here does I/O: the store (`follower.receive.channeldb`) loads a Channel, asks `judge` and saves
`Judgement.after` when the message is accepted.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from durable.errors import ReplayedMessage, StaleMessage
from keys.gate import MAX_FUTURE_S

WINDOW_S = 14 * 86400  # twice the relay's 7-day TTL: mail the relay may still hold is never stale
FUTURE_S = MAX_FUTURE_S  # the gate's bound, which refuses such a message first
KEEP_IDS_S = WINDOW_S + FUTURE_S + 86400  # ids outlive every message the date check lets in
MAX_GAPS = 256  # ranges kept per sender; past this the oldest are given up


class SequenceVerdict(StrEnum):
    NEW = "new"
    LATE = "late"
    DUPLICATE = "duplicate"
    REPLAY = "replay"
    STALE = "stale"

    @property
    def accepted(self) -> bool:
        return self in (SequenceVerdict.NEW, SequenceVerdict.LATE)


# Records are NamedTuples, not dataclasses: they are as immutable, and `talk receive` builds
# their classes at every start, where a frozen dataclass costs ten times as much.
class Gap(NamedTuple):
    """Seqs lo..hi (inclusive) have not come; first noticed at `noticed` (epoch seconds)."""

    lo: int
    hi: int
    noticed: float

    @property
    def size(self) -> int:
        return self.hi - self.lo + 1


class Channel(NamedTuple):
    """What a receiver remembers of one sender's numbering."""

    highest: int | None = 0  # None: a sender that counted before we kept count (see `unknown_start`)
    gaps: tuple[Gap, ...] = ()

    def live(self, now: float) -> Channel:
        """Without the gaps too old to ever fill."""
        kept = tuple(g for g in self.gaps if g.noticed > now - WINDOW_S)
        return self if len(kept) == len(self.gaps) else self._replace(gaps=kept)

    def missing(self, now: float) -> int:
        return sum(g.size for g in self.live(now).gaps)


class Judgement(NamedTuple):
    verdict: SequenceVerdict
    after: Channel  # the sender's channel once this message is accepted
    skipped: int = 0  # messages this one showed to be missing (it jumped past them)
    missing: int = 0  # messages from this sender missing once this one is accepted
    reason: str = ""


def sent_at(ts: str) -> float | None:
    """Epoch seconds of an envelope's `ts`, or None if it is not an ISO 8601 time with a zone."""
    try:
        when = datetime.fromisoformat(ts)
    except (TypeError, ValueError):
        return None
    return when.timestamp() if when.tzinfo is not None else None


def stale_reason(ts: str, now: float) -> str | None:
    """Why a message dated `ts` is refused, or None if its date is within the window."""
    when = sent_at(ts)
    if when is None:
        return "it carries no readable date"
    if when < now - WINDOW_S:
        days = (now - when) / 86400
        return f"it is dated {days:.0f} days ago, older than the {WINDOW_S // 86400}-day window"
    if when > now + FUTURE_S:
        return f"it is dated {(when - now) / 3600:.1f} hours ahead of this machine's clock"
    return None


def judge(channel: Channel, seq: int | None, ts: str, known: bool, now: float) -> Judgement:
    """What a message is, given its sender's `channel`, its `seq`, its `ts` and whether its id
    was `known` already. `after` is `channel` itself unless the message is accepted."""
    if known:
        return Judgement(SequenceVerdict.DUPLICATE, channel, reason="already received")
    stale = stale_reason(ts, now)
    if stale is not None:
        return Judgement(SequenceVerdict.STALE, channel, reason=stale)
    current = channel.live(now)
    if seq is None:
        return Judgement(SequenceVerdict.NEW, current, missing=current.missing(now))
    if current.highest is None:
        current = Channel(seq - 1)
    if seq > (current.highest or 0):
        return _ahead(current, seq, now)
    at = next((i for i, g in enumerate(current.gaps) if g.lo <= seq <= g.hi), None)
    if at is None:
        return Judgement(SequenceVerdict.REPLAY, channel,
                        reason=f"its sequence number {seq} was already used by another message")
    after = current._replace(gaps=_fill(current.gaps, at, seq))
    return Judgement(SequenceVerdict.LATE, after, missing=after.missing(now))


def _ahead(channel: Channel, seq: int, now: float) -> Judgement:
    highest = channel.highest or 0
    skipped = seq - highest - 1
    gaps = channel.gaps + ((Gap(highest + 1, seq - 1, now),) if skipped else ())
    after = Channel(seq, gaps[-MAX_GAPS:])
    return Judgement(SequenceVerdict.NEW, after, skipped=skipped, missing=after.missing(now))


def _fill(gaps: tuple[Gap, ...], at: int, seq: int) -> tuple[Gap, ...]:
    """`gaps` with `seq` taken out of `gaps[at]`, which splits in two when seq is inside it."""
    gap = gaps[at]
    parts = tuple(Gap(lo, hi, gap.noticed) for lo, hi in ((gap.lo, seq - 1), (seq + 1, gap.hi)) if lo <= hi)
    return gaps[:at] + parts + gaps[at + 1:]


def unknown_start() -> Channel:
    """The channel of a contact we had before this store existed: it may have numbered mail
    to us already (read by a version that kept no count), so the first seq heard from it is
    where counting starts, not a sign that everything below it was dropped. A contact added
    later starts at 0, so even a dropped first message shows as missing."""
    return Channel(highest=None)


def refuse_if_out_of_window(decision: Judgement, name: str) -> None:
    """Raise the refusal for a stale or replayed message from the contact `name`.

    Raises:
        StaleMessage: dated outside the window.
        ReplayedMessage: a seq already used by another message.
    """
    if decision.verdict is SequenceVerdict.STALE:
        raise StaleMessage(f"a message from {name} was refused as stale: {decision.reason}; "
                           f"if it matters, ask {name} to send it again")
    if decision.verdict is SequenceVerdict.REPLAY:
        replayed = ReplayedMessage(f"a message from {name} was refused as a replay: {decision.reason}")
        replayed.highest = decision.after.highest
        raise replayed


def spool_fields(decision: Judgement) -> dict[str, int | bool]:
    """What the receiver adds to the spool line: `gap`, how many earlier messages from the same
    sender this one showed to be missing; `late`, it came after later ones (it fills a gap)."""
    fields: dict[str, int | bool] = {}
    if decision.skipped:
        fields["gap"] = decision.skipped
    if decision.verdict is SequenceVerdict.LATE:
        fields["late"] = True
    return fields
