"""The store contract, run against every backend: SQLite and a real Redis server.

Both stores must give the same answers, since any relay replica may serve any request.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import sqlite3
from pathlib import Path
from typing import Any, TypeVar

import pytest

from relay.notify import PUSH_BLOB_MAX
from relay.redis_store import RedisStore
from relay.sqlite_store import SqliteStore
from relay.store import Deposited, DepositOutcome, RedeemOutcome, Store
from tests.redis_support import keys_under, redis_prefix
from tests.unit.relay.conftest import Run

T = TypeVar("T")
NOW = 1_800_000_000.25
BIG = 1_000_000


def hexid() -> str:
    return secrets.token_hex(16)


def put(run: Run[Any], store: Store, fp: str, tag: str, blob: bytes, now: float = NOW) -> str:
    outcome, mail_id, _ = run(store.deposit(fp, tag, blob, now, BIG, BIG))
    assert outcome is DepositOutcome.STORED and mail_id
    return str(mail_id)


def test_key_directory(store: Store, run: Run[Any]) -> None:
    fp = hexid()
    assert run(store.get_bundle(fp)) is None
    run(store.put_bundle(fp, '{"v": 1}'))
    run(store.put_bundle(fp, '{"v": 2}'))  # republishing replaces
    assert run(store.get_bundle(fp)) == '{"v": 2}'
    assert run(store.get_bundle(hexid())) is None


def test_fetch_is_oldest_first_and_filtered_by_tag(store: Store, run: Run[Any]) -> None:
    fp, a, b, c = hexid(), hexid(), hexid(), hexid()
    ids = [put(run, store, fp, tag, f"m{i}".encode()) for i, tag in enumerate([a, b, a, c, b])]
    assert len(set(ids)) == 5
    got = run(store.fetch(fp, [a, b], 100, NOW - 60))
    assert [m.id for m in got] == [ids[0], ids[1], ids[2], ids[4]]
    assert [m.tag for m in got] == [a, b, a, b]
    assert [m.blob for m in got] == [b"m0", b"m1", b"m2", b"m4"]
    assert all(m.created == NOW for m in got)
    assert [m.id for m in run(store.fetch(fp, [c, c], 100, NOW - 60))] == [ids[3]]
    assert [m.id for m in run(store.fetch(fp, [b, a], 2, NOW - 60))] == ids[:2]  # limit
    assert run(store.fetch(fp, [hexid()], 100, NOW - 60)) == []
    assert run(store.fetch(hexid(), [a, b, c], 100, NOW - 60)) == []  # another mailbox


def test_ids_increase_across_mailboxes(store: Store, run: Run[Any]) -> None:
    tag = hexid()
    ids = [int(put(run, store, hexid(), tag, b"x")) for _ in range(5)]
    assert ids == sorted(ids) and len(set(ids)) == 5


def test_binary_blobs_round_trip(store: Store, run: Run[Any]) -> None:
    fp, tag, blob = hexid(), hexid(), bytes(range(256)) * 4 + b" \x00 "
    put(run, store, fp, tag, blob)
    assert [m.blob for m in run(store.fetch(fp, [tag], 10, NOW - 1))] == [blob]


def test_since_hides_expired_mail_and_purge_drops_it(store: Store, run: Run[Any]) -> None:
    fp, tag = hexid(), hexid()
    old = put(run, store, fp, tag, b"old", now=NOW - 100)
    new = put(run, store, fp, tag, b"new", now=NOW)
    assert [m.id for m in run(store.fetch(fp, [tag], 1, NOW - 50))] == [new]  # limit after since
    assert [m.id for m in run(store.fetch(fp, [tag], 10, NOW - 100))] == [new]  # created > since
    assert [m.id for m in run(store.fetch(fp, [tag], 10, NOW - 101))] == [old, new]
    assert run(store.purge(NOW, 100)) == 1  # created <= now - ttl goes
    assert [m.id for m in run(store.fetch(fp, [tag], 10, 0))] == [new]
    assert run(store.purge(NOW, 100)) == 0


def test_purge_sweeps_more_than_one_batch(store: Store, run: Run[Any]) -> None:
    fp, tag = hexid(), hexid()
    for i in range(1203):
        put(run, store, fp, tag, b"x", now=NOW - 1000 + i * 0.001)
    keep = put(run, store, fp, tag, b"keep")
    assert run(store.purge(NOW, 10)) == 1203
    assert [m.id for m in run(store.fetch(fp, [tag], 10, 0))] == [keep]


def test_caps_count_and_bytes(store: Store, run: Run[Any]) -> None:
    fp, tag, other = hexid(), hexid(), hexid()
    run(store.register_tags(fp, [tag], 10))
    run(store.register_tags(other, [tag], 10))
    for _ in range(2):
        assert run(store.deposit(fp, tag, b"12345", NOW, 2, 100))[0] is DepositOutcome.STORED
    assert run(store.deposit(fp, tag, b"1", NOW, 2, 100)) == (DepositOutcome.MAILBOX_FULL, "", False)
    assert run(store.deposit(other, tag, b"1234", NOW, 10, 10))[0] is DepositOutcome.STORED
    assert run(store.deposit(other, tag, b"123456", NOW, 10, 10))[0] is DepositOutcome.STORED
    assert run(store.deposit(other, tag, b"1", NOW, 10, 10)) == (DepositOutcome.MAILBOX_FULL, "", False)
    ids = [m.id for m in run(store.fetch(other, [tag], 10, 0))]
    assert run(store.ack(other, ids[:1])) == 1  # acking frees room
    assert run(store.deposit(other, tag, b"1234", NOW, 10, 10))[0] is DepositOutcome.STORED
    assert len(run(store.fetch(fp, [tag], 10, 0))) == 2


@pytest.mark.parametrize("registered", [True, False])
def test_concurrent_deposits_never_pass_the_cap(store: Store, run: Run[Any], registered: bool) -> None:
    fp, tag = hexid(), hexid()
    if registered:
        run(store.register_tags(fp, [tag], 10))

    async def race() -> list[Deposited]:
        return list(await asyncio.gather(*(store.deposit(fp, tag, b"x", NOW, 7, BIG) for _ in range(30))))

    outcomes = [d.outcome for d in run(race())]
    assert outcomes.count(DepositOutcome.STORED) == 7
    assert len(run(store.fetch(fp, [tag], 100, 0))) == 7


STORED, FULL, UNKNOWN_FULL = (DepositOutcome.STORED, DepositOutcome.MAILBOX_FULL,
                               DepositOutcome.UNKNOWN_FULL)


def quota(run: Run[Any], store: Store, fp: str, tag: str, known: int = 3, unknown: int = 2) -> DepositOutcome:
    """Deposit under small caps: `known` for registered tags, `unknown` for the rest."""
    outcome, _, _ = run(store.deposit(fp, tag, b"blob", NOW, known, BIG, unknown, BIG))
    return DepositOutcome(outcome)


def test_unregistered_tags_cannot_crowd_out_registered_ones(store: Store, run: Run[Any]) -> None:
    fp, mine = hexid(), hexid()
    run(store.register_tags(fp, [mine], 10))
    assert [quota(run, store, fp, hexid()) for _ in range(4)] == [STORED, STORED, UNKNOWN_FULL, UNKNOWN_FULL]
    assert [quota(run, store, fp, mine) for _ in range(4)] == [STORED, STORED, STORED, FULL]
    assert quota(run, store, hexid(), hexid()) is STORED  # another mailbox has its own quotas


def test_registering_a_tag_moves_its_waiting_mail_to_the_owners_quota(store: Store, run: Run[Any]) -> None:
    fp, early = hexid(), hexid()
    assert [quota(run, store, fp, early) for _ in range(3)] == [STORED, STORED, UNKNOWN_FULL]
    assert run(store.is_registered(fp, early)) is False
    run(store.register_tags(fp, [early, early], 10))
    assert run(store.is_registered(fp, early)) is True
    assert run(store.is_registered(hexid(), early)) is False  # registered for this mailbox only
    assert quota(run, store, fp, hexid()) is STORED  # the unknown quota has room again
    assert [quota(run, store, fp, early) for _ in range(2)] == [STORED, FULL]  # 2 moved + 1 = 3
    waiting = run(store.fetch(fp, [early], 10, 0))
    assert len(waiting) == 3
    assert run(store.ack(fp, [m.id for m in waiting])) == 3
    assert [quota(run, store, fp, early) for _ in range(4)] == [STORED, STORED, STORED, FULL]


TAG_FULL = DepositOutcome.TAG_FULL


def shared(run: Run[Any], store: Store, fp: str, tag: str, blob: bytes = b"blob", per_tag: int = 2,
           per_tag_bytes: int = BIG) -> DepositOutcome:
    """Deposit into a mailbox of 5 where one registered tag may hold `per_tag`."""
    outcome, _, _ = run(store.deposit(fp, tag, blob, NOW, 5, BIG, 2, BIG, per_tag, per_tag_bytes))
    return DepositOutcome(outcome)


def test_one_registered_tag_holds_at_most_its_share(store: Store, run: Run[Any]) -> None:
    fp, loud, quiet, other = hexid(), hexid(), hexid(), hexid()
    run(store.register_tags(fp, [loud, quiet, other], 10))
    assert [shared(run, store, fp, loud) for _ in range(4)] == [STORED, STORED, TAG_FULL, TAG_FULL]
    assert [shared(run, store, fp, quiet) for _ in range(3)] == [STORED, STORED, TAG_FULL]
    assert shared(run, store, fp, other) is STORED
    assert shared(run, store, fp, hexid()) is STORED  # unregistered mail has its own quota, unshared
    assert shared(run, store, hexid(), loud) is STORED  # the same tag in another mailbox
    waiting = run(store.fetch(fp, [loud], 10, 0))
    assert run(store.ack(fp, [waiting[0].id])) == 1
    assert [shared(run, store, fp, loud) for _ in range(2)] == [STORED, TAG_FULL]  # an ack makes room
    assert [shared(run, store, fp, other) for _ in range(2)] == [FULL, FULL]  # 5 in the mailbox: full


def test_a_tags_share_counts_bytes_too(store: Store, run: Run[Any]) -> None:
    fp, tag = hexid(), hexid()
    run(store.register_tags(fp, [tag], 10))
    assert shared(run, store, fp, tag, b"x" * 60, per_tag=9, per_tag_bytes=100) is STORED
    assert shared(run, store, fp, tag, b"x" * 60, per_tag=9, per_tag_bytes=100) is TAG_FULL
    assert shared(run, store, fp, tag, b"x" * 40, per_tag=9, per_tag_bytes=100) is STORED


def test_a_tags_share_frees_as_its_mail_expires_or_is_purged(store: Store, run: Run[Any]) -> None:
    fp, tag, early = hexid(), hexid(), hexid()
    run(store.register_tags(fp, [tag], 10))
    assert [shared(run, store, fp, tag) for _ in range(3)] == [STORED, STORED, TAG_FULL]
    assert run(store.purge(NOW + 100, 50)) >= 2
    assert shared(run, store, fp, tag) is STORED
    # Unregistered mail counts toward its tag's share once the owner registers the tag.
    assert [shared(run, store, fp, early) for _ in range(2)] == [STORED, STORED]
    run(store.register_tags(fp, [early], 10))
    assert shared(run, store, fp, early) is TAG_FULL
    assert run(store.purge_unknown(fp)) == 0


def test_a_mailbox_registers_at_most_its_share_of_tags(store: Store, run: Run[Any]) -> None:
    fp, tags = hexid(), [hexid() for _ in range(3)]
    run(store.register_tags(fp, tags, 2))
    assert [quota(run, store, fp, tags[2], unknown=1) for _ in range(2)] == [STORED, UNKNOWN_FULL]
    assert quota(run, store, fp, tags[0], unknown=1) is STORED


def test_purge_unknown_deletes_only_mail_under_unregistered_tags(store: Store, run: Run[Any]) -> None:
    fp, mine, invite = hexid(), hexid(), hexid()
    run(store.register_tags(fp, [mine], 10))
    kept = put(run, store, fp, mine, b"real")
    junk_tags = [hexid() for _ in range(5)]
    for tag in junk_tags:
        put(run, store, fp, tag, b"junk")
    run(store.create_invite(fp, invite, NOW + 600))
    assert run(store.redeem_invite(invite, b"request", NOW, BIG, BIG)) is RedeemOutcome.STORED
    assert run(store.purge_unknown(hexid())) == 0  # another mailbox: nothing of this one goes
    assert run(store.purge_unknown(fp)) == 5
    assert run(store.fetch(fp, junk_tags, 10, 0)) == []
    assert [m.id for m in run(store.fetch(fp, [mine], 10, 0))] == [kept]
    assert [m.blob for m in run(store.fetch(fp, [invite], 10, 0))] == [b"request"]
    assert run(store.purge_unknown(fp)) == 0
    assert [quota(run, store, fp, hexid()) for _ in range(3)] == [STORED, STORED, UNKNOWN_FULL]


def test_stored_counts_undelivered_blobs_over_all_mailboxes(store: Store, run: Run[Any]) -> None:
    before = run(store.stored())  # a shared Redis may hold other tests' mail under other prefixes
    a, b, tag = hexid(), hexid(), hexid()
    ids = [put(run, store, a, tag, b"1"), put(run, store, a, tag, b"2"), put(run, store, b, tag, b"3")]
    assert run(store.stored()) == before + 3
    run(store.ack(a, ids[:2]))
    assert run(store.stored()) == before + 1


def test_a_burst_of_deposits_acks_and_nonces_answers_each_alone(store: Store, run: Run[Any]) -> None:
    """Calls that arrive together (one group commit on SQLite) each get their own answer.
    Their order is not promised (Redis runs them over several connections)."""
    fp, tag, nonce = hexid(), hexid(), hexid()
    old = put(run, store, fp, tag, b"old")

    async def burst() -> list[Any]:
        return list(await asyncio.gather(
            store.deposit(fp, tag, b"n1", NOW, 100, BIG), store.ack(fp, [old]),
            store.remember_nonce(fp, nonce, NOW, 120), store.remember_nonce(fp, nonce, NOW, 120),
            store.deposit(fp, tag, b"n2", NOW, 100, BIG), store.ack(fp, [old]),
        ))

    first, acked, fresh, replay, second, again = run(burst())
    assert sorted([acked, again]) == [0, 1] and sorted([fresh, replay]) == [False, True]
    assert first[0] is second[0] is DepositOutcome.STORED and first[1] != second[1]
    assert sorted(m.blob for m in run(store.fetch(fp, [tag], 10, 0))) == [b"n1", b"n2"]


def test_sqlite_one_failing_call_in_a_group_fails_alone(tmp_path: Path, run: Run[Any]) -> None:
    store = SqliteStore(tmp_path / "relay.db")
    fp, tag = hexid(), hexid()

    def broken() -> None:
        raise sqlite3.OperationalError("disk I/O error")

    async def burst() -> list[Any]:
        return list(await asyncio.gather(
            store.deposit(fp, tag, b"kept", NOW, 100, BIG), store._grouped(broken),
            store.deposit(fp, tag, b"also kept", NOW, 100, BIG), return_exceptions=True,
        ))

    try:
        first, failed, second = run(burst())
        assert isinstance(failed, sqlite3.OperationalError)
        assert first[0] is second[0] is DepositOutcome.STORED
        assert [m.blob for m in run(store.fetch(fp, [tag], 10, 0))] == [b"kept", b"also kept"]
    finally:
        run(store.close())


def test_sqlite_announces_a_deposit_before_its_row_is_written(tmp_path: Path, run: Run[Any]) -> None:
    """The relay tells the owner's streams while the group commits: the id it announces is the
    row's, and the row is not there yet when it does."""
    store = SqliteStore(tmp_path / "relay.db")
    fp, tag = hexid(), hexid()
    heard: list[tuple[str, bool]] = []

    async def announce(mail_id: str) -> None:
        written = store.db.execute("SELECT 1 FROM mail WHERE id = ?", (int(mail_id),)).fetchone()
        heard.append((mail_id, written is not None))

    try:
        first = put(run, store, fp, tag, b"before")
        outcome, mail_id, woken = run(store.deposit(fp, tag, b"blob", NOW, BIG, BIG, announce=announce))
        assert (outcome, woken) == (DepositOutcome.STORED, True)
        assert heard == [(mail_id, False)] and int(mail_id) > int(first)
        assert [(m.id, m.blob) for m in run(store.fetch(fp, [tag], 10, 0))] == [(first, b"before"),
                                                                                 (mail_id, b"blob")]
    finally:
        run(store.close())


