"""A small synchronous relay client: one kept-alive connection per command.

`talk send` must start fast: httpx alone costs more import time than the whole send budget,
so plain-HTTP relays are spoken to by `follower.http11` and HTTPS relays by http.client.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any, Protocol
from urllib.parse import urlsplit

from nacl.exceptions import CryptoError

from follower.http11 import Connection
from keys.encoding import b64d
from keys.errors import RelayError, UserError
from keys.identity import KeyBundle
from keys.wire import API, SESSION_KEY_BYTES, auth_headers, session_headers

SESSION_MARGIN_S = 60  # renew a session this long before the relay would forget it


class Transport(Protocol):
    def exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]: ...

    def close(self) -> None: ...


class _HttpsTransport:
    """TLS relays go through http.client; its import cost is paid only for https URLs."""

    def __init__(self, host: str, port: int | None, timeout: float) -> None:
        import http.client

        self._conn = http.client.HTTPSConnection(host, port, timeout=timeout)

    def exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        import http.client

        try:
            self._conn.request(method, path, body=body, headers=headers)
            response = self._conn.getresponse()
            return response.status, response.read()
        except http.client.RemoteDisconnected as exc:
            raise ConnectionResetError(str(exc)) from exc
        except http.client.HTTPException as exc:
            raise OSError(f"bad HTTP from relay: {exc}") from exc

    def close(self) -> None:
        self._conn.close()


class Signer(Protocol):
    @property
    def fingerprint(self) -> str: ...

    def sign(self, message: bytes) -> bytes: ...


class SessionOwner(Signer, Protocol):
    """A signer that can also open what is sealed to it: needed to take a session key."""

    def unseal(self, blob: bytes) -> bytes: ...


class _Session:
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
        self._timeout = timeout
        self._conn: Transport | None = None
        self._use_sessions = sessions
        self._sessions: dict[str, _Session] = {}

    def __enter__(self) -> RelayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self) -> Transport:
        if self._conn is None:
            if self._https:
                self._conn = _HttpsTransport(self._host, self._port, self._timeout)
            else:
                self._conn = Connection(self._host, self._port or 80, self._timeout)
        return self._conn

    def _exchange(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        # A kept-alive connection the relay has closed fails on first use: retry once on a new one.
        # Every request is safe to repeat: deposits carry message ids the receiver dedups.
        for attempt in (1, 2):
            conn = self._connection()
            try:
                return conn.exchange(method, self._prefix + path, body, headers)
            except OSError as exc:
                self.close()
                dropped = isinstance(exc, BrokenPipeError | ConnectionResetError)
                if attempt == 2 or not dropped:
                    raise RelayError(
                        f"cannot reach the relay at {self.url} ({_reason(exc)}); is it running? "
                        "Check --relay or TALK_RELAY",
                    ) from exc
        raise AssertionError("unreachable")

    def request(
        self, method: str, path: str, body: bytes = b"", *, signer: Signer | None = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"content-type": content_type}
        if signer is None:
            return self._checked(method, path, body, headers)
        if not self._use_sessions or not hasattr(signer, "unseal"):
            headers.update(auth_headers(signer.sign, method, self._prefix + path, body))
            return self._checked(method, path, body, headers)
        for attempt in (1, 2):
            session = self._session(signer)  # type: ignore[arg-type]
            headers.update(session.headers(method, self._prefix + path, body))
            try:
                return self._checked(method, path, body, headers)
            except RelayError as exc:
                # The relay restarted, or this is another replica: it knows no session of ours.
                if exc.code != "session_expired" or attempt == 2:
                    raise
                self._sessions.pop(signer.fingerprint, None)
        raise AssertionError("unreachable")

    def _session(self, owner: SessionOwner) -> _Session:
        session = self._sessions.get(owner.fingerprint)
        if session is None or session.expires - SESSION_MARGIN_S <= time.time():
            path = f"{API}/mail/{owner.fingerprint}/session"
            headers = {"content-type": "application/json",
                       **auth_headers(owner.sign, "POST", self._prefix + path, b"")}
            data = self._checked("POST", path, b"", headers)
            try:
                key = owner.unseal(b64d(data["key"]))
                session = _Session(str(data["session"]), key, float(data["expires"]))
            except (KeyError, TypeError, ValueError, CryptoError) as exc:
                raise RelayError(f"the relay sent a malformed session: {exc}") from exc
            if len(key) != SESSION_KEY_BYTES:
                raise RelayError("the relay sent a session key of the wrong size")
            self._sessions[owner.fingerprint] = session
        return session

    def _checked(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> Any:
        status, raw = self._exchange(method, path, body, headers)
        payload = _parse(raw)
        if status >= 400:
            message = payload.get("message") if isinstance(payload, dict) else None
            code = payload.get("error", "") if isinstance(payload, dict) else ""
            raise RelayError(
                f"relay refused {method} {path.split('/')[2] if path.count('/') > 1 else path}: "
                f"{message or f'HTTP {status}'}",
                status=status,
                code=code,
            )
        return payload

    def publish(self, bundle: KeyBundle) -> None:
        body = json.dumps(bundle.to_json()).encode()
        self.request("PUT", f"{API}/keys/{bundle.fingerprint}", body)

    def bundle(self, fp: str) -> KeyBundle:
        """The bundle the relay serves for `fp`, not yet checked against any pin."""
        data = self.request("GET", f"{API}/keys/{fp}")
        try:
            return KeyBundle.from_json(data)
        except ValueError as exc:
            raise RelayError(f"the relay served a malformed key bundle for {fp}: {exc}") from exc

    def deposit(self, fp: str, tag: str, blob: bytes) -> str:
        data = self.request(
            "POST", f"{API}/mail/{fp}/{tag}", blob, content_type="application/octet-stream"
        )
        return str(data["id"])

    def fetch(
        self, signer: Signer, tags: list[str], limit: int = 100, ack: list[str] | None = None
    ) -> tuple[list[Fetched], bool]:
        """The oldest waiting mail; `ack` deletes those ids first, in the same request."""
        request: dict[str, Any] = {"tags": tags, "limit": limit}
        if ack:
            request["ack"] = ack
        body = json.dumps(request).encode()
        data = self.request("POST", f"{API}/mail/{signer.fingerprint}/fetch", body, signer=signer)
        try:
            mail = [Fetched(m["id"], m["tag"], b64d(m["blob"])) for m in data["messages"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise RelayError(f"the relay sent a malformed fetch response: {exc}") from exc
        return mail, bool(data.get("more"))

    def ack(self, signer: Signer, ids: list[str]) -> int:
        body = json.dumps({"ids": ids}).encode()
        data = self.request("POST", f"{API}/mail/{signer.fingerprint}/ack", body, signer=signer)
        return int(data.get("deleted", 0))

    def open_invite(self, signer: Signer, tag: str, expires: int) -> None:
        body = json.dumps({"tag": tag, "expires": expires}).encode()
        self.request("POST", f"{API}/invites/{signer.fingerprint}", body, signer=signer)

    def revoke_invite(self, signer: Signer, tag: str) -> bool:
        body = json.dumps({"tag": tag}).encode()
        data = self.request("POST", f"{API}/invites/{signer.fingerprint}/revoke", body, signer=signer)
        return bool(data.get("revoked"))

    def redeem(self, tag: str, blob: bytes) -> None:
        self.request("POST", f"{API}/redeem/{tag}", blob, content_type="application/octet-stream")

    def purge_unknown(self, signer: Signer, tags: list[str]) -> int:
        """Delete the mail waiting under tags this mailbox never registered; `tags` (the ones
        its owner reads) are registered first, so their mail stays. Returns how many went."""
        body = json.dumps({"tags": tags}).encode()
        data = self.request("POST", f"{API}/mail/{signer.fingerprint}/purge", body, signer=signer)
        return int(data.get("deleted", 0))


class Fetched:
    __slots__ = ("blob", "id", "tag")

    def __init__(self, id: str, tag: str, blob: bytes) -> None:
        self.id, self.tag, self.blob = id, tag, blob


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return {"message": raw[:200].decode(errors="replace")}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.timeout | TimeoutError):
        return "timed out"
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
