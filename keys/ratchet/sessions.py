"""Pairwise Olm sessions, one file per peer, sealed at rest, and the one safe order to receive in.

Files, in the identity folder: `ratchet_sessions/<peer fingerprint>.json` holds, as JSON in a
file rewritten in place (`durable.slots`: a save costs one data sync at most, see Sending),
{"v": 1, "sessions": [PICKLE, ...], "seen": [ID, ...], "card"?: CARD, "lost"?: N, "lost_at"?: T,
"unopened"?: [ID, ...], "unopened_at"?: T, "started_at"?: T, "unsynced"?: N, "boot"?: ID,
"heard"?: true, "short"?: true, "chains"?: {SESSION ID: [KEY, ...]},
"late"?: [{"key": KEY, "pickle": PICKLE, "at": T}, ...]}:
the sessions with that peer, the one used last first, each sealed under the Olm account's pickle
key (`keys.ratchet.account`), the ids of the last `SEEN_MOST` messages received, the peer's
ratchet card the last session was started with (public, checked against the pin when it came,
and again by `talk verify`), how often (and when last) the peer said it lost them (`forget`),
the ids of the messages from the peer no session here could open (`opening`; ids, so a message
fetched again after a crash counts once) and when last, and when the newest session began.
`short` says the peer's receipts answered, so it reads the short form of a message
(`keys.ratchet.envelope`). The plain fields before it are what `talk status` shows on both sides
of a re-established session (`session_history`). `chains` names, per session, the peer's
ratchet keys (public) of its receiving chains, so a message is routed to the chain it rides
without opening a pickle; `late` holds the receiving chains the sessions dropped (and those
of a session dropped whole, past `SESSIONS_MOST`), each sealed alone, for mail that comes late
(`keys.ratchet.late`: why, what an archived chain can and cannot derive, how long it is kept).
Beside it,
`<peer fingerprint>.lock`: every reader of the identity (receive, follower, MCP) holds it from
loading a peer's sessions to saving them, so no two processes ever advance one ratchet from
the same state.

Receiving takes a page of mail at a time (`RatchetSessions.page`), in this order:

 1. A message whose id is in `seen`, or was opened earlier in the page, is answered as a
    duplicate before any session is touched: a resend or a replay costs no ratchet step and
    cannot fail a decryption.
 2. The message is decrypted in memory, in the peer's state taken once per page under its
    lock (as this process saved it last, while the file still holds that, else as the file
    holds it): in the session whose chain its ratchet key names; else in the archived chain it
    names (a late message; the chain, advanced, replaces the archived one); else in a session
    it starts a new chain in (the peer's answer), the chain that session drops then archived.
    A pre-key message that no session matches starts an inbound session, which takes its
    one-time key out of the account, held (once) for the rest of the page, in memory too.
    A message that fails changes nothing: vodozemac advances a session only once a message
    decrypts, so the page's other messages open as if the refused one had never come.
 3. The caller hands every plaintext of the page over durably (written and synced where it
    is read).
 4. `commit`: each peer with a message opened is saved once, with the ids added to `seen`
    and the archive as the page left it, in the same write as its sessions, synced, and then
    copied over the state before it (`durable.slots`); then the account, if step 2 changed
    it (replaced whole: the old file, with the one-time key the page used, is unlinked).
 5. The caller acks the page on the relay.

Why this order. A kill before 3 saved nothing: the page is still on the relay and decrypts
again from the same states (a chain a session dropped is still in it, not yet archived: the
drop and the archiving land in one write, so no kill leaves a chain in neither). A kill
between 3 and 4 hands it over twice; each second hand-over is dropped by id where the first
landed (the spool keeps each id once), and the states then saved are the ones after these
messages. A kill between two saves of step 4 leaves some peers
saved, others not: the messages of the unsaved ones decrypt again from their old state, those
of the saved ones are recognized at step 1; all are still on the relay. A kill between 4 and 5
leaves the page on the relay, every message recognized at step 1 and acked. A kill before the
account's save leaves the one-time keys in it, where they are only unused: the relay never
hands them out again. Saving before the hand-over would lose the message for good instead:
Olm forgets a message key once it is used, so the copy still on the relay could never be
decrypted again.

Locks. A page holds every lock it took until it ends, so it may wait for one only while that
cannot close a circle: for a peer's lock while it holds none, and for the account's while it
holds only the lock of the peer whose message it is opening. Any other lock it cannot take at
once is `Busy`: the caller ends the page before that message, and the next page, holding
nothing, waits for it. Everyone else takes one of these locks at a time. Within the page's
own process no lock it holds may be taken again (flock is per open file: that would wait for
the page forever), so a message whose handling sends or forgets ends the page first too
(`Page.holding`, `follower.receive.inbound`).

A message no session opens is noted in the peer's state in memory, and saved with the page's
commit, before the page is acked (its sender is told): a kill before the commit fetches the
message again, to be refused and noted again, and its id is noted once. The note is never the
reason anything is acked or kept. What the sender is told differs: `Unopened` when sessions
with it are held here but none opens the message, nor an archived chain (a key used already,
a chain older than the archive keeps, an altered message: the sessions held are still good),
a plain `TamperedMessage` when none is held, or a pre-key message matches none held and
cannot start one (the sender's session is lost to this side: it starts a new one).

Sending: `encrypt` saves the advanced session before it returns the ciphertext, so no chain
key ever encrypts two messages, whatever is killed afterwards. Only one save in `SYNC_EVERY`
waits for the disk: the others are left in the kernel's page cache, which outlives any process
that is killed, so only a crash of the machine can take them back, and the machine then boots
again. The file says in which boot it was written (`boot`, `durable.boot`) and how many
saves since the last synced one (`unsynced`). One send always waits for the disk: the first
after a message was opened (`heard`). It is the one that picks a new random ratchet key, which
every later message of the chain, and the peer's answer to it, depend on; left in the page
cache, a power loss would take the key back, the next boot would pick another, and the peer,
which read the message, would answer on a key this side no longer has (the session forked, and
neither side could open the other's next message). Synced, the key is on the disk before the
message leaves. In a conversation that costs one data sync per reply, as the receive before it
already did; a one-way stream pays nothing more. A state read in another boot may be older than
what was sent, by fewer than `SYNC_EVERY` messages (sends after it, or after the synced save it
is, may be lost), so before anything else every session in it encrypts and throws away
`SYNC_EVERY` messages, stepping past every message key that could have been used, and the next
save is synced. The peer sees a gap of unsent messages, which Olm allows (it keeps the skipped
keys for a while). Without a boot id every save is synced and none is stepped past.

What a copy of the folder opens (forward secrecy at rest). A receiving chain key opens every
later message of its chain, so a state from before a page would open that page's messages from
the relay's copies. None is left: the page's save is synced, and `durable.slots` then copies the
new state over the slot that held the one before it; no later save brings that back (a send's
unsynced save overwrites the older slot, which then holds a state after the page). So once
`commit` returns, no state in the file, in either slot, opens a message the page took. An
archived chain is no exception: a late message opened in it stores the chain back advanced,
in the same synced save, and only a dropped chain is archived, never a whole old session,
whose sending ratchet could derive the peer's next chain. The archive does keep, for up to
`keys.ratchet.late.KEEP_S`, the keys of messages that never came in the chains it holds: what
a live chain keeps too, for as long as the session holds it. On the
sending side an unsynced save leaves, in the older slot, the state before the last send, whose
sending chain key derives the key of the message sent last to this peer (vodozemac offers no
call that does it, but the pickle holds the key); the newest state, like any sender's, derives
the keys of the messages this side sends next, until the peer answers. A synced save (a page,
a loss, a new session, or every `SYNC_EVERY`-th send) leaves none behind. A power loss before
the copy reaches the disk may bring the older slot back there, until the next synced save.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import vodozemac

from durable.boot import boot_id
from durable.errors import NotFound, TamperedMessage, UserError
from durable.files import ensure_private_dir
from durable.locks import kept_locked, locked
from durable.slots import Slotted, holds, read_slots, write_slots
from keys.encoding import is_hex32
from keys.ratchet import late
from keys.ratchet.account import RatchetAccount
from keys.ratchet.card import Claim

__all__ = [
    "SEEN_MOST", "SESSIONS_DIR", "SYNC_EVERY", "Busy", "History", "Opened", "Page", "RatchetSessions",
    "Unopened", "has_sessions", "session_card", "session_history", "stored_state",
]

SESSIONS_DIR = "ratchet_sessions"
SEEN_MOST = 1000  # ids remembered per peer; an older replay meets Olm's own refusal instead
SESSIONS_MOST = 5  # sessions kept per peer (two can start at once when both sides write first)
# Sends per synced save. A power loss leaves the peer a gap of at most this many messages that
# never came: Olm keeps 40 skipped keys a chain, so the gap fits beside them and mail sent
# before the loss still opens if it comes after, far below the 2,000 a chain may skip.
SYNC_EVERY = 32


class Opened(NamedTuple):
    """A received message, opened but not yet committed (see the module's order)."""

    duplicate: bool
    plaintext: bytes


class Busy(Exception):
    """A lock the page may not wait for is held elsewhere: end the page before this message."""


class Unopened(TamperedMessage):
    """A message from a peer this side holds a session with, opened by none of them nor by an
    archived chain: its key was used already, its chain is gone (older than the archive keeps),
    or it was altered. Not "no session": the sessions held stay good for what comes next."""


class _Peer(NamedTuple):
    sessions: list[vodozemac.Session]
    seen: list[str]
    lost: int = 0
    lost_at: float = 0.0
    card: dict[str, Any] | None = None
    unopened: tuple[str, ...] = ()
    unopened_at: float = 0.0
    started_at: float = 0.0
    at: Slotted | None = None  # where the file holds this state: the next save goes beside it
    unsynced: int = 0  # saves since the last synced one (SYNC_EVERY: the next one must be)
    heard: bool = False  # a message opened since the last send: the next send may turn the ratchet
    late: tuple[late.LateChain, ...] = ()  # chains the sessions dropped, oldest first (`keys.ratchet.late`)
    # Per session id, the peer's ratchet keys of its receiving chains, oldest first, as far as
    # known: a message is routed by them without opening a pickle (`Page._decrypt`).
    chains: dict[str, tuple[bytes, ...]] | None = None
    # As `_save` wrote them last: the sessions' pickles, the seen ids' JSON and the file's other
    # fields but the two a send changes (`unsynced`, `heard`). A send that reuses the state it
    # saved (`encrypt`) advanced the first session alone and saw nothing new, so it pickles that
    # one and encodes nothing else again (a full `seen` is some 35 KB of JSON).
    pickles: tuple[str, ...] = ()
    seen_text: str = ""
    head_text: str = ""
    # The peer's receipts answered (`Page.confirm`): it reads the short form of a message
    # (`keys.ratchet.envelope`), until it says it lost its sessions.
    short: bool = False


class History(NamedTuple):
    """What became of the sessions with a peer (times are 0.0 for never): how often the peer
    said it lost ours, how many of its messages no session here could open, and when the
    newest session began."""

    lost: int = 0
    lost_at: float = 0.0
    unopened: int = 0
    unopened_at: float = 0.0
    started_at: float = 0.0
    sessions: int = 0  # sessions held now: none after a loss, until one begins again

    @property
    def reestablished_at(self) -> float | None:
        """When a session began again after the last loss on either side; None if none did yet,
        or nothing was ever lost."""
        broken = max(self.lost_at, self.unopened_at)
        return self.started_at if broken and self.started_at >= broken else None


def stored_state(path: Path) -> Any:
    """The JSON a session file holds, read without its lock (a save never shows half written:
    `durable.slots`); None if there is no such file, or it is damaged (its owner says how when
    it takes the lock)."""
    try:
        found = read_slots(path)
        return None if found is None else json.loads(found.payload)
    except ValueError:
        return None


def session_card(identity_folder: Path, peer: str) -> dict[str, Any] | None:
    """The card `peer`'s last session was started with, as stored (not checked here); None if
    there is no session file or no card in it."""
    stored = stored_state(identity_folder / SESSIONS_DIR / f"{peer}.json") if is_hex32(peer) else None
    card = stored.get("card") if isinstance(stored, dict) else None
    return card if isinstance(card, dict) else None


def session_history(identity_folder: Path) -> dict[str, History]:
    """Per peer with a session file, its `History`; the plain fields only, so no pickle is
    opened and no lock taken (a file is replaced whole, never seen half written)."""
    found = {}
    for path in sorted((identity_folder / SESSIONS_DIR).glob("*.json")):
        stored = stored_state(path)
        if isinstance(stored, dict) and is_hex32(path.stem):
            marks = _marks(stored)
            found[path.stem] = History(**{**marks, "unopened": len(marks["unopened"])},
                                       sessions=_count(stored.get("sessions")))
    return found


def has_sessions(identity_folder: Path, peer: str) -> bool:
    """Whether a session with `peer` is held (its file may remain with none, after a loss);
    the plain field only, so no pickle is opened."""
    stored = stored_state(identity_folder / SESSIONS_DIR / f"{peer}.json") if is_hex32(peer) else None
    return isinstance(stored, dict) and _count(stored.get("sessions")) > 0


def _count(sessions: Any) -> int:
    return len(sessions) if isinstance(sessions, list) else 0


def _marks(stored: dict[str, Any]) -> dict[str, Any]:
    """The plain fields of a session file, as `_Peer` holds them."""
    return {"lost": int(stored.get("lost", 0)), "lost_at": float(stored.get("lost_at", 0.0)),
            "unopened": tuple(str(i) for i in stored.get("unopened", [])),
            "unopened_at": float(stored.get("unopened_at", 0.0)),
            "started_at": float(stored.get("started_at", 0.0))}


# What this process saved last, per session file and pickle key, by a send or a page of mail: a
# process that sends or receives again (the follower, the MCP server, a library caller) reuses it
# while the file still holds it (`durable.slots.holds`), instead of reading and unpickling it on
# every message and every page. Whoever takes an entry takes it out while it uses it, and only a
# state as saved is put back: one some step changed in memory without saving is never handed
# out again.
_LAST_SAVED: dict[tuple[Path, bytes], _Peer] = {}


class RatchetSessions:
    """The Olm sessions of the identity whose account `account` holds, with every peer."""

    def __init__(self, account: RatchetAccount, clock: Callable[[], float] = time.time) -> None:
        self.account = account
        self.folder = account.folder / SESSIONS_DIR
        self._key = account.pickle_key
        self._clock = clock  # when a chain is archived, and which archived ones are too old to keep
        self._paths: dict[tuple[str, str], Path] = {}  # a send names three: built once per peer

    def _path(self, peer: str, suffix: str) -> Path:
        path = self._paths.get((peer, suffix))
        if path is None:
            if not is_hex32(peer):
                raise UserError(f"{peer!r} is not a fingerprint of 32 hex characters")
            path = self._paths[(peer, suffix)] = self.folder / f"{peer}{suffix}"
        return path

    @contextlib.contextmanager
    def _locked(self, peer: str, wait: bool = True) -> Iterator[_Peer]:
        ensure_private_dir(self.folder, "ratchet sessions folder")
        with locked(self._path(peer, ".lock"), wait=wait):
            yield self._kept(peer)[0]

    def _kept(self, peer: str) -> tuple[_Peer, bool]:
        """(the peer's state, whether it is the one this process saved last), under its lock: that
        one while the file still holds it, else the file's."""
        path = self._path(peer, ".json")
        kept = _LAST_SAVED.pop((path, self._key), None)
        if kept is not None and kept.at is not None and holds(path, kept.at):
            return kept, True
        return self._load(peer), False

    def _remember(self, peer: str, state: _Peer) -> None:
        """Keep `state`, as just saved, for the next send or page (`_kept`)."""
        _LAST_SAVED[(self._path(peer, ".json"), self._key)] = state

    def _load(self, peer: str) -> _Peer:
        try:
            at = read_slots(self._path(peer, ".json"))
            if at is None:
                return _Peer([], [])
            stored = json.loads(at.payload)
            if not isinstance(stored, dict) or stored.get("v") != 1:
                raise ValueError("not a session file of version 1")
            sessions = [vodozemac.Session.from_pickle(str(p), self._key) for p in stored["sessions"]]
            card = stored["card"] if isinstance(stored.get("card"), dict) else None
            seen = [str(i) for i in stored["seen"]]
            unsynced = int(stored.get("unsynced", 0))
            if stored.get("boot", boot_id()) != boot_id():
                _step_past_unsynced(sessions)
                unsynced = SYNC_EVERY
            chains = {str(sid): tuple(bytes.fromhex(k) for k in keys)
                      for sid, keys in dict(stored.get("chains", {})).items()}
            return _Peer(sessions, seen, card=card, at=at, unsynced=unsynced, chains=chains,
                         heard=stored.get("heard") is True, short=stored.get("short") is True,
                         late=late.late_from_json(stored.get("late", [])), **_marks(stored))
        except (KeyError, TypeError, ValueError) as exc:  # vodozemac's and json's errors are ValueErrors
            raise UserError(
                f"the ratchet sessions with {peer} cannot be opened ({exc}); move "
                f"{self._path(peer, '.json')} aside and a new session is started"
            ) from exc

    def _save(self, peer: str, state: _Peer, sync: bool = True, sent: bool = False) -> _Peer:
        """Save `state` (loaded under the peer's lock, still held); the state as now saved.
        Without `sync` (a send's save) the disk is waited for only every `SYNC_EVERY` saves, and
        for the first send after a message was opened (see Sending, in the module's docstring).
        `sent`: `state` is what this store saved last, changed since only by a send in its
        first session (`_Peer.pickles`), and the file still holds it (`durable.slots.holds`,
        under the lock still held), which keeps the file open to write through."""
        boot = boot_id()
        turned = state.heard and not sync  # a send that followed a receive
        unsynced = (0 if sync or turned or boot is None or state.unsynced + 1 >= SYNC_EVERY
                    else state.unsynced + 1)
        heard = state.heard and sync
        kept = state.sessions[:SESSIONS_MOST]
        dropped = state.sessions[SESSIONS_MOST:]
        # The same archive, unless a chain is dropped or expires: its text is then encoded once.
        archive = late.kept((*state.late, *self._chains_of(dropped)) if dropped else state.late,
                            self._clock())
        reuse = sent and len(state.pickles) == len(kept) and state.seen_text != "" and state.head_text != ""
        pickles = ((kept[0].pickle(self._key), *state.pickles[1:]) if reuse
                   else tuple(s.pickle(self._key) for s in kept))
        seen = state.seen_text if reuse else json.dumps(state.seen[-SEEN_MOST:], separators=(",", ":"))
        head = state.head_text if reuse else self._head(state, kept, boot)
        # Spliced in as text, as the archive is: a pickle is unpadded base64, which JSON holds as
        # it is, so the encoder need not scan a few kilobytes per session for what to escape.
        sessions = '"' + '","'.join(pickles) + '"' if pickles else ""
        marks = (f',"unsynced":{unsynced}' if unsynced else "") + (',"heard":true' if heard else "")
        data = f'{head}{marks},"sessions":[{sessions}],"seen":{seen}'
        if archive:  # a send's save does not encode it again (`late.late_text`)
            data = f'{data},"late":{late.late_text(archive)}'
        at = write_slots(self._path(peer, ".json"), f"{data}}}".encode(), state.at, sync=not unsynced,
                         held=sent)
        return state._replace(sessions=kept, at=at, unsynced=unsynced, late=archive, heard=heard,
                              pickles=pickles, seen_text=seen, head_text=head)

    @staticmethod
    def _head(state: _Peer, kept: list[vodozemac.Session], boot: str | None) -> str:
        """The session file's plain fields as JSON, less its closing brace and the fields a send
        changes (`unsynced`, `heard`), which `_save` adds."""
        losses = {"lost": state.lost, "lost_at": state.lost_at} if state.lost else {}
        unopened = ({"unopened": list(state.unopened[-SEEN_MOST:]), "unopened_at": state.unopened_at}
                    if state.unopened else {})
        known = state.chains or {}
        chains = {s.session_id: [k.hex() for k in known[s.session_id]] for s in kept if s.session_id in known}
        return json.dumps({
            "v": 1,
            **losses,
            **unopened,
            **({"started_at": state.started_at} if state.started_at else {}),
            **({"card": state.card} if state.card is not None else {}),
            **({"boot": boot} if boot is not None else {}),
            **({"short": True} if state.short else {}),
            **({"chains": chains} if chains else {}),
        }, separators=(",", ":"))[:-1]

    def _chains_of(self, sessions: list[vodozemac.Session]) -> list[late.LateChain]:
        """The receiving chains of sessions dropped whole (more than `SESSIONS_MOST`), archived
        each alone: mail sent in them may still come. Never a whole session (`keys.ratchet.late`)."""
        now = self._clock()
        found = []
        for session in sessions:
            state = late.unseal(session.pickle(self._key), self._key)
            found += [late.LateChain(key, late.seal(late.lone_chain(state, key), self._key), now)
                      for key in late.chain_keys(state)]
        return found

    def has_session(self, peer: str) -> bool:
        with self._locked(peer) as state:
            return bool(state.sessions)

    def forget(self, peer: str) -> None:
        """Drop the sessions with `peer`, keeping the ids seen and counting the loss: the peer
        said it can open none of them (its state was lost), so the next message starts a new
        one from a claimed key. Their receiving chains are archived, each alone: what the peer
        sent in them before its loss may still come (`keys.ratchet.late`)."""
        with self._locked(peer) as state:
            self._save(peer, state._replace(sessions=[], late=(*state.late, *self._chains_of(state.sessions)),
                                            lost=state.lost + 1, lost_at=time.time(), short=False))

    def start(self, peer: str, claim: Claim) -> None:
        """A new outbound session with `peer`, from a claimed key (already checked against the
        pin: `follower.send.ratchet_keys.claim_ratchet_key`); it becomes the one `encrypt` uses."""
        session = self.account.read().create_outbound_session(
            vodozemac.Curve25519PublicKey.from_bytes(claim.card.curve25519),
            vodozemac.Curve25519PublicKey.from_bytes(claim.key.key),
        )
        with self._locked(peer) as state:
            self._save(peer, state._replace(sessions=[session, *state.sessions], card=claim.card.to_json(),
                                            started_at=time.time()))

    def encrypt(self, peer: str, plaintext: bytes | Callable[[], bytes],
                short: Callable[[], bytes] | None = None) -> vodozemac.AnyOlmMessage:
        """Encrypt with the session used last, saved advanced before the ciphertext is returned:
        what `short` makes (the same message's short form, `keys.ratchet.envelope`) if given and
        the peer is known to read it, else `plaintext` (or what it makes). Each form is made only
        if it is the one sent, so a message costs one encoding; one that raises while it is made
        leaves the session as it was.

        Raises:
            NotFound: no session with `peer` yet (`start` one from a claimed key).
        """
        kept = (self._path(peer, ".json"), self._key) in _LAST_SAVED  # then a save made the folder
        if not kept:
            ensure_private_dir(self.folder, "ratchet sessions folder")
        try:
            return self._encrypt(peer, plaintext, short)
        except FileNotFoundError:
            if not kept:
                raise
            # The folder was removed since (its lock file cannot be opened again): made anew, the
            # send starts over from what it holds, so nothing this attempt advanced is used.
            ensure_private_dir(self.folder, "ratchet sessions folder")
            return self._encrypt(peer, plaintext, short)

    def _encrypt(self, peer: str, plaintext: bytes | Callable[[], bytes],
                 short: Callable[[], bytes] | None) -> vodozemac.AnyOlmMessage:
        with kept_locked(self._path(peer, ".lock")):
            state, reuse = self._kept(peer)
            if not state.sessions:
                raise NotFound(f"no ratchet session with {peer} yet")
            try:
                if short is not None and state.short:
                    sent = short()
                else:
                    sent = plaintext if isinstance(plaintext, bytes) else plaintext()
            except BaseException:
                self._remember(peer, state)  # nothing changed it: still as the file holds it
                raise
            message = state.sessions[0].encrypt(sent)
            self._remember(peer, self._save(peer, state, sync=False, sent=reuse))
        return message

    @contextlib.contextmanager
    def page(self) -> Iterator[Page]:
        """Open a page of mail: the locks `Page.open` takes are held until the block ends, and
        nothing is saved unless the block calls `Page.commit` (see the module's order)."""
        with contextlib.ExitStack() as locks:
            page = Page(self, locks)
            yield page
            for peer, state in page.saved.items():  # still under the page's locks
                self._remember(peer, state)


class Page:
    """The messages one page of mail opened, from any peers, until its `commit`."""

    def __init__(self, store: RatchetSessions, locks: contextlib.ExitStack) -> None:
        self._store = store
        self._locks = locks
        self._peers: dict[str, _Peer] = {}
        self._seen: dict[str, set[str]] = {}  # each peer's `seen`, to look an id up in one step
        self._touched: set[str] = set()
        self._account: vodozemac.Account | None = None
        self._account_changed = False
        # The peers' states as `commit` saved them, while the page changes them no further: kept
        # for this process's next send or page once the page ends (`RatchetSessions._kept`).
        self.saved: dict[str, _Peer] = {}

    @property
    def holding(self) -> bool:
        """Whether the page holds a lock: then a lock taken elsewhere in this process (a send,
        `forget`) would wait for the page, and so forever."""
        return bool(self._peers)

    def open(self, peer: str, peer_curve25519: bytes, msg_id: str, message: vodozemac.AnyOlmMessage,
             card: dict[str, Any] | None = None) -> Opened:
        """Open `message` from `peer` (whose card, `card`, checked, gave `peer_curve25519`), in
        memory: the peer's state after it is what `commit` saves.

        Raises:
            Busy: a lock the page may not wait for is held elsewhere; nothing was opened.
            Unopened: sessions with `peer` are held, but none opens it, nor an archived chain;
                nothing changed but the note of it, which `commit` saves.
            TamperedMessage: no session with `peer` is held, or it is a pre-key message that
                matches none held and cannot start one; nothing changed but the note of it.
            UserError: the stored sessions or account cannot be opened.
        """
        return self._open(peer, peer_curve25519, msg_id, message, card, note=True)

    def confirm(self, peer: str, msg_id: str, message: vodozemac.AnyOlmMessage) -> bool:
        """Open `message`, a receipt's answer (`keys.ratchet.envelope.answer_of`), like `open`:
        once it opens in a session this side started, the peer is known to hold it, and `encrypt`
        sends normal messages there, no longer pre-key messages with the card. Whether it opened
        (not a duplicate). One that opens in none is dropped, not noted as unopened: it carried
        nothing, and the sessions held stay as they were.

        Raises:
            Busy: as `open`; nothing was opened.
            UserError: the stored sessions cannot be opened.
        """
        if message.to_pre_key() is not None:
            return False  # an answer never starts a session: that takes a one-time key and a card
        try:
            opened = self._open(peer, b"", msg_id, message, None, note=False)
        except TamperedMessage:
            return False
        self._peers[peer] = self._peers[peer]._replace(short=True)  # only this version answers
        return not opened.duplicate

    def _open(self, peer: str, peer_curve25519: bytes, msg_id: str, message: vodozemac.AnyOlmMessage,
              card: dict[str, Any] | None, note: bool) -> Opened:
        state = self._peer(peer)
        self.saved.pop(peer, None)  # whatever happens next, this state may change
        seen = self._seen.get(peer)
        if seen is None:  # once per peer and page: the set is built from the loaded list
            seen = self._seen[peer] = set(state.seen)
        if msg_id in seen:
            return Opened(True, b"")
        if state.chains is None:
            state = self._peers[peer] = state._replace(chains={})
        try:
            plaintext, state, started = self._decrypt(state, peer_curve25519, message)
        except TamperedMessage:
            if note and msg_id not in state.unopened:
                noted = (*state.unopened, msg_id)
                self._peers[peer] = state._replace(unopened=noted, unopened_at=time.time())
                self._touched.add(peer)
            raise
        state.seen.append(msg_id)  # the page's own list (loaded for it), not copied per message
        seen.add(msg_id)
        if started or not state.heard or (card and card != state.card):  # not for each of a stream
            state = state._replace(card=card or state.card, heard=True,
                                   started_at=time.time() if started else state.started_at)
        self._peers[peer] = state
        self._touched.add(peer)
        return Opened(False, plaintext)

    def let_go(self, peer: str, msg_id: str) -> None:
        """Keep `msg_id`, opened in this page, out of `peer`'s seen ids: the message was refused
        after it opened for a reason its sender cures by sending it again under the same id
        (a reused number, `follower.send.resending`), and that copy must open, not be answered as a
        duplicate. The refusal's record is the quarantine; the ratchet step it took stays."""
        state = self._peers.get(peer)
        seen = self._seen.get(peer)
        if state is None or seen is None or msg_id not in seen:
            return
        self.saved.pop(peer, None)
        seen.discard(msg_id)
        state.seen.remove(msg_id)

    def _decrypt(self, state: _Peer, peer_curve25519: bytes,
                 message: vodozemac.AnyOlmMessage) -> tuple[bytes, _Peer, bool]:
        """(plaintext, the peer's state after it, whether it started a session), in memory.

        A message rides the held session whose chain its ratchet key names; else the archived
        chain it names (a late message: no held session's chain can be a key the peer used
        before); else it starts a chain in a held session (the peer's answer to this side's
        last message), and the chain that drops is archived; else, a pre-key message that
        matches no held session, it starts one. Whatever fails changes nothing.
        """
        key = late.ratchet_key(message.to_parts())
        pre_key = message.to_pre_key()
        matching = (state.sessions if pre_key is None
                    else [s for s in state.sessions if s.session_matches(pre_key)])
        if key is not None:
            for session in matching:
                if key in self._chain_keys(state, session):
                    return _decrypt_in(session, message), _first(state, session), False
            at = late.find(state.late, key)
            if at is not None:
                plaintext, archive = self._in_late(state, at, message)
                return plaintext, state._replace(late=archive), False
        for session in matching:
            opened = self._in_new_chain(state, session, message, key)
            if opened is not None:
                plaintext, dropped = opened
                return plaintext, _first(state, session)._replace(late=(*state.late, *dropped)), False
        if pre_key is None or matching:
            if state.sessions:
                raise Unopened("no ratchet session with this peer, nor an archived chain, opens the "
                               "message: its key was used already, its chain is older than kept, or "
                               "it was altered")
            raise TamperedMessage("no ratchet session with this peer opens the message: it was sent in a "
                                  "session this side no longer has, or it was altered")
        plaintext, session = _start_inbound(self._held_account(), peer_curve25519, message)
        self._account_changed = True
        return plaintext, _first(state, session), True

    def _chain_keys(self, state: _Peer, session: vodozemac.Session) -> tuple[bytes, ...]:
        """The peer's ratchet keys of `session`'s chains, as the peer's state knows them; read
        from the session only if it does not (a session begun since, or an older file), and
        then kept there, and saved with it."""
        assert state.chains is not None  # `open` gives every state it decrypts in a dict
        keys = state.chains.get(session.session_id)
        if keys is None:
            keys = state.chains[session.session_id] = late.chain_keys(self._state_of(session))
        return keys

    def _state_of(self, session: vodozemac.Session) -> dict[str, Any]:
        key = self._store._key
        return late.unseal(session.pickle(key), key)

    def _in_new_chain(self, state: _Peer, session: vodozemac.Session, message: vodozemac.AnyOlmMessage,
                      key: bytes | None) -> tuple[bytes, list[late.LateChain]] | None:
        """(plaintext, the chains `session` dropped for the new one, archived) if a message whose
        ratchet key (`key`) is new to `session` opens in it; None if not. A session with room for
        another chain drops none: its known keys just gain this one. A full one is read before
        and after the step (once per turn, never per message), so whatever vodozemac drops is
        archived; so is one whose chains are not known."""
        assert state.chains is not None
        known = state.chains.get(session.session_id)
        room = key is not None and known is not None and len(known) < late.CHAINS_MOST
        before = None if room else self._state_of(session)
        try:
            plaintext = session.decrypt(message)
        except ValueError:
            return None
        if before is None:
            assert known is not None and key is not None
            state.chains[session.session_id] = (*known, key)
            return plaintext, []
        after = state.chains[session.session_id] = late.chain_keys(self._state_of(session))
        now = self._store._clock()
        dropped = [late.LateChain(gone, late.seal(late.lone_chain(before, gone), self._store._key), now)
                   for gone in late.dropped(late.chain_keys(before), after)]
        return plaintext, dropped

    def _in_late(self, state: _Peer, at: int,
                 message: vodozemac.AnyOlmMessage) -> tuple[bytes, tuple[late.LateChain, ...]]:
        """(plaintext, the archive after it): a late message opened in the archived chain `at`,
        which is stored back advanced, so the key it used is gone from what `commit` saves.

        Raises:
            Unopened: the chain does not open it (its key was used, or it was altered).
            TamperedMessage: so, and no session with the peer is held any more.
        """
        archive = state.late
        chain = archive[at]
        session = vodozemac.Session.from_pickle(chain.pickle, self._store._key)
        try:
            plaintext = session.decrypt(message)
        except ValueError as exc:
            refusal = Unopened if state.sessions else TamperedMessage
            raise refusal(f"the archived chain the message names does not open it ({exc}): its key "
                          "was used already, or it was altered") from exc
        advanced = chain._replace(pickle=session.pickle(self._store._key))
        return plaintext, (*archive[:at], advanced, *archive[at + 1:])

    def commit(self) -> None:
        """Save each peer a message was opened (or refused) from, once, then the account if it
        changed."""
        for peer in sorted(self._touched):
            self._peers[peer] = self.saved[peer] = self._store._save(peer, self._peers[peer])
        if self._account is not None and self._account_changed:
            self._store.account.save(self._account)
        self._touched.clear()
        self._account_changed = False

    def _peer(self, peer: str) -> _Peer:
        state = self._peers.get(peer)
        if state is None:
            try:
                state = self._locks.enter_context(self._store._locked(peer, wait=not self._peers))
            except BlockingIOError as exc:
                raise Busy(f"the ratchet sessions with {peer} are in use") from exc
            self._peers[peer] = state
        return state

    def _held_account(self) -> vodozemac.Account:
        if self._account is None:
            try:
                self._account = self._locks.enter_context(
                    self._store.account.held(wait=len(self._peers) == 1))
            except BlockingIOError as exc:
                raise Busy("the ratchet account is in use") from exc
        return self._account


def _step_past_unsynced(sessions: list[vodozemac.Session]) -> None:
    """Step each session's sending chain past every message key a send may have used since the
    last synced save (see the module's docstring), in memory."""
    for session in sessions:
        for _ in range(SYNC_EVERY):
            session.encrypt(b"")


def _first(state: _Peer, used: vodozemac.Session) -> _Peer:
    """`state` with `used` first among its sessions: the one `encrypt` answers in."""
    if state.sessions and state.sessions[0] is used:
        return state  # a stream in one session: nothing to move
    return state._replace(sessions=[used, *(s for s in state.sessions if s is not used)])


def _decrypt_in(session: vodozemac.Session, message: vodozemac.AnyOlmMessage) -> bytes:
    """Open a message in the held session whose chain its ratchet key names.

    Raises:
        Unopened: that chain does not open it: its key was used already, or it was altered.
    """
    try:
        return session.decrypt(message)
    except ValueError as exc:
        raise Unopened(f"the ratchet session whose chain the message names does not open it ({exc}): "
                       "its key was used already, or it was altered") from exc


def _start_inbound(
    account: vodozemac.Account, peer_curve25519: bytes, message: vodozemac.AnyOlmMessage
) -> tuple[bytes, vodozemac.Session]:
    pre_key = message.to_pre_key()
    assert pre_key is not None  # `Page._decrypt` starts a session from pre-key messages only
    try:
        session, plaintext = account.create_inbound_session(
            vodozemac.Curve25519PublicKey.from_bytes(peer_curve25519), pre_key
        )
    except ValueError as exc:
        raise TamperedMessage(f"a ratchet pre-key message that starts no session ({exc}): a one-time "
                              "key used twice, another sender's key, or an altered message") from exc
    return plaintext, session
