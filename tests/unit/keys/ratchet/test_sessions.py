"""keys.ratchet.sessions: Olm sessions per peer, and receiving with a kill between any two steps.

The steps of a receive are run by the test itself (open, hand over, commit, ack), stopping
where a kill would, then starting again from what is on disk, as a new process would.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import vodozemac

from durable.errors import NotFound, TamperedMessage, UserError
from durable.locks import locked
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount
from keys.ratchet.sessions import (
    SESSIONS_DIR,
    SYNC_EVERY,
    Busy,
    History,
    Opened,
    RatchetSessions,
    Unopened,
    session_history,
    stored_state,
)
from tests.power_loss import Disks
from tests.unit.keys.olm_sides import Received, Side, opens, receive, receive_page
from tests.unit.samples import hexid, secret_forms


@pytest.fixture
def sides(tmp_path: Path, alice_id: Identity, bob_id: Identity) -> tuple[Side, Side]:
    alice, bob = Side(tmp_path / "alice", alice_id), Side(tmp_path / "bob", bob_id)
    alice.store().start(bob.fp, bob.claim())
    return alice, bob


def test_a_first_message_starts_the_session_and_replies_ride_it(sides: tuple[Side, Side]) -> None:
    alice, bob = sides
    first = alice.store().encrypt(bob.fp, b"hello bob")
    assert first.to_pre_key() is not None
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "m1", first, handed)
    reply = bob.store().encrypt(alice.fp, b"hello alice")
    assert reply.to_pre_key() is None  # bob's side of the session is established
    assert receive(alice, bob, "r1", reply, handed)
    later = alice.store().encrypt(bob.fp, b"again")
    assert later.to_pre_key() is None  # alice heard back: no more pre-key messages
    assert receive(bob, alice, "m2", later, handed)
    assert handed == {"m1": b"hello bob", "r1": b"hello alice", "m2": b"again"}


@pytest.mark.parametrize("kill_after", [1, 2, 3, 4])
def test_a_kill_at_any_step_loses_nothing_and_hands_each_message_over_once(
    sides: tuple[Side, Side], kill_after: int
) -> None:
    """Five messages, the first a pre-key message; each receive is killed once after step
    `kill_after`, then run again from disk to the ack."""
    alice, bob = sides
    sent = {hexid(n): f"message {n}".encode() for n in range(5)}
    messages = {msg_id: alice.store().encrypt(bob.fp, text) for msg_id, text in sent.items()}
    handed: dict[str, bytes] = {}
    for msg_id, message in messages.items():  # the relay still holds it after a kill: fetched again
        assert not receive(bob, alice, msg_id, message, handed, stop_after=kill_after)
        assert receive(bob, alice, msg_id, message, handed)
    assert handed == sent


def test_each_form_is_made_only_if_sent_and_one_that_fails_takes_no_ratchet_step(
        sides: tuple[Side, Side]) -> None:
    """A send hands over what makes each form of its message (the short form only for a peer that
    reads it): one that raises while it is made (too long for a session) leaves the file as it
    was, and the next message is the one the peer opens next."""
    alice, bob = sides
    store, made = alice.store(), []
    path = alice.folder / SESSIONS_DIR / f"{bob.fp}.json"
    before = path.read_bytes()

    def too_long() -> bytes:
        made.append("whole")
        raise OverflowError("too long for a session")

    def short() -> bytes:
        made.append("short")
        return b""

    with pytest.raises(OverflowError):
        store.encrypt(bob.fp, too_long, short)
    assert made == ["whole"] and path.read_bytes() == before  # bob has not answered: no short form
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "m1", store.encrypt(bob.fp, lambda: b"the next one"), handed)
    assert handed == {"m1": b"the next one"}


def test_a_message_seen_before_is_recognized_before_it_touches_the_ratchet(
    sides: tuple[Side, Side]
) -> None:
    alice, bob = sides
    message = alice.store().encrypt(bob.fp, b"once")
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "m1", message, handed)
    path = bob.folder / SESSIONS_DIR / f"{alice.fp}.json"
    before = path.read_bytes()
    other = alice.store().encrypt(bob.fp, b"not this one")
    for replay in (message, other):  # not even decrypted: another message under a seen id is one too
        assert opens(bob, alice, "m1", replay) == Opened(True, b"")
    assert path.read_bytes() == before


def test_saving_before_the_hand_over_would_lose_the_message(sides: tuple[Side, Side]) -> None:
    """Why the order is what it is: commit first, lose the hand-over, and the copy still on
    the relay is past decrypting under a new id (and under its own id it is a duplicate)."""
    alice, bob = sides
    message = alice.store().encrypt(bob.fp, b"fragile")
    with bob.store().page() as opening:
        opening.open(alice.fp, alice.curve(), "m1", message)
        opening.commit()  # and then the process dies before the plaintext is written anywhere
    with pytest.raises(Unopened, match="key was used already"):
        opens(bob, alice, "m1-again", message)


def test_an_uncommitted_inbound_session_leaves_the_one_time_key_in_the_account(
    sides: tuple[Side, Side]
) -> None:
    alice, bob = sides
    account_file = bob.folder / "ratchet.json"
    before = account_file.read_bytes()
    message = alice.store().encrypt(bob.fp, b"first")
    assert opens(bob, alice, "m1", message).plaintext == b"first"
    assert account_file.read_bytes() == before
    assert not (bob.folder / SESSIONS_DIR / f"{alice.fp}.json").exists()


def test_sessions_are_sealed_at_rest(sides: tuple[Side, Side], bob_id: Identity) -> None:
    alice, bob = sides
    path = alice.folder / SESSIONS_DIR / f"{bob.fp}.json"
    data = path.read_bytes()
    for form in secret_forms(alice.identity):
        assert form not in data
    assert path.stat().st_mode & 0o777 == 0o600
    # Alice's files opened with another identity's keys: one clear error.
    stranger = RatchetSessions(RatchetAccount(alice.folder, bob_id))
    with pytest.raises(UserError, match="cannot be opened"):
        stranger.encrypt(bob.fp, b"x")
    stored = stored_state(path)
    assert set(stored) == {"v", "sessions", "seen", "card", "started_at", "boot"}
    assert len(stored["sessions"]) == 1


def test_a_message_no_session_opens_is_one_clear_error(sides: tuple[Side, Side], tmp_path: Path,
                                                       carol_id: Identity) -> None:
    alice, bob = sides
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "m1", alice.store().encrypt(bob.fp, b"hi"), handed)
    carol = Side(tmp_path / "carol", carol_id)
    carol.store().start(bob.fp, bob.claim())
    stray = carol.store().encrypt(bob.fp, b"from carol")
    # Carol's pre-key message, claimed to be alice's: bob's key for alice does not fit it.
    with pytest.raises(TamperedMessage):
        opens(bob, alice, "m2", stray)
    normal = bob.store().encrypt(alice.fp, b"reply")
    with pytest.raises(TamperedMessage, match="no ratchet session"):
        opens(carol, bob, "m3", normal)
    with pytest.raises(UserError, match="not a fingerprint"):
        bob.store().encrypt("../alice", b"x")


RECEIVER = """
import base64, os, sys
from pathlib import Path
import vodozemac
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount
from keys.ratchet.sessions import RatchetSessions
folder, sender, curve, kind, body, out = sys.argv[1:7]
identity = Identity.from_secret("bob", bytes.fromhex(sys.stdin.read()))
message = vodozemac.AnyOlmMessage.from_parts(int(kind), base64.b64decode(body))
store = RatchetSessions(RatchetAccount(Path(folder), identity))
with store.page() as page:
    opened = page.open(sender, bytes.fromhex(curve), "m1", message)
    if not opened.duplicate:
        fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, opened.plaintext + b"\\n")
        os.fsync(fd)
        os.close(fd)
        page.commit()
