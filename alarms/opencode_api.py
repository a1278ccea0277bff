"""The few calls the opencode alarm makes to an `opencode serve` HTTP server (stdlib only).

Every call has a timeout: an opencode server that is still starting can accept a connection
and answer nothing for minutes. Failures come in two kinds, because the alarm treats them
differently: `OpencodeDown` (no answer, or a 5xx: wait and try again, keep the mail) and
`OpencodeRefused` (a 4xx: the session is gone or the request is wrong; still keep the mail,
but say so loudly, since only the user can fix it).
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 5.0
SESSION_TITLE = "talk"  # with a title opencode makes no extra "title generator" model call


class OpencodeError(Exception):
    """A call to the opencode server did not succeed."""


class OpencodeDown(OpencodeError):
    """No usable answer (refused, timed out, 5xx): opencode is down or busy starting."""


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

    def request(self, method: str, path: str, body: Any = None) -> Reply:
        data = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"} if data is not None else {}
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, self.prefix + path, body=data, headers=headers)
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
        """Queue a user message; opencode answers 204 at once and runs the turn when it can."""
        self.request("POST", f"/session/{urllib.parse.quote(sid)}/prompt_async", body)
