"""A small synchronous relay client: kept-alive connections, owner and deposit traffic apart.

`talk send` must start fast: httpx alone costs more import time than the whole send budget,
so plain-HTTP relays are spoken to by `follower.relay.http11` and HTTPS relays by http.client.

Two kinds of request must never meet on one connection, or the relay could join them:
owner requests (fetch, ack, session, invites, publishing, taking and acking file chunks: they
name and prove our own fingerprint) and anonymous ones (deposits, file chunks put and their
progress, invite redemptions, key lookups: they name only the recipient). Owner requests share
one connection; an anonymous connection carries requests about one recipient mailbox (or one
invite tag) only, and is closed before the next recipient's, so the relay cannot tell that two
deposits came from one sender by the connection they came on.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from nacl.exceptions import CryptoError

from durable.bounded_json import parse_json
from durable.errors import RelayError, UserError
from durable.printable import printable
from follower.relay.http11 import Connection, ProtocolError
from keys.encoding import b64d
from keys.envelope import MAX_BLOB
from keys.identity import KeyBundle
from keys.wire import API, SESSION_KEY_BYTES, auth_headers, session_headers

__all__ = ["MALFORMED", "Fetched", "RelayClient", "check_relay_url", "read_mail"]

SESSION_MARGIN_S = 60  # renew a session this long before the relay would forget it
PAGE = 100  # messages asked for per fetch
# The largest answer a relay of ours gives is one full fetch page: PAGE blobs of at most
# MAX_BLOB bytes, base64 (4 bytes per 3) in JSON, with an id and a tag around each (< 256
# bytes). Anything longer is not a relay answer, and buffering it would let a hostile relay
# fill our memory.
MAX_ANSWER = PAGE * (4 * (MAX_BLOB // 3 + 1) + 256) + 4096
# The code of a RelayError for an answer that is not the talk protocol: no status tells whether
# the relay acted, so a deposit is not queued for later (a broken relay stays broken).
MALFORMED = "malformed_answer"
UNKNOWN_MAILBOX = "unknown_mailbox"  # the relay holds no keys for the mailbox a request names
OWNER = "owner"  # the lane of requests that name and prove our own fingerprint
TIMEOUT_ENV = "TALK_RELAY_TIMEOUT"
MAX_ID = 64  # a relay's message ids are short letters and digits (what an ack may name)
T = TypeVar("T")
Answer = Callable[[str, str, str, bytes, dict[str, str]], T]  # (lane, method, path, body, headers)


def relay_timeout(default: float) -> float:
    """Seconds to wait for the relay's next bytes (TALK_RELAY_TIMEOUT, for slow links or tests);
    a whole answer may take three times that."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, ""))
    except ValueError:
        return default
    return value if 0 < value < 3600 else default


class Transport(Protocol):
    def exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str],
        meanwhile: Callable[[], None] | None = None,
    ) -> tuple[int, bytes]:
        """Send one request and read its answer; `meanwhile` runs once the request has left,
        before the answer is read (see `RelayClient.deposit`)."""
        ...

    def close(self) -> None: ...


class _HttpsTransport:
    """TLS relays go through http.client; its import cost is paid only for https URLs.

    http.client bounds the head itself (100 fields, 64 KiB lines); the body is read at most
    MAX_ANSWER + 1 bytes, and a timer shuts the socket when a whole answer takes longer than
    `total_s`, which http.client's per-read timeout alone never does against a dripping relay.
    """

    def __init__(self, host: str, port: int | None, timeout: float) -> None:
        import http.client

        self._conn = http.client.HTTPSConnection(host, port, timeout=timeout)
        self._total_s = 3 * timeout
        self._expired = False

    def exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str],
        meanwhile: Callable[[], None] | None = None,
    ) -> tuple[int, bytes]:
        import threading

        self._expired = False
        timer = threading.Timer(self._total_s, self._expire)
        timer.start()
        try:
            return self._exchange(method, path, body, headers, meanwhile)
        except OSError:
            if self._expired:
                raise TimeoutError(f"the answer took longer than {self._total_s:g} s") from None
            raise
        finally:
            timer.cancel()

    def _exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str],
        meanwhile: Callable[[], None] | None,
    ) -> tuple[int, bytes]:
        import http.client

        try:
            self._conn.request(method, path, body=body, headers=headers)
            if meanwhile is not None:
                meanwhile()
            response = self._conn.getresponse()
            body = response.read(MAX_ANSWER + 1)
        except http.client.RemoteDisconnected as exc:
            raise ConnectionResetError(str(exc)) from exc
        except (http.client.HTTPException, ValueError) as exc:
            raise ProtocolError(str(exc) or type(exc).__name__) from exc
        if len(body) > MAX_ANSWER:
            self.close()
            raise ProtocolError(f"an answer over the limit of {MAX_ANSWER} bytes")
        return response.status, body

    def _expire(self) -> None:
        self._expired = True
        sock = self._conn.sock
        if sock is not None:
            import socket  # loaded already by http.client, which HTTPS relays need

            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._conn.close()