"""


def test_processes_receiving_one_message_at_once_hand_it_over_once(
    sides: tuple[Side, Side], tmp_path: Path
) -> None:
    """The follower and a `talk receive` fetch the same first message at the same moment."""
    alice, bob = sides
    kind, body = alice.store().encrypt(bob.fp, b"only once").to_parts()
    out = tmp_path / "handed"
    args = [str(bob.folder), alice.fp, alice.curve().hex(), str(kind), base64.b64encode(body).decode(),
            str(out)]
    root = Path(__file__).resolve().parents[3]
    workers = [subprocess.Popen([sys.executable, "-c", RECEIVER, *args], cwd=root, stdin=subprocess.PIPE,
                                text=True) for _ in range(3)]
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(bob.identity.secret_bytes().hex())
        worker.stdin.close()
    assert [w.wait(timeout=120) for w in workers] == [0, 0, 0]
    assert out.read_bytes() == b"only once\n"


def test_forget_counts_each_loss_and_a_new_session_keeps_the_count(sides: tuple[Side, Side]) -> None:
    alice, bob = sides
    [(fp, history)] = session_history(alice.folder).items()
    assert fp == bob.fp and history.started_at > 0 and history.reestablished_at is None  # nothing lost
    alice.store().forget(bob.fp)
    alice.store().forget(bob.fp)
    [history] = session_history(alice.folder).values()
    assert (history.lost, history.reestablished_at) == (2, None) and history.lost_at > 0
    assert not alice.store().has_session(bob.fp)
    alice.store().start(bob.fp, bob.claim())
    alice.store().encrypt(bob.fp, b"after the loss")
    [history] = session_history(alice.folder).values()
    assert history.lost == 2 and history.reestablished_at == history.started_at >= history.lost_at
    assert session_history(bob.folder) == {}  # bob has no session file yet


def test_a_receiver_that_lost_its_sessions_notes_each_unopened_message_once_then_the_new_session(
        sides: tuple[Side, Side]) -> None:
    alice, bob = sides
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "m1", alice.store().encrypt(bob.fp, b"first"), handed)
    assert receive(alice, bob, "r1", bob.store().encrypt(alice.fp, b"reply"), handed)
    for path in (bob.folder / SESSIONS_DIR).iterdir():
        path.unlink()  # bob's state is lost; alice's next message is no pre-key message
    lost = alice.store().encrypt(bob.fp, b"into the lost session")
    for _ in range(2):  # fetched again, as after a kill before the ack: noted once
        with bob.store().page() as page:
            with pytest.raises(TamperedMessage):
                page.open(alice.fp, alice.curve(), "m2", lost)
            page.commit()
    [history] = session_history(bob.folder).values()
    assert (history.unopened, history.started_at, history.reestablished_at) == (1, 0.0, None)
    assert history.unopened_at > 0
    alice.store().forget(bob.fp)  # the refusal's receipt reached alice
    alice.store().start(bob.fp, bob.claim())
    assert receive(bob, alice, "m2", alice.store().encrypt(bob.fp, b"into the lost session"), handed)
    [history] = session_history(bob.folder).values()
    assert history.unopened == 1 and history.reestablished_at == history.started_at >= history.unopened_at
    assert handed["m2"] == b"into the lost session"


def test_a_session_began_again_only_after_the_last_loss_on_either_side(tmp_path: Path) -> None:
    assert History().reestablished_at is None
    assert History(started_at=5.0).reestablished_at is None  # a first session re-establishes nothing
    assert History(lost=1, lost_at=7.0, started_at=5.0).reestablished_at is None
    assert History(unopened=1, unopened_at=7.0, started_at=9.0).reestablished_at == 9.0
    assert History(lost=1, lost_at=10.0, unopened=1, unopened_at=7.0, started_at=9.0).reestablished_at is None
    # Read from the plain fields: a file whose pickles no key opens still tells its history.
    (tmp_path / SESSIONS_DIR).mkdir()
    (tmp_path / SESSIONS_DIR / f"{hexid(1)}.json").write_text(json.dumps(
        {"v": 1, "sessions": ["not a pickle"], "seen": [], "unopened": ["a", "b"], "unopened_at": 3.0}))
    assert list(session_history(tmp_path).values()) == [History(unopened=2, unopened_at=3.0, sessions=1)]


def altered(message: vodozemac.AnyOlmMessage) -> vodozemac.AnyOlmMessage:
    """`message` with one bit of its MAC flipped, as a relay or a thief on the wire might."""
    kind, body = message.to_parts()
    return vodozemac.AnyOlmMessage.from_parts(kind, body[:-1] + bytes([body[-1] ^ 1]))


def stored_seen(me: Side, peer: Side) -> list[str]:
    seen: list[str] = stored_state(me.folder / SESSIONS_DIR / f"{peer.fp}.json")["seen"]
    return seen


@pytest.fixture
def carol(tmp_path: Path, carol_id: Identity, sides: tuple[Side, Side]) -> Side:
    """A second peer writing to bob, with a session started from a one-time key of his."""
    carol = Side(tmp_path / "carol", carol_id)
    carol.store().start(sides[1].fp, sides[1].claim())
    return carol


def two_peers_page(alice: Side, bob: Side, carol: Side) -> tuple[Received, dict[str, bytes]]:
    """Five messages of alice's (the first a pre-key message on a one-time key) and three of
    carol's (all pre-key messages: she has not heard back), interleaved, as one relay page."""
    page, sent = [], {}
    for n in range(8):
        sender = carol if n % 3 == 2 else alice
        msg_id, text = hexid(n), f"message {n} from {sender.identity.name}".encode()
        page.append((sender, msg_id, sender.store().encrypt(bob.fp, text)))
        sent[msg_id] = text
    return page, sent


