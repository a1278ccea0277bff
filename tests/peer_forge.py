"""A hostile peer's tools for tests: seal any JSON as a contact would, with the project's own keys.

talk's own `seal` only seals an `Inner` it built; an attacker seals whatever it likes. These
helpers do the same, so the tests can hand the receiver exactly the bytes an attacker would.
"""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from follower.relay.client import RelayClient
from follower.send.outbound import checked_bundle
from keys import keystore
from keys.contacts import Contact, ContactBook
from keys.encoding import utc_now_iso
from keys.envelope import Inner, channel_tag, open_blob, pad
from keys.identity import Identity, KeyBundle
from keys.invites import box_proof, parse_code, seal_request
from keys.ratchet.account import RatchetAccount
from keys.ratchet.card import verify_card
from keys.ratchet.envelope import is_ratchet, olm_part, unwrap
from keys.ratchet.sessions import RatchetSessions
from keys.sodium import Box, PublicKey, SealedBox
from spool_writer.record import SpoolRecord

if TYPE_CHECKING:
    from tests.conftest import Agent, RelayProcess


def identity_of(home: Path, name: str) -> Identity:
    """An identity made with --no-passphrase, unlocked from its TALK_HOME."""
    return keystore.unlock(keystore.load(home / name), None)


def contact_of(home: Path, name: str, contact: str) -> Contact:
    return ContactBook(home / name).get(contact)


def envelope(sender: Identity, to: Contact, **fields: Any) -> dict[str, Any]:
    """A well-formed inner envelope; `fields` override or add (None removes a field)."""
    data: dict[str, Any] = {"v": 1, "id": secrets.token_hex(16), "from": sender.fingerprint,
                            "to": to.fingerprint, "ts": utc_now_iso(), "kind": "chat", "text": "hi"}
    data.update(fields)
    return {k: v for k, v in data.items() if v is not None}


def seal_raw(sender: Identity, to: Contact, data: Any) -> bytes:
    """Seal `data` (any JSON value, or raw bytes) exactly as talk seals an envelope."""
    plain = data if isinstance(data, bytes) else json.dumps(data, ensure_ascii=False).encode()
    peer = PublicKey(to.box_key)
    boxed = Box(sender.box_secret, peer).encrypt(pad(plain))
    return bytes(SealedBox(peer).encrypt(bytes(sender.box_secret.public_key) + bytes(boxed)))


def deposit_raw(relay_url: str, sender: Identity, to: Contact, data: Any) -> str:
    """Deposit a crafted envelope on the pair's chat channel; returns the relay's id."""
    tag = channel_tag(sender.box_secret, PublicKey(to.box_key), to.fingerprint)
    with RelayClient(relay_url) as client:
        return client.deposit(to.fingerprint, tag, seal_raw(sender, to, data))


def deposit_blob(relay_url: str, sender: Identity, to: Contact, blob: bytes) -> str:
    """Deposit raw bytes (not even sealed) on the pair's chat channel."""
    tag = channel_tag(sender.box_secret, PublicKey(to.box_key), to.fingerprint)
    with RelayClient(relay_url) as client:
        return client.deposit(to.fingerprint, tag, blob)


def peek(relay_url: str, home: Path, name: str, sender_name: str) -> list[Inner]:
    """The mail `sender_name` left for `name`, opened with `name`'s own keys (its Olm sessions
    too) as a hostile member's own client would, and left on the relay unacked, its sessions
    unsaved: the real `talk receive` still takes it afterwards."""
    me, sender = identity_of(home, name), contact_of(home, name, sender_name)
    book = ContactBook(home / name)
    tag = channel_tag(me.box_secret, PublicKey(sender.box_key), me.fingerprint)
    with RelayClient(relay_url) as client:
        fetched, _ = client.fetch(me, [tag])
    opened = []
    with RatchetSessions(RatchetAccount(home / name, me)).page() as page:  # never committed
        for item in fetched:
            _, outer = open_blob(item.blob, me.box_secret, me.fingerprint, book.with_box_key,
                                 lambda c: c.fingerprint, me.kem_seed)
            if not is_ratchet(outer):
                opened.append(outer)
                continue
            part = olm_part(outer)
            curve = b"" if part.card is None else verify_card(part.card, sender.fingerprint,
                                                              sender.sign_key).curve25519
            inside = page.open(sender.fingerprint, curve, outer.id, part.message, part.card)
            opened.append(unwrap(outer, inside.plaintext))
    return opened


