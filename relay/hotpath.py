"""The two requests that carry a relay's load — a deposit and a follower's fetch — handed
straight to their handlers, past Starlette's router and exception layers.

Profiled at ~3,700 messages/s, those layers (route matching over every route, the request
wrapper, two exception middlewares wrapping `send`) cost about a third of each request. This
dispatcher calls the very same `Relay` handlers, answers errors through the same handlers and
counts the same metrics; every other request, and anything it does not recognise, goes down
the normal Starlette stack, whose 404/405 answers stay the only ones.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from relay.errors import ApiError
from relay.store import StoreUnavailable

if TYPE_CHECKING:
    from relay.app import Relay

log = logging.getLogger("talk.relay")
Handler = Callable[[Request], Awaitable[Response]]
NOT_TAGS = frozenset({"ack", "purge", "session"})  # the other POST routes under /v1/mail/{fp}/


class HotPath:
    def __init__(self, app: ASGIApp, relay: Relay) -> None:
        self.app = app
        self.relay = relay

    def match(self, scope: Scope) -> tuple[Handler, dict[str, str]] | None:
        """POST /v1/mail/{fp}/fetch and POST /v1/mail/{fp}/{tag}, exactly as the routes read them."""
        if scope["type"] != "http" or scope["method"] != "POST":
            return None
        parts = scope["path"].split("/")
        if len(parts) != 5 or parts[0] or parts[1] != "v1" or parts[2] != "mail" or not parts[3]:
            return None
        fp, last = parts[3], parts[4]
        if last == "fetch":
            return self.relay.fetch, {"fp": fp}
        if not last or last in NOT_TAGS:
            return None
        return self.relay.deposit, {"fp": fp, "tag": last}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self.match(scope)
        if found is None:
            await self.app(scope, receive, send)
            return
        handler, params = found
        start = time.perf_counter()
        scope["path_params"] = params
        request = Request(scope, receive)
        try:
            response = await handler(request)
        except ApiError as exc:
            response = await self.relay.api_error(request, exc)
        except StoreUnavailable as exc:
            response = await self.relay.store_error(request, exc)
        except ClientDisconnect:  # gone before its body was read: nobody to answer, nothing wrong
            return
        except Exception as exc:  # what the server-error layer would do: log it, answer 500 JSON
            log.exception("relay: internal error")
            response = await self.relay.internal_error(request, exc)
        await response(scope, receive, send)
        self.relay.metrics.observe(handler.__name__, time.perf_counter() - start)