@pytest.mark.parametrize("kill_after", [1, 2, 3, 4])
def test_a_page_from_two_peers_killed_at_any_step_loses_nothing_and_hands_each_over_once(
    sides: tuple[Side, Side], carol: Side, kill_after: int
) -> None:
    alice, bob = sides
    page, sent = two_peers_page(alice, bob, carol)
    ids = [msg_id for _, msg_id, _ in page]
    handed: dict[str, bytes] = {}
    assert receive_page(bob, page, handed, stop_after=kill_after) == []
    assert receive_page(bob, page, handed) == ids  # the relay still held the page: fetched again
    assert handed == sent
    again: dict[str, bytes] = {}
    assert receive_page(bob, page, again) == ids and again == {}  # an ack lost: all duplicates
    assert stored_seen(bob, alice) == [i for s, i, _ in page if s is alice]
    later = alice.store().encrypt(bob.fp, b"the session goes on")
    assert receive_page(bob, [(alice, "later", later)], handed) == ["later"]
    assert handed["later"] == b"the session goes on"


KILLED_IN_COMMIT = """
import base64, json, os, signal, sys
from pathlib import Path
import vodozemac
import keys.ratchet.account, keys.ratchet.sessions
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount
from keys.ratchet.sessions import RatchetSessions
folder, out, saves = sys.argv[1], sys.argv[2], int(sys.argv[3])
job = json.loads(sys.stdin.read())
identity = Identity.from_secret("bob", bytes.fromhex(job["secret"]))
written = keys.ratchet.account.write_json
count = 0

def write_json(path, data, **how):
    global count
    written(path, data, **how)
    count += 1
    if count == saves:
        os.kill(os.getpid(), signal.SIGKILL)

keys.ratchet.account.write_json = write_json
laid = keys.ratchet.sessions.write_slots

def write_slots(path, data, after, **how):
    global count
    at = laid(path, data, after, **how)
    count += 1
    if count == saves:
        os.kill(os.getpid(), signal.SIGKILL)
    return at

keys.ratchet.sessions.write_slots = write_slots
with RatchetSessions(RatchetAccount(Path(folder), identity)).page() as page:
    opened = [(m["id"], page.open(m["sender"], bytes.fromhex(m["curve"]), m["id"],
                                  vodozemac.AnyOlmMessage.from_parts(m["kind"], base64.b64decode(m["body"]))))
              for m in job["page"]]
    with open(out, "w") as f:
        json.dump({i: o.plaintext.decode() for i, o in opened}, f)
        f.flush()
        os.fsync(f.fileno())
    page.commit()
"""


