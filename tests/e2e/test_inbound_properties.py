"""Property: whatever plaintext a contact, a joiner or a group member puts at any layer, the whole
inbound path (fetch, open, parse, decrypt, gate, naming, policy, spool, ack) never raises, and
every message ends spooled, held, taken as a receipt or quarantined: exactly once, and acked.

The layers: the sealed envelope's plaintext, the Olm plaintext inside a session, an invite
request, a Megolm body inside a group message, a receipt's items, and a well-formed message's
text. Every example deposits on a real relay over loopback and a real `Receiver` takes the mail into
a real spool, as the follower does. A smaller run of the real `talk receive` takes a fixed set of
the nastiest payloads.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nacl.secret import SecretBox

from follower.held import HeldBox
from follower.receive.channeldb import ChannelDB, SpoolDedup
from follower.receive.inbound import Receiver
from follower.receive.quarantine import Quarantine
from follower.relay.client import RelayClient
from follower.send import outbound
from follower.send.outbound import create_invite
from follower.send.outbox import Outbox
from keys.contacts import Contact, ContactBook
from keys.encoding import utc_now_iso
from keys.envelope import MAX_PADDED, channel_tag, new_message, pad, receipt_tag, seal
from keys.groups.sessions import GroupKeys
from keys.identity import Identity
from keys.invites import InviteBook
from keys.ratchet.account import RatchetAccount, card_for
from keys.ratchet.envelope import wrap
from keys.ratchet.sessions import RatchetSessions
from keys.sodium import PublicKey
from spool_writer.record import SpoolRecord
from spool_writer.spool import Spool
from tests.conftest import Agent, RelayProcess, befriend, free_port, make_agent
from tests.peer_forge import identity_of, seal_raw, waiting

# Room left at each layer once the layers around it are added (base64 and envelopes).
MOST = {"sealed": MAX_PADDED - 200, "olm": 40_000, "invite": MAX_PADDED - 200, "megolm": 24_000,
        "receipt": 40_000}


def deep(depth: int, pair: str) -> str:
    if pair == "{}":
        return '{"a":' * depth + "0" + "}" * depth
    return pair[0] * depth + pair[1] * depth


ODD_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40)  # surrogates too
JSON_VALUE: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | ODD_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ODD_TEXT, inner, max_size=4),
    max_leaves=20,
)
FIELDS = ["v", "id", "from", "to", "ts", "kind", "text", "seq", "hops", "group", "receipts", "olm", "task",
          "gm", "bundle", "box_proof"]
RAW = st.one_of(
    st.builds(deep, st.integers(0, 30_000), st.sampled_from(["[]", "{}", "[}", "[["])).map(str.encode),
    JSON_VALUE.map(lambda v: json.dumps(v).encode()),  # lone surrogates go as \ud800 escapes
    st.binary(max_size=300),
    st.sampled_from([b"", b"\xef\xbb\xbf{}", b"NaN", b"1e999999", b"9" * 5000, r'["\ud800"]'.encode("utf-16"),
                     b'{"v":1,"v":2}', b"[" * 999 + b"]" * 999]),
)
# Changes to a well-formed plaintext of the layer: a field set to anything, or removed.
EDITS = st.lists(st.tuples(st.sampled_from(FIELDS), st.one_of(st.just(None), JSON_VALUE)), max_size=3)
PAYLOAD = st.one_of(RAW.map(lambda r: ("raw", r)), EDITS.map(lambda e: ("edits", e)))
LAYER = st.sampled_from(["sealed", "olm", "invite", "megolm", "receipt", "text"])


@dataclass
class World:
    relay: RelayProcess
    alice: Agent
    bob: Agent
    alice_id: Identity
    bob_id: Identity
    group_id: str

    @property
    def folder(self) -> Path:
        return self.bob.home / "bob"

    def to_bob(self) -> Contact:
        return ContactBook(self.alice.home / "alice").get("bob")


def make_world(root: Path, relay: RelayProcess) -> World:
    """alice and bob by invite, an Olm session from alice to bob, and a group of the two."""
    alice, bob = make_agent(root, relay, "alice", None), make_agent(root, relay, "bob", None)
    befriend(alice, bob)
    bob.ok("policy", "alice", "accept", "--receive-rate", "10000", "--yes")
    alice.ok("send", "bob", "a session begins")  # ratchet on by default: an Olm session
    alice.ok("group", "create", "duo", "--member", "bob")
    assert [m["text"] for m in bob.ok("receive").lines()] == ["a session begins"]
    group_id = alice.ok("group", "list", "--json").json()["groups"][0]["id"]
    alice_id, bob_id = identity_of(alice.home, "alice"), identity_of(bob.home, "bob")
    return World(relay, alice, bob, alice_id, bob_id, group_id)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with tempfile.TemporaryDirectory(prefix="talk-inbound-") as tmp:
        root = Path(tmp)
        relay = RelayProcess(root / "relay.db", free_port(), ["--rate-per-client", "off",
                                                               "--rate-per-tag", "off"]).start()
        try:
            yield make_world(root, relay)
        finally:
            relay.stop()


def plaintext(payload: tuple[str, Any], base: dict[str, Any], layer: str) -> bytes:
    kind, value = payload
    if kind == "raw":
        return bytes(value)[:MOST[layer]]
    data = dict(base)
    for name, new in value:
        if new is None:
            data.pop(name, None)
        else:
            data[name] = new
    return json.dumps(data).encode()[:MOST[layer]]


def chat(client: RelayClient, sender: Identity, to: Contact, blob: bytes) -> None:
    tag = channel_tag(sender.box_secret, PublicKey(to.box_key), to.fingerprint)
    client.deposit(to.fingerprint, tag, blob)


def deposit(world: World, client: RelayClient, layer: str, payload: tuple[str, Any]) -> None:
    """One message from alice (or a joiner) whose plaintext at `layer` is `payload`."""
    alice, to_bob, bob_fp = world.alice_id, world.to_bob(), world.bob_id.fingerprint
    base = {"v": 1, "id": secrets.token_hex(16), "from": alice.fingerprint, "to": bob_fp, "ts": utc_now_iso(),
            "kind": "chat", "text": "hi"}
    outbox = Outbox(world.alice.home / "alice")
    if layer == "sealed":
        chat(client, alice, to_bob, seal_raw(alice, to_bob, plaintext(payload, base, layer)))
    elif layer == "olm":
        store = RatchetSessions(RatchetAccount(world.alice.home / "alice", alice))
        message = store.encrypt(bob_fp, plaintext(payload, base, layer))
        card = card_for(store.account.read(), alice).to_json() if message.to_pre_key() is not None else None
        outer = wrap(new_message(alice.fingerprint, bob_fp, ""), message, card)
        chat(client, alice, to_bob, seal(outer, alice.box_secret, PublicKey(to_bob.box_key)))
    elif layer == "invite":
        code = create_invite(world.bob_id, client, InviteBook(world.folder), 1)
        client.redeem(code.tag, bytes(SecretBox(code.key).encrypt(pad(plaintext(payload, base, layer)))))
    elif layer == "megolm":
        gm = secrets.token_hex(16)
        body = plaintext(payload, {"gm": gm, "text": "hi"}, layer)
        sessions = GroupKeys(RatchetAccount(world.alice.home / "alice", alice))
        encrypted = sessions.encrypt(world.group_id, [bob_fp], body)
        block = {"id": world.group_id, "name": "duo", "gm": gm, "session": encrypted.session_id,
                 "body": encrypted.body, "by": "person", "key": encrypted.key}
        outbound.send(alice, client, to_bob, "", outbox=outbox, group=block)
    elif layer == "receipt":
        items = [{"ref": secrets.token_hex(16), "state": "delivered", "reason": ""}]
        data = plaintext(payload, {**base, "kind": "receipt", "receipts": items}, layer)
        tag = receipt_tag(alice.box_secret, PublicKey(to_bob.box_key), bob_fp)
        client.deposit(bob_fp, tag, seal_raw(alice, to_bob, data))
    else:  # a well-formed message whose text is the payload, sent as talk sends it
        text = plaintext(payload, {}, "olm").decode(errors="replace")[:20_000]
        outbound.send(alice, client, to_bob, text or "-", outbox=outbox)


@dataclass
class Counts:
    spooled: int
    quarantined: int
    held: int

    @classmethod
    def of(cls, folder: Path) -> Counts:
        spool = folder / "spool" / "inbox.ndjson"
        lines = spool.read_bytes().count(b"\n") if spool.exists() else 0
        return cls(lines, Quarantine(folder).count(), len(HeldBox(folder).all()))


def bobs_inbox(world: World, client: RelayClient) -> tuple[Receiver, Spool]:
    """bob's inbox as the follower builds it: a page is made durable before it is acked."""
    spool, store = Spool(world.folder / "spool"), ChannelDB(world.folder)
    spool.layout.ensure()  # as the follower does when it starts

    @contextlib.contextmanager
    def page() -> Iterator[None]:
        with store.page(), spool.batch():
            yield

    inbox = Receiver(world.bob_id, client, ContactBook(world.folder), InviteBook(world.folder),
                  SpoolDedup(store, spool.knows), batch_acks=True, handed_state="spooled", page=page)
    return inbox, spool


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(batch=st.lists(st.tuples(LAYER, PAYLOAD), min_size=1, max_size=4))
def test_any_plaintext_at_any_layer_ends_in_one_place_and_acked(
    world: World, batch: list[tuple[str, tuple[str, Any]]]
) -> None:
    before = Counts.of(world.folder)
    with RelayClient(world.relay.url) as client:
        for layer, payload in batch:
            deposit(world, client, layer, payload)
        inbox, spool = bobs_inbox(world, client)

        def hand_on(record: dict[str, Any]) -> None:  # as the follower's `deliver`
            spool.deliver(cast(SpoolRecord, record))

        report = inbox.receive(hand_on)  # never raises
    after = Counts.of(world.folder)
    spooled, quarantined = after.spooled - before.spooled, after.quarantined - before.quarantined
    assert waiting(world.relay, world.bob_id.fingerprint) == 0  # all acked: nothing comes back first
    assert spooled == report.delivered and quarantined == len(report.refused)
    assert after.held - before.held == report.held
    assert report.delivered + len(report.refused) + report.held + report.receipts == len(batch), report
    assert report.duplicates == 0


