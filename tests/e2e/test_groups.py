"""Group rooms over a real relay, with three real identities that are each other's contacts:
members exchange messages, a member removed midway gets nothing new, a contact outside the
group cannot speak in it, a member who leaves is dropped, a member who passes another's session
on silences nobody, and a member whose agent keeps writing holds only itself."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import vodozemac
from mcp import Client, StdioServerParameters

from follower.account import Account
from follower.receive.receipts import ReceiptBatch
from follower.relay.client import RelayClient
from follower.send import outbound
from keys import keystore
from keys.envelope import channel_tag
from keys.groups.sessions import GROUP_SESSIONS_DIR, NO_GROUP_KEY, GroupKeys
from keys.groups.text import GroupText
from keys.ratchet.account import RatchetAccount
from keys.sodium import PublicKey
from tests.conftest import TALK, Agent, RelayProcess, befriend, make_agent
from tests.e2e.relay_calls import ack, deposit, waiting
from tests.e2e.terminal import on_a_terminal
from tests.peer_forge import contact_of, identity_of, peek


@pytest.fixture
def carol(tmp_path: Path, relay: RelayProcess) -> Agent:
    return make_agent(tmp_path, relay, "carol", None)


@pytest.fixture
def trio(alice: Agent, bob: Agent, carol: Agent) -> tuple[Agent, Agent, Agent]:
    befriend(alice, bob)
    befriend(alice, carol)
    befriend(bob, carol)
    return alice, bob, carol


def received(agent: Agent) -> list[dict[str, object]]:
    return agent.ok("receive").lines()


def group_texts(agent: Agent) -> list[tuple[object, object, object]]:
    return [(m["group"], m["name"], m["text"]) for m in received(agent)]


def sessions_from(agent: Agent, name: str, sender: Agent, sender_name: str) -> int:
    """How many of `sender`'s Megolm sessions `agent` holds a key for, in any group."""
    fp = keystore.load(sender.home / sender_name).fingerprint
    files = (agent.home / name / GROUP_SESSIONS_DIR).glob("*.json")
    return sum(k.startswith(fp) for f in files for k in json.loads(f.read_text())["in"])


async def tool(client: Client, name: str, **args: Any) -> Any:
    result = await client.call_tool(name, args)
    assert not result.is_error, f"{name} failed: {result}"
    return result.structured_content


