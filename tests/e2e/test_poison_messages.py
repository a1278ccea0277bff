"""Poison messages against a real relay and the real CLI: JSON nested 20,000 deep at every layer a
peer controls (the sealed envelope, the Olm plaintext, an invite request, a Megolm body) and a
joiner's name that collides with a long one. Each ends quarantined and acked; the mail after it
is delivered; `talk receive` exits 0 with no traceback; a sender who can be named is told."""

from __future__ import annotations

import secrets
from pathlib import Path

from nacl.secret import SecretBox

from follower.account import Account
from follower.receive.quarantine import Quarantine
from follower.relay.client import RelayClient
from follower.send import outbound
from follower.send.outbox import Outbox
from keys import keystore
from keys.envelope import Inner, new_message, pad, seal
from keys.groups.sessions import GroupKeys
from keys.identity import Identity
from keys.invites import InviteCode, parse_code
from keys.ratchet.account import RatchetAccount, card_for
from keys.ratchet.envelope import wrap
from keys.ratchet.sessions import RatchetSessions
from keys.sodium import PublicKey
from tests.conftest import Agent, RelayProcess, befriend, make_agent, wait_for
from tests.e2e.relay_calls import assert_error, fetch, new_tag, publish, signed
from tests.peer_forge import (
    contact_of,
    deposit_blob,
    deposit_raw,
    forged_identity,
    redeem_as,
    spool_records,
    waiting,
)

DEEP = b"[" * 20_000 + b"]" * 20_000


def received_cleanly(agent: Agent) -> list[str]:
    """The texts one `talk receive` prints, once it exited 0 without a traceback."""
    r = agent.run("receive")
    assert r.code == 0 and "Traceback" not in r.err, r.err
    return [str(m.get("text")) for m in r.lines()]


def refused_at_sender(sender: Agent, msg_id: str) -> None:
    def refused() -> bool:
        sender.ok("receive")  # no follower runs for the sender: its receive takes the receipts
        return bool(sender.ok("status", msg_id, "--json").json()["state"] == "refused")

    wait_for(refused, 20, "a refused receipt at the sender")


def olm_poison(alice: Agent, forger: Identity, bob_fp: str, plaintext: bytes) -> tuple[str, bytes]:
    """(id, sealed blob) of a message in alice's Olm session with bob whose plaintext is `plaintext`,
    recorded in alice's outbox as her own, so bob's receipt for it lands there."""
    store = RatchetSessions(RatchetAccount(alice.home / "alice", forger))
    message = store.encrypt(bob_fp, plaintext)
    card = card_for(store.account.read(), forger).to_json() if message.to_pre_key() is not None else None
    outer = wrap(new_message(forger.fingerprint, bob_fp, ""), message, card)
    to_bob = contact_of(alice.home, "alice", "bob")
    Outbox(alice.home / "alice").sent(outer.id, bob_fp, "bob", "chat", "x", "t", "")
    return outer.id, seal(outer, forger.box_secret, PublicKey(to_bob.box_key))


def invite_poison(inviter: Agent, relay: RelayProcess) -> InviteCode:
    """A fresh invite of `inviter`'s, redeemed with a request nested 20,000 deep; its code."""
    code = parse_code(inviter.ok("invite", "--json").json()["code"])
    with RelayClient(relay.url) as client:
        client.redeem(code.tag, bytes(SecretBox(code.key).encrypt(pad(DEEP))))
    return code


def megolm_poison(alice: Agent, forger: Identity, relay: RelayProcess, bob_fp: str) -> Inner:
    """A group message from alice to bob in group duo (made already) whose Megolm body is nested
    20,000 deep, sent as talk sends a group copy (so alice's outbox has it)."""
    group_id = alice.ok("group", "list", "--json").json()["groups"][0]["id"]
    account = Account(keystore.load(alice.home / "alice"), relay.url, unlocked=forger)
    encrypted = GroupKeys(RatchetAccount(alice.home / "alice", forger)).encrypt(group_id, [bob_fp], DEEP)
    block = {"id": group_id, "name": "duo", "gm": secrets.token_hex(16), "session": encrypted.session_id,
             "body": encrypted.body, "by": "agent", "key": encrypted.key}
    with RelayClient(relay.url) as client:
        return outbound.send(forger, client, account.contacts.get("bob"), "", outbox=account.outbox,
                             group=block)


def test_a_sealed_envelope_nested_20000_deep(duo: tuple[Agent, Agent, Identity], relay: RelayProcess) -> None:
    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    deposit_raw(relay.url, forger, to_bob, DEEP)
    alice.ok("send", "bob", "after the poison")
    assert received_cleanly(bob) == ["after the poison"]
    [kept] = Quarantine(bob.home / "bob").entries()
    assert "deeper than" in kept["reason"] and kept["from"] == forger.fingerprint  # its Box names it
    assert waiting(relay, to_bob.fingerprint) == 0
    assert received_cleanly(bob) == []


