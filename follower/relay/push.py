"""The push stream: a thread that holds the relay's WebSocket open and wakes the follower.

The stream only says "look now"; the follower then fetches. "ready" arrives on every
(re)connect, so mail deposited while the stream was down is fetched as soon as it is back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

from follower.relay.backoff import RETRY
from follower.relay.client import Signer
from keys.wire import API, auth_headers

__all__ = ["PushListener"]

log = logging.getLogger("talk.follower")
# The relay's stream messages are {"type": "ready"} and {"type": "mail", "tag": …}, under 200
# bytes; a bigger frame is hostile, and ends the connection (1009) instead of filling memory.
MAX_MESSAGE = 4096
MAX_QUEUE = 4  # messages buffered before reading stops: each only says "look now"


def stream_url(relay: str, fp: str) -> tuple[str, str]:
    """(WebSocket URL, the path the signature covers) for a mailbox's stream."""
    parts = urlsplit(relay)
    scheme = "wss" if parts.scheme == "https" else "ws"
    path = f"{parts.path.rstrip('/')}{API}/mail/{fp}/stream"
    return f"{scheme}://{parts.netloc}{path}", path


class PushListener(threading.Thread):
    def __init__(self, relay: str, signer: Signer, wake: threading.Event,
                 on_state: Callable[[str], None]) -> None:
        super().__init__(name="push", daemon=True)
        self.url, self.path = stream_url(relay, signer.fingerprint)
        self.signer = signer
        self.wake = wake
        self.on_state = on_state
        self._stop = threading.Event()
        self._ws: object | None = None

    def stop(self) -> None:
        self._stop.set()
        ws = self._ws
        if ws is not None:
            ws.close()  # type: ignore[attr-defined]

    def run(self) -> None:
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        attempt = 0
        while not self._stop.is_set():
            self.on_state("connecting")
            try:
                headers = auth_headers(self.signer.sign, "GET", self.path, b"")
                with connect(self.url, additional_headers=headers, compression=None,
                             open_timeout=10, ping_interval=20, ping_timeout=20,
                             max_size=MAX_MESSAGE, max_queue=MAX_QUEUE) as ws:
                    self._ws = ws
                    self.on_state("connected")
                    attempt = 0
                    for _ in ws:
                        self.wake.set()
            except InvalidStatus as exc:
                # The relay is up but refused the stream (it lost our keys, say): a fetch now
                # tells why in the status, and publishes lost keys again.
                log.info("push stream refused: %s", exc)
                self.wake.set()
            except Exception as exc:  # any failure: back off and reconnect, never die
                log.info("push stream: %s", exc)
            finally:
                self._ws = None
            attempt += 1
            self._stop.wait(RETRY.delay(attempt))
        self.on_state("off")
