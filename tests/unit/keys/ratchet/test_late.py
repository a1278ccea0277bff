"""keys.ratchet.late: mail held back across many reply exchanges opens once, from an archive of
the chains vodozemac dropped, and a copy of the files opens none of it again."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import vodozemac

import keys.ratchet.late as late
from durable.errors import TamperedMessage
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount
from keys.ratchet.late import KEEP_S, LATE_MOST, LateChain
from keys.ratchet.sessions import SESSIONS_DIR, Opened, RatchetSessions, Unopened, stored_state
from tests.unit.keys.olm_sides import Side, opens, receive

SESSION_FIELDS = {"session_keys", "sending_ratchet", "receiving_chains", "config"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Timed(Side):
    """A side whose stores read the time from `clock`."""

    def __init__(self, folder: Path, identity: Identity, clock: Clock) -> None:
        super().__init__(folder, identity)
        self.clock = clock

    def store(self) -> RatchetSessions:
        return RatchetSessions(RatchetAccount(self.folder, self.identity), clock=self.clock)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def pair(tmp_path: Path, alice_id: Identity, bob_id: Identity, clock: Clock) -> tuple[Timed, Timed]:
    """Alice and bob with a session both ways: alice's mail is no longer pre-key messages."""
    alice, bob = Timed(tmp_path / "alice", alice_id, clock), Timed(tmp_path / "bob", bob_id, clock)
    alice.store().start(bob.fp, bob.claim())
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "hello", alice.store().encrypt(bob.fp, b"hello"), handed)
    assert receive(alice, bob, "hello-back", bob.store().encrypt(alice.fp, b"hello back"), handed)
    return alice, bob


def turns(alice: Side, bob: Side, count: int, tag: str = "t") -> None:
    """`count` reply exchanges: bob answers, alice answers; each starts a chain on the other side."""
    handed: dict[str, bytes] = {}
    for n in range(count):
        assert receive(alice, bob, f"{tag}b{n}", bob.store().encrypt(alice.fp, b"from bob"), handed)
        assert receive(bob, alice, f"{tag}a{n}", alice.store().encrypt(bob.fp, b"from alice"), handed)


def session_file(me: Side, peer: Side) -> Path:
    return me.folder / SESSIONS_DIR / f"{peer.fp}.json"


def pair_of_sessions() -> tuple[vodozemac.Session, vodozemac.Session]:
    a, b = vodozemac.Account(), vodozemac.Account()
    b.generate_one_time_keys(1)
    outbound = a.create_outbound_session(b.curve25519_key, next(iter(b.one_time_keys.values())))
    pre_key = outbound.encrypt(b"first").to_pre_key()
    assert pre_key is not None
    inbound, _ = b.create_inbound_session(a.curve25519_key, pre_key)
    return outbound, inbound


def test_the_pickle_format_is_vodozemacs_own_both_ways() -> None:
    """If a vodozemac release changes its pickle, this fails: archived chains would be unreadable."""
    outbound, inbound = pair_of_sessions()
    for _ in range(3):
        outbound.decrypt(inbound.encrypt(b"answer"))
        inbound.decrypt(outbound.encrypt(b"again"))
    key = os.urandom(32)
    pickle = inbound.pickle(key)
    state = late.unseal(pickle, key)
    assert set(state) == SESSION_FIELDS
    assert len(late.chain_keys(state)) == 4  # the first chain and one per answer heard
    assert late.seal(state, key) == pickle  # the same bytes: IV and keys come from the key alone
    again = vodozemac.Session.from_pickle(late.seal(state, key), key)
    assert again.session_id == inbound.session_id
    assert again.decrypt(outbound.encrypt(b"through our own seal")) == b"through our own seal"
    with pytest.raises(ValueError, match="not a session pickle"):
        late.unseal(pickle, os.urandom(32))
    tampered = pickle[:10] + ("A" if pickle[10] != "A" else "B") + pickle[11:]
    with pytest.raises(ValueError):
        late.unseal(tampered, key)


def test_vodozemac_keeps_five_chains_the_oldest_dropped() -> None:
    """The limit the archive exists for; the receiver reads what was dropped whatever it is."""
    outbound, inbound = pair_of_sessions()
    key = os.urandom(32)
    for _ in range(8):
        outbound.decrypt(inbound.encrypt(b"answer"))
        inbound.decrypt(outbound.encrypt(b"again"))
    assert len(late.chain_keys(late.unseal(inbound.pickle(key), key))) == late.CHAINS_MOST == 5