def test_sqlite_a_write_failing_after_its_announcement_fails_the_deposit_and_counts_nothing(
        tmp_path: Path, run: Run[Any]) -> None:
    """The sender hears the error (and sends again: the owner's follower knows the copy it was
    pushed); the quota holds nothing of it, and its id is never given to other mail."""
    store = SqliteStore(tmp_path / "relay.db")
    fp, tag = hexid(), hexid()
    heard: list[str] = []

    async def announce(mail_id: str) -> None:
        heard.append(mail_id)

    store.db.execute("CREATE TRIGGER full BEFORE INSERT ON mail BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    try:
        with pytest.raises(sqlite3.IntegrityError, match="disk full"):
            run(store.deposit(fp, tag, b"lost", NOW, 1, BIG, announce=announce))
        assert len(heard) == 1 and run(store.stored()) == 0
        store.db.execute("DROP TRIGGER full")
        outcome, mail_id, _ = run(store.deposit(fp, tag, b"kept", NOW, 1, BIG))  # a quota of one: free
        assert outcome is DepositOutcome.STORED and int(mail_id) > int(heard[0])
        assert [m.blob for m in run(store.fetch(fp, [tag], 10, 0))] == [b"kept"]
    finally:
        run(store.close())


def test_sqlite_a_deposit_decided_before_a_registration_commits_is_counted_as_registered(
        tmp_path: Path, run: Run[Any]) -> None:
    store = SqliteStore(tmp_path / "relay.db")
    fp, tag = hexid(), hexid()

    async def both() -> Deposited:
        registering = asyncio.ensure_future(store.register_tags(fp, [tag], 10))
        await asyncio.sleep(0)  # its op is queued, not yet committed: the deposit reads it unknown
        deposited = await store.deposit(fp, tag, b"mail", NOW, BIG, BIG)
        await registering
        return deposited

    try:
        assert run(both()).outcome is DepositOutcome.STORED
        assert store.db.execute("SELECT known FROM mail WHERE fp = ?", (fp,)).fetchall() == [(1,)]
        assert store.totals.box(fp) == (1, 4, 0, 0)
        assert run(store.purge_unknown(fp)) == 0
    finally:
        run(store.close())


def test_sqlite_a_second_relay_on_the_same_file_is_refused(tmp_path: Path, run: Run[Any]) -> None:
    """Ids are given out by the process that serves the file: two would give the same one."""
    from durable.errors import UserError

    store = SqliteStore(tmp_path / "relay.db")
    try:
        with pytest.raises(UserError, match="another relay process serves"):
            SqliteStore(tmp_path / "relay.db")
    finally:
        run(store.close())
    run(SqliteStore(tmp_path / "relay.db").close())  # once the first is closed


def test_ack_deletes_only_the_owners_ids(store: Store, run: Run[Any]) -> None:
    alice, mallory, tag = hexid(), hexid(), hexid()
    mine = [put(run, store, alice, tag, b"a1"), put(run, store, alice, tag, b"a2")]
    theirs = put(run, store, mallory, tag, b"m1")
    assert run(store.ack(mallory, mine)) == 0  # another owner's ids delete nothing
    assert [m.id for m in run(store.fetch(alice, [tag], 10, 0))] == mine
    assert run(store.ack(alice, ["abc", "9" * 64, "\u00b2", "0", mine[0], mine[0]])) == 1
    assert [m.id for m in run(store.fetch(alice, [tag], 10, 0))] == mine[1:]
    assert run(store.ack(alice, [mine[1]])) == 1
    assert run(store.ack(alice, [mine[1]])) == 0  # acking twice is harmless
    assert run(store.fetch(alice, [tag], 10, 0)) == []
    assert [m.id for m in run(store.fetch(mallory, [tag], 10, 0))] == [theirs]


def test_next_page_acks_then_reads_in_one_call(store: Store, run: Run[Any]) -> None:
    """A follower's fetch: the previous page's acks (only the owner's own ids count), then the
    next page, which never includes what was just acked."""
    alice, mallory, tag = hexid(), hexid(), hexid()
    mine = [put(run, store, alice, tag, f"a{i}".encode()) for i in range(3)]
    theirs = put(run, store, mallory, tag, b"m1")
    assert run(store.next_page(alice, [], [tag], 2, 0))[0] == 0
    deleted, page = run(store.next_page(alice, [*mine[:2], theirs, "junk"], [tag], 10, 0))
    assert deleted == 2 and [m.id for m in page] == mine[2:]
    assert run(store.next_page(alice, mine, [tag], 10, 0)) == (1, [])
    assert [m.id for m in run(store.fetch(mallory, [tag], 10, 0))] == [theirs]


def test_nonce_replay(store: Store, run: Run[Any]) -> None:
    fp, nonce = hexid(), hexid()
    assert run(store.remember_nonce(fp, nonce, NOW, 120)) is True
    assert run(store.remember_nonce(fp, nonce, NOW + 1, 120)) is False  # a replay
    assert run(store.remember_nonce(hexid(), nonce, NOW, 120)) is True  # per mailbox
    assert run(store.remember_nonce(fp, hexid(), NOW, 120)) is True


def test_invite_outcomes(store: Store, run: Run[Any]) -> None:
    fp, tag = hexid(), hexid()
    assert run(store.redeem_invite(tag, b"req", NOW, BIG, BIG)) is RedeemOutcome.UNKNOWN
    assert run(store.invite_owner(tag)) is None
    run(store.create_invite(fp, tag, NOW + 600))
    run(store.create_invite(hexid(), tag, NOW + 900))  # the first owner keeps a tag
    assert run(store.invite_owner(tag)) == fp
    assert run(store.redeem_invite(tag, b"req", NOW, BIG, BIG)) is RedeemOutcome.STORED
    assert run(store.redeem_invite(tag, b"again", NOW, BIG, BIG)) is RedeemOutcome.USED
    got = run(store.fetch(fp, [tag], 10, 0))
    assert [(m.tag, m.blob) for m in got] == [(tag, b"req")]

    late = hexid()
    run(store.create_invite(fp, late, NOW - 1))
    assert run(store.redeem_invite(late, b"req", NOW, BIG, BIG)) is RedeemOutcome.EXPIRED
    assert run(store.fetch(fp, [late], 10, 0)) == []


def test_invite_into_a_full_mailbox_stays_usable(store: Store, run: Run[Any]) -> None:
    fp, tag, filler = hexid(), hexid(), hexid()
    run(store.register_tags(fp, [filler], 10))
    put(run, store, fp, filler, b"fills it")
    run(store.create_invite(fp, tag, NOW + 600))
    assert run(store.redeem_invite(tag, b"req", NOW, 1, BIG)) is RedeemOutcome.MAILBOX_FULL
    assert run(store.redeem_invite(tag, b"req", NOW, 2, BIG)) is RedeemOutcome.STORED


def test_revoke_only_by_the_owner(store: Store, run: Run[Any]) -> None:
    fp, tag = hexid(), hexid()
    run(store.create_invite(fp, tag, NOW + 600))
    assert run(store.revoke_invite(hexid(), tag)) is False
    assert run(store.invite_owner(tag)) == fp
    assert run(store.revoke_invite(fp, tag)) is True
    assert run(store.revoke_invite(fp, tag)) is False
    assert run(store.redeem_invite(tag, b"req", NOW, BIG, BIG)) is RedeemOutcome.UNKNOWN


def test_ping(store: Store, run: Run[Any]) -> None:
    assert run(store.ping()) is None


# ---------------------------------------------------------------- Redis only


def test_redis_mailbox_leaves_no_keys_once_emptied(redis_url: str, run: Run[Any]) -> None:
    with redis_prefix() as prefix:
        store = RedisStore(redis_url, prefix)
        fp, tag = hexid(), hexid()
        ids = [put(run, store, fp, tag, b"x") for _ in range(3)]
        assert {k.decode() for k in keys_under(prefix)} >= {f"{prefix}blob:{fp}", f"{prefix}size:{fp}"}
        assert run(store.ack(fp, ids)) == 3
        assert {k.decode() for k in keys_under(prefix)} == {f"{prefix}seq"}
        run(store.close())


def test_redis_deposit_announces_mail_under_registered_tags_only(
    redis_url: str, run: Run[Any]
) -> None:
    """The deposit script publishes the wake-up itself (one round trip, not two), exactly
    where the relay would: a registered tag. Other tags' wake-ups stay the relay's to throttle."""
    from redis import Redis

    with redis_prefix() as prefix:
        store = RedisStore(redis_url, prefix)
        fp, mine, junk = hexid(), hexid(), hexid()
        listener = Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call, unused-ignore]
        listener.subscribe(f"{prefix}notify:{fp}")
        assert listener.get_message(timeout=5) is None  # the confirmation, skipped: now listening
        try:
            run(store.register_tags(fp, [mine], 10))
            assert run(store.deposit(fp, junk, b"x", NOW, BIG, BIG)).woken is False
            stored = run(store.deposit(fp, mine, b"y", NOW, BIG, BIG))
            assert stored.woken is True
            assert run(store.deposit(fp, mine, b"z" * (PUSH_BLOB_MAX + 1), NOW, BIG, BIG)).woken is True
            heard = [m["data"] for m in iter(lambda: listener.get_message(timeout=1), None)]
            # The small blob rides along, the big one is left to the fetch; nothing for the junk one.
            assert heard == [f"{fp} {mine} {stored.id} y".encode(), f"{fp} {mine}".encode()]
        finally:
            listener.close()
            run(store.close())


