"""The relay's HTTP routes: thin shells over the store, `keys.wire` auth and the limits.

    GET  /healthz                          store reachable (503 if not), version, store kind
    PUT  /v1/keys/{fp}                     publish a self-signed key bundle (must hash to fp; a
                                           KEM key in it must be signed by it: `keys.kem_card`)
    GET  /v1/keys/{fp}                     fetch a bundle; the caller checks it against fp
    POST /v1/mail/{fp}/{tag}               anyone: deposit one sealed blob (raw body)
    POST /v1/mail/{fp}/session             owner (signed): a session key sealed to the owner
    POST /v1/mail/{fp}/fetch               owner: {"tags": [...], "limit": n, "ack": [...]?}
                                           → delete the acked ids, then the oldest mail first
    POST /v1/mail/{fp}/ack                 owner: {"ids": [...]} → delete them
    POST /v1/mail/{fp}/purge               owner: {"tags": [...]?} → register those tags, then
                                           delete all mail and files under tags never registered
    PUT  /v1/ratchet/{fp}                  owner: {"card", "fallback"?, "one_time": [...]}, each
                                           signed by the owner's published key (`keys.ratchet.card`)
                                           → {"one_time_left": n}
    POST /v1/ratchet/{fp}/claim            anyone: {"card", "key", "kind"}: a one-time key, each
                                           handed out once, else the fallback key
    GET  /v1/ratchet/{fp}/card             anyone: {"card"}, the published card alone; no key is
                                           taken out (what `talk verify` shows before any session)
    POST /v1/invites/{fp}                  owner: open an invite slot {"tag", "expires"}
    POST /v1/invites/{fp}/revoke           owner: {"tag"}
    POST /v1/redeem/{tag}                  anyone: the one contact request an invite admits
    …    /v1/files/…                       file chunks (`relay.file_routes`)
    WS   /v1/mail/{fp}/stream              owner: {"type":"ready"}, then {"type":"mail","tag"}
                                           each time mail is deposited in the mailbox, with
                                           "id" and "blob" (base64) when the blob is small
                                           (`relay.notify.PUSH_BLOB_MAX`); still stored until acked

Owner requests are signed, or MACed with an owner token (`keys.wire`, `relay.owner_tokens`).
Deposits and redemptions spend a token of the client's and of the tag's bucket; key
publications, key lookups, owner requests and stream handshakes one of the client's bucket for
their kind (429 with Retry-After when empty); a mailbox holds at most `max_streams_per_mailbox`
streams per process. The tags an owner names in a fetch are registered as its own
(`relay.store` explains the two quotas that gives).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Message
from starlette.websockets import WebSocket, WebSocketDisconnect

from durable.version import version
from keys.encoding import b64e, is_hex32
from keys.identity import KeyBundle
from keys.ratchet.card import RatchetKeyError, verify_publication
from keys.sodium import PublicKey, SealedBox
from keys.wire import (
    AUTH_WINDOW_S,
    NONCE_HEADER,
    SESSION_HEADER,
    AuthVerdict,
    check_auth,
    check_session_mac,
)
from relay import logsafe
from relay.clock import Clock
from relay.config import RelayConfig
from relay.errors import ApiError, bad_request, not_found, unknown_mailbox
from relay.file_routes import file_routes
from relay.hotpath import ErrorHandler, HotPath
from relay.limits import Limiter, WakeThrottle, client_address, retry_after
from relay.metrics import Meter, Metrics, TimedRoutes
from relay.notify import Hub, LocalHub, Wakeups
from relay.owner_tokens import OwnerTokens
from relay.request_parts import json_object, path_hex, read_body
from relay.store import RETRY_AFTER_S, DepositOutcome, RedeemOutcome, Store, StoreUnavailable

JSON_LIMIT = 256 * 1024
PING_TIMEOUT_S = 5.0  # a health check that hangs is as bad as one that fails
DEPTH_INTERVAL_S = 5.0  # how often the stored-messages gauge is sampled
SIGN_KEY_CACHE = 100_000  # ~10 MB at most: 32-byte keys under 32-character fingerprints
KNOWN_CACHE = 50_000  # (mailbox, tag) pairs known registered, ~8 MB: a follower's fetch costs no write
UNKNOWN_WAKE_S = 1.0  # push wake-ups per mailbox for mail under unregistered tags, at most
OUTAGE_LOG_S = 10.0  # while the store is down, one log line per this many seconds, not per request
log = logging.getLogger("talk.relay")


def _hex_list(data: dict[str, Any], key: str, most: int) -> list[str]:
    items = data.get(key)
    if not isinstance(items, list) or not items or len(items) > most:
        raise bad_request(f"'{key}' must be a list of 1 to {most} items")
    if not all(isinstance(i, str) and 0 < len(i) <= 64 and i.isalnum() for i in items):
        raise bad_request(f"every item of '{key}' must be a short alphanumeric string")
    return items


def _unix_seconds(value: object) -> float | None:
    """A finite number of seconds, or None (bools, NaN, infinities and huge ints included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None


class Relay:
    def __init__(
        self, store: Store, config: RelayConfig, hub: Hub, metrics: Meter, store_kind: str,
        clock: Clock = time.time,
    ) -> None:
        self.store = store
        self.clock = clock  # expiry's wall clock (relay.clock); rate limits use time.monotonic
        self.config = config
        self.hub = hub
        self.metrics = metrics
        self.store_kind = store_kind
        self.per_client = Limiter(config.rate_per_client)
        self.per_tag = Limiter(config.rate_per_tag)
        self.publishes = Limiter(config.rate_publish)
        self.lookups = Limiter(config.rate_lookup)
        self.owner_requests = Limiter(config.rate_owner)
        self.handshakes = Limiter(config.rate_stream)
        self._sign_keys: OrderedDict[str, bytes] = OrderedDict()
        self._known: OrderedDict[str, None] = OrderedDict()
        self.junk_wakes = WakeThrottle(UNKNOWN_WAKE_S)
        self._later: set[asyncio.Task[None]] = set()
        self.tokens = OwnerTokens()
        self._outage_logged = -math.inf

    def unavailable(self, exc: Exception) -> ApiError:
        """The answer to a request the store could not serve: 503, come back in a moment."""
        now = time.monotonic()
        if now - self._outage_logged >= OUTAGE_LOG_S:
            self._outage_logged = now
            log.warning("relay: the %s store does not answer (%s); answering 503 until it does",
                        self.store_kind, exc)
        return ApiError(503, "store_unavailable",
                        f"the relay's {self.store_kind} store does not answer; retry in {RETRY_AFTER_S} s",
                        {"Retry-After": str(RETRY_AFTER_S)})

    def client(self, conn: HTTPConnection) -> str:
        peer = conn.client.host if conn.client else None
        return client_address(peer, conn.headers.get("x-forwarded-for"), self.config.behind_proxy,
                              self.config.trusted_proxies)

    def admit_deposit(self, conn: HTTPConnection, tag_key: str) -> None:
        """Spend one token of the client's bucket and one of the tag's, or refuse with 429."""
        now = time.monotonic()  # buckets measure intervals; wall-clock steps must not refill them
        _spend(self.per_client, self.client(conn), now, "deposits from this client")
        _spend(self.per_tag, tag_key, now, "deposits into this channel")

    async def deposited_blob(self, request: Request, tag_key: str, what: str) -> bytes:
        """A stranger's sealed blob, once the client's and the tag's buckets admit it."""
        self.admit_deposit(request, tag_key)
        blob = await read_body(request, self.config.max_blob)
        if not blob:
            raise bad_request(f"empty body: deposit {what}")
        return blob

    def admit(self, conn: HTTPConnection, limiter: Limiter, what: str) -> None:
        """Spend one token of the client's bucket for this kind of request, or refuse with 429."""
        _spend(limiter, self.client(conn), time.monotonic(), what)

    async def register(self, fp: str, tags: list[str]) -> None:
        """Register the tags an owner names as its own; pairs registered before cost nothing."""
        fresh = [tag for tag in tags if fp + tag not in self._known]
        if not fresh:
            return
        await self.store.register_tags(fp, fresh, self.config.max_known_tags)
        self._remember(fp, fresh)

    async def is_known(self, fp: str, tag: str) -> bool:
        """Whether `tag` is registered for `fp`: from the cache, else asked of the store (another
        replica, or this one before a restart, may have registered it)."""
        if fp + tag in self._known:
            return True
        if not await self.store.is_registered(fp, tag):
            return False
        self._remember(fp, [tag])
        return True

    def _remember(self, fp: str, tags: list[str]) -> None:
        for tag in tags:
            self._known[fp + tag] = None
        while len(self._known) > KNOWN_CACHE:
            self._known.popitem(last=False)

    async def owner_request(self, request: Request, limit: int = JSON_LIMIT) -> tuple[str, bytes]:
        """Authenticate the mailbox owner; return (fingerprint, body)."""
        fp = path_hex(request, "fp")
        self.admit(request, self.owner_requests, "owner requests from this client")
        body = await read_body(request, limit)
        # The raw path, as the client signed it (building request.url costs ~10 µs a request).
        await self.check_owner(fp, request.method, request.scope["path"], request.headers.items(), body)
        return fp, body

    async def sign_key(self, fp: str) -> bytes | None:
        """The mailbox owner's signing key, cached: a fingerprint is the hash of its keys, so
        the key for a fingerprint can never change and a cached entry is never stale."""
        key = self._sign_keys.get(fp)
        if key is not None:
            self._sign_keys.move_to_end(fp)
            return key
        stored = await self.store.get_bundle(fp)
        if stored is None:
            return None
        key = KeyBundle.from_json(json.loads(stored)).sign_key
        self._sign_keys[fp] = key
        if len(self._sign_keys) > SIGN_KEY_CACHE:
            self._sign_keys.popitem(last=False)
        return key

    async def check_owner(
        self, fp: str, method: str, path: str, raw_headers: Any, body: bytes
    ) -> None:
        headers = {k.lower(): v for k, v in raw_headers}
        now = self.clock()
        sid = headers.get(SESSION_HEADER)
        if sid is not None:
            self.check_session(fp, sid, method, path, headers, body, now)
            return
        sign_key = await self.sign_key(fp)
        if sign_key is None:
            raise unknown_mailbox("its owner has not published keys on this relay")
        _refuse(check_auth(sign_key, method, path, headers, body, now))
        if not await self.store.remember_nonce(fp, headers[NONCE_HEADER], now, 2 * AUTH_WINDOW_S):
            raise _replayed()

    def check_session(
        self, fp: str, sid: str, method: str, path: str, headers: dict[str, str], body: bytes, now: float
    ) -> None:
        token = self.tokens.get(sid, now)
        if token is None:
            raise ApiError(401, "session_expired",
                           "session unknown or expired (the relay may have restarted); open a new one")
        if token.fp != fp:
            raise ApiError(403, "forbidden", "this session belongs to another mailbox")
        _refuse(check_session_mac(token.key, method, path, headers, body, now))
        counter = headers[NONCE_HEADER]
        if not (counter.isdigit() and token.fresh_counter(int(counter))):
            raise _replayed()

    async def open_session(self, request: Request) -> Response:
        """One signed request buys a session key, sealed so that only the owner can open it."""
        fp, _ = await self.owner_request(request)
        stored = await self.store.get_bundle(fp)
        if stored is None:  # deleted between the auth and now: nothing to seal to
            raise unknown_mailbox("its owner has not published keys on this relay")
        box_key = KeyBundle.from_json(json.loads(stored)).box_key
        sid, token = self.tokens.open(fp, self.clock())
        sealed = SealedBox(PublicKey(box_key)).encrypt(token.key)
        return JSONResponse({"session": sid, "key": b64e(sealed), "expires": int(token.expires)},
                            status_code=201)

    async def healthz(self, request: Request) -> Response:
        try:
            await asyncio.wait_for(self.store.ping(), PING_TIMEOUT_S)
        except Exception as exc:  # any failure of the store is the answer this route exists for
            raise self.unavailable(exc) from exc
        return JSONResponse({"ok": True, "version": version(), "store": self.store_kind})

    async def put_keys(self, request: Request) -> Response:
        fp = path_hex(request, "fp")
        self.admit(request, self.publishes, "key publications from this client")
        data = json_object(await read_body(request, JSON_LIMIT))
        try:
            bundle = KeyBundle.from_json(data)
        except ValueError as exc:
            raise bad_request(f"invalid key bundle: {exc}") from exc
        if bundle.fingerprint != fp or not bundle.self_signed():
            raise bad_request("key bundle does not hash to this fingerprint or is not self-signed")
        if bundle.kem is not None and bundle.kem_key() is None:
            raise bad_request("key bundle's post-quantum key is not signed by its signing key")
        if bundle.kem is None:  # anyone may PUT a self-signed bundle: none strips a published KEM key
            stored = await self.store.get_bundle(fp)
            kept = None if stored is None else KeyBundle.from_json(json.loads(stored)).kem
            bundle = bundle._replace(kem=kept)
        await self.store.put_bundle(fp, json.dumps(bundle.to_json()))
        return JSONResponse({"fingerprint": fp})

    async def lookup(
        self, request: Request, read: Callable[[str], Awaitable[str | None]], missing: str
    ) -> str:
        """What `read` holds for the path's fingerprint, one key lookup spent; 404 `missing`."""
        fp = path_hex(request, "fp")
        self.admit(request, self.lookups, "key lookups from this client")
        stored = await read(fp)
        if stored is None:
            raise not_found(missing)
        return stored

    async def get_keys(self, request: Request) -> Response:
        stored = await self.lookup(request, self.store.get_bundle, "no keys published for this fingerprint")
        return Response(stored, media_type="application/json")

    async def put_ratchet(self, request: Request) -> Response:
        """Keep the owner's ratchet keys, once every one is signed by its published key: nobody
        can publish keys for someone else, and a relay's own store holds only checked ones."""
        fp, body = await self.owner_request(request)
        sign_key = await self.sign_key(fp)
        if sign_key is None:  # deleted between the auth and now
            raise unknown_mailbox("its owner has not published keys on this relay")
        most = self.config.max_ratchet_keys
        try:
            keys = verify_publication(json_object(body), fp, sign_key, most)
        except RatchetKeyError as exc:
            raise bad_request(f"invalid ratchet keys: {exc}") from exc
        fallback = None if keys.fallback is None else json.dumps(keys.fallback.to_json())
        one_time = [(k.key_id, json.dumps(k.to_json())) for k in keys.one_time]
        left = await self.store.put_ratchet(fp, json.dumps(keys.card.to_json()), fallback, one_time, most)
        if left is None:
            raise ApiError(507, "keys_full", f"the relay keeps at most {most} one-time ratchet keys "
                           "per identity; publish fewer")
        return JSONResponse({"one_time_left": left})

    async def claim_ratchet(self, request: Request) -> Response:
        fp = path_hex(request, "fp")
        self.admit(request, self.lookups, "key lookups from this client")
        claimed = await self.store.claim_ratchet(fp)
        if claimed is None or claimed.key is None:
            raise not_found("no ratchet keys published for this fingerprint")
        return JSONResponse({"card": json.loads(claimed.card), "key": json.loads(claimed.key),
                             "kind": "one_time" if claimed.one_time else "fallback"})

    async def get_ratchet_card(self, request: Request) -> Response:
        card = await self.lookup(request, self.store.ratchet_card,
                                 "no ratchet keys published for this fingerprint")
        return JSONResponse({"card": json.loads(card)})

    async def deposit(self, request: Request) -> Response:
        fp, tag = path_hex(request, "fp"), path_hex(request, "tag")
        blob = await self.deposited_blob(request, f"{fp}/{tag}", "one sealed blob")
        if await self.sign_key(fp) is None:
            raise unknown_mailbox("the recipient has not published keys on this relay")
        config = self.config

        async def announce(mail_id: str) -> None:
            await self.tell_owner(fp, tag, mail_id, blob)

        outcome, mail_id, woken = await self.store.deposit(
            fp, tag, blob, self.clock(), config.max_mailbox_messages, config.max_mailbox_bytes,
            config.max_unknown_messages, config.max_unknown_bytes, config.tag_messages, config.tag_bytes,
            announce=announce, registered=fp + tag in self._known,
        )
        if outcome is DepositOutcome.TAG_FULL:
            raise ApiError(507, "mailbox_full",
                           f"this channel holds its share of the recipient's mailbox (at most "
                           f"{config.tag_messages} messages or {config.tag_bytes // 1024} KiB per sender "
                           "while they are away); retry later, once the recipient reads it")
        if outcome is DepositOutcome.MAILBOX_FULL:
            raise ApiError(507, "mailbox_full", "the recipient's mailbox is full; retry later")
        if outcome is DepositOutcome.UNKNOWN_FULL:
            raise ApiError(507, "mailbox_full",
                           "the recipient's mailbox holds its most mail on channels it has not read "
                           "yet; retry later (the recipient's next fetch opens this channel)")
        self.count_deposit(blob)
        if not woken:  # told neither by the store's own step nor while it wrote the mail
            await self.tell_owner(fp, tag, mail_id, blob)
            if self.hub.tells_at_once and self.hub.streams(fp):
                # One turn of the loop for the streams just told to write their frames (`Wakeups`):
                # the owner's follower starts waking before the sender hears this answer.
                await asyncio.sleep(0)
        return JSONResponse({"id": mail_id}, status_code=201)

    async def tell_owner(self, fp: str, tag: str, mail_id: str, blob: bytes) -> None:
        """`wake`, where a hub that cannot be reached costs only the push: the owner's next fetch
        finds the mail."""
        try:
            await self.wake(fp, tag, mail_id, blob)
        except StoreUnavailable as exc:
            log.info("relay: could not wake a mailbox's owner (%s); its next fetch finds the mail", exc)

    async def wake(self, fp: str, tag: str, mail_id: str, blob: bytes) -> None:
        """Tell the owner's streams, with the blob when it is small; under a tag the owner never
        registered, at most once a second and without the blob (`relay.limits.WakeThrottle`)."""
        if await self.is_known(fp, tag):
            await self.hub.publish(fp, tag, mail_id, blob)
            return
        delay = self.junk_wakes.take(fp, time.monotonic())
        if delay == 0.0:
            await self.hub.publish(fp, tag)
        elif delay is not None:
            asyncio.get_running_loop().call_later(delay, self._wake_later, fp, tag)

    def _wake_later(self, fp: str, tag: str) -> None:
        self.junk_wakes.fired(fp, time.monotonic())
        task = asyncio.ensure_future(self._publish_late(fp, tag))
        self._later.add(task)  # held until done: the loop keeps only a weak reference
        task.add_done_callback(self._later.discard)

    async def _publish_late(self, fp: str, tag: str) -> None:
        try:
            await self.hub.publish(fp, tag)
        except Exception as exc:  # nobody awaits this one: log it rather than lose it
            log.warning("relay: a delayed wake-up failed (%s)", exc)

    async def fetch(self, request: Request) -> Response:
        fp, body = await self.owner_request(request)
        data = json_object(body)
        tags = _hex_list(data, "tags", self.config.max_tags)
        limit = data.get("limit", self.config.fetch_limit)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise bad_request("'limit' must be a positive integer")
        limit = min(limit, self.config.fetch_limit)
        await self.register(fp, tags)
        # Acking the previous page in the same request halves a follower's requests under load.
        acks = _hex_list(data, "ack", 1000) if data.get("ack") else []
        since = self.clock() - self.config.ttl_s
        deleted, mail = await self.store.next_page(fp, acks, tags, limit + 1, since)
        self.metrics.acks.inc(deleted)
        messages = [{"id": m.id, "tag": m.tag, "blob": b64e(m.blob), "ts": m.created} for m in mail]
        self.metrics.deliveries.inc(min(limit, len(messages)))
        return JSONResponse({"messages": messages[:limit], "more": len(messages) > limit,
                             "deleted": deleted})

    async def ack(self, request: Request) -> Response:
        fp, body = await self.owner_request(request)
        ids = _hex_list(json_object(body), "ids", 1000)
        deleted = await self.store.ack(fp, ids)
        self.metrics.acks.inc(deleted)
        return JSONResponse({"deleted": deleted})

    async def purge(self, request: Request) -> Response:
        """Delete the mail under tags the owner never registered (the junk a stranger can leave);
        the tags named first are registered, so a new contact's first mail is kept."""
        fp, body = await self.owner_request(request)
        data = json_object(body)
        tags = _hex_list(data, "tags", self.config.max_tags) if data.get("tags") else []
        await self.register(fp, tags)
        deleted = await self.store.purge_unknown(fp)
        return JSONResponse({"deleted": deleted, "files": await self.store.files.purge_unknown(fp)})

    async def open_invite(self, request: Request) -> Response:
        fp, body = await self.owner_request(request)
        data = json_object(body)
        tag, expires = data.get("tag"), _unix_seconds(data.get("expires"))
        if not is_hex32(tag) or expires is None:
            raise bad_request("an invite slot needs 'tag' (32 hex) and 'expires' (unix seconds)")
        await self.store.create_invite(fp, str(tag), expires, self.config.max_known_tags)
        return JSONResponse({"tag": tag}, status_code=201)

    async def revoke_invite(self, request: Request) -> Response:
        fp, body = await self.owner_request(request)
        tag = json_object(body).get("tag")
        if not is_hex32(tag):
            raise bad_request("'tag' must be 32 hex characters")
        return JSONResponse({"revoked": await self.store.revoke_invite(fp, str(tag))})

    async def redeem(self, request: Request) -> Response:
        tag = path_hex(request, "tag")
        blob = await self.deposited_blob(request, tag, "one sealed contact request")
        outcome = await self.store.redeem_invite(
            tag, blob, self.clock(), self.config.max_mailbox_messages, self.config.max_mailbox_bytes
        )
        if outcome is RedeemOutcome.STORED:
            self.count_deposit(blob)
            fp = await self.store.invite_owner(tag)
            if fp is not None:
                await self.hub.publish(fp, tag)
            return JSONResponse({"redeemed": True}, status_code=201)
        raise {
            RedeemOutcome.UNKNOWN: ApiError(404, "invite_unknown", "invite code unknown or revoked"),
            RedeemOutcome.USED: ApiError(409, "invite_used", "invite code was already used"),
            RedeemOutcome.EXPIRED: ApiError(410, "invite_expired", "invite code has expired"),
            RedeemOutcome.MAILBOX_FULL: ApiError(507, "mailbox_full", "inviter's mailbox is full"),
        }[outcome]

    def count_deposit(self, blob: bytes) -> None:
        self.metrics.deposits.inc()
        self.metrics.deposit_bytes.inc(len(blob))

    def check_stream_room(self, fp: str) -> None:
        if self.hub.streams(fp) >= self.config.max_streams_per_mailbox:
            log.info("relay: refused a push stream to mailbox %s: at the cap", logsafe.hide(fp))
            cap = self.config.max_streams_per_mailbox
            raise ApiError(429, "too_many_streams",
                           f"this mailbox already has {cap} push streams open; close one first")

    async def stream(self, ws: WebSocket) -> None:
        """Push a wake-up to the mailbox owner each time mail is deposited for it."""
        try:
            fp = path_hex(ws, "fp")
            self.admit(ws, self.handshakes, "stream handshakes from this client")
            await self.check_owner(fp, "GET", ws.url.path, ws.headers.items(), b"")
            # No await between this check and subscribe: two handshakes cannot both take the last slot.
            self.check_stream_room(fp)
        except ApiError as exc:
            await self.deny(ws, exc)
            return
        except StoreUnavailable as exc:
            await self.deny(ws, self.unavailable(exc))
            return
        queue = self.hub.subscribe(fp)
        self.metrics.streams.inc()
        try:
            try:
                await self.hub.ready(fp)
            except StoreUnavailable as exc:
                await self.deny(ws, self.unavailable(exc))
                return
            await ws.accept()
            await ws.send_json({"type": "ready"})
            await _pump(ws, queue)
        except WebSocketDisconnect:
            pass
        finally:
            self.metrics.streams.dec()
            self.hub.unsubscribe(fp, queue)

    async def deny(self, ws: WebSocket, exc: ApiError) -> None:
        """Refuse the handshake with the same HTTP status and JSON as any other route."""
        self.metrics.errors.labels(exc.code).inc()
        if "websocket.http.response" in ws.scope.get("extensions", {}):
            await ws.send_denial_response(_error_response(exc.status, exc.code, exc.message, exc.headers))
        else:
            await ws.close(code=1008, reason=exc.message[:120])

    async def api_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        self.metrics.errors.labels(exc.code).inc()
        return _error_response(exc.status, exc.code, exc.message, exc.headers)

    async def store_error(self, request: Request, exc: Exception) -> Response:
        return await self.api_error(request, self.unavailable(exc))

    async def http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        codes = {404: "not_found", 405: "method_not_allowed"}
        message = {404: "no such route", 405: "method not allowed on this route"}
        code = codes.get(exc.status_code, "http_error")
        self.metrics.errors.labels(code).inc()
        return _error_response(exc.status_code, code, message.get(exc.status_code, str(exc.detail)))

    async def internal_error(self, request: Request, exc: Exception) -> Response:
        self.metrics.errors.labels("internal").inc()
        return _error_response(500, "internal", "internal relay error; the operator's log has details")


def _spend(limiter: Limiter, key: str, now: float, what: str) -> None:
    wait = limiter.take(key, now)
    if wait:
        log.info("relay: rate limited %s %s", what, logsafe.hide(key))
        after = retry_after(wait)
        raise ApiError(429, "rate_limited", f"too many {what}; retry in {after} s",
                       {"Retry-After": after})


def _replayed() -> ApiError:
    return ApiError(401, "unauthorized", "replayed request: this signature was already used")


def _refuse(verdict: AuthVerdict) -> None:
    if verdict is AuthVerdict.MISSING:
        raise ApiError(401, "unauthorized", "owner signature headers missing or malformed")
    if verdict is AuthVerdict.STALE:
        raise ApiError(401, "unauthorized", "request time outside the window; check your clock")
    if verdict is AuthVerdict.BAD_SIGNATURE:
        raise ApiError(403, "forbidden", "signature is not the mailbox owner's")


async def _pump(ws: WebSocket, queue: Wakeups) -> None:
    """Forward wake-ups until the client goes away (a client never needs to send anything).
    Whatever the client sends, or its going away, ends the wait as a notice does."""
    listener = _listen(ws, queue)
    try:
        while True:
            await queue.wait()
            if listener.done():
                if listener.result()["type"] == "websocket.disconnect":
                    return
                listener = _listen(ws, queue)
            for told in queue.take():
                await ws.send_text(told.frame())
    finally:
        listener.cancel()


def _listen(ws: WebSocket, queue: Wakeups) -> asyncio.Future[Message]:
    listener = asyncio.ensure_future(ws.receive())
    listener.add_done_callback(lambda _: queue.wake())
    return listener


def _error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status, headers=headers)