@pytest.mark.parametrize("saves", [1, 2, 3])
def test_a_kill_between_the_saves_of_a_commit_loses_nothing(
    sides: tuple[Side, Side], carol: Side, tmp_path: Path, saves: int
) -> None:
    """The commit saves alice's sessions, carol's, then the account (whose one-time keys two
    pre-key messages used); a real kill after `saves` of those three writes, then the page
    is taken again from disk as the next process would."""
    alice, bob = sides
    page, sent = two_peers_page(alice, bob, carol)
    job = {"secret": bob.identity.secret_bytes().hex(), "page": [
        {"sender": s.fp, "curve": s.curve().hex(), "id": i, "kind": m.to_parts()[0],
         "body": base64.b64encode(m.to_parts()[1]).decode()} for s, i, m in page]}
    out = tmp_path / "handed.json"
    root = Path(__file__).resolve().parents[3]
    child = subprocess.run([sys.executable, "-c", KILLED_IN_COMMIT, str(bob.folder), str(out), str(saves)],
                           cwd=root, input=json.dumps(job), text=True, capture_output=True, timeout=120)
    assert child.returncode == -9, child.stderr
    handed = {i: t.encode() for i, t in json.loads(out.read_text()).items()}
    assert handed == sent  # handed over before the commit began
    again: dict[str, bytes] = {}
    assert receive_page(bob, page, again) == [i for _, i, _ in page]
    saved = sorted([alice.fp, carol.fp])[:saves]  # the commit saves peers in this order
    # The peers saved are recognized; the others' messages open again from their old state (the
    # spool then drops the second hand-over by id).
    assert again == {i: sent[i] for s, i, _ in page if s.fp not in saved}
    for peer in (alice, carol):  # every message is known now, whichever saves the kill let through
        assert stored_seen(bob, peer) == [i for s, i, _ in page if s is peer]


def test_an_id_opened_earlier_in_the_page_is_a_duplicate(sides: tuple[Side, Side]) -> None:
    alice, bob = sides
    first, second = (alice.store().encrypt(bob.fp, t) for t in (b"one", b"two"))
    with bob.store().page() as page:
        assert page.open(alice.fp, alice.curve(), "m1", first) == Opened(False, b"one")
        assert page.open(alice.fp, alice.curve(), "m1", first) == Opened(True, b"")
        assert page.open(alice.fp, alice.curve(), "m1", second) == Opened(True, b"")  # not decrypted
        assert page.open(alice.fp, alice.curve(), "m2", second) == Opened(False, b"two")
        page.commit()
    assert stored_seen(bob, alice) == ["m1", "m2"]


def test_a_pre_key_message_and_a_normal_one_from_one_peer_open_in_one_page(
    sides: tuple[Side, Side]
) -> None:
    """Both sides write first: alice's pre-key message starts a session on bob's one-time key
    while bob's own pre-key message starts one on hers; once alice has read bob's, her next
    message rides his session, a normal message. Bob takes her two in one page."""
    alice, bob = sides
    bob.store().start(alice.fp, alice.claim())
    pre_key = alice.store().encrypt(bob.fp, b"in alice's session")
    handed: dict[str, bytes] = {}
    assert receive(alice, bob, "b1", bob.store().encrypt(alice.fp, b"bob first"), handed)
    normal = alice.store().encrypt(bob.fp, b"in bob's session")  # the session read last goes first
    assert pre_key.to_pre_key() is not None and normal.to_pre_key() is None
    page = [(alice, "a1", pre_key), (alice, "a2", normal)]
    assert receive_page(bob, page, handed) == ["a1", "a2"]
    assert handed == {"b1": b"bob first", "a1": b"in alice's session", "a2": b"in bob's session"}
    stored = stored_state(bob.folder / SESSIONS_DIR / f"{alice.fp}.json")
    assert stored["seen"] == ["a1", "a2"] and len(stored["sessions"]) == 2
    later = alice.store().encrypt(bob.fp, b"later")
    assert receive_page(bob, [(alice, "a3", later)], handed) == ["a3"] and handed["a3"] == b"later"


def test_a_refused_message_between_good_ones_spoils_nothing(sides: tuple[Side, Side], carol: Side) -> None:
    """In one page: alice's pre-key message, an altered copy of her second, carol's pre-key
    message claimed to be alice's (no session of alice's, and not her key), the second itself,
    and an altered pre-key message. Each refused one is refused alone and advances nothing:
    the good ones open, before and after it, and so does what comes later."""
    alice, bob = sides
    first, second, third = (alice.store().encrypt(bob.fp, t) for t in (b"one", b"two", b"three"))
    stray = carol.store().encrypt(bob.fp, b"carol's, said to be alice's")
    account = bob.folder / "ratchet.json"
    with bob.store().page() as page:
        assert page.open(alice.fp, alice.curve(), "m1", first) == Opened(False, b"one")
        with pytest.raises(TamperedMessage):
            page.open(alice.fp, alice.curve(), "m2-altered", altered(second))
        with pytest.raises(TamperedMessage):
            page.open(alice.fp, alice.curve(), "stray", stray)
        assert page.open(alice.fp, alice.curve(), "m2", second) == Opened(False, b"two")
        with pytest.raises(TamperedMessage):
            page.open(alice.fp, alice.curve(), "m3-altered", altered(third))
        page.commit()
    assert stored_seen(bob, alice) == ["m1", "m2"]
    handed: dict[str, bytes] = {}
    assert receive_page(bob, [(carol, "c1", stray), (alice, "m3", third)], handed) == ["c1", "m3"]
    assert handed == {"c1": b"carol's, said to be alice's", "m3": b"three"}  # her key was not spent
    # A page of refused messages alone advances nothing, nor the account it held: it saves only
    # the note that a message of alice's could not be opened, which `talk status` shows.
    peer_file = bob.folder / SESSIONS_DIR / f"{alice.fp}.json"
    account_before, peer_before = account.read_bytes(), stored_state(peer_file)
    fourth = alice.store().encrypt(bob.fp, b"four")
    assert receive_page(bob, [(alice, "m4-altered", altered(fourth))], handed) == ["m4-altered"]
    peer_after = stored_state(peer_file)
    assert account.read_bytes() == account_before
    assert (peer_after["sessions"], peer_after["seen"]) == (peer_before["sessions"], peer_before["seen"])
    assert peer_after["unopened"][-1] == "m4-altered"
    assert receive_page(bob, [(alice, "m4", fourth)], handed) == ["m4"] and handed["m4"] == b"four"


