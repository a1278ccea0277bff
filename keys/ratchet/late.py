"""Late mail: the peer's receiving chains an Olm session dropped, kept so a message held back
across many reply exchanges still opens, once.

Why. vodozemac keeps at most five receiving chains per session, and every reply exchange (a
turn) starts a new one, dropping the oldest: a message queued while the relay was away, a
killed send deposited later, a relay that delays, held back across six turns or more, would
meet no chain that opens it. So each chain a session drops is archived here, as a session of
its own (and so is each chain of a session the receiver drops whole, keeping the newest five),
and the receiver opens a late message in it (`keys.ratchet.sessions`, `Page.open`).

What an archived chain is. A vodozemac session pickle holding that one receiving chain (with
its skipped message keys) and a sending ratchet that derives nothing: inactive, with an
all-zero root key and an all-zero peer ratchet key, whose Diffie-Hellman vodozemac refuses as
non-contributory. So it can neither encrypt nor start a new chain from a message's ratchet key:
a message no archived chain belongs to fails in it without changing anything. Opening a late
message advances the chain like any other; the advanced pickle is stored back, so the key used
is gone. Only the dropped chain is archived, never a whole old session: an old session's
sending ratchet could derive the peer's next chain, and open mail already taken.

The pickle format (vodozemac 0.10, `Session.pickle(key)`): base64 without padding of an
AES-256-CBC (PKCS#7) ciphertext of the session's serde JSON, followed by the first 8 bytes of
HMAC-SHA256 over that ciphertext; the AES key, the MAC key and the IV are the 80 bytes
HKDF-SHA256 expands from the pickle key (salt one zero byte, info "Pickle"). `seal` and
`unseal` write and read it; the tests check both against the library, so a vodozemac that
changes it fails them loudly instead of archiving chains it cannot read.

Finding which chain a message rides costs no pickle: `ratchet_key` reads the peer's ratchet key
from the message's bytes (Olm's own protobuf-like encoding), and the session file names each
session's chains by their keys; the receiver reads them from a pickle (`chain_keys`) only for a
session begun since, and before and after a message that starts a new chain (once a turn).

Bounds. The relay keeps mail `RELAY_TTL_S` (seven days, its default `ttl_s`), so a chain is
kept `KEEP_S`, twice that, from when it was dropped, and at most `LATE_MOST` per peer, the
newest kept (`kept`): some 1.5 KB each, 100 KB in all, which every save of the session file
writes (a send's save splices in the text encoded once: `late_text`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from durable.digests import compare_digest

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers import Cipher, modes

__all__ = [
    "CHAINS_MOST", "KEEP_S", "LATE_MOST", "RELAY_TTL_S", "LateChain", "chain_keys", "dropped", "find", "kept",
    "late_from_json", "late_text", "late_to_json", "lone_chain", "ratchet_key", "seal", "unseal",
]

RELAY_TTL_S = 7 * 86400  # how long the relay keeps a message nobody acked
KEEP_S = 2 * RELAY_TTL_S  # an archived chain outlives every copy the relay could still hand over
CHAINS_MOST = 5  # receiving chains vodozemac keeps per session (its ChainStore; a test pins it)
LATE_MOST = 64  # archived chains per peer: a message held back 64 turns still opens

MAC_LEN = 8  # vodozemac truncates the pickle's HMAC-SHA256 to 8 bytes
KEY_LEN = 32
_KEY_FIRST = bytes([3, 0x0A, KEY_LEN])  # version 3, field 1 (length-delimited), 32 bytes
_NOWHERE = [0] * KEY_LEN  # an all-zero Curve25519 key: every DH with it is refused


class LateChain(NamedTuple):
    """One archived receiving chain: the peer's ratchet key it belongs to (public, to find it
    without opening anything), the sealed single-chain session, and when it was archived."""

    key: bytes
    pickle: str
    at: float


def _keys(pickle_key: bytes) -> tuple[bytes, bytes, bytes]:
    """HKDF-SHA256 (RFC 5869), salt one zero byte, info "Pickle", 80 bytes: the AES key, the
    MAC key and the IV. Written on HMAC so that finding a chain costs no import of
    `cryptography`, which a `talk` command would otherwise pay at every start."""
    prk = _hmac_sha256(b"\x00", pickle_key)
    okm, block = b"", b""
    for counter in range(1, 4):  # 3 blocks of 32 bytes cover 80
        block = _hmac_sha256(prk, block + b"Pickle" + bytes([counter]))
        okm += block
    return okm[:32], okm[32:64], okm[64:80]


def _hmac_sha256(key: bytes, data: bytes) -> bytes:
    """HMAC-SHA256, from `hmac`, imported only when a chain is sealed or read: it loads OpenSSL's
    libcrypto, which finding a chain does not need (`durable.digests`)."""
    import hmac

    return hmac.digest(key, data, "sha256")


def _cbc(aes: bytes, iv: bytes) -> Cipher[modes.CBC]:
    """AES-256-CBC, imported only when a chain is sealed or read (a turn, not a message)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    return Cipher(algorithms.AES(aes), modes.CBC(iv))


