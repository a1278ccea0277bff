"""The push stream: a thread that holds the relay's WebSocket open and wakes the follower.

A frame says "look now"; when it carries a stored message (small ones do: `relay.notify`), the
message goes into `PushedMail` for the follower to open without fetching it. That copy is a
shortcut, never the record: the message stays on the relay until the follower acks it after the
spool sync, and a frame that is malformed, dropped or never sent only means the fetch that a
wake-up causes brings it instead. "ready" arrives on every (re)connect, so mail deposited while
the stream was down is fetched as soon as it is back.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from durable.bounded_json import parse_json
from follower.relay.backoff import RETRY
from follower.relay.client import Fetched, Signer, read_mail
from keys.wire import API, auth_headers

if TYPE_CHECKING:
    from follower.relay.stream import Stream

__all__ = ["PushListener", "PushedMail", "pushed_mail"]

log = logging.getLogger("talk.follower")
# The relay's stream messages are {"type": "ready"}, {"type": "mail", "tag": …} and the same with
# "id" and a base64 "blob" of at most 8 KiB (12 KiB as base64); a bigger frame is hostile, and
# ends the connection (1009) instead of filling memory.
MAX_MESSAGE = 16 * 1024
MAX_PUSHED = 256  # messages waiting for the follower; past that the fetch brings the rest
OPEN_TIMEOUT_S = 10.0
PING_INTERVAL_S = 20.0  # a ping after this long without a byte from the relay…
PING_TIMEOUT_S = 20.0  # …and the relay taken for gone if this passes without one


def stream_url(relay: str, fp: str) -> tuple[str, str]:
    """(WebSocket URL, the path the signature covers) for a mailbox's stream."""
    parts = urlsplit(relay)
    scheme = "wss" if parts.scheme == "https" else "ws"
    path = f"{parts.path.rstrip('/')}{API}/mail/{fp}/stream"
    return f"{scheme}://{parts.netloc}{path}", path


def pushed_mail(frame: str | bytes) -> Fetched | None:
    """The message a stream frame carries; None for a bare wake-up and for anything malformed
    (which still wakes the follower: the fetch brings whatever there is). Never raises."""
    try:
        value = parse_json(frame, MAX_MESSAGE)
        if not isinstance(value, dict) or value.get("type") != "mail" or "blob" not in value:
            return None
        return read_mail(value)
    except (KeyError, TypeError, ValueError) as exc:
        log.info("push stream: ignored a malformed frame (%s)", exc)
        return None


class PushedMail:
    """Messages the push thread received, waiting for the follower's next drain."""

    def __init__(self, most: int = MAX_PUSHED) -> None:
        self._lock = threading.Lock()
        self._mail: deque[Fetched] = deque()
        self._most = most

    def put(self, item: Fetched) -> None:
        with self._lock:
            if len(self._mail) < self._most:  # over: left for the fetch the wake-up causes
                self._mail.append(item)

    def take(self) -> list[Fetched]:
        with self._lock:
            taken = list(self._mail)
            self._mail.clear()
        return taken


class Waker(Protocol):
    """What a frame sets (a `threading.Event`, or the follower's `DrainAsked`)."""

    def set(self) -> None: ...


class PushListener(threading.Thread):
    """`take`, when given, is offered each message the stream carried, on this thread: it takes
    what waits in `mail` at once when it can (True), so the message is not handed to another
    thread first; otherwise (False) `wake` is set, as for every other frame."""

    def __init__(self, relay: str, signer: Signer, wake: Waker,
                 on_state: Callable[[str], None], mail: PushedMail | None = None,
                 take: Callable[[], bool] | None = None) -> None:
        super().__init__(name="push", daemon=True)
        self.url, self.path = stream_url(relay, signer.fingerprint)
        self.signer = signer
        self.wake = wake
        self.on_state = on_state
        self.mail = mail
        self.take = take
        self._stop = threading.Event()
        self._stream: Stream | None = None

    def stop(self) -> None:
        self._stop.set()  # before looking for the stream: `run` looks at this once it has one
        stream = self._stream
        if stream is not None:
            stream.close()

    def run(self) -> None:
        from websockets.exceptions import InvalidStatus

        from follower.relay.stream import Stream

        attempt = 0
        while not self._stop.is_set():
            self.on_state("connecting")
            try:
                headers = auth_headers(self.signer.sign, "GET", self.path, b"")
                with Stream.open(self.url, headers, OPEN_TIMEOUT_S, MAX_MESSAGE,
                                 PING_INTERVAL_S, PING_TIMEOUT_S) as stream:
                    self._stream = stream
                    if self._stop.is_set():
                        break
                    self.on_state("connected")
                    attempt = 0
                    for frame in stream.messages():  # read on this thread, and taken here too
                        self.received(frame)
            except InvalidStatus as exc:
                # The relay is up but refused the stream (it lost our keys, say): a fetch now
                # tells why in the status, and publishes lost keys again.
                log.info("push stream refused: %s", exc)
                self.wake.set()
            except Exception as exc:  # any failure: back off and reconnect, never die
                log.info("push stream: %s", exc)
            finally:
                self._stream = None
            attempt += 1
            self._stop.wait(RETRY.delay(attempt))
        self.on_state("off")

    def received(self, frame: str | bytes) -> None:
        if self.mail is not None:
            item = pushed_mail(frame)
            if item is not None:
                self.mail.put(item)
                if self.take is not None and self.take():
                    return
        self.wake.set()