def test_a_page_holding_a_lock_waits_for_no_other(sides: tuple[Side, Side], carol: Side) -> None:
    """A page waits for a lock only while it holds none (or, for the account, only its
    message's peer's); another lock held elsewhere is `Busy`, and nothing is opened."""
    alice, bob = sides
    from_alice, from_carol = alice.store().encrypt(bob.fp, b"a"), carol.store().encrypt(bob.fp, b"c")
    sessions = bob.folder / SESSIONS_DIR
    with bob.store().page() as page:
        page.open(alice.fp, alice.curve(), "a1", from_alice)  # holds alice's lock and the account
        with locked(sessions / f"{carol.fp}.lock"), pytest.raises(Busy):  # another reader has carol's
            page.open(carol.fp, carol.curve(), "c1", from_carol)
        page.commit()
    with locked(bob.folder / "ratchet.lock"), bob.store().page() as page:
        later = alice.store().encrypt(bob.fp, b"in the session")
        assert page.open(alice.fp, alice.curve(), "a2", later) == Opened(False, b"in the session")
        with pytest.raises(Busy):  # carol's pre-key message needs the account another holds
            page.open(carol.fp, carol.curve(), "c1", from_carol)
        page.commit()
    handed: dict[str, bytes] = {}
    assert receive_page(bob, [(carol, "c1", from_carol)], handed) == ["c1"] and handed == {"c1": b"c"}
    assert stored_seen(bob, alice) == ["a1", "a2"] and stored_seen(bob, carol) == ["c1"]