# The nastiest payloads of each layer, through the real `talk receive`.
NASTIEST: list[tuple[str, tuple[str, Any]]] = [
    (layer, payload)
    for layer in ("sealed", "olm", "invite", "megolm", "receipt", "text")
    for payload in [
        ("raw", deep(20_000 if layer != "megolm" else 10_000, "[]").encode()),
        ("raw", deep(5_000, "{}").encode()),
        ("raw", b"[" * 999 + b"]" * 999),
        ("raw", b"9" * 5000),
        ("raw", r'["\ud800"]'.encode("utf-16")),
        ("raw", b"\xff\xfe"),
        ("edits", [("text", "\ud800\udfff\ud800" + "\x1b[2J" * 100)]),
        ("edits", [("text", "x" * 30_000), ("hops", [[[[[]]]]])]),
        ("edits", [("id", None), ("kind", "group"), ("group", {"op": "leave", "id": "0" * 32})]),
        ("edits", [("receipts", [{"ref": "0" * 32, "state": "refused", "reason": "\ud800" * 300}])]),
        ("edits", [("bundle", {"name": "b" * 64, "sign_key": "", "box_key": ""}), ("box_proof", "")]),
    ]
]


def test_the_real_receive_takes_the_nastiest_payloads(tmp_path: Path, relay: RelayProcess) -> None:
    world = make_world(tmp_path, relay)
    alice, bob = world.alice, world.bob
    before = Counts.of(world.folder)
    with RelayClient(relay.url) as client:
        for layer, payload in NASTIEST:
            deposit(world, client, layer, payload)
    alice.ok("send", "bob", "after them all")
    taken = bob.run("receive")
    assert taken.code == 0 and "Traceback" not in taken.err, taken.err
    assert [m.get("text") for m in taken.lines()][-1] == "after them all"
    assert waiting(relay, world.bob_id.fingerprint) == 0
    after = Counts.of(world.folder)
    quarantined = after.quarantined - before.quarantined
    assert after.held == before.held and quarantined == taken.err.count("quarantined:")
    raw_refused = sum(kind == "raw" for layer, (kind, _) in NASTIEST if layer != "text")
    assert raw_refused <= quarantined <= len(NASTIEST) - (len(taken.lines()) - 1)  # one place each
    assert bob.run("receive").out == ""  # nothing comes back