async def _every(seconds: float, job: Callable[[], Awaitable[None]], level: int, failed: str) -> None:
    """Run `job` now and every `seconds` after, until cancelled; a failure is logged, not fatal."""
    while True:
        try:
            await job()
        except Exception as exc:
            log.log(level, "relay: %s (%s); retrying in %.0f s", failed, exc, seconds)
        await asyncio.sleep(seconds)


def create_app(
    store: Store, config: RelayConfig | None = None, hub: Hub | None = None,
    metrics: Metrics | None = None, store_kind: str = "sqlite", clock: Clock = time.time,
) -> Starlette:
    """Without `metrics` nothing is counted (`relay.metrics.Meter`); `relay.metrics.serve_metrics`
    makes them visible."""
    relay = Relay(store, config or RelayConfig(), hub or LocalHub(), metrics or Meter(), store_kind, clock)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async def purge() -> None:
            await store.purge(relay.clock(), relay.config.ttl_s)
            await store.files.purge(relay.clock(), relay.config.ttl_s)

        async def sample_depth() -> None:
            relay.metrics.stored.set(await store.stored())

        await relay.hub.start()
        # A networked store's hiccup must not end either for good; while the store is down the
        # health check says so, and the depth sample only goes stale.
        tasks = [
            asyncio.create_task(_every(relay.config.purge_interval_s, purge, logging.WARNING,
                                       "purge failed")),
        ]
        if metrics is not None:  # a gauge nobody reads is not worth a count of the whole store
            tasks.append(asyncio.create_task(_every(DEPTH_INTERVAL_S, sample_depth, logging.INFO,
                                                    "cannot sample the store's depth")))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await relay.hub.stop()
            await store.close()

    handlers: dict[type[Exception], ErrorHandler] = {
        ApiError: relay.api_error, StoreUnavailable: relay.store_error,
        HTTPException: relay.http_error, Exception: relay.internal_error,
    }
    timed = [] if metrics is None else [Middleware(TimedRoutes, metrics=metrics)]
    return RelayApp(relay, handlers, routes=routes(relay), middleware=timed, lifespan=lifespan)


