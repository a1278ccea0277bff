"""alarms.hook_fit: the longest run of messages a host shows whole, and what the rest earns."""

from __future__ import annotations

from alarms.framing import frame
from alarms.hook_fit import fit_within
from durable.receipt_states import Receipt
from spool_writer.record import SpoolRecord
from tests.unit.samples import hexid, spool_message


def message(n: int, text: str) -> SpoolRecord:
    return {**spool_message(hexid(n)), "text": text}


def test_takes_the_longest_prefix_that_fits() -> None:
    records = [message(1, "a" * 100), message(2, "b" * 100), message(3, "c" * 5000)]
    limit = len(frame(records[:2]))
    assert fit_within(limit)(records) == (2, Receipt.DELIVERED)
    assert fit_within(len(frame(records)))(records) == (3, Receipt.DELIVERED)


def test_a_first_message_too_long_waits_or_goes_for_the_overflow_receipt() -> None:
    records = [message(1, "x" * 5000), message(2, "y")]
    assert fit_within(1000)(records) == (0, None)
    assert fit_within(1000, Receipt.WRITTEN)(records) == (1, Receipt.WRITTEN)


def test_the_channel_note_counts_against_the_limit() -> None:
    records = [message(1, "a" * 100)]
    limit = len(frame(records))
    assert fit_within(limit)(records) == (1, Receipt.DELIVERED)
    assert fit_within(limit, channel="a developer message")(records) == (0, None)
