"""relay.hotpath against Starlette's router: for any request the hot path declines or picks
the very handler, with the very path parameters, that the router would pick."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Match, Mount, Route, WebSocketRoute

from relay.app import create_app
from relay.hotpath import HotPath, MailboxRoute, UnfollowableRoute, mailbox_posts
from relay.sqlite_store import SqliteStore

FP, TAG = "a" * 32, "c" * 32
SAMPLES = {"fp": FP, "tag": TAG, "file": "cd" * 16, "index": "3"}
ODD = [
    ("POST", "/v1/mail/{fp}/fetch/"), ("POST", "/v1/mail/{fp}/"), ("POST", "/v1/mail/{fp}"),
    ("POST", "/v1/mail//fetch"), ("POST", "//v1/mail/{fp}/fetch"), ("POST", "/v1//mail/{fp}/fetch"),
    ("POST", "/v1/mail/{fp}//"), ("POST", "v1/mail/{fp}/fetch"), ("POST", "/v2/mail/{fp}/fetch"),
    ("POST", "/V1/mail/{fp}/fetch"), ("POST", "/v1/MAIL/{fp}/fetch"), ("POST", "/v1/mail/{fp}/FETCH"),
    ("POST", "/v1/mail/{fp}/Session"), ("post", "/v1/mail/{fp}/fetch"), ("post", "/v1/mail/{fp}/{tag}"),
    ("POST", "/v1/mail/{fp}/{tag}/extra"), ("POST", "/v1/mail/{fp}/fetch/extra"),
    ("POST", "/v1/mail/{fp}/ack/"), ("POST", "/v1/mail/{fp}/stream"), ("POST", "/v1/mail/{fp}/é"),
    ("GET", "/v1/mail/{fp}/fetch"), ("GET", "/v1/mail/{fp}/{tag}"), ("HEAD", "/v1/mail/{fp}/{tag}"),
    ("PUT", "/v1/mail/{fp}/{tag}"), ("DELETE", "/v1/mail/{fp}/fetch"), ("OPTIONS", "/v1/mail/{fp}/ack"),
    ("POST", "/v1/mail/{fp}/archive"), ("POST", "/v1/mail/NOTHEX/NOTHEX"),
    ("POST", "/v1/mail/{fp}/fetch\n"), ("POST", "/v1/mail/{fp}/ack\n"), ("POST", "/v1/mail/{fp}/{tag}\n"),
    ("POST", "/v1/mail/{fp}\n/fetch"), ("POST", "/v1/keys/{fp}"), ("POST", "/v1/invites/{fp}/revoke"),
    ("POST", "/healthz"), ("POST", "/"), ("POST", ""),
]


async def archive(request: Request) -> Response:
    return PlainTextResponse("archived " + request.path_params["fp"])


@pytest.fixture
def app() -> Iterator[Starlette]:
    store = SqliteStore(":memory:")
    try:
        yield create_app(store)
    finally:
        store.db.close()


def with_archive(app: Starlette) -> Starlette:
    """The app with a made-up POST /v1/mail/{fp}/archive, declared in its route table where a
    route under /v1/mail/{fp}/ belongs: before the route that takes every other word."""
    table = app.router.routes
    at = next(i for i, r in enumerate(table) if getattr(r, "path", "") == "/v1/mail/{fp}/{tag}")
    table.insert(at, Route("/v1/mail/{fp}/archive", archive, methods=["POST"]))
    return app


def scope_for(method: str, path: str, root_path: str = "") -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "root_path": root_path,
            "headers": [], "query_string": b""}


def routed(app: Starlette, scope: dict[str, Any]) -> tuple[Any, dict[str, Any]] | None:
    """Starlette's choice: the first route that matches in full (a partial match is a 405)."""
    for route in app.router.routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return route.endpoint, child["path_params"]  # type: ignore[attr-defined]
    return None


def hot_path(app: Starlette) -> HotPath:
    stack = app.build_middleware_stack()
    assert isinstance(stack, HotPath)
    return stack


def assert_agree(app: Starlette, hot: HotPath, scope: dict[str, Any]) -> None:
    taken = hot.match(scope)
    assert taken is None or taken == routed(app, scope), (scope["method"], scope["path"], taken)


def declared(app: Starlette) -> list[tuple[str, str]]:
    """Every HTTP route of the table, with sample parameters."""
    return [(method, route.path.format(**SAMPLES)) for route in app.router.routes
            if isinstance(route, Route) for method in sorted(route.methods or ())]


def test_the_hot_path_agrees_on_every_declared_route(app: Starlette) -> None:
    hot = hot_path(app)
    for method, path in declared(app):
        assert_agree(app, hot, scope_for(method, path))
    # and it does take the load it exists for
    assert hot.match(scope_for("POST", f"/v1/mail/{FP}/fetch")) == (app.relay.fetch, {"fp": FP})  # type: ignore[attr-defined]
    deposit = (app.relay.deposit, {"fp": FP, "tag": TAG})  # type: ignore[attr-defined]
    assert hot.match(scope_for("POST", f"/v1/mail/{FP}/{TAG}")) == deposit