def test_an_olm_plaintext_nested_20000_deep(duo: tuple[Agent, Agent, Identity], relay: RelayProcess) -> None:
    alice, bob, forger = duo
    to_bob = contact_of(alice.home, "alice", "bob")
    alice.ok("send", "bob", "in a session")
    assert received_cleanly(bob) == ["in a session"]
    assert alice.ok("contacts", "--json").json()[0]["forward_secrecy"] is True  # ratchet on by default
    poison_id, blob = olm_poison(alice, forger, to_bob.fingerprint, DEEP)
    deposit_blob(relay.url, forger, to_bob, blob)
    alice.ok("send", "bob", "after the poison")
    assert received_cleanly(bob) == ["after the poison"]
    [kept] = Quarantine(bob.home / "bob").entries()
    assert kept["id"] == poison_id and "deeper than" in kept["reason"]
    assert waiting(relay, to_bob.fingerprint) == 0
    refused_at_sender(alice, poison_id)


def test_an_invite_request_nested_20000_deep(duo: tuple[Agent, Agent, Identity], relay: RelayProcess) -> None:
    alice, bob, _ = duo
    code = invite_poison(alice, relay)
    bob.ok("send", "alice", "after the poison")
    assert received_cleanly(alice) == ["after the poison"]
    [kept] = Quarantine(alice.home / "alice").entries()
    assert "contact request" in kept["reason"]
    alice_fp = keystore.load(alice.home / "alice").fingerprint
    assert waiting(relay, alice_fp) == 0
    invites = alice.ok("invite", "list", "--json").json()
    assert [i["state"] for i in invites if i["code"] == code.encode()] == ["used"]  # spent, not open
    assert received_cleanly(alice) == []


def test_a_megolm_body_nested_20000_deep(duo: tuple[Agent, Agent, Identity], relay: RelayProcess) -> None:
    alice, bob, forger = duo
    alice.ok("group", "create", "duo", "--member", "bob")
    assert received_cleanly(bob) == []  # the group's creation: a change of the book, not mail
    bob_fp = keystore.load(bob.home / "bob").fingerprint
    poison = megolm_poison(alice, forger, relay, bob_fp)
    alice.ok("send", "bob", "after the poison")
    assert received_cleanly(bob) == ["after the poison"]
    [kept] = Quarantine(bob.home / "bob").entries()
    assert kept["id"] == poison.id and "no valid text" in kept["reason"]
    assert waiting(relay, bob_fp) == 0
    refused_at_sender(alice, poison.id)


def test_a_follower_delivers_the_mail_after_the_poison(
    duo_following: tuple[Agent, Agent, Identity], relay: RelayProcess
) -> None:
    alice, bob, forger = duo_following
    to_bob = contact_of(alice.home, "alice", "bob")
    alice.ok("group", "create", "duo", "--member", "bob")
    first = alice.ok("send", "bob", "in a session", "--json").json()["id"]
    wait_for(lambda: first in {r["id"] for r in spool_records(bob, "bob")}, 20, "the first message")
    deposit_raw(relay.url, forger, to_bob, DEEP)
    deposit_blob(relay.url, forger, to_bob, olm_poison(alice, forger, to_bob.fingerprint, DEEP)[1])
    invite_poison(bob, relay)
    megolm_poison(alice, forger, relay, to_bob.fingerprint)
    good = alice.ok("send", "bob", "after the poison", "--json").json()["id"]
    wait_for(lambda: good in {r["id"] for r in spool_records(bob, "bob")}, 30, "the mail after the poison")
    wait_for(lambda: waiting(relay, to_bob.fingerprint) == 0, 20, "every blob acked")
    assert len(Quarantine(bob.home / "bob").entries()) == 4  # each layer's poison, once
    status = bob.ok("status", "--json").json()
    assert status["follower"]["running"] and status["quarantined"] == 4
    assert [r["id"] for r in spool_records(bob, "bob")] == [first, good]


def test_a_joiner_named_like_a_contact_with_a_long_name(tmp_path: Path, relay: RelayProcess) -> None:
    long_name = "b" * 60
    alice = make_agent(tmp_path, relay, "alice", None)
    bob = make_agent(tmp_path, relay, long_name, None)
    befriend(alice, bob)
    mallory = forged_identity(long_name)
    redeem_as(alice, relay, mallory)
    taken = alice.run("receive")
    assert taken.code == 0 and "Traceback" not in taken.err, taken.err
    [accepted] = taken.lines()
    assert accepted["name"] == long_name[:57] + "-" + mallory.fingerprint[:6]
    assert len(accepted["name"]) == 64
    assert [i["state"] for i in alice.ok("invite", "list", "--json").json()] == ["used", "used"]
    names = {c["name"] for c in alice.ok("contacts", "--json").json()}
    assert names == {long_name, accepted["name"]}
    bob.ok("send", "alice", "still flowing")
    assert received_cleanly(alice) == ["still flowing"]


def test_the_relay_refuses_a_body_nested_20000_deep_and_goes_on(relay: RelayProcess) -> None:
    owner = publish(relay)
    for path in (f"/v1/mail/{owner.fingerprint}/fetch", f"/v1/mail/{owner.fingerprint}/ack"):
        assert_error(signed(relay, owner, "POST", path, DEEP), 400, "bad_request", "deeper than")
    assert fetch(relay, owner, [new_tag()])["messages"] == []