def test_a_lone_chain_derives_nothing_and_a_stranger_message_changes_nothing() -> None:
    outbound, inbound = pair_of_sessions()
    key = os.urandom(32)
    held = outbound.encrypt(b"held")
    chain = late.ratchet_key(held.to_parts())
    assert chain is not None and late.chain_keys(late.unseal(inbound.pickle(key), key)) == (chain,)
    lone_state = late.lone_chain(late.unseal(inbound.pickle(key), key), chain)
    lone = vodozemac.Session.from_pickle(late.seal(lone_state, key), key)
    inbound.decrypt(outbound.encrypt(b"taken"))  # the live session moves on; the lone copy does not
    with pytest.raises(ValueError):
        lone.encrypt(b"x")  # its sending ratchet derives nothing
    outbound.decrypt(inbound.encrypt(b"answer"))
    next_chain = outbound.encrypt(b"in alice's next chain")  # a ratchet key the lone chain never saw
    before = lone.pickle(key)
    with pytest.raises(ValueError):
        lone.decrypt(next_chain)
    assert lone.pickle(key) == before
    assert lone.decrypt(held) == b"held"
    with pytest.raises(KeyError):
        late.lone_chain(late.unseal(inbound.pickle(key), key), bytes(32))


def test_the_ratchet_key_is_read_from_both_kinds_of_message() -> None:
    outbound, inbound = pair_of_sessions()
    key = os.urandom(32)
    pre_key = outbound.encrypt(b"still pre-key")
    assert pre_key.to_pre_key() is not None
    assert late.ratchet_key(pre_key.to_parts()) == late.chain_keys(late.unseal(inbound.pickle(key), key))[0]
    normal = inbound.encrypt(b"answer")
    assert normal.to_pre_key() is None
    assert late.ratchet_key(normal.to_parts()) is not None
    outbound.decrypt(normal)
    assert late.ratchet_key(normal.to_parts()) == late.chain_keys(late.unseal(outbound.pickle(key), key))[0]
    for junk in (b"", b"\x03", b"\x04\n\x20" + bytes(32), b"\x03\n\xff", b"\x03\x0a\x05abc", b"\x03\x10\x80",
                 b"\x03\n\x20short"):
        assert late.ratchet_key((1, junk)) is None
        assert late.ratchet_key((0, junk)) is None


def test_kept_drops_the_old_and_bounds_the_rest_newest_kept() -> None:
    chains = [LateChain(bytes([n]) * 32, f"p{n}", at=float(n)) for n in range(100)]
    assert late.kept(chains, 100.0) == tuple(chains[-LATE_MOST:])
    assert late.kept(chains, 50.0 + KEEP_S) == tuple(chains[51:])
    assert late.kept(chains, 200.0 + KEEP_S) == ()
    assert late.late_from_json(late.late_to_json(chains)) == tuple(chains)
    young = tuple(chains[-LATE_MOST:])
    assert late.kept(young, 100.0) is young  # unchanged: a send's save reuses its text
    assert json.loads(late.late_text(young)) == late.late_to_json(young)
    assert late.late_text(young) is late.late_text(young)
    with pytest.raises(ValueError):
        late.late_from_json([{"key": "00", "pickle": "p", "at": 1.0}])


@pytest.mark.parametrize("count", [10, 30])
def test_mail_held_back_across_many_turns_opens_exactly_once(pair: tuple[Timed, Timed], count: int) -> None:
    alice, bob = pair
    held = alice.store().encrypt(bob.fp, b"held back")
    after = alice.store().encrypt(bob.fp, b"sent after it")  # same chain, delivered in time
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "after", after, handed)
    turns(alice, bob, count)
    assert len(stored_state(session_file(bob, alice))["late"]) >= count - 5
    assert receive(bob, alice, "held", held, handed)
    assert handed["held"] == b"held back"
    assert opens(bob, alice, "held", held) == Opened(True, b"")  # fetched again: a duplicate
    with pytest.raises(Unopened, match="key was used already"):
        opens(bob, alice, "held-under-another-id", held)
    turns(alice, bob, 2, "later")  # and the conversation goes on


def test_a_saved_state_never_opens_a_late_message_already_taken(pair: tuple[Timed, Timed]) -> None:
    """Forward secrecy at rest: every pickle in the file, in either slot, live or archived."""
    alice, bob = pair
    held = alice.store().encrypt(bob.fp, b"held back")
    turns(alice, bob, 10)
    path = session_file(bob, alice)
    archived = {c.key for c in late.late_from_json(stored_state(path)["late"])}
    assert late.ratchet_key(held.to_parts()) in archived  # it would open before it is taken
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "held", held, handed)
    found = re.findall(rb'"([A-Za-z0-9+/]{64,})"', path.read_bytes())
    pickles = [p for p in found if not re.fullmatch(rb"[0-9a-f]+", p)]  # not the hex ratchet keys
    assert len(pickles) > 10
    key = bob.store()._key
    for pickle in pickles:
        session = vodozemac.Session.from_pickle(pickle.decode(), key)
        with pytest.raises(ValueError):
            session.decrypt(held)