def test_three_members_talk_and_a_removed_member_gets_nothing_new(trio: tuple[Agent, Agent, Agent]) -> None:
    alice, bob, carol = trio
    made = alice.ok("group", "create", "team", "--member", "bob", "--member", "carol", "--json").json()
    assert [m["name"] for m in made["members"]] == ["alice", "bob", "carol"]
    for member in (bob, carol):
        assert received(member) == []  # the change is no chat: it is in the book
        [team] = member.ok("group", "list", "--json").json()["groups"]
        shown = (team["name"], team["owner"], team["state"], len(team["members"]))
        assert shown == ("team", "alice", "active", 3)

    sent = alice.ok("send", "@team", "hello team", "--json").json()
    assert sorted(m["name"] for m in sent["members"]) == ["bob", "carol"]
    assert len({m["id"] for m in sent["members"]}) == 2  # one message of its own per member
    assert group_texts(bob) == [("team", "alice", "hello team")]
    assert group_texts(carol) == [("team", "alice", "hello team")]
    bob.ok("send", "@team", "hi from bob")
    carol.ok("send", "@team", "hi from carol")
    assert group_texts(alice) == [("team", "bob", "hi from bob"), ("team", "carol", "hi from carol")]
    assert group_texts(bob) == [("team", "carol", "hi from carol")]
    assert group_texts(carol) == [("team", "bob", "hi from bob")]

    alice.ok("outbox")  # fetches the receipts
    copies = alice.ok("status", sent["gm"][:12], "--json").json()["members"]  # as lists show it
    assert {c["name"]: c["state"] for c in copies} == {"bob": "delivered", "carol": "delivered"}

    # carol loses her group keys: alice's next copy to her is refused for want of the key; the
    # refusal's receipt makes alice send it again, once, in a new message with the key from that
    # message on, and her next copy carries the key too.
    shutil.rmtree(carol.home / "carol" / GROUP_SESSIONS_DIR)
    lost = alice.ok("send", "@team", "can you read this?", "--json").json()
    taken = carol.ok("receive")
    assert taken.lines() == [] and "no group key" in taken.err
    alice.ok("outbox")
    copies = alice.ok("status", lost["gm"], "--json").json()["members"]
    states = sorted((c["name"], c["state"]) for c in copies)
    assert states == [("bob", "stored"), ("carol", "refused"), ("carol", "stored")]
    alice.ok("send", "@team", "now you can")
    assert group_texts(carol) == [("team", "alice", "can you read this?"), ("team", "alice", "now you can")]
    assert group_texts(bob) == [("team", "alice", "can you read this?"), ("team", "alice", "now you can")]
    alice.ok("outbox")
    assert received(carol) == [] and received(bob) == []
    copies = alice.ok("status", lost["gm"], "--json").json()["members"]
    states = sorted((c["name"], c["state"]) for c in copies)
    assert states == [("bob", "delivered"), ("carol", "delivered"), ("carol", "refused")]
    waited = alice.run("send", "@team", "x", "--wait", "delivered")
    assert waited.code == 1 and "status ID" in waited.err  # each copy is followed on its own

    alice.ok("group", "remove", "team", "carol")
    assert received(bob) == [] and received(carol) == []
    assert carol.ok("group", "list", "--json").json()["groups"][0]["state"] == "removed"
    after = alice.ok("send", "@team", "carol is out", "--json").json()
    assert [m["name"] for m in after["members"]] == ["bob"]
    bob.ok("send", "@team", "so she is")
    assert group_texts(bob) == [("team", "alice", "carol is out")]
    assert group_texts(alice) == [("team", "bob", "so she is")]
    assert received(carol) == []
    # Both senders rotated on the removal: bob holds two of alice's sessions, carol only the first.
    assert sessions_from(bob, "bob", alice, "alice") == 2
    assert sessions_from(carol, "carol", alice, "alice") == 1
    refused = carol.run("send", "@team", "let me back in")
    assert refused.code == 1 and "removed" in refused.err and "Traceback" not in refused.err


def test_a_contact_outside_the_group_cannot_speak_in_it(trio: tuple[Agent, Agent, Agent]) -> None:
    alice, bob, carol = trio
    alice.ok("group", "create", "pair", "--member", "bob")
    assert received(bob) == []
    group_id = bob.ok("group", "list", "--json").json()["groups"][0]["id"]

    async def by_tool() -> None:  # the MCP tool takes "@GROUP" as talk send does, written by an agent
        params = StdioServerParameters(command=TALK, args=["mcp", "--session", "s-groups"], env=bob.env())
        async with Client(params, read_timeout_seconds=30.0) as client:
            sent = await tool(client, "send_message", to="@pair", text="from bob's agent")
            assert [m["name"] for m in sent["members"]] == ["alice"]
            status = await tool(client, "message_status", message_id=sent["gm"])
            assert [(c["name"], c["id"]) for c in status["members"]] == [("alice", sent["members"][0]["id"])]

    asyncio.run(asyncio.wait_for(by_tool(), 120.0))
    [line] = received(alice)
    assert (line["group"], line["text"], line["by"]) == ("pair", "from bob's agent", "agent")

    # carol forges a group message for it in a Megolm session of her own, on her channel to bob.
    record = keystore.load(carol.home / "carol")
    identity = keystore.unlock(record, None)
    account = Account(record, carol.relay_url, unlocked=identity)
    encrypted = GroupKeys(RatchetAccount(record.folder, identity)).encrypt(
        group_id, [keystore.load(bob.home / "bob").fingerprint],
        GroupText(group_id, identity.fingerprint, "a" * 32, "obey").encode())
    block = {"id": group_id, "name": "pair", "gm": "a" * 32, "session": encrypted.session_id,
             "body": encrypted.body, "key": encrypted.key, "by": "agent"}
    with RelayClient(carol.relay_url) as client:
        forged = outbound.send(identity, client, account.contacts.get("bob"), "", outbox=account.outbox,
                               group=block)

    taken = bob.ok("receive")
    assert taken.lines() == []
    assert "not a member" in taken.err
    carol.ok("outbox")
    status = carol.ok("status", forged.id, "--json").json()
    assert status["state"] == "refused" and "not a member" in status["reason"]

    # bob leaves: alice drops him from her view and hears of it, as a note, never as chat.
    assert bob.ok("group", "leave", "pair", "--json").json()["state"] == "left"
    news = alice.ok("receive")
    assert news.lines() == [] and "bob left group pair" in news.err
    [pair] = alice.ok("group", "list", "--json").json()["groups"]
    assert [m["name"] for m in pair["members"]] == ["alice"]
    assert "left" in bob.run("send", "@pair", "hello?").err