def counted_syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The data syncs from here on, each by its file descriptor."""
    synced: list[int] = []
    data_sync = os.fdatasync

    def counted(fd: int) -> None:
        synced.append(fd)
        data_sync(fd)

    monkeypatch.setattr(os, "fdatasync", counted)
    return synced


def test_a_send_waits_for_the_disk_once_in_sync_every(sides: tuple[Side, Side],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    alice, bob = sides
    with monkeypatch.context() as patched:
        synced = counted_syncs(patched)
        messages = [alice.store().encrypt(bob.fp, b"%d" % n) for n in range(2 * SYNC_EVERY)]
    assert len(synced) == 2
    handed: dict[str, bytes] = {}
    for n, message in enumerate(messages):
        assert receive(bob, alice, f"m{n}", message, handed) and handed[f"m{n}"] == b"%d" % n


@pytest.mark.parametrize("lost", ["the sends after a synced save", "unsynced sends"])
def test_after_the_machine_crashed_no_message_key_is_used_twice(
        sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch, lost: str) -> None:
    """A power loss takes back saves the disk was not waited for: the state read after it is
    older than what went out. Simulated: the session file as it was, read in another boot."""
    alice, bob = sides
    handed: dict[str, bytes] = {}
    path = alice.folder / SESSIONS_DIR / f"{bob.fp}.json"
    sent = SYNC_EVERY - 1 if lost == "the sends after a synced save" else 3
    for n in range(sent):  # the last of these is synced when it is the SYNC_EVERY-th save
        assert receive(bob, alice, f"early{n}", alice.store().encrypt(bob.fp, b"early"), handed)
    on_disk = path.read_bytes()
    gone = [alice.store().encrypt(bob.fp, b"gone %d" % n) for n in range(SYNC_EVERY - 2)]
    for n, message in enumerate(gone):  # they went out, and bob read them
        assert receive(bob, alice, f"gone{n}", message, handed)
    path.write_bytes(on_disk)  # ... then the machine lost power

    # Read in the same boot (what a crash cannot give), the old state would use their keys again:
    reused = alice.store().encrypt(bob.fp, b"again")
    with pytest.raises(TamperedMessage):
        opens(bob, alice, "reused", reused)
    path.write_bytes(on_disk)
    import keys.ratchet.sessions as sessions_mod
    monkeypatch.setattr(sessions_mod, "boot_id", lambda: "another boot")
    after = alice.store().encrypt(bob.fp, b"after the crash")
    assert receive(bob, alice, "after", after, handed) and handed["after"] == b"after the crash"
    assert stored_state(path)["boot"] == "another boot" and "unsynced" not in stored_state(path)
    later = alice.store().encrypt(bob.fp, b"and on")  # stepped once, not again
    assert receive(bob, alice, "later", later, handed) and handed["later"] == b"and on"


def test_mail_sent_before_a_power_loss_still_opens_when_it_comes_after_the_gap(
        sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch) -> None:
    """The most a power loss can take back is SYNC_EVERY - 1 sends; the state read in the next
    boot steps past SYNC_EVERY keys. The peer, opening the first message after the loss before
    the ones sent before it (the relay may hand them out of order), keeps every skipped key:
    the gap fits in what Olm keeps."""
    alice, bob = sides
    handed: dict[str, bytes] = {}
    path = alice.folder / SESSIONS_DIR / f"{bob.fp}.json"
    n = 0
    while n == 0 or "unsynced" in stored_state(path):  # up to a synced save
        assert receive(bob, alice, f"early{n}", alice.store().encrypt(bob.fp, b"early"), handed)
        n += 1
    on_disk = path.read_bytes()
    unsynced = [alice.store().encrypt(bob.fp, b"late %d" % n) for n in range(SYNC_EVERY - 1)]
    assert len(unsynced) == SYNC_EVERY - 1 and stored_state(path)["unsynced"] == SYNC_EVERY - 1
    path.write_bytes(on_disk)  # the machine lost power: none of those saves reached the disk
    import keys.ratchet.sessions as sessions_mod
    monkeypatch.setattr(sessions_mod, "boot_id", lambda: "another boot")
    after = alice.store().encrypt(bob.fp, b"after the crash")
    assert receive(bob, alice, "after", after, handed)
    for n, message in enumerate(unsynced):
        assert receive(bob, alice, f"late{n}", message, handed) and handed[f"late{n}"] == b"late %d" % n


SENDS_ONE = """
import base64, sys
from pathlib import Path
from keys.identity import Identity
from keys.ratchet.account import RatchetAccount
from keys.ratchet.sessions import RatchetSessions
identity = Identity.from_secret("alice", bytes.fromhex(sys.argv[2]))
store = RatchetSessions(RatchetAccount(Path(sys.argv[1]), identity))
message = store.encrypt(sys.argv[3], b"from another process")
kind, body = message.to_parts()
print(kind, base64.b64encode(body).decode())
"""


def sent_by_another_process(sender: Side, to: Side) -> vodozemac.AnyOlmMessage:
    root = Path(__file__).resolve().parents[3]
    child = subprocess.run([sys.executable, "-c", SENDS_ONE, str(sender.folder),
                            sender.identity.secret_bytes().hex(), to.fp],
                           cwd=root, text=True, capture_output=True, timeout=120)
    assert child.returncode == 0, child.stderr
    kind, body = child.stdout.split()
    return vodozemac.AnyOlmMessage.from_parts(int(kind), base64.b64decode(body))


def test_a_sender_reuses_its_last_state_only_while_the_file_still_holds_it(
        sides: tuple[Side, Side], tmp_path: Path) -> None:
    """Another process's send between two of this one's advances the session on disk: this
    process must not encrypt from the state it kept, or two messages would share a key."""
    alice, bob = sides
    first = alice.store().encrypt(bob.fp, b"first")  # kept in this process
    middle = sent_by_another_process(alice, bob)
    third = alice.store().encrypt(bob.fp, b"third")
    handed: dict[str, bytes] = {}
    for msg_id, message in (("first", first), ("middle", middle), ("third", third)):
        assert receive(bob, alice, msg_id, message, handed)
    assert handed == {"first": b"first", "middle": b"from another process", "third": b"third"}


def test_a_page_reuses_the_state_it_saved_only_while_the_file_still_holds_it(
        sides: tuple[Side, Side]) -> None:
    """A page keeps the state it committed for this process's next page or send; another
    process's send in between advanced the session on disk, and must not be undone by it."""
    alice, bob = sides
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "hello", alice.store().encrypt(bob.fp, b"hello"), handed)
    assert receive(alice, bob, "r0", bob.store().encrypt(alice.fp, b"reply 0"), handed)  # kept here
    middle = sent_by_another_process(alice, bob)
    assert receive(alice, bob, "r1", bob.store().encrypt(alice.fp, b"reply 1"), handed)
    after = alice.store().encrypt(bob.fp, b"after")
    for msg_id, message in (("middle", middle), ("after", after)):
        assert receive(bob, alice, msg_id, message, handed)
    assert handed["middle"] == b"from another process" and handed["after"] == b"after"


def test_a_sender_whose_session_folder_was_removed_starts_again_cleanly(sides: tuple[Side, Side]) -> None:
    alice, bob = sides
    alice.store().encrypt(bob.fp, b"kept in this process")
    shutil.rmtree(alice.folder / SESSIONS_DIR)  # the state is lost while the process runs on
    with pytest.raises(NotFound, match="no ratchet session"):
        alice.store().encrypt(bob.fp, b"after")
    alice.store().start(bob.fp, bob.claim())
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "new", alice.store().encrypt(bob.fp, b"in a new session"), handed)
    assert handed == {"new": b"in a new session"}


def delivered(me: Side, sender: Side, msg_id: str, message: vodozemac.AnyOlmMessage,
              handed: dict[str, bytes]) -> bool:
    """Whether the message opened and was handed over (a refused one is acked too)."""
    return receive(me, sender, msg_id, message, handed) and msg_id in handed