def test_an_archived_chain_is_kept_fourteen_days(pair: tuple[Timed, Timed], clock: Clock) -> None:
    alice, bob = pair
    kept, gone = (alice.store().encrypt(bob.fp, t) for t in (b"kept", b"gone"))
    turns(alice, bob, 8)
    clock.now += KEEP_S - 1
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "kept", kept, handed) and handed["kept"] == b"kept"
    clock.now += 2
    turns(alice, bob, 1, "expire")  # any save drops what is too old
    assert all(c.at > clock.now - KEEP_S for c in late.late_from_json(stored_state(session_file(bob, alice))
                                                                      .get("late", [])))
    with pytest.raises(Unopened):
        opens(bob, alice, "gone", gone)


def test_a_stream_in_one_chain_opens_no_pickle_per_message(
    pair: tuple[Timed, Timed], monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = pair
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "first", alice.store().encrypt(bob.fp, b"first"), handed)
    calls: list[str] = []
    real = late.unseal

    def counted(pickle: str, key: bytes) -> dict[str, Any]:
        calls.append(pickle)
        return real(pickle, key)

    monkeypatch.setattr(late, "unseal", counted)
    for n in range(20):  # a page each: the chain keys come from the file, not from a pickle
        assert receive(bob, alice, f"s{n}", alice.store().encrypt(bob.fp, b"stream"), handed)
    assert calls == []
    # Each answer starts a new chain at alice's: while her session has room for it, it drops
    # nothing and nothing is read; once it is full, each turn reads it before and after the step.
    reads = []
    for turn in range(late.CHAINS_MOST + 2):
        calls.clear()
        assert receive(alice, bob, f"answer{turn}", bob.store().encrypt(alice.fp, b"answer"), handed)
        reads.append(len(calls))
        assert receive(bob, alice, f"again{turn}", alice.store().encrypt(bob.fp, b"again"), handed)
    assert reads[0] == 0 and reads == sorted(reads) and set(reads) == {0, 2} and reads[-2:] == [2, 2]
    assert len(handed) == 1 + 20 + 2 * (late.CHAINS_MOST + 2)