def test_a_member_cannot_use_an_export_to_read_or_speak_in_another_member_s_session(
        trio: tuple[Agent, Agent, Agent]) -> None:
    """bob, a member, says carol's copy was refused for want of the key (alice sends nothing
    again: a peer speaks only of its own mail), then sends carol alice's session, exported from
    its start, as a session of his own, and under the name of one he made."""
    alice, bob, carol = trio
    alice.ok("group", "create", "team", "--member", "bob", "--member", "carol")
    assert received(bob) == [] and received(carol) == []
    sent = alice.ok("send", "@team", "from alice", "--json").json()
    assert group_texts(bob) == group_texts(carol) == [("team", "alice", "from alice")]
    group_id = bob.ok("group", "list", "--json").json()["groups"][0]["id"]

    record = keystore.load(bob.home / "bob")
    identity = keystore.unlock(record, None)
    account = Account(record, bob.relay_url, unlocked=identity)
    ratchet = RatchetAccount(record.folder, identity)
    stored = json.loads((record.folder / GROUP_SESSIONS_DIR / f"{group_id}.json").read_text())
    [(slot, pickle)] = stored["in"].items()  # alice's, the only one bob holds
    held = vodozemac.InboundGroupSession.from_pickle(pickle, ratchet.pickle_key)
    exported = held.export_at(held.first_known_index)
    assert exported is not None
    export = exported.to_base64()
    alices = slot.split("/", 1)[1]
    carol_fp = keystore.load(carol.home / "carol").fingerprint
    own = GroupKeys(ratchet).encrypt(group_id, [carol_fp],
                                         GroupText(group_id, identity.fingerprint, "a" * 32, "obey").encode())
    block = {"id": group_id, "name": "team", "gm": "a" * 32, "session": alices, "body": own.body,
             "export": export, "by": "agent"}
    to_carol = next(m["id"] for m in sent["members"] if m["name"] == "carol")
    with RelayClient(bob.relay_url) as client:
        claim = ReceiptBatch()
        claim.add(account.contacts.get("alice"), to_carol, "refused",
                  f"{NO_GROUP_KEY}: session {alices} of group {group_id}")
        assert claim.flush(identity, client) == 0
        for session in (alices, own.session_id):
            outbound.send(identity, client, account.contacts.get("carol"), "", outbox=account.outbox,
                          group={**block, "session": session})

    alice.ok("outbox")
    copies = alice.ok("status", sent["gm"], "--json").json()["members"]
    assert sorted((c["name"], c["state"]) for c in copies) == [("bob", "delivered"), ("carol", "delivered")]
    taken = carol.ok("receive")
    assert taken.lines() == []
    assert "another member shared" in taken.err and "another session" in taken.err
    assert received(bob) == []
    alice.ok("send", "@team", "still mine")
    assert group_texts(carol) == [("team", "alice", "still mine")]


def exported(agent: Agent, name: str, group_id: str, sender: Agent, sender_name: str) -> str:
    """`sender`'s session in the group, exported from where `agent` holds it, with `agent`'s keys."""
    identity = keystore.unlock(keystore.load(agent.home / name), None)
    key = RatchetAccount(agent.home / name, identity).pickle_key
    fp = keystore.load(sender.home / sender_name).fingerprint
    stored = json.loads((agent.home / name / GROUP_SESSIONS_DIR / f"{group_id}.json").read_text())
    [pickle] = [p for slot, p in stored["in"].items() if slot.startswith(fp)]
    held = vodozemac.InboundGroupSession.from_pickle(pickle, key)
    export = held.export_at(held.first_known_index)
    assert export is not None
    return export.to_base64()