@pytest.fixture
def disk(sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Disks:
    return Disks(monkeypatch, tmp_path / "disks").watch(*(side.folder for side in sides))


def test_a_power_loss_right_after_a_reply_leaves_both_sides_in_step(
        sides: tuple[Side, Side], disk: Disks) -> None:
    """The first send after a receive picks a new ratchet key. If the save that holds it were
    left unsynced, a power loss would take it back and the next boot would pick another: the
    peer, which read the message, would answer on a key this side no longer has."""
    alice, bob = sides
    handed: dict[str, bytes] = {}
    for turn in range(3):
        assert delivered(bob, alice, f"a{turn}", alice.store().encrypt(bob.fp, b"question"), handed)
        assert delivered(alice, bob, f"b{turn}", bob.store().encrypt(alice.fp, b"answer"), handed)
        reply = alice.store().encrypt(bob.fp, b"reply right after reading")
        assert delivered(bob, alice, f"r{turn}", reply, handed)
        disk.lose_power(alice.folder)  # the reply went out and was read; then alice lost power
        after = alice.store().encrypt(bob.fp, b"after the power loss")
        assert delivered(bob, alice, f"p{turn}", after, handed)
        answer = bob.store().encrypt(alice.fp, b"bob answers")
        assert delivered(alice, bob, f"q{turn}", answer, handed), "alice no longer opens bob's answer"
    assert handed["q2"] == b"bob answers" and len(handed) == 15


def test_a_power_loss_on_the_receiving_side_takes_back_nothing_it_acked(
        sides: tuple[Side, Side], disk: Disks) -> None:
    alice, bob = sides
    handed: dict[str, bytes] = {}
    for n in range(SYNC_EVERY + 3):
        assert delivered(bob, alice, f"a{n}", alice.store().encrypt(bob.fp, b"%d" % n), handed)
        if n % 4 == 3:
            disk.lose_power(bob.folder)
            reply = bob.store().encrypt(alice.fp, b"still here")
            assert delivered(alice, bob, f"b{n}", reply, handed)
            disk.lose_power(alice.folder)
    assert len(handed) == SYNC_EVERY + 3 + (SYNC_EVERY + 3) // 4


def test_an_id_let_go_after_its_refusal_opens_when_sent_again_and_its_step_is_kept(
        sides: tuple[Side, Side]) -> None:
    """A message refused after it opened (a reused number) is let go: its sender sends it again
    under the same id, and that new copy opens; the ratchet step the refused copy took stays."""
    alice, bob = sides
    refused, other = (alice.store().encrypt(bob.fp, t) for t in (b"reused number", b"next"))
    with bob.store().page() as page:
        assert page.open(alice.fp, alice.curve(), "m1", refused) == Opened(False, b"reused number")
        page.let_go(alice.fp, "m1")
        page.let_go(alice.fp, "never opened")  # nothing to let go: nothing changes
        assert page.open(alice.fp, alice.curve(), "m2", other) == Opened(False, b"next")
        page.commit()
    assert stored_seen(bob, alice) == ["m2"]
    again = alice.store().encrypt(bob.fp, b"reused number, renumbered")
    with bob.store().page() as page:
        assert page.open(alice.fp, alice.curve(), "m1", again) == Opened(False, b"reused number, renumbered")
        page.commit()
    with pytest.raises(TamperedMessage):  # the refused copy's key is spent: it never opens again
        opens(bob, alice, "m3", refused)
    assert stored_seen(bob, alice) == ["m2", "m1"]


def confirms(me: Side, peer: Side, msg_id: str, answer: vodozemac.AnyOlmMessage, commit: bool = True) -> bool:
    """Take a receipt's answer in a page of its own, as `follower.receive.inbound` does."""
    with me.store().page() as opening:
        opened = opening.confirm(peer.fp, msg_id, answer)
        if commit:
            opening.commit()
    return opened


def test_an_answer_confirms_a_one_way_stream(sides: tuple[Side, Side]) -> None:
    alice, bob = sides
    handed: dict[str, bytes] = {}
    for n in range(3):  # bob only receives: alice stays on pre-key messages
        message = alice.store().encrypt(bob.fp, b"%d" % n)
        assert message.to_pre_key() is not None
        assert receive(bob, alice, f"m{n}", message, handed)
    answer = bob.store().encrypt(alice.fp, b"")  # what his receipt carries
    assert answer.to_pre_key() is None
    assert confirms(alice, bob, "receipt1", answer)
    assert not confirms(alice, bob, "receipt1", answer)  # a replayed receipt: a duplicate, no step
    later = alice.store().encrypt(bob.fp, b"confirmed")
    assert later.to_pre_key() is None
    assert receive(bob, alice, "m3", later, handed) and handed["m3"] == b"confirmed"


def test_an_answer_no_session_opens_is_dropped_unnoted(sides: tuple[Side, Side]) -> None:
    alice, bob = sides
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "m0", alice.store().encrypt(bob.fp, b"hi"), handed)
    answer = bob.store().encrypt(alice.fp, b"")
    assert not confirms(alice, bob, "receipt1", altered(answer))
    assert "unopened" not in stored_state(alice.folder / SESSIONS_DIR / f"{bob.fp}.json")
    assert alice.store().encrypt(bob.fp, b"still").to_pre_key() is not None  # nothing changed
    assert confirms(alice, bob, "receipt2", answer)  # the real one still opens


def test_a_kill_before_the_answer_is_committed_takes_it_again(sides: tuple[Side, Side]) -> None:
    alice, bob = sides
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "m0", alice.store().encrypt(bob.fp, b"hi"), handed)
    answer = bob.store().encrypt(alice.fp, b"")
    assert confirms(alice, bob, "receipt1", answer, commit=False)  # killed before the commit
    assert alice.store().encrypt(bob.fp, b"before").to_pre_key() is not None
    assert confirms(alice, bob, "receipt1", answer)  # the receipt, fetched again, opens again
    message = alice.store().encrypt(bob.fp, b"after")
    assert message.to_pre_key() is None
    assert receive(bob, alice, "m2", message, handed) and handed["m2"] == b"after"


