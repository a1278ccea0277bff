"""relay.notify: the in-process hub wakes each open stream of a mailbox, and only those."""

from __future__ import annotations

import asyncio

from relay.notify import PUSH_BLOB_MAX, QUEUE_DEPTH, LocalHub, Notice, notice


def test_a_deposit_wakes_every_stream_of_its_mailbox_and_no_other() -> None:
    async def scenario() -> None:
        hub = LocalHub()
        a1, a2, b = hub.subscribe("a"), hub.subscribe("a"), hub.subscribe("b")
        assert (hub.streams("a"), hub.streams("b"), hub.streams("c")) == (2, 1, 0)
        await hub.publish("a", "tag1")
        assert (a1.take(), a2.take()) == ([Notice("tag1")], [Notice("tag1")])
        assert not b
        await hub.publish("nobody", "tag2")  # no stream open: nothing to wake, nothing kept
        assert sorted(hub.mailboxes()) == ["a", "b"]

    asyncio.run(scenario())


def test_a_slow_stream_holds_at_most_a_full_queue_of_wake_ups() -> None:
    async def scenario() -> None:
        hub = LocalHub()
        queue = hub.subscribe("a")
        for i in range(QUEUE_DEPTH + 10):
            await hub.publish("a", f"t{i}")  # never blocks nor raises on a full queue
        assert len(queue) == QUEUE_DEPTH

    asyncio.run(scenario())


def test_unsubscribing_the_last_stream_forgets_the_mailbox() -> None:
    async def scenario() -> None:
        hub = LocalHub()
        one, two = hub.subscribe("a"), hub.subscribe("a")
        hub.unsubscribe("a", one)
        assert hub.streams("a") == 1 and hub.mailboxes() == ["a"]
        hub.unsubscribe("a", two)
        hub.unsubscribe("a", two)  # twice, or for a mailbox never seen: harmless
        hub.unsubscribe("zzz", one)
        assert hub.streams("a") == 0 and hub.mailboxes() == []
        await hub.publish("a", "late")
        assert not one and not two

    asyncio.run(scenario())


def test_a_small_blob_rides_along_and_a_big_one_is_left_to_the_fetch() -> None:
    assert notice("t", "7", b"x" * PUSH_BLOB_MAX) == Notice("t", "7", b"x" * PUSH_BLOB_MAX)
    assert notice("t", "7", b"x" * (PUSH_BLOB_MAX + 1)) == Notice("t")
    assert notice("t", "", b"sealed") == Notice("t")  # no id: nothing to ack, so no blob

    async def scenario() -> None:
        hub = LocalHub()
        queue = hub.subscribe("a")
        await hub.publish("a", "t", "8", b"sealed")
        assert queue.take() == [Notice("t", "8", b"sealed")]

    asyncio.run(scenario())


def test_a_notice_ends_the_streams_wait_in_one_turn_of_the_loop() -> None:
    """What lets a deposit's answer wait one turn for the push to be written (`Relay.deposit`)."""
    async def scenario() -> None:
        hub = LocalHub()
        queue = hub.subscribe("a")
        woken: list[list[Notice]] = []

        async def stream() -> None:
            await queue.wait()
            woken.append(queue.take())

        task = asyncio.ensure_future(stream())
        await asyncio.sleep(0)  # the stream waits
        await hub.publish("a", "t", "9", b"sealed")
        await asyncio.sleep(0)  # one turn
        assert woken == [[Notice("t", "9", b"sealed")]]
        await task

    asyncio.run(scenario())


def test_a_wake_without_a_notice_ends_the_wait_with_nothing_to_send() -> None:
    async def scenario() -> None:
        queue = LocalHub().subscribe("a")
        waiting = asyncio.ensure_future(queue.wait())
        await asyncio.sleep(0)
        assert not waiting.done()
        queue.wake()  # the client went away, say
        await asyncio.wait_for(waiting, 5)
        assert queue.take() == []
        queue.tell(Notice("t"))
        await asyncio.wait_for(queue.wait(), 5)  # a notice already waiting: no wait at all
        assert queue.take() == [Notice("t")]

    asyncio.run(scenario())


def test_a_notice_frame_is_what_the_follower_reads_as_pushed_mail_or_a_bare_wake_up() -> None:
    from follower.relay.push import pushed_mail

    blob = bytes(range(256)) * 3
    item = pushed_mail(notice("ab" * 16, "42", blob).frame())
    assert item is not None and (item.id, item.tag, item.blob) == ("42", "ab" * 16, blob)
    too_big = notice("ab" * 16, "43", b"x" * (PUSH_BLOB_MAX + 1))  # left to the fetch
    assert pushed_mail(too_big.frame()) is None
    assert pushed_mail(Notice("ab" * 16).frame()) is None
