"""The few calls the opencode door makes to an `opencode serve` HTTP server (stdlib only).

Verified against opencode 1.18.33: `GET /session/status` maps each busy session to
`{"type": "busy"}` (or `"retry"`) and leaves idle ones out; `GET /session/{id}/message?limit=N`
gives the newest N messages, oldest first; `GET /event` is a server-sent event stream of
`data: {"type", "properties"}` lines (see `alarms.hosts.opencode.events`).

Every call connects anew, and each connection is checked before a byte is sent on it: the
server at its other end must be the user's own (`alarms.hosts.opencode.trust`), else the call fails
with `OpencodeUntrusted` and nothing, neither mail nor a password, reaches it.

Every call has a timeout: an opencode server that is still starting can accept a connection
and answer nothing for minutes. Failures come in two kinds, because the door treats them
differently: `OpencodeDown` (no answer, or a 5xx: wait and try again, keep the mail) and
`OpencodeRefused` (a 4xx: the session is gone or the request is wrong; still keep the mail,
but say so loudly, since only the user can fix it). `OpencodeUntrusted` is a kind of
`OpencodeDown`: the mail waits until the user's own server listens there again.

    OpencodeError
    ├── OpencodeDown
    │   └── OpencodeUntrusted   the server there is not the user's
    └── OpencodeRefused         4xx, with its status
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.parse
from dataclasses import dataclass
from typing import Any

from alarms.hosts.opencode.trust import authorization, distrust
from alarms.procnet import peer_owner

__all__ = ["split_url"]

TIMEOUT_S = 5.0
SESSION_TITLE = "talk"  # with a title opencode makes no extra "title generator" model call


class OpencodeError(Exception):
    """A call to the opencode server did not succeed."""


class OpencodeDown(OpencodeError):
    """No usable answer (refused, timed out, 5xx): opencode is down or busy starting."""


class OpencodeUntrusted(OpencodeDown):
    """The server at the URL is not the user's (another user's listener, or one of unknown owner)."""


class OpencodeRefused(OpencodeError):
    """opencode answered 4xx; `status` says which (404: no such session)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def split_url(url: str) -> tuple[str, int, str]:
    """(host, port, path prefix) of an `http://host:port[/prefix]` opencode URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"{url!r} is not an http://HOST:PORT URL of an opencode server")
    return parts.hostname, parts.port or 80, parts.path.rstrip("/")


class OpencodeClient:
    def __init__(self, url: str, timeout: float = TIMEOUT_S) -> None:
        self.url = url
        self.host, self.port, self.prefix = split_url(url)
        self.timeout = timeout

    def _connect(self, timeout: float, what: str) -> http.client.HTTPConnection:
        """A connection to the server, made and checked (`alarms.hosts.opencode.trust`) before use."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.connect()
            assert conn.sock is not None
            peer = conn.sock.getpeername()
            why = distrust(peer_owner(conn.sock), peer[0], os.geteuid(), f"{self.host}:{self.port}")
        except OSError as exc:
            conn.close()
            raise OpencodeDown(f"opencode at {self.url} did not answer {what}: {exc!r}") from exc
        if why is not None:
            conn.close()
            raise OpencodeUntrusted(why)
        return conn

    def request(self, method: str, path: str, body: Any = None) -> Reply:
        data = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"} if data is not None else {}
        conn = self._connect(self.timeout, f"{method} {path}")
        try:
            conn.request(method, self.prefix + path, body=data, headers={**headers, **authorization()})
            resp = conn.getresponse()
            reply = Reply(resp.status, resp.read())
        except (OSError, http.client.HTTPException) as exc:
            raise OpencodeDown(f"opencode at {self.url} did not answer {method} {path}: {exc!r}") from exc
        finally:
            conn.close()
        return self._check(method, path, reply)

    def _check(self, method: str, path: str, reply: Reply) -> Reply:
        if reply.status >= 500:
            raise OpencodeDown(f"opencode at {self.url} failed {method} {path}: HTTP {reply.status}")
        if reply.status >= 400:
            detail = reply.body[:300].decode(errors="replace")
            raise OpencodeRefused(f"opencode refused {method} {path}: HTTP {reply.status} {detail}",
                                  reply.status)
        return reply

    def create_session(self, title: str = SESSION_TITLE) -> str:
        info = self.request("POST", "/session", {"title": title}).json()
        return str(info["id"])

    def session_exists(self, sid: str) -> bool:
        try:
            self.request("GET", f"/session/{urllib.parse.quote(sid)}")
        except OpencodeRefused as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def prompt_async(self, sid: str, body: dict[str, Any]) -> None:
        """Hand opencode a user message; it answers 204 before storing it (the store runs after).

        Into an idle session this starts a run; into a busy one the message joins the running
        loop, which reads the session's messages again before each model request.
        """
        self.request("POST", f"/session/{urllib.parse.quote(sid)}/prompt_async", body)

    def busy(self, sid: str) -> bool:
        """Whether the session runs now (busy, or waiting to retry the model)."""
        status = self.request("GET", "/session/status").json()
        return isinstance(status, dict) and sid in status

    def asking(self, sid: str) -> list[str]:
        """The ids of the permissions and questions the session has open for its person."""
        found = []
        for path in ("/permission", "/question"):
            listed = self.request("GET", path).json()
            found += [str(r["id"]) for r in listed if isinstance(r, dict) and r.get("sessionID") == sid
                      and "id" in r] if isinstance(listed, list) else []
        return found

    def stored(self, sid: str, message_id: str) -> bool:
        """Whether opencode has stored the message (404 when not, or not yet)."""
        path = f"/session/{urllib.parse.quote(sid)}/message/{urllib.parse.quote(message_id)}"
        try:
            self.request("GET", path)
        except OpencodeRefused as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def newest_messages(self, sid: str, limit: int) -> list[dict[str, Any]]:
        """The `info` of the session's newest `limit` messages, oldest first."""
        got = self.request("GET", f"/session/{urllib.parse.quote(sid)}/message?limit={limit}").json()
        if not isinstance(got, list):
            raise OpencodeDown(f"opencode at {self.url} sent no message list for session {sid}")
        return [m["info"] for m in got if isinstance(m, dict) and isinstance(m.get("info"), dict)]

    def open_events(self, timeout: float) -> http.client.HTTPResponse:
        """`GET /event`, the server's event stream; the caller reads lines and closes it."""
        conn = self._connect(timeout, "GET /event")
        try:
            conn.request("GET", self.prefix + "/event",
                         headers={"accept": "text/event-stream", **authorization()})
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise OpencodeDown(f"opencode at {self.url} did not answer GET /event: {exc!r}") from exc
        if resp.status != 200:
            conn.close()
            self._check("GET", "/event", Reply(resp.status, b""))
            raise OpencodeDown(f"opencode at {self.url} answered GET /event with HTTP {resp.status}")
        return resp