@pytest.mark.parametrize(("method", "template"), ODD)
def test_the_hot_path_agrees_on_odd_requests(app: Starlette, method: str, template: str) -> None:
    assert_agree(app, hot_path(app), scope_for(method, template.format(**SAMPLES)))


def test_the_hot_path_leaves_a_request_under_a_root_path_to_the_router(app: Starlette) -> None:
    scope = scope_for("POST", f"/base/v1/mail/{FP}/ack", root_path="/base")
    assert hot_path(app).match(scope) is None
    assert routed(app, scope) == (app.relay.ack, {"fp": FP})  # type: ignore[attr-defined]


def test_the_hot_path_is_no_websocket(app: Starlette) -> None:
    scope = {**scope_for("GET", f"/v1/mail/{FP}/fetch"), "type": "websocket"}
    assert hot_path(app).match(scope) is None


SEGMENTS = st.sampled_from(["", "v1", "mail", FP, "fetch", "ack", "session", "purge", "archive",
                            "stream", "x", "FETCH", "fetch\n", "\n", "v1/mail", TAG])


@settings(max_examples=400, deadline=None)
@given(st.lists(SEGMENTS, min_size=1, max_size=7), st.sampled_from(["POST", "GET", "PUT"]))
def test_the_hot_path_agrees_on_any_path(parts: list[str], method: str) -> None:
    store = SqliteStore(":memory:")
    try:
        app = with_archive(create_app(store))
        assert_agree(app, hot_path(app), scope_for(method, "/" + "/".join(parts)))
    finally:
        store.db.close()


def test_a_route_added_to_the_table_is_not_a_deposit(app: Starlette) -> None:
    app = with_archive(app)
    hot = hot_path(app)
    for method, path in [*declared(app), *ODD]:
        assert_agree(app, hot, scope_for(method, path.format(**SAMPLES)))
    assert hot.match(scope_for("POST", f"/v1/mail/{FP}/archive")) is None
    assert routed(app, scope_for("POST", f"/v1/mail/{FP}/archive")) == (archive, {"fp": FP})
    assert post(app, f"/v1/mail/{FP}/archive") == (200, b"archived " + FP.encode())


def test_a_route_the_tag_route_would_swallow_is_refused_when_the_app_is_built(app: Starlette) -> None:
    app.add_route("/v1/mail/{fp}/archive", archive, methods=["POST"])  # appended: after {tag}
    with pytest.raises(UnfollowableRoute, match="unreachable"):
        app.build_middleware_stack()


@pytest.mark.parametrize("route", [
    Route("/v1/mail/{fp:path}/x", archive, methods=["POST"]),
    Route("/v1/mail/{fp}/{n:int}", archive, methods=["POST"]),
    Route(f"/v1/mail/{FP}/fetch", archive, methods=["POST"]),
    Route("/v1/{box}/{fp}/x", archive, methods=["POST"]),
    Route("/v1/mail/{fp}/x{y}", archive, methods=["POST"]),
    Route("/{anything:path}", archive, methods=["POST"]),
    Mount("/v1", routes=[]),
])
def test_a_route_the_hot_path_cannot_mirror_is_refused(route: Any) -> None:
    with pytest.raises(UnfollowableRoute):
        mailbox_posts([route, Route("/v1/mail/{fp}/{tag}", archive, methods=["POST"])])


def test_routes_elsewhere_do_not_concern_the_hot_path() -> None:
    table = [Route("/v1/files/{p:path}", archive, methods=["POST"]), Route("/{x}", archive),
             Route("/v1/mail/{fp}/fetch", archive, methods=["GET"]),
             WebSocketRoute("/v1/mail/{fp}/{tag}", archive)]
    assert mailbox_posts(table).words == {} and mailbox_posts(table).any_word is None


def post(app: Starlette, path: str) -> tuple[int, bytes]:
    """One POST through the whole ASGI app, hot path included."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {**scope_for("POST", path), "http_version": "1.1", "scheme": "http",
             "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1234)}
    asyncio.run(app(scope, receive, send))  # type: ignore[arg-type]
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], body


def test_a_deposit_still_goes_through_the_hot_path(app: Starlette) -> None:
    status, body = post(app, f"/v1/mail/{FP}/{TAG}")  # empty: refused by the deposit handler
    assert status == 400 and json.loads(body)["error"] == "bad_request"


def test_the_parameter_names_are_the_tables() -> None:
    posts = mailbox_posts([Route("/v1/mail/{box}/peek", archive, methods=["POST"]),
                           Route("/v1/mail/{box}/{label}", archive, methods=["POST"])])
    assert posts.words == {"peek": MailboxRoute(archive, "box")}
    assert posts.any_word == MailboxRoute(archive, "box", "label")