def test_an_answer_and_the_send_after_it_wait_for_the_disk(sides: tuple[Side, Side],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The answer picks bob's new ratchet key, which alice's next message builds on: a power loss
    that took it back after it left would fork the session (see Sending, in the module's docstring)."""
    alice, bob = sides
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "m0", alice.store().encrypt(bob.fp, b"hi"), handed)
    synced = counted_syncs(monkeypatch)
    answer = bob.store().encrypt(alice.fp, b"")
    assert len(synced) == 1  # saved on the disk before it is returned, so before it leaves
    assert confirms(alice, bob, "receipt1", answer) and len(synced) == 2  # the page's commit
    message = alice.store().encrypt(bob.fp, b"turned")  # alice's first send on bob's new key
    assert len(synced) == 3
    assert receive(bob, alice, "m1", message, handed) and handed["m1"] == b"turned"


def test_a_one_way_stream_never_unseals_the_account_once_a_session_is_held(
        sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch) -> None:
    """The account is opened only to spend a one-time key: a pre-key message that starts a
    session. Every other step of a stream reads session files (and the card) alone."""
    alice, bob = sides
    handed: dict[str, bytes] = {}
    first = alice.store().encrypt(bob.fp, b"first")
    card = alice.store().account.card()  # what every pre-key message of hers carries
    assert receive(bob, alice, "m0", first, handed)  # bob's one-time key is spent here

    def sealed(*_: object) -> vodozemac.Account:
        raise AssertionError("the Olm account was unsealed")

    monkeypatch.setattr(vodozemac.Account, "from_pickle", sealed)
    for n in range(1, 4):  # pre-key messages of the same session: the card, and no one-time key
        message = alice.store().encrypt(bob.fp, b"%d" % n)
        assert message.to_pre_key() is not None and alice.store().account.card() == card
        with bob.store().page() as opening:
            opened = opening.open(alice.fp, b"", f"m{n}", message)
            opening.commit()
        assert opened.plaintext == b"%d" % n
    assert confirms(alice, bob, "receipt", bob.store().encrypt(alice.fp, b""))
    message = alice.store().encrypt(bob.fp, b"normal")
    with bob.store().page() as opening:
        assert opening.open(alice.fp, b"", "m9", message).plaintext == b"normal"
        opening.commit()


def test_a_send_pickles_only_the_session_it_advanced_and_saves_everything(
        sides: tuple[Side, Side], monkeypatch: pytest.MonkeyPatch) -> None:
    alice, bob = sides
    handed: dict[str, bytes] = {}
    assert receive(bob, alice, "m0", alice.store().encrypt(bob.fp, b"hi"), handed)
    bob.store().start(alice.fp, alice.claim())  # bob's own session too: two held, one used
    for n in range(3):
        assert receive(alice, bob, f"r{n}", bob.store().encrypt(alice.fp, b"%d" % n), handed)
    path = alice.folder / SESSIONS_DIR / f"{bob.fp}.json"
    before = stored_state(path)
    assert len(before["sessions"]) == 2 and before["seen"] == ["r0", "r1", "r2"]
    pickled: list[int] = []
    real = vodozemac.Session.pickle

    def counted(session: vodozemac.Session, key: bytes) -> str:
        pickled.append(1)
        return real(session, key)

    monkeypatch.setattr(vodozemac.Session, "pickle", counted)
    store = alice.store()
    sent = [store.encrypt(bob.fp, b"s%d" % n) for n in range(4)]
    assert len(pickled) == 4  # each the one used: the first takes the state the page saved
    after = stored_state(path)
    assert after["seen"] == before["seen"] and after["sessions"][1] == before["sessions"][1]
    assert after["sessions"][0] != before["sessions"][0]
    # The plain fields, written again as text from the first send's save, are all still there.
    sent_marks = ("sessions", "unsynced", "heard")
    assert {k: v for k, v in after.items() if k not in sent_marks} == {
        k: v for k, v in before.items() if k not in sent_marks} and "chains" in after and "card" in after
    for n, message in enumerate(sent):
        assert receive(bob, alice, f"s{n}", message, handed) and handed[f"s{n}"] == b"s%d" % n


def test_the_short_form_goes_only_to_a_peer_whose_receipts_answered(sides: tuple[Side, Side]) -> None:
    alice, bob = sides
    handed: dict[str, bytes] = {}
    assert alice.store().encrypt(bob.fp, b"long", lambda: b"short").to_pre_key() is not None
    with bob.store().page() as opening:  # a pre-key message: bob did not answer yet
        first = alice.store().encrypt(bob.fp, b"long", lambda: b"short")
        assert opening.open(alice.fp, alice.curve(), "m0", first).plaintext == b"long"
        opening.commit()
    path = alice.folder / SESSIONS_DIR / f"{bob.fp}.json"
    assert confirms(alice, bob, "receipt1", bob.store().encrypt(alice.fp, b""))
    assert stored_state(path)["short"] is True
    assert receive(bob, alice, "m1", alice.store().encrypt(bob.fp, b"long", lambda: b"short"), handed)
    assert handed["m1"] == b"short"
    alice.store().forget(bob.fp)  # bob lost his sessions: perhaps another install; long form again
    assert "short" not in stored_state(path)