def test_redis_purge_is_exact_to_the_last_digit_and_sweeps_entries_of_earlier_versions(
    redis_url: str, run: Run[Any]
) -> None:
    """The age index holds minus each creation time, written as text so no digit is rounded
    away; an entry an earlier version scored by the creation time itself is still swept."""
    from redis import Redis

    with redis_prefix() as prefix:
        store = RedisStore(redis_url, prefix)
        fp, tag = hexid(), hexid()
        created = 1733390000.1234567  # more digits than a Lua number prints
        exact = put(run, store, fp, tag, b"exact", now=created)
        legacy = put(run, store, fp, tag, b"legacy", now=created - 5)
        with Redis.from_url(redis_url) as client:
            client.zadd(prefix + "age", {f"{fp} {legacy}": created - 5})
        try:
            assert run(store.purge(math.nextafter(created, 0), 0)) == 1  # the legacy entry only
            assert [m.id for m in run(store.fetch(fp, [tag], 10, 0))] == [exact]
            assert run(store.purge(created, 0)) == 1
            assert run(store.stored()) == 0
        finally:
            run(store.close())


def test_redis_nonces_and_spent_slots_expire_natively(redis_url: str, run: Run[Any]) -> None:
    with redis_prefix() as prefix:
        store = RedisStore(redis_url, prefix)
        fp, nonce, tag = hexid(), hexid(), hexid()
        run(store.remember_nonce(fp, nonce, NOW, 120))
        run(store.create_invite(fp, tag, 2_000_000_000.0))
        run(store.create_invite(fp, hexid(), 1e300))  # far future: kept, no overflowing TTL
        ttl_nonce = run(store.redis.ttl(f"{prefix}nonce:{fp}:{nonce}"))
        assert 100 < ttl_nonce <= 120
        assert run(store.redis.ttl(f"{prefix}invite:{tag}")) > 0
        run(store.close())