def test_sends_after_a_chain_is_archived_encode_the_archive_no_more(
    pair: tuple[Timed, Timed], monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = pair
    turns(alice, bob, late.CHAINS_MOST + 2)
    assert stored_state(session_file(alice, bob))["late"]  # her side archived bob's old chains
    encoded: list[int] = []
    real = late.late_to_json

    def counted(chains: Any) -> list[dict[str, Any]]:
        encoded.append(1)
        return real(chains)

    monkeypatch.setattr(late, "late_to_json", counted)
    sent = [alice.store().encrypt(bob.fp, b"on") for _ in range(5)]
    assert encoded == []
    handed: dict[str, bytes] = {}
    for n, message in enumerate(sent):
        assert receive(bob, alice, f"s{n}", message, handed)
    assert len(handed) == 5


def test_a_peer_without_a_session_is_told_no_session_not_unopened(
    pair: tuple[Timed, Timed], tmp_path: Path, carol_id: Identity
) -> None:
    alice, bob = pair
    carol = Side(tmp_path / "carol", carol_id)
    to_carol = bob.store().encrypt(alice.fp, b"meant for alice")
    with pytest.raises(TamperedMessage) as refused:
        opens(carol, bob, "m1", to_carol)  # carol holds no session with bob
    assert not isinstance(refused.value, Unopened)
    alice.store().forget(bob.fp)  # her sessions with bob are gone, their chains archived
    kind, body = to_carol.to_parts()
    altered = vodozemac.AnyOlmMessage.from_parts(kind, body[:-1] + bytes([body[-1] ^ 1]))
    with pytest.raises(TamperedMessage) as refused:
        opens(alice, bob, "m1", altered)
    assert not isinstance(refused.value, Unopened)
    assert opens(alice, bob, "m1", to_carol).plaintext == b"meant for alice"  # as sent, it opens


def test_a_late_pre_key_message_opens_in_its_archived_first_chain(
    pair: tuple[Timed, Timed], tmp_path: Path, carol_id: Identity
) -> None:
    """Carol's second pre-key message waits while the conversation moves on: its chain, her
    session's first, was dropped from bob's session, and opens from the archive."""
    alice, bob = pair
    carol = Timed(tmp_path / "carol", carol_id, alice.clock)
    carol.store().start(bob.fp, bob.claim())
    first, held = (carol.store().encrypt(bob.fp, t) for t in (b"first", b"held back"))
    assert held.to_pre_key() is not None
    handed: dict[str, bytes] = {}
    assert receive(bob, carol, "c1", first, handed)
    turns(carol, bob, 7)
    assert receive(bob, carol, "c2", held, handed) and handed["c2"] == b"held back"
    with pytest.raises(Unopened):
        opens(bob, carol, "c2-again", held)


def test_only_the_newest_chains_are_kept(pair: tuple[Timed, Timed], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(late, "LATE_MOST", 4)
    alice, bob = pair
    oldest = alice.store().encrypt(bob.fp, b"too old")
    turns(alice, bob, 5)
    recent = alice.store().encrypt(bob.fp, b"recent enough")
    turns(alice, bob, 7, "more")  # its chain is dropped too, and is among the newest four
    assert len(stored_state(session_file(bob, alice))["late"]) == 4
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "recent", recent, handed) and handed["recent"] == b"recent enough"
    with pytest.raises(Unopened):
        opens(bob, alice, "oldest", oldest)


@pytest.mark.parametrize("kill_after", [1, 2, 3, 4])
def test_a_kill_while_a_chain_is_dropped_loses_neither_the_chain_nor_the_message(
    pair: tuple[Timed, Timed], kill_after: int
) -> None:
    """The page whose message drops the chain a held message rides is killed after step
    `kill_after`, then fetched again to the end: the chain is in the file, live or archived,
    at every moment, and the held message opens once."""
    alice, bob = pair
    held = alice.store().encrypt(bob.fp, b"held back")
    turns(alice, bob, 4)  # bob's session now holds five chains, the held message's the oldest
    path = session_file(bob, alice)
    assert "late" not in stored_state(path)
    handed: dict[str, bytes] = {}
    assert receive(alice, bob, "b", bob.store().encrypt(alice.fp, b"turn"), handed)
    dropping = alice.store().encrypt(bob.fp, b"starts a sixth chain")
    assert not receive(bob, alice, "a", dropping, handed, stop_after=kill_after)
    # Before the commit nothing was saved (the chain is live); after it, it is archived.
    assert ("late" in stored_state(path)) == (kill_after == 4)
    assert receive(bob, alice, "a", dropping, handed)  # fetched again: opened, or a duplicate
    assert len(stored_state(path)["late"]) == 1
    assert receive(bob, alice, "held", held, handed)
    assert handed == {"b": b"turn", "a": b"starts a sixth chain", "held": b"held back"}


def test_after_a_loss_late_mail_still_opens_and_a_used_key_is_no_session(pair: tuple[Timed, Timed]) -> None:
    """Bob drops his sessions with alice (she said she lost hers): her mail sent before, still on
    its way, opens from the archive, whether its chain was dropped before or with the session;
    a message whose key is used is "no session", as he holds none with her."""
    alice, bob = pair
    held, taken = (alice.store().encrypt(bob.fp, t) for t in (b"held back", b"taken"))
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "taken", taken, handed)
    turns(alice, bob, 7)
    recent = alice.store().encrypt(bob.fp, b"in a chain still live")
    bob.store().forget(alice.fp)
    assert receive(bob, alice, "held", held, handed) and handed["held"] == b"held back"
    assert receive(bob, alice, "recent", recent, handed) and handed["recent"] == b"in a chain still live"
    with pytest.raises(TamperedMessage) as refused:
        opens(bob, alice, "taken-again", taken)
    assert not isinstance(refused.value, Unopened)


def test_the_chains_of_a_session_dropped_whole_are_archived_alone(pair: tuple[Timed, Timed]) -> None:
    """Alice begins session after session (each time her state was lost, say) and bob keeps the
    newest five: her pre-key message held back in the first opens from its archived chain."""
    alice, bob = pair
    held = None
    handed: dict[str, bytes] = {}
    for n in range(6):
        alice.store().start(bob.fp, bob.claim())
        if held is None:
            held = alice.store().encrypt(bob.fp, b"held back")
        assert receive(bob, alice, f"s{n}", alice.store().encrypt(bob.fp, b"new session"), handed)
    assert held is not None and held.to_pre_key() is not None
    stored = stored_state(session_file(bob, alice))
    assert len(stored["sessions"]) == 5
    assert receive(bob, alice, "held", held, handed) and handed["held"] == b"held back"
    with pytest.raises(TamperedMessage):
        opens(bob, alice, "held-again", held)