def seal(state: dict[str, Any], pickle_key: bytes) -> str:
    """`state` (a session's serde JSON) as vodozemac's pickle under `pickle_key`."""
    aes, mac, iv = _keys(pickle_key)
    text = json.dumps(state, separators=(",", ":")).encode()
    pad = 16 - len(text) % 16  # PKCS#7: always 1 to 16 bytes, each the count
    encryptor = _cbc(aes, iv).encryptor()
    sealed = encryptor.update(text + bytes([pad]) * pad) + encryptor.finalize()
    tag = _hmac_sha256(mac, sealed)[:MAC_LEN]
    return base64.b64encode(sealed + tag).decode().rstrip("=")


def unseal(pickle: str, pickle_key: bytes) -> dict[str, Any]:
    """The serde JSON of vodozemac's pickle `pickle`.

    Raises:
        ValueError: not a pickle sealed under `pickle_key`, or not a session's JSON.
    """
    aes, mac, iv = _keys(pickle_key)
    raw = base64.b64decode(pickle + "=" * (-len(pickle) % 4), validate=True)
    sealed, tag = raw[:-MAC_LEN], raw[-MAC_LEN:]
    expected = _hmac_sha256(mac, sealed)[:MAC_LEN]
    if len(sealed) % 16 or not compare_digest(expected, tag):
        raise ValueError("not a session pickle sealed under this key")
    decryptor = _cbc(aes, iv).decryptor()
    padded = decryptor.update(sealed) + decryptor.finalize()
    pad = padded[-1] if padded else 0
    if not 1 <= pad <= 16 or padded[-pad:] != bytes([pad]) * pad:
        raise ValueError("a session pickle with broken padding")
    state = json.loads(padded[:-pad])
    if not isinstance(state, dict) or not isinstance(state.get("receiving_chains", {}).get("inner"), list):
        raise ValueError("a pickle that holds no session's receiving chains")
    return state


def chain_keys(state: dict[str, Any]) -> tuple[bytes, ...]:
    """The peer's ratchet keys of a session's receiving chains (its serde JSON), oldest first."""
    return tuple(bytes(chain["ratchet_key"]) for chain in state["receiving_chains"]["inner"])


def lone_chain(state: dict[str, Any], key: bytes) -> dict[str, Any]:
    """A session's JSON holding only its receiving chain for `key` and a sending ratchet that
    derives nothing (see the module's docstring).

    Raises:
        KeyError: the session has no chain for `key`.
    """
    chain = next((c for c in state["receiving_chains"]["inner"] if bytes(c["ratchet_key"]) == key), None)
    if chain is None:
        raise KeyError("no receiving chain for that ratchet key")
    return {**state,
            "sending_ratchet": {"type": "inactive", "root_key": {"key": _NOWHERE}, "ratchet_key": _NOWHERE},
            "receiving_chains": {"inner": [chain]}}