def test_sqlite_running_totals_follow_acks_purges_and_restarts(tmp_path: Path) -> None:
    """The SQLite caps read running totals: they must match the mail through every change."""
    import sqlite3

    from relay.sqlite_store import SqliteStore
    from relay.store import DepositOutcome

    path = tmp_path / "totals.db"

    def totals(store: SqliteStore) -> dict[str, tuple[int, int]]:
        with sqlite3.connect(path) as db:
            real = db.execute("SELECT fp, COUNT(*), SUM(LENGTH(blob)) FROM mail GROUP BY fp").fetchall()
            real_tags = db.execute("SELECT fp, tag, COUNT(*), SUM(LENGTH(blob)) FROM mail GROUP BY fp, tag")
            for fp, tag, count, size in real_tags.fetchall():  # each tag's share, likewise
                assert store.totals.channel(fp, tag) == (count, size)
        assert all(store.totals.box(fp) == (count, size, 0, 0) for fp, count, size in real)
        return {fp: (n, b) for fp, n, b in real}

    async def scenario() -> None:
        store = SqliteStore(path)
        fp, tag = "ab" * 16, "cd" * 16
        await store.register_tags(fp, [tag], 10)
        ids = []
        for i in range(5):
            outcome, mail_id, _ = await store.deposit(fp, tag, b"x" * (10 + i), 100.0 + i, 5, 10**6)
            assert outcome is DepositOutcome.STORED
            ids.append(mail_id)
        assert (await store.deposit(fp, tag, b"y", 200.0, 5, 10**6))[0] is DepositOutcome.MAILBOX_FULL
        assert totals(store) == {fp: (5, 60)}
        assert await store.ack(fp, ids[:2]) == 2
        assert totals(store) == {fp: (3, 39)}
        assert (await store.deposit(fp, tag, b"z" * 7, 300.0, 5, 10**6))[0] is DepositOutcome.STORED
        assert await store.purge(now=103.5, ttl=0.0) == 2  # the deposits at 102 and 103 expire
        assert totals(store) == {fp: (2, 21)}
        await store.close()
        reopened = SqliteStore(path)  # a restart rebuilds the totals from the mail
        assert totals(reopened) == {fp: (2, 21)}
        await reopened.close()

    asyncio.run(scenario())