def routes(relay: Relay) -> list[BaseRoute]:
    """Every route of the relay, in the order the router tries them (and `relay.hotpath` reads
    them): a POST under /v1/mail/{fp}/ goes before the {tag} route that takes every other word."""
    return [
        Route("/healthz", relay.healthz, methods=["GET"]),
        Route("/v1/keys/{fp}", relay.put_keys, methods=["PUT"]),
        Route("/v1/keys/{fp}", relay.get_keys, methods=["GET"]),
        Route("/v1/mail/{fp}/session", relay.open_session, methods=["POST"]),
        Route("/v1/mail/{fp}/fetch", relay.fetch, methods=["POST"]),
        Route("/v1/mail/{fp}/ack", relay.ack, methods=["POST"]),
        Route("/v1/mail/{fp}/purge", relay.purge, methods=["POST"]),
        Route("/v1/mail/{fp}/{tag}", relay.deposit, methods=["POST"]),
        Route("/v1/ratchet/{fp}", relay.put_ratchet, methods=["PUT"]),
        Route("/v1/ratchet/{fp}/claim", relay.claim_ratchet, methods=["POST"]),
        Route("/v1/ratchet/{fp}/card", relay.get_ratchet_card, methods=["GET"]),
        Route("/v1/invites/{fp}", relay.open_invite, methods=["POST"]),
        Route("/v1/invites/{fp}/revoke", relay.revoke_invite, methods=["POST"]),
        Route("/v1/redeem/{tag}", relay.redeem, methods=["POST"]),
        WebSocketRoute("/v1/mail/{fp}/stream", relay.stream),
        *file_routes(relay),
    ]


class RelayApp(Starlette):
    """Starlette, with `relay.hotpath.HotPath` in front of its whole stack (outside even the
    server-error layer, whose job HotPath does itself for the routes it takes), reading the
    same routes and exception handlers."""

    def __init__(
        self, relay: Relay, handlers: dict[type[Exception], ErrorHandler], **kwargs: Any
    ) -> None:
        self.relay = relay
        self.handlers = handlers
        super().__init__(exception_handlers=handlers, **kwargs)

    def build_middleware_stack(self) -> ASGIApp:
        hot = (self.relay.fetch, self.relay.deposit)  # a follower's fetch and a deposit: the load
        return HotPath(super().build_middleware_stack(), self.router.routes, hot, self.handlers,
                       self.relay.metrics.observe)