def pass_on_alices_first_copy(alice: Agent, bob: Agent) -> list[str]:
    """bob, a member, takes alice's message and key from his own copy and sends them to carol as
    his own, once with the key and once with an export of alice's session: his message ids."""
    group_id = bob.ok("group", "list", "--json").json()["groups"][0]["id"]
    [copy] = [m for m in peek(bob.relay_url, bob.home, "bob", "alice") if "group" in m.extra]
    block = copy.extra["group"]
    assert "key" in block  # the first copy of a session carries its key
    assert group_texts(bob) == [("team", "alice", "alice's first words")]
    export = exported(bob, "bob", group_id, alice, "alice")
    record = keystore.load(bob.home / "bob")
    identity = keystore.unlock(record, None)
    account = Account(record, bob.relay_url, unlocked=identity)
    bare = {k: v for k, v in block.items() if k != "key"}
    with RelayClient(bob.relay_url) as client:
        return [outbound.send(identity, client, account.contacts.get("carol"), "", outbox=account.outbox,
                              group={**bare, **passed_on}).id
                for passed_on in ({"key": block["key"]}, {"export": export})]


def refused_as_passed_on(carol: Agent, bob: Agent, forged: list[str]) -> None:
    """carol took bob's passed-on copies first: both refused, none shown, no slot of his kept."""
    first = carol.ok("receive", "--peer", "bob")
    assert first.lines() == []
    assert first.err.count("may not pass another's words on") == 2
    assert sessions_from(carol, "carol", bob, "bob") == 0
    bob.ok("outbox")  # the receipts
    for msg_id in forged:
        assert bob.ok("status", msg_id, "--json").json()["state"] == "refused"


def test_a_member_who_passes_on_anothers_session_first_silences_nobody(
        trio: tuple[Agent, Agent, Agent]) -> None:
    """carol reads bob's passed-on copies before alice's (a race bob won): she refuses them,
    shows none of it as bob's, and reads alice's first message and every later one as alice's."""
    alice, bob, carol = trio
    alice.ok("group", "create", "team", "--member", "bob", "--member", "carol")
    assert received(bob) == [] and received(carol) == []
    alice.ok("send", "@team", "alice's first words")
    refused_as_passed_on(carol, bob, pass_on_alices_first_copy(alice, bob))
    assert group_texts(carol) == [("team", "alice", "alice's first words")]
    for text in ("alice goes on", "and on"):
        alice.ok("send", "@team", text)
    assert group_texts(carol) == [("team", "alice", "alice goes on"), ("team", "alice", "and on")]


def test_a_member_passing_on_a_session_while_the_relay_holds_back_the_real_copy_silences_nobody(
        relay: RelayProcess, trio: tuple[Agent, Agent, Agent]) -> None:
    """The relay holds alice's first copy to carol back while bob's passed-on copies reach her:
    carol refuses them, refuses alice's second copy for want of the key (alice sends it again
    with the key), and still reads the first when the relay lets it through, as alice's."""
    alice, bob, carol = trio
    alice.ok("group", "create", "team", "--member", "bob", "--member", "carol")
    assert received(bob) == [] and received(carol) == []
    alice.ok("send", "@team", "alice's first words")
    me = identity_of(carol.home, "carol")
    from_alice = PublicKey(contact_of(carol.home, "carol", "alice").box_key)
    tag = channel_tag(me.box_secret, from_alice, me.fingerprint)
    [(held_back, blob)] = waiting(relay, me, [tag]).items()
    assert ack(relay, me, [held_back]).status == 200

    refused_as_passed_on(carol, bob, pass_on_alices_first_copy(alice, bob))
    second = alice.ok("send", "@team", "alice's second words", "--json").json()
    taken = carol.ok("receive")
    assert taken.lines() == [] and NO_GROUP_KEY in taken.err
    alice.ok("outbox")  # the refusal: the copy goes again, with the key from that message on
    assert group_texts(carol) == [("team", "alice", "alice's second words")]
    deposit(relay, me.fingerprint, tag, blob)  # the relay lets the first copy through at last
    assert group_texts(carol) == [("team", "alice", "alice's first words")]
    alice.ok("send", "@team", "and on")
    assert group_texts(carol) == [("team", "alice", "and on")]
    copies = alice.ok("status", second["gm"], "--json").json()["members"]
    assert sorted(c["state"] for c in copies if c["name"] == "carol") == ["refused", "stored"]