def otks(ids: range) -> list[tuple[int, str]]:
    return [(i, f'{{"id": {i}}}') for i in ids]


def test_ratchet_keys_are_claimed_once_each_then_the_fallback(store: Store, run: Run[Any]) -> None:
    fp = hexid()
    assert run(store.claim_ratchet(fp)) is None  # nothing published
    assert run(store.put_ratchet(fp, "card1", "fallback1", otks(range(3)), 100)) == 3
    claims = [run(store.claim_ratchet(fp)) for _ in range(5)]
    assert [(c.card, c.key, c.one_time) for c in claims if c] == [
        ("card1", '{"id": 0}', True), ("card1", '{"id": 1}', True), ("card1", '{"id": 2}', True),
        ("card1", "fallback1", False), ("card1", "fallback1", False),
    ]
    assert run(store.claim_ratchet(hexid())) is None  # another identity's: untouched


def test_reading_the_card_takes_no_key_out(store: Store, run: Run[Any]) -> None:
    fp = hexid()
    assert run(store.ratchet_card(fp)) is None  # nothing published
    run(store.put_ratchet(fp, "card1", "fb", otks(range(1)), 100))
    assert [run(store.ratchet_card(fp)) for _ in range(3)] == ["card1"] * 3
    claimed = run(store.claim_ratchet(fp))
    assert claimed is not None and (claimed.key, claimed.one_time) == ('{"id": 0}', True)  # still there
    run(store.put_ratchet(fp, "card2", None, [], 100))
    assert run(store.ratchet_card(fp)) == "card2" and run(store.ratchet_card(hexid())) is None