class Signer(Protocol):
    @property
    def fingerprint(self) -> str: ...

    def sign(self, message: bytes) -> bytes: ...


class MailboxOwner(Signer, Protocol):
    """A signer that can also open what is sealed to it: needed to take a session key."""

    def unseal(self, blob: bytes) -> bytes: ...


class _OwnerToken:
    __slots__ = ("counter", "expires", "key", "sid")

    def __init__(self, sid: str, key: bytes, expires: float) -> None:
        self.sid, self.key, self.expires = sid, key, expires
        self.counter = 0

    def headers(self, method: str, path: str, body: bytes) -> dict[str, str]:
        self.counter += 1
        return session_headers(self.sid, self.key, self.counter, method, path, body)


def check_relay_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"relay URL {url!r} must look like http://HOST:PORT or https://HOST")
    if not all("!" <= c <= "~" for c in parts.path):  # what an HTTP request line can carry
        raise UserError(f"relay URL {url!r} has a path with spaces or non-ASCII characters; "
                        "percent-encode them (%20 for a space)")
    return url.rstrip("/")


class RelayClient:
    """`sessions=True` (for long-lived clients such as the follower): the first owner request
    opens a session, later ones are MACed instead of signed (see `keys.wire`)."""

    def __init__(self, url: str, timeout: float = 10.0, sessions: bool = False) -> None:
        self.url = check_relay_url(url)
        parts = urlsplit(self.url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._prefix = parts.path
        self._timeout = relay_timeout(timeout)
        self._owner: Transport | None = None
        self._anonymous: tuple[str, Transport] | None = None  # (the lane it serves, connection)
        self._use_sessions = sessions
        self._sessions: dict[str, _OwnerToken] = {}
        self.republished_at: float | None = None  # when an owner request found our keys gone

    def __enter__(self) -> RelayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._drop(OWNER)
        if self._anonymous is not None:
            self._drop(self._anonymous[0])

    def _drop(self, lane: str) -> None:
        if lane == OWNER:
            conn, self._owner = self._owner, None
        elif self._anonymous is not None and self._anonymous[0] == lane:
            conn, self._anonymous = self._anonymous[1], None
        else:
            return
        if conn is not None:
            conn.close()

    def _new_transport(self) -> Transport:
        if self._https:
            return _HttpsTransport(self._host, self._port, self._timeout)
        return Connection(self._host, self._port or 80, self._timeout, max_body=MAX_ANSWER)

    def _connection(self, lane: str) -> Transport:
        """The connection for `lane`: OWNER, or an anonymous lane named for its recipient."""
        if lane == OWNER:
            if self._owner is None:
                self._owner = self._new_transport()
            return self._owner
        if self._anonymous is None or self._anonymous[0] != lane:
            if self._anonymous is not None:
                self._drop(self._anonymous[0])
            self._anonymous = (lane, self._new_transport())
        return self._anonymous[1]

    def _exchange(
        self, lane: str, method: str, path: str, body: bytes, headers: dict[str, str],
        meanwhile: Callable[[], None] | None = None,
    ) -> tuple[int, bytes]:
        # A kept-alive connection the relay has closed fails on first use: retry once on a new one.
        # Every request is safe to repeat: deposits carry message ids the receiver dedups.
        for attempt in (1, 2):
            conn = self._connection(lane)
            try:
                return conn.exchange(method, self._prefix + path, body, headers, meanwhile)
            except OSError as exc:
                self._drop(lane)
                dropped = isinstance(exc, BrokenPipeError | ConnectionResetError)
                if isinstance(exc, ProtocolError):
                    raise RelayError(
                        f"the relay at {self.url} sent a malformed answer ({_printable(str(exc))}); "
                        "check that --relay or TALK_RELAY names a talk relay", code=MALFORMED,
                    ) from exc
                if attempt == 2 or not dropped:
                    raise RelayError(
                        f"cannot reach the relay at {self.url} ({_reason(exc)}); is it running? "
                        "Check --relay or TALK_RELAY",
                    ) from exc
        raise AssertionError("unreachable")

    def request(
        self, method: str, path: str, body: bytes = b"", *, signer: Signer | None = None,
        content_type: str = "application/json", lane: str = OWNER,
    ) -> dict[str, Any]:
        """One request on `lane` (signed requests always go on the owner's); the JSON object
        the relay answered.

        Raises:
            RelayError: unreachable, a refusal (its `status` and `code`), or a malformed answer.
        """
        headers = {"content-type": content_type}
        if signer is None:
            return self._checked(lane, method, path, body, headers)
        bundle = getattr(signer, "bundle", None)  # an identity can publish its keys again
        try:
            return self._owner_request(method, path, body, signer, headers)
        except RelayError as exc:
            # The relay lost our keys (a store restarted empty, a new replica's store): every
            # owner request would fail, and nobody could write to us, until they are back.
            if exc.code != UNKNOWN_MAILBOX or bundle is None:
                raise
        self.publish(bundle())
        self.republished_at = time.time()
        return self._owner_request(method, path, body, signer, {"content-type": content_type})

    def _owner_request(self, method: str, path: str, body: bytes, signer: Signer,
                       headers: dict[str, str], answer: Answer[T] | None = None) -> T:
        """Signed, or MACed in our session; `answer` (the JSON object by default) reads the reply."""
        read: Answer[Any] = self._checked if answer is None else answer
        if not self._use_sessions or not hasattr(signer, "unseal"):
            headers.update(auth_headers(signer.sign, method, self._prefix + path, body))
            return read(OWNER, method, path, body, headers)  # type: ignore[no-any-return]
        for attempt in (1, 2):
            session = self._session(signer)  # type: ignore[arg-type]
            headers.update(session.headers(method, self._prefix + path, body))
            try:
                return read(OWNER, method, path, body, headers)  # type: ignore[no-any-return]
            except RelayError as exc:
                # The relay restarted, or this is another replica: it knows no session of ours.
                if exc.code != "session_expired" or attempt == 2:
                    raise
                self._sessions.pop(signer.fingerprint, None)
        raise AssertionError("unreachable")

    def _session(self, owner: MailboxOwner) -> _OwnerToken:
        session = self._sessions.get(owner.fingerprint)
        if session is None or session.expires - SESSION_MARGIN_S <= time.time():
            path = f"{API}/mail/{owner.fingerprint}/session"
            headers = {"content-type": "application/json",
                       **auth_headers(owner.sign, "POST", self._prefix + path, b"")}
            data = self._checked(OWNER, "POST", path, b"", headers)
            try:
                key = owner.unseal(b64d(data["key"]))
                session = _OwnerToken(str(data["session"]), key, float(data["expires"]))
            except (KeyError, TypeError, ValueError, CryptoError) as exc:
                raise RelayError(f"the relay sent a malformed session: {exc}") from exc
            if len(key) != SESSION_KEY_BYTES:
                raise RelayError("the relay sent a session key of the wrong size")
            self._sessions[owner.fingerprint] = session
        return session

    def _checked(
        self, lane: str, method: str, path: str, body: bytes, headers: dict[str, str],
        meanwhile: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        status, raw = self._exchange(lane, method, path, body, headers, meanwhile)
        payload = _json_object(raw)
        route = path.split("/")[2] if path.count("/") > 1 else path
        if status >= 400:
            raise _refusal(method, route, status, payload, raw)
        if payload is None:
            raise RelayError(f"the relay at {self.url} answered {method} {route} with something "
                             "other than a JSON object; check that --relay or TALK_RELAY names a talk relay",
                             code=MALFORMED)
        return payload

    def _bytes(
        self, lane: str, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> bytes:
        """The answer's body as it came, once its status says it is no refusal."""
        status, raw = self._exchange(lane, method, path, body, headers)
        if status >= 400:
            raise _refusal(method, path.split("/")[2], status, _json_object(raw), raw)
        return raw

    def publish(self, bundle: KeyBundle) -> None:
        body = json.dumps(bundle.to_json()).encode()
        self.request("PUT", f"{API}/keys/{bundle.fingerprint}", body)  # names us: owner lane

    def bundle(self, fp: str) -> KeyBundle:
        """The bundle the relay serves for `fp`, not yet checked against any pin."""
        data = self.request("GET", f"{API}/keys/{fp}", lane=f"mailbox {fp}")
        try:
            return KeyBundle.from_json(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise RelayError(f"the relay served a malformed key bundle for {fp}: {exc}") from exc

    def publish_ratchet(self, signer: Signer, publication: dict[str, Any]) -> int:
        """Publish ratchet keys (`keys.ratchet.card.Publication`); how many one-time keys wait.

        Raises:
            RelayError: unreachable, a refusal, or an answer without the count.
        """
        body = json.dumps(publication).encode()
        data = self.request("PUT", f"{API}/ratchet/{signer.fingerprint}", body, signer=signer)
        left = data.get("one_time_left")
        if not isinstance(left, int) or isinstance(left, bool) or left < 0:
            raise RelayError(f"the relay at {self.url} did not say how many ratchet keys it holds",
                             code=MALFORMED)
        return left

    def claim_ratchet(self, fp: str) -> dict[str, Any]:
        """One of `fp`'s ratchet keys with its card, not yet checked against any pin.

        Raises:
            RelayError: unreachable, or a refusal (404 not_found: none published).
        """
        return self.request("POST", f"{API}/ratchet/{fp}/claim", lane=f"mailbox {fp}")

    def ratchet_card(self, fp: str) -> dict[str, Any]:
        """`fp`'s published ratchet card, `{"card": ...}`, not yet checked against any pin; no
        key is taken out.

        Raises:
            RelayError: unreachable, or a refusal (404 not_found: none published, or a relay
                that predates the route).
        """
        return self.request("GET", f"{API}/ratchet/{fp}/card", lane=f"mailbox {fp}")

    def deposit(self, fp: str, tag: str, blob: bytes, meanwhile: Callable[[], None] | None = None) -> str:
        """Store `blob` in `fp`'s mailbox under `tag`; the id the relay gave it. `meanwhile` is work
        of the caller's that may run while the relay stores it: it runs once the request has left,
        before the answer is read (again if the request is sent again on a new connection, so it
        must do its work once, and it must not raise), or not at all if the request never left.

        Raises:
            RelayError: unreachable, a refusal (404 not_found: no such mailbox), or a malformed answer.
        """
        data = self._checked(f"mailbox {fp}", "POST", f"{API}/mail/{fp}/{tag}", blob,
                             {"content-type": "application/octet-stream"}, meanwhile)
        mail_id = data.get("id")
        if not isinstance(mail_id, str):
            raise RelayError(f"the relay at {self.url} did not say where it stored the message; "
                             "check that --relay or TALK_RELAY names a talk relay", code=MALFORMED)
        return mail_id

    def fetch(
        self, signer: Signer, tags: list[str], limit: int = PAGE, ack: list[str] | None = None
    ) -> tuple[list[Fetched], bool]:
        """The oldest waiting mail; `ack` deletes those ids first, in the same request."""
        request: dict[str, Any] = {"tags": tags, "limit": limit}
        if ack:
            request["ack"] = ack
        body = json.dumps(request).encode()
        data = self.request("POST", f"{API}/mail/{signer.fingerprint}/fetch", body, signer=signer)
        try:
            mail = [read_mail(m) for m in data["messages"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise RelayError(f"the relay sent a malformed fetch response: {exc}") from exc
        return mail, bool(data.get("more"))

    def ack(self, signer: Signer, ids: list[str]) -> int:
        body = json.dumps({"ids": ids}).encode()
        data = self.request("POST", f"{API}/mail/{signer.fingerprint}/ack", body, signer=signer)
        deleted = data.get("deleted", 0)
        return deleted if isinstance(deleted, int) else 0

    def open_invite(self, signer: Signer, tag: str, expires: int) -> None:
        body = json.dumps({"tag": tag, "expires": expires}).encode()
        self.request("POST", f"{API}/invites/{signer.fingerprint}", body, signer=signer)

    def revoke_invite(self, signer: Signer, tag: str) -> bool:
        body = json.dumps({"tag": tag}).encode()
        data = self.request("POST", f"{API}/invites/{signer.fingerprint}/revoke", body, signer=signer)
        return bool(data.get("revoked"))

    def redeem(self, tag: str, blob: bytes) -> None:
        self.request("POST", f"{API}/redeem/{tag}", blob, content_type="application/octet-stream",
                     lane=f"invite {tag}")

    def purge_unknown(self, signer: Signer, tags: list[str]) -> int:
        """Delete the mail waiting under tags this mailbox never registered; `tags` (the ones
        its owner reads) are registered first, so their mail stays. Returns how many went."""
        body = json.dumps({"tags": tags}).encode()
        data = self.request("POST", f"{API}/mail/{signer.fingerprint}/purge", body, signer=signer)
        return int(data.get("deleted", 0))


    def put_chunk(self, fp: str, tag: str, file_id: str, index: int, blob: bytes) -> None:
        """Put one sealed chunk of a file for `fp`'s mailbox, under our channel tag `tag`; a chunk
        put again is accepted and changes nothing.

        Raises:
            RelayError: unreachable, or a refusal: 413 `file_too_large`, 507 `file_quota` (retry
                later), 409 `file_conflict`, 429 `rate_limited`.
        """
        self.request("PUT", f"{API}/files/{fp}/{tag}/{file_id}/{index}", blob,
                     content_type="application/octet-stream", lane=f"mailbox {fp}")

    def file_next(self, fp: str, file_id: str) -> int:
        """The first chunk index of the file the relay does not hold: where an upload resumes."""
        data = self.request("GET", f"{API}/files/{fp}/{file_id}", lane=f"mailbox {fp}")
        index = data.get("next")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise RelayError(f"the relay at {self.url} did not say how much of a file it holds",
                             code=MALFORMED)
        return index

    def get_chunk(self, owner: Signer, file_id: str, index: int) -> bytes:
        """One sealed chunk of a file in our mailbox, as hostile as any blob: at most a chunk's
        size, its contents for `keys.filestream.Opener` to judge.

        Raises:
            RelayError: unreachable, a refusal (404 `no_such_chunk`), or an answer longer than
                any chunk.
        """
        from keys.filestream import ABYTES, CHUNK_BYTES  # loaded with the first file: mail needs none

        path = f"{API}/files/{owner.fingerprint}/chunk"
        body = json.dumps({"file": file_id, "index": index}).encode()
        raw = self._owner_request("POST", path, body, owner, {"content-type": "application/json"},
                                  answer=self._bytes)
        if len(raw) > CHUNK_BYTES + ABYTES:
            raise RelayError(f"the relay at {self.url} sent a file chunk of {len(raw)} bytes, longer "
                             "than any chunk", code=MALFORMED)
        return raw

    def ack_files(self, owner: Signer, file_ids: list[str]) -> int:
        """Delete files of our mailbox from the relay; how many it held."""
        body = json.dumps({"files": file_ids}).encode()
        data = self.request("POST", f"{API}/files/{owner.fingerprint}/ack", body, signer=owner)
        deleted = data.get("deleted", 0)
        return deleted if isinstance(deleted, int) and not isinstance(deleted, bool) else 0


def _refusal(
    method: str, route: str, status: int, payload: dict[str, Any] | None, raw: bytes
) -> RelayError:
    message = payload.get("message") if payload is not None else raw[:200].decode(errors="replace")
    code = payload.get("error", "") if payload is not None else ""
    return RelayError(
        f"relay refused {method} {route}: {_printable(str(message or f'HTTP {status}'))}",
        status=status,
        code=code if isinstance(code, str) else "",
    )


class Fetched:
    __slots__ = ("blob", "id", "tag")

    def __init__(self, id: str, tag: str, blob: bytes) -> None:
        self.id, self.tag, self.blob = id, tag, blob


def read_mail(item: object) -> Fetched:
    """One stored message as the relay sent it, fetched or pushed (`follower.relay.push`): the
    one place its fields are checked. The blob is as hostile as ever; opening it decides.

    Raises:
        KeyError, TypeError, ValueError: not {"id": str, "tag": str, "blob": base64} with an id
            the relay takes back in an ack and a blob of at most MAX_BLOB bytes.
    """
    if not isinstance(item, dict):
        raise TypeError(f"expected a message object, got {type(item).__name__}")
    blob = b64d(item["blob"])
    if len(blob) > MAX_BLOB:
        raise ValueError(f"a blob of {len(blob)} bytes, over the limit of {MAX_BLOB}")
    mail_id = _text(item["id"])
    if not (0 < len(mail_id) <= MAX_ID and mail_id.isascii() and mail_id.isalnum()):
        # An id an ack cannot name would make the relay refuse the ack of the whole page.
        raise ValueError("a message id that is not 1 to 64 letters and digits")
    return Fetched(mail_id, _text(item["tag"]), blob)


def _json_object(raw: bytes) -> dict[str, Any] | None:
    """The relay's answer as a JSON object (empty: {}), or None if it is anything else."""
    if not raw:
        return {}
    try:
        value = parse_json(raw, MAX_ANSWER)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _printable(text: str, limit: int = 200) -> str:
    """Relay-sent text for a one-line error: length bounded, then shown as every peer text is."""
    return printable(text[:limit])


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError
        return "timed out"
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