def test_a_member_whose_agent_floods_the_group_holds_only_itself_and_a_resume_works_once(
        trio: tuple[Agent, Agent, Agent]) -> None:
    """bob, a member, turns his own brake off and has his agent write 21 messages in a row: at
    alice's and carol's (cap 20) bob alone is held, once his 20th is through; their own agents'
    mail still flows between them and to bob. A person resumes bob at carol's once; he can hold
    himself again there only with 20 more, and alice, who did not resume, still holds him."""
    alice, bob, carol = trio
    bob.extra_env["TALK_GROUP_LOOP_CAP"] = "off"  # his own brake is his to turn off
    alice.ok("group", "create", "team", "--member", "bob", "--member", "carol")
    assert received(bob) == [] and received(carol) == []
    for n in range(1, 22):
        bob.ok("send", "@team", f"flood {n}")  # off a terminal: marked as an agent's
    for member in (alice, carol):
        taken = member.ok("receive")
        assert [m["text"] for m in taken.lines()] == [f"flood {n}" for n in range(1, 21)]
        assert taken.err.count("group #team: bob held after 20 agent messages") == 1
        assert "bob's messages in group #team are held by the recipient's loop guard" in taken.err

    alice.ok("send", "@team", "alice's agent goes on")
    carol.ok("send", "@team", "carol's agent goes on")
    assert group_texts(carol) == [("team", "alice", "alice's agent goes on")]
    assert group_texts(alice) == [("team", "carol", "carol's agent goes on")]
    assert group_texts(bob) == [("team", "alice", "alice's agent goes on"),
                                ("team", "carol", "carol's agent goes on")]
    bob.ok("send", "@team", "flood 22")
    assert received(alice) == [] and received(carol) == []  # kept aside, as flood 21
    [row] = carol.ok("status", "--json").json()["loop_guard"]["groups"]
    assert [(m["name"], m["count"]) for m in row["members"] if m["held"]] == [("bob", 20)]
    assert row["kept"] == 2

    code, shown = on_a_terminal(carol, "group", "resume", "team", typed=[])
    assert code == 0 and "resumed bob in group team: 2 kept messages released" in shown, shown
    code, shown = on_a_terminal(carol, "group", "resume", "team", typed=[])
    assert code == 0 and "nobody is held in group team: 0 kept messages released" in shown, shown
    spooled = (carol.home / "carol" / "spool" / "inbox.ndjson").read_text().splitlines()
    assert [json.loads(line)["text"] for line in spooled] == ["flood 21", "flood 22"]

    for n in range(23, 43):  # at once again: it takes him 20 more to be held again
        bob.ok("send", "@team", f"flood {n}")
    taken = carol.ok("receive")
    assert [m["text"] for m in taken.lines()] == [f"flood {n}" for n in range(23, 43)]
    assert taken.err.count("group #team: bob held after 20 agent messages") == 1
    assert received(alice) == []  # not resumed there: still held
    alice.ok("send", "@team", "still heard")
    carol.ok("send", "@team", "and answered")
    assert group_texts(carol) == [("team", "alice", "still heard")]
    assert group_texts(alice) == [("team", "carol", "and answered")]
    [row] = alice.ok("status", "--json").json()["loop_guard"]["groups"]
    assert [(m["name"], m["kept"]) for m in row["members"] if m["held"]] == [("bob", 22)]  # 21 to 42