def test_a_republished_key_is_never_handed_out_again(store: Store, run: Run[Any]) -> None:
    """A retried publication, or an old one replayed, after its first key was claimed."""
    fp = hexid()
    run(store.put_ratchet(fp, "card", "fb", otks(range(2)), 100))
    first = run(store.claim_ratchet(fp))
    assert first is not None and first.key == '{"id": 0}'
    assert run(store.put_ratchet(fp, "card", None, otks(range(2)), 100)) == 1
    assert run(store.put_ratchet(fp, "card2", None, otks(range(2, 4)), 100)) == 3  # top-up
    keys = [run(store.claim_ratchet(fp)) for _ in range(4)]
    assert [(c.card, c.key) for c in keys if c] == [
        ("card2", '{"id": 1}'), ("card2", '{"id": 2}'), ("card2", '{"id": 3}'), ("card2", "fb"),
    ]  # the fallback given before is kept when none comes with a publication


def test_ratchet_keys_stop_at_the_cap(store: Store, run: Run[Any]) -> None:
    fp = hexid()
    assert run(store.put_ratchet(fp, "card", "fb", otks(range(8)), 10)) == 8
    assert run(store.put_ratchet(fp, "card", "fb", otks(range(8, 11)), 10)) is None
    assert run(store.put_ratchet(fp, "card", "fb", otks(range(8, 10)), 10)) == 10  # none went in before
    assert run(store.put_ratchet(fp, "card", None, [], 10)) == 10  # asking costs nothing


def test_no_fallback_published_means_no_key(store: Store, run: Run[Any]) -> None:
    fp = hexid()
    run(store.put_ratchet(fp, "card", None, [], 100))
    claimed = run(store.claim_ratchet(fp))
    assert claimed is not None and (claimed.card, claimed.key, claimed.one_time) == ("card", None, False)


def test_concurrent_claims_never_share_a_key(
    store: Store, run: Run[Any], loop: asyncio.AbstractEventLoop
) -> None:
    fp = hexid()
    run(store.put_ratchet(fp, "card", "fb", otks(range(40)), 100))

    async def claim_all() -> list[Any]:
        return list(await asyncio.gather(*(store.claim_ratchet(fp) for _ in range(50))))

    claims = loop.run_until_complete(claim_all())
    one_time = [c.key for c in claims if c.one_time]
    assert len(one_time) == 40 and len(set(one_time)) == 40
    assert [c.key for c in claims if not c.one_time] == ["fb"] * 10