def dropped(before: Iterable[bytes], after: Iterable[bytes]) -> list[bytes]:
    """The chains (by ratchet key) a session held before a message and no longer holds."""
    now = set(after)
    return [key for key in before if key not in now]


def find(late: Iterable[LateChain], key: bytes) -> int | None:
    """Where in `late` the chain for ratchet key `key` is; None if none is archived."""
    return next((i for i, chain in enumerate(late) if chain.key == key), None)


def kept(late: Iterable[LateChain], now: float) -> tuple[LateChain, ...]:
    """`late` without the chains archived `KEEP_S` or more before `now`, and at most the newest
    `LATE_MOST` of the rest (archived order: oldest first)."""
    young = tuple(chain for chain in late if now - chain.at < KEEP_S)[-LATE_MOST:]
    return late if isinstance(late, tuple) and young == late else young  # the same: its text is kept


def late_to_json(late: Iterable[LateChain]) -> list[dict[str, Any]]:
    return [{"key": c.key.hex(), "pickle": c.pickle, "at": c.at} for c in late]


# The JSON text of the archives written last, by the archive (kept alive here, so its id is not
# reused): every send saves the whole session file, and a full archive is some 100 KB of JSON
# that changes only when a page archives, opens or expires a chain.
_TEXTS: dict[int, tuple[tuple[LateChain, ...], str]] = {}
_TEXTS_MOST = 16


def late_text(late: tuple[LateChain, ...]) -> str:
    """`late_to_json(late)` as compact JSON text, encoded once per archive."""
    kept_text = _TEXTS.get(id(late))
    if kept_text is not None and kept_text[0] is late:
        return kept_text[1]
    text = json.dumps(late_to_json(late), separators=(",", ":"))
    if len(_TEXTS) >= _TEXTS_MOST:
        _TEXTS.pop(next(iter(_TEXTS)))
    _TEXTS[id(late)] = (late, text)
    return text


def late_from_json(stored: Any) -> tuple[LateChain, ...]:
    """The archive as a session file holds it.

    Raises:
        ValueError, KeyError, TypeError: not an archive.
    """
    if not isinstance(stored, list):
        raise ValueError("the archive of late chains is not a list")
    late = tuple(LateChain(bytes.fromhex(str(c["key"])), str(c["pickle"]), float(c["at"])) for c in stored)
    if any(len(c.key) != KEY_LEN for c in late):
        raise ValueError("an archived chain's ratchet key is not 32 bytes")
    return late


def ratchet_key(message: tuple[int, bytes]) -> bytes | None:
    """The sender's ratchet key in an Olm message, from `AnyOlmMessage.to_parts()`: a version
    byte (3), then fields as protobuf writes them, a pre-key message carrying the message in
    field 4, a message its ratchet key in field 1. None if the bytes do not say."""
    kind, data = message
    if kind == 1 and data[:3] == _KEY_FIRST:  # as vodozemac writes a message: the key first
        return data[3:3 + KEY_LEN] if len(data) >= 3 + KEY_LEN else None
    if kind == 0:  # a pre-key message: its field 4 is the message
        inner = _field(data, 4)
        data = inner if inner is not None else b""
    key = _field(data, 1)
    return key if key is not None and len(key) == KEY_LEN else None


def _field(data: bytes, wanted: int) -> bytes | None:
    """The first length-delimited field numbered `wanted` after the version byte; None if the
    fields before it, or it, are malformed (a message's trailing MAC is never reached: its
    ratchet key is the first field)."""
    if not data or data[0] != 3:
        return None
    at = 1
    while at < len(data):
        tag, at = _varint(data, at)
        if tag is None:
            return None
        if tag & 7 == 0:  # a varint field (a chain index)
            _, at = _varint(data, at)
            if at < 0:
                return None
            continue
        if tag & 7 != 2:
            return None
        size, at = _varint(data, at)
        if size is None or at + size > len(data):
            return None
        if tag >> 3 == wanted:
            return data[at:at + size]
        at += size
    return None


def _varint(data: bytes, at: int) -> tuple[int | None, int]:
    value = shift = 0
    while at < len(data) and shift < 64:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    return None, -1
