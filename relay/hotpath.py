"""The two requests that carry a relay's load — a deposit and a follower's fetch — handed
straight to their handlers, past Starlette's router and exception layers.

Profiled at ~3,700 messages/s, those layers (route matching over every route, the request
wrapper, two exception middlewares wrapping `send`) cost about a third of each request. This
dispatcher calls the very same handlers, answers errors through the same exception handlers
and counts the same metrics; every other request, and anything it does not recognise, goes
down the normal Starlette stack, whose 404/405 answers stay the only ones.

It reads what POST /v1/mail/{fp}/<word> reaches from the app's own route table, in the
router's order (`mailbox_posts`), so a route added there can never be taken for a deposit; a
table whose shape it cannot follow is refused when the app is built, not guessed at.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from starlette.convertors import StringConvertor
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import PARAM_REGEX, BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("talk.relay")
Handler = Callable[[Request], Awaitable[Response]]
ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]
MAILBOX = ("", "v1", "mail")  # the literal head of every path this dispatcher takes
MAILBOX_PREFIX = "/".join(MAILBOX) + "/"


class UnfollowableRoute(ValueError):
    """A route table the hot path cannot mirror exactly; raised when the app is built."""


@dataclass(frozen=True)
class MailboxRoute:
    """A POST /v1/mail/{owner}/<last> route: its endpoint and the names of its parameters."""

    endpoint: Handler
    owner: str
    word: str = ""  # the last segment's parameter, where it is one


@dataclass(frozen=True)
class MailboxPosts:
    """What POST /v1/mail/{fp}/<last> reaches: `words` by their literal last segment, then the
    route with a parameter there (`any_word`), as the router tries them."""

    words: dict[str, MailboxRoute] = field(default_factory=dict)
    any_word: MailboxRoute | None = None


def mailbox_posts(routes: Sequence[BaseRoute]) -> MailboxPosts:
    """Raises:
        UnfollowableRoute: a route the router would try on some mailbox POSTs but not on all
            the ones with its last segment (a Mount, a literal fingerprint, a narrow or
            multi-segment parameter), or one no request can reach because a route before it
            takes every word (each of its requests would become a deposit)."""
    posts = MailboxPosts()
    for route in routes:
        if isinstance(route, WebSocketRoute):
            continue  # never matches an http scope
        if not isinstance(route, Route):
            raise UnfollowableRoute(f"the hot path cannot follow a {type(route).__name__}")
        found = _mailbox_route(route) if "POST" in (route.methods or ()) else None
        if found is None:
            continue
        owner, last = found
        if posts.any_word is not None:
            raise UnfollowableRoute(f"POST {route.path} is unreachable: a POST route before it "
                                    "takes every word there; declare it before that route")
        if isinstance(last, str):
            posts.words.setdefault(last, MailboxRoute(route.endpoint, owner))
        else:
            posts = MailboxPosts(posts.words, MailboxRoute(route.endpoint, owner, last.name))
    return posts


@dataclass(frozen=True)
class _Param:
    name: str
    every: bool  # matches every single segment (a str convertor), not only some


def _mailbox_route(route: Route) -> tuple[str, str | _Param] | None:
    """The name of the {fp} parameter and the last segment of `route` if it is
    /v1/mail/{fp}/<last>; None if it matches no /v1/mail/<fp>/<word> path at all."""
    prefix = route.path.split("{", 1)[0]  # the literal head, before any parameter
    if not (MAILBOX_PREFIX.startswith(prefix) or prefix.startswith(MAILBOX_PREFIX)):
        return None
    shape = [_segment(route, text) for text in route.path.split("/")]
    if any(isinstance(part, _Param) and not part.every for part in shape):
        raise UnfollowableRoute(f"{route.path}: only plain {{name}} parameters under /v1/mail/")
    if len(shape) != len(MAILBOX) + 2:
        return None
    fp, last = shape[3], shape[4]
    if shape[:3] != list(MAILBOX) or not isinstance(fp, _Param):
        raise UnfollowableRoute(f"{route.path}: the hot path reads /v1/mail/{{fp}}/<word> only")
    return fp.name, last


def _segment(route: Route, text: str) -> str | _Param:
    found = PARAM_REGEX.fullmatch(text)
    if found is None:
        if "{" in text:
            raise UnfollowableRoute(f"{route.path}: a parameter shares a segment with text")
        return text
    convertor = route.param_convertors[found.group(1)]
    return _Param(found.group(1), isinstance(convertor, StringConvertor))


class HotPath:
    """ASGI app in front of `app`: takes the POSTs under /v1/mail/{fp}/ whose endpoint, in
    `routes`, is one of `hot`, and hands everything else to `app`."""

    def __init__(
        self, app: ASGIApp, routes: Sequence[BaseRoute], hot: Collection[Handler],
        errors: Mapping[type[Exception], ErrorHandler], observe: Callable[[str, float], None],
    ) -> None:
        if Exception not in errors:
            raise ValueError("the hot path needs an exception handler for Exception (the 500)")
        posts = mailbox_posts(routes)
        self.app = app
        self.words = {word: (route if route.endpoint in hot else None)
                      for word, route in posts.words.items()}
        any_word = posts.any_word
        self.any_word = any_word if any_word is not None and any_word.endpoint in hot else None
        self.errors = errors
        self.observe = observe

    def match(self, scope: Scope) -> tuple[Handler, dict[str, str]] | None:
        """The handler and path parameters the router would give this request, if it is hot."""
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            return None
        parts = scope["path"].split("/")
        if len(parts) != 5 or parts[0] or parts[1] != "v1" or parts[2] != "mail" or not parts[3]:
            return None
        fp, last = parts[3], parts[4]
        # A route's regex ends in `$`, which also matches before a final newline: the router
        # would give "/v1/mail/F/ack\n" to the ack route, so such a path is the router's to read.
        if not last or last[-1] == "\n":
            return None
        if last in self.words:
            taken = self.words[last]
            return None if taken is None else (taken.endpoint, {taken.owner: fp})
        taken = self.any_word
        return None if taken is None else (taken.endpoint, {taken.owner: fp, taken.word: last})

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
        except ClientDisconnect:  # gone before its body was read: nobody to answer, nothing wrong
            return
        except Exception as exc:
            response = await self.answer(request, exc)
        await response(scope, receive, send)
        self.observe(handler.__name__, time.perf_counter() - start)

    async def answer(self, request: Request, exc: Exception) -> Response:
        """The answer Starlette's exception layers would give: the handler registered for the
        nearest class of `exc`; where that is the catch-all, logged as the server-error layer would."""
        cls = next(c for c in type(exc).__mro__ if c in self.errors)
        if cls is Exception:
            log.exception("relay: internal error")
        return await self.errors[cls](request, exc)