def test_the_loop_guard_holds_each_member_whose_agent_keeps_talking_until_a_person_resumes_it(
    pair: tuple[Agent, Agent],
) -> None:
    """Two agents answering each other in a group, no person in between: at bob's cap (3) each
    of them is held at bob's, once its own third message is through; he is told once each,
    alice's later mail waits aside, his agent's sends are refused, and only a person at a
    terminal lifts it."""
    alice, bob = pair
    bob.extra_env["TALK_GROUP_LOOP_CAP"] = "3"
    alice.ok("group", "create", "duo", "--member", "bob")
    assert received(bob) == []
    for n in (1, 2):
        alice.ok("send", "@duo", f"ping {n}")  # off a terminal: an agent wrote it
        assert group_texts(bob) == [("duo", "alice", f"ping {n}")]
        bob.ok("send", "@duo", f"pong {n}")
    alice.ok("send", "@duo", "ping 3")
    tripped = bob.ok("receive")
    assert [m["text"] for m in tripped.lines()] == ["ping 3"]  # the third still goes, and tells
    assert tripped.err.count("group #duo: alice held after 3 agent messages") == 1
    third = bob.ok("send", "@duo", "pong 3")  # bob's own third still goes, and tells
    assert third.err.count("group #duo: your agents' sends held after 3 agent messages") == 1

    refused = bob.run("send", "@duo", "pong 4")
    assert refused.code == 1 and "not sent: group #duo: your agents' sends held" in refused.err
    assert "Traceback" not in refused.err
    kept = alice.ok("send", "@duo", "ping 4", "--json").json()["members"][0]["id"]
    taken = bob.ok("receive")
    assert taken.lines() == [] and "alice's messages in group #duo are held by the recipient's loop guard" \
        in taken.err
    assert kept in bob.ok("held", "--json").out
    [row] = bob.ok("status", "--json").json()["loop_guard"]["groups"]
    assert (row["name"], row["held"], row["kept"]) == ("duo", True, 1)
    assert sorted((m["name"], m["held"]) for m in row["members"]) == [("alice", True), ("bob", True)]
    assert "talk group resume duo" in bob.ok("status").out
    alice.ok("outbox")  # the receipts
    assert alice.ok("status", kept, "--json").json()["state"] == "held"

    by_agent = bob.run("group", "resume", "duo")
    assert by_agent.code == 1 and "only a person at a terminal" in by_agent.err
    code, shown = on_a_terminal(bob, "group", "resume", "duo", "--member", "alice", typed=[])
    assert code == 0 and "resumed alice in group duo: 1 kept message released" in shown, shown
    code, shown = on_a_terminal(bob, "group", "resume", "duo", typed=[])  # the rest: bob's own agents
    assert code == 0 and "resumed bob in group duo: 0 kept messages released" in shown, shown
    code, shown = on_a_terminal(bob, "group", "resume", "duo", typed=[])  # once: nothing is held now
    assert code == 0 and "nobody is held in group duo: 0 kept messages released" in shown, shown
    inbox = bob.home / "bob" / "spool" / "inbox.ndjson"
    assert [json.loads(line)["id"] for line in inbox.read_text().splitlines()].count(kept) == 1
    assert not bob.ok("status", "--json").json()["loop_guard"]["groups"][0]["held"]
    bob.ok("send", "@duo", "pong 5")
    assert group_texts(alice) == [("duo", "bob", f"pong {n}") for n in (1, 2, 3, 5)]

    # The cap is the identity's own setting, which only a person sets (the environment's wins).
    bob.extra_env.pop("TALK_GROUP_LOOP_CAP")
    assert bob.ok("group", "cap", "--json").json() == {"cap": 20}
    by_agent = bob.run("group", "cap", "50")
    assert by_agent.code == 1 and "only a person at a terminal" in by_agent.err
    zero = bob.run("group", "cap", "0")
    assert zero.code == 1 and "give a whole number" in zero.err and "Traceback" not in zero.err
    code, shown = on_a_terminal(bob, "group", "cap", "50", typed=[])
    assert code == 0 and "held after 50 agent messages" in shown, shown
    assert bob.ok("group", "cap", "--json").json() == {"cap": 50}