# What talk itself writes outside the quote; every other line an agent sees must start with "> ".
_OWN_LINE = re.compile(
    r"\[talk\] \d+ new messages? from peers:"
    r"|--- (?:message|task) \d+ of \d+(?: in group @[\w.-]+)? from [\w.-]+ \(fingerprint [0-9a-f]{32}, "
    r"id [0-9a-f]{32}, sent [0-9TZ:.-]+(?:; its sender says an? (?:person|agent) wrote it)?\)"
    r"|--- end of message \d+"
    r"|    NOTE: \d+ earlier messages? from [\w.-]+ did not arrive .*"
    r"|    NOTE: this message from [\w.-]+ arrived after later ones \(delayed on the way\)\."
    r"|    A task from a device you trust for tasks \(task [\w.:-]+, mode [\w-]+\)\..*"
    r"|    WARNING: this text carries an opencode-mesh task header, .*"
    r"|    The result of task (?:[\w][\w.:-]*|\?): (?:done|partial|failed|\?)\."
    r"|    A question about task (?:[\w][\w.:-]*|\?); answer it with talk send\."
    r"|These are messages from other agents \(peers\), delivered by talk\. .*"
    r"|Except: a message headed \"task\" .*"
    r"|Messages marked \"in group\" went to every member of that group: .*"
)
_ONE_LINE = re.compile(r"\[talk\] peer message(?: in group @[\w.-]+)? from [\w.-]+ "
                       r"\(fingerprint [0-9a-f]{32}, id [0-9a-f]{32}"
                       r"(?:; its sender says an? (?:person|agent) wrote it)?\)"
                       r"(?: \[[^\]\n]*\])?: \".*\" -- data from another agent, .*")


def peer_lines_outside_quote(framed: str) -> list[str]:
    """Lines of a framed block that talk did not write and that are not quoted: must be none.
    Every line break must be a plain "\\n": any other (U+2028, CR, VT, NEL…) counts as a breach."""
    breaches = [] if framed.splitlines() == framed.split("\n") else ["a line break other than \\n"]
    return breaches + [line for line in framed.split("\n")
                       if not line.startswith("> ") and line != ">" and not _OWN_LINE.fullmatch(line)]


def one_line_breaches(line: str) -> list[str]:
    """A monitor's one-line event must be exactly one line of talk's shape."""
    if len(line.splitlines()) != 1 or _ONE_LINE.fullmatch(line) is None:
        return [line]
    return []


def borrowed_box_bundle(owner: Identity, box_of: Identity) -> KeyBundle:
    """A bundle self-signed by `owner` around someone else's box key: signs, but owns no box."""
    unsigned = KeyBundle(owner.name, owner.sign_public, box_of.box_public, b"\0" * 64)
    return unsigned._replace(signature=owner.sign(unsigned.signed_part()))


def forged_identity(name: str) -> Identity:
    """An identity with a name `talk init` would refuse: a joiner signs whatever it likes."""
    made = Identity.generate("x")
    return Identity(name, made.signing_key, made.box_secret)


def redeem_as(inviter: Agent, relay: RelayProcess, joiner: Identity) -> None:
    """Join `inviter` with a fresh code of its, as `joiner` (named as it likes), proven and signed."""
    code = parse_code(inviter.ok("invite", "--json").json()["code"])
    with RelayClient(relay.url) as client:  # never published: the inviter cannot even answer it
        inviter_box = PublicKey(checked_bundle(client, code.fingerprint).box_key)
        proof = box_proof(code, joiner.bundle(), joiner.box_secret, inviter_box)
        client.redeem(code.tag, seal_request(code, joiner.bundle(), proof, secrets.token_hex(16)))


# --- what the attacked side shows ----------------------------------------------------------------

def waiting(relay: RelayProcess, fp: str) -> int:
    """How many messages the relay still holds for mailbox `fp` (what was not acked)."""
    with sqlite3.connect(relay.mailbox_db()) as db:
        return int(db.execute("SELECT COUNT(*) FROM mail WHERE fp = ?", (fp,)).fetchone()[0])


def spool_records(agent: Agent, name: str) -> list[SpoolRecord]:
    """The lines as an alarm reads them back: typed as written, checked by no one (see
    spool_writer.record), which is what the framing under test must cope with."""
    spool = agent.home / name / "spool"
    files = [spool / "inbox.ndjson", *sorted((spool / "sessions").glob("*.ndjson"))]
    return [cast(SpoolRecord, json.loads(line))
            for f in files if f.exists() for line in f.read_text().splitlines()]
