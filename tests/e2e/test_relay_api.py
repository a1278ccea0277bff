"""The relay's HTTP contract, against a real relay process on a loopback port.

Every refusal is JSON `{"error": CODE, "message": TEXT}` with a 4xx status (507 for a full
mailbox); bad input is never a 500. Owner routes need a fresh signature by the mailbox owner,
and a refused owner request changes nothing.
"""

from __future__ import annotations

import base64
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route

from durable.version import version
from keys.encoding import b64e
from keys.envelope import MAX_BLOB
from keys.filestream import ABYTES, CHUNK_BYTES
from keys.identity import Identity, KeyBundle
from keys.wire import (
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIME_HEADER,
    auth_headers,
)
from relay.app import JSON_LIMIT, create_app
from relay.sqlite_store import SqliteStore
from tests.conftest import TALK, RelayClock, RelayProcess, free_port
from tests.e2e.relay_calls import (
    Reply,
    ack,
    assert_error,
    call,
    deposit,
    fetch,
    jbody,
    mail_rows,
    new_tag,
    open_slot,
    publish,
    relay_on,
    relay_with,
    signed,
    stale_headers,
    waiting,
)

# ---------------------------------------------------------------- HTTP helpers

@pytest.fixture
def relay(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RelayProcess]:
    """A relay on SQLite, or on a real Redis server for the tests marked ON_EITHER_STORE."""
    with relay_on(getattr(request, "param", "sqlite"), tmp_path) as relay:
        yield relay


# The route contract holds on both stores: these tests run again, unchanged, on Redis.
ON_EITHER_STORE = pytest.mark.parametrize("relay", ["sqlite", "redis"], indirect=True)



@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayProcess]:
    """One relay for the big tables; each test still uses its own fresh mailbox."""
    relay = RelayProcess(tmp_path_factory.mktemp("shared") / "relay.db", free_port()).start()
    yield relay
    relay.stop()


@pytest.fixture(scope="module")
def owner(shared: RelayProcess) -> Identity:
    return publish(shared, "owner")


# ---------------------------------------------------------------- the table of bad requests

FP, NOFP, TAG = "{fp}", "{nofp}", "{tag}"
UPPER, SHORT, LONG, NOTHEX = "AB" * 16, "ab" * 15, "ab" * 17, "zz" * 16
FILE = "cd" * 16
DEEP = b"[" * 100_000
MISSING = "missing"  # auth modes: none, a valid owner signature, or raw headers
OWNER = "owner"


@dataclass(frozen=True)
class Bad:
    id: str
    route: str  # the route it aims at, as "METHOD /template"; "" for no route at all
    method: str
    path: str
    status: int
    code: str
    body: bytes = b""
    auth: str | dict[str, str] = MISSING
    says: str = ""


def _hex_path_cases() -> list[Bad]:
    """Every route, with each of its hex path parameters malformed."""
    routes = [
        ("PUT", "/v1/keys/{fp}", ["fp"]),
        ("GET", "/v1/keys/{fp}", ["fp"]),
        ("POST", "/v1/mail/{fp}/{tag}", ["fp", "tag"]),
        ("POST", "/v1/mail/{fp}/fetch", ["fp"]),
        ("POST", "/v1/mail/{fp}/ack", ["fp"]),
        ("POST", "/v1/mail/{fp}/purge", ["fp"]),
        ("POST", "/v1/mail/{fp}/session", ["fp"]),
        ("POST", "/v1/invites/{fp}", ["fp"]),
        ("POST", "/v1/invites/{fp}/revoke", ["fp"]),
        ("POST", "/v1/redeem/{tag}", ["tag"]),
        ("PUT", "/v1/ratchet/{fp}", ["fp"]),
        ("POST", "/v1/ratchet/{fp}/claim", ["fp"]),
        ("GET", "/v1/ratchet/{fp}/card", ["fp"]),
        ("PUT", "/v1/files/{fp}/{tag}/{file}/{index}", ["fp", "tag", "file"]),
        ("GET", "/v1/files/{fp}/{file}", ["fp", "file"]),
        ("POST", "/v1/files/{fp}/chunk", ["fp"]),
        ("POST", "/v1/files/{fp}/ack", ["fp"]),
    ]
    cases = []
    for method, template, params in routes:
        for param in params:
            for label, bad in (("upper", UPPER), ("short", SHORT), ("long", LONG),
                               ("nothex", NOTHEX)):
                values = {"fp": FP, "tag": TAG, "file": FILE, "index": "0", param: bad}
                path = template.format(**values)
                cases.append(Bad(
                    f"{method}-{template}-{param}-{label}", f"{method} {template}", method, path,
                    400, "bad_request", b"x", says=f"{param} must be 32 lowercase hex",
                ))
    return cases


def _json_body_cases() -> list[Bad]:
    """Every JSON route: unparsable bodies and JSON that is not an object."""
    routes = [
        ("PUT", "/v1/keys/{fp}", MISSING),
        ("POST", "/v1/mail/{fp}/fetch", OWNER),
        ("POST", "/v1/mail/{fp}/ack", OWNER),
        ("POST", "/v1/mail/{fp}/purge", OWNER),
        ("POST", "/v1/invites/{fp}", OWNER),
        ("POST", "/v1/invites/{fp}/revoke", OWNER),
        ("PUT", "/v1/ratchet/{fp}", OWNER),
        ("POST", "/v1/files/{fp}/chunk", OWNER),
        ("POST", "/v1/files/{fp}/ack", OWNER),
    ]
    bodies = {
        "empty": (b"", "not valid JSON"),
        "truncated": (b'{"tags": [', "not valid JSON"),
        "not-utf8": (b"\xff\xfe{}", "not valid JSON"),
        "trailing-garbage": (b"{}}", "not valid JSON"),
        "deep-nesting": (DEEP, "not valid JSON"),
        "list": (b"[]", "must be a JSON object"),
        "string": (b'"tags"', "must be a JSON object"),
        "number": (b"42", "must be a JSON object"),
        "null": (b"null", "must be a JSON object"),
    }
    return [
        Bad(f"{method}-{template}-{label}", f"{method} {template}", method,
            template.format(fp=FP), 400, "bad_request", body, auth, says)
        for method, template, auth in routes
        for label, (body, says) in bodies.items()
    ]


FETCH, ACK = "POST /v1/mail/{fp}/fetch", "POST /v1/mail/{fp}/ack"
SESSION, SESSION_PATH = "POST /v1/mail/{fp}/session", "/v1/mail/{fp}/session"
INVITE, REVOKE = "POST /v1/invites/{fp}", "POST /v1/invites/{fp}/revoke"
KEYS_PUT, KEYS_GET = "PUT /v1/keys/{fp}", "GET /v1/keys/{fp}"
DEPOSIT, REDEEM, HEALTH = "POST /v1/mail/{fp}/{tag}", "POST /v1/redeem/{tag}", "GET /healthz"
FETCH_PATH, ACK_PATH = "/v1/mail/{fp}/fetch", "/v1/mail/{fp}/ack"
PURGE, PURGE_PATH = "POST /v1/mail/{fp}/purge", "/v1/mail/{fp}/purge"
RATCHET, RATCHET_PATH = "PUT /v1/ratchet/{fp}", "/v1/ratchet/{fp}"
CLAIM, CLAIM_PATH = "POST /v1/ratchet/{fp}/claim", "/v1/ratchet/{fp}/claim"
CARD, CARD_PATH = "GET /v1/ratchet/{fp}/card", "/v1/ratchet/{fp}/card"
FILE_PUT, FILE_PUT_PATH = "PUT /v1/files/{fp}/{tag}/{file}/{index}", f"/v1/files/{{fp}}/{{tag}}/{FILE}/0"
FILE_NEXT, FILE_NEXT_PATH = "GET /v1/files/{fp}/{file}", f"/v1/files/{{fp}}/{FILE}"
CHUNK, CHUNK_PATH = "POST /v1/files/{fp}/chunk", "/v1/files/{fp}/chunk"
FILES_ACK, FILES_ACK_PATH = "POST /v1/files/{fp}/ack", "/v1/files/{fp}/ack"
NOW, NONCE = "{now}", "{nonce}"  # filled in as each request is sent


def _field_cases() -> list[Bad]:
    """JSON objects with fields of the wrong type or range."""
    t = "a" * 32
    fetch_bodies: dict[str, tuple[Any, str]] = {
        "tags-missing": ({}, "'tags' must be a list"),
        "tags-string": ({"tags": t}, "'tags' must be a list"),
        "tags-object": ({"tags": {t: 1}}, "'tags' must be a list"),
        "tags-empty": ({"tags": []}, "'tags' must be a list"),
        "tags-too-many": ({"tags": [t] * 1001}, "'tags' must be a list"),
        "tags-ints": ({"tags": [1, 2]}, "every item of 'tags'"),
        "tags-null-item": ({"tags": [None]}, "every item of 'tags'"),
        "tags-empty-item": ({"tags": [""]}, "every item of 'tags'"),
        "tags-long-item": ({"tags": ["a" * 65]}, "every item of 'tags'"),
        "tags-punctuation": ({"tags": ["a-b"]}, "every item of 'tags'"),
        "limit-true": ({"tags": [t], "limit": True}, "'limit' must be a positive integer"),
        "limit-false": ({"tags": [t], "limit": False}, "'limit' must be a positive integer"),
        "limit-negative": ({"tags": [t], "limit": -1}, "'limit' must be a positive integer"),
        "limit-zero": ({"tags": [t], "limit": 0}, "'limit' must be a positive integer"),
        "limit-float": ({"tags": [t], "limit": 2.5}, "'limit' must be a positive integer"),
        "limit-string": ({"tags": [t], "limit": "10"}, "'limit' must be a positive integer"),
        "limit-null": ({"tags": [t], "limit": None}, "'limit' must be a positive integer"),
        "ack-string": ({"tags": [t], "ack": "1"}, "'ack' must be a list"),
        "ack-too-many": ({"tags": [t], "ack": ["1"] * 1001}, "'ack' must be a list"),
        "ack-ints": ({"tags": [t], "ack": [1]}, "every item of 'ack'"),
        "ack-punctuation": ({"tags": [t], "ack": ["1;2"]}, "every item of 'ack'"),
    }
    ack_bodies: dict[str, tuple[Any, str]] = {
        "ids-missing": ({}, "'ids' must be a list"),
        "ids-string": ({"ids": "1"}, "'ids' must be a list"),
        "ids-number": ({"ids": 1}, "'ids' must be a list"),
        "ids-empty": ({"ids": []}, "'ids' must be a list"),
        "ids-too-many": ({"ids": ["1"] * 1001}, "'ids' must be a list"),
        "ids-ints": ({"ids": [1]}, "every item of 'ids'"),
        "ids-nested": ({"ids": [["1"]]}, "every item of 'ids'"),
        "ids-negative": ({"ids": ["-1"]}, "every item of 'ids'"),
    }
    invite_bodies: dict[str, tuple[Any, str]] = {
        "empty-object": ({}, "needs 'tag'"),
        "tag-missing": ({"expires": 2e9}, "needs 'tag'"),
        "tag-upper": ({"tag": UPPER, "expires": 2e9}, "needs 'tag'"),
        "tag-int": ({"tag": 7, "expires": 2e9}, "needs 'tag'"),
        "expires-missing": ({"tag": t}, "needs 'tag'"),
        "expires-string": ({"tag": t, "expires": "tomorrow"}, "needs 'tag'"),
        "expires-bool": ({"tag": t, "expires": True}, "needs 'tag'"),
        "expires-null": ({"tag": t, "expires": None}, "needs 'tag'"),
        "expires-list": ({"tag": t, "expires": [2e9]}, "needs 'tag'"),
    }
    purge_bodies: dict[str, tuple[Any, str]] = {
        "tags-string": ({"tags": t}, "'tags' must be a list"),
        "tags-too-many": ({"tags": [t] * 1001}, "'tags' must be a list"),
        "tags-punctuation": ({"tags": ["a-b"]}, "every item of 'tags'"),
    }
    revoke_bodies: dict[str, tuple[Any, str]] = {
        "tag-missing": ({}, "'tag' must be 32 hex"),
        "tag-short": ({"tag": "ab"}, "'tag' must be 32 hex"),
        "tag-list": ({"tag": [t]}, "'tag' must be 32 hex"),
    }
    cases = []
    for route, path, table in ((FETCH, FETCH_PATH, fetch_bodies), (ACK, ACK_PATH, ack_bodies),
                               (PURGE, PURGE_PATH, purge_bodies),
                               (INVITE, "/v1/invites/{fp}", invite_bodies),
                               (REVOKE, "/v1/invites/{fp}/revoke", revoke_bodies)):
        for label, (obj, says) in table.items():
            cases.append(Bad(f"{route}-{label}", route, "POST", path, 400, "bad_request",
                             jbody(obj), OWNER, says))
    # Numbers JSON allows but a time cannot be: these were a 500 or a silent no-op before.
    for label, raw in (("nan", b"NaN"), ("infinity", b"Infinity"), ("overflow", b"1e999"),
                       ("huge-int", b"9" * 400)):
        body = b'{"tag": "' + t.encode() + b'", "expires": ' + raw + b"}"
        cases.append(Bad(f"{INVITE}-expires-{label}", INVITE, "POST", "/v1/invites/{fp}", 400,
                         "bad_request", body, OWNER, "needs 'tag'"))
    return cases


def _auth_cases() -> list[Bad]:
    """Every owner route, with missing or malformed signature headers."""
    sig = b64e(b"\0" * 64)
    nonce = "n" * 32
    variants: dict[str, tuple[dict[str, str], int, str, str]] = {
        "no-headers": ({}, 401, "unauthorized", "missing or malformed"),
        "time-only": ({TIME_HEADER: NOW}, 401, "unauthorized", "missing or malformed"),
        "time-word": ({TIME_HEADER: "now", NONCE_HEADER: nonce, SIGNATURE_HEADER: sig}, 401,
                      "unauthorized", "missing or malformed"),
        "time-superscript": ({TIME_HEADER: "\u00b2\u00b2", NONCE_HEADER: nonce,
                              SIGNATURE_HEADER: sig}, 401, "unauthorized", "missing"),
        "time-huge": ({TIME_HEADER: "9" * 400, NONCE_HEADER: nonce, SIGNATURE_HEADER: sig}, 401,
                      "unauthorized", "missing"),
        "time-ancient": ({TIME_HEADER: "1", NONCE_HEADER: nonce, SIGNATURE_HEADER: sig}, 401,
                         "unauthorized", "window"),
        "nonce-short": ({TIME_HEADER: NOW, NONCE_HEADER: "abc", SIGNATURE_HEADER: sig}, 401,
                        "unauthorized", "missing"),
        "nonce-dashes": ({TIME_HEADER: NOW, NONCE_HEADER: "a-b-c-d-e-f-g-h-i",
                          SIGNATURE_HEADER: sig}, 401, "unauthorized", "missing"),
        "sig-not-base64": ({TIME_HEADER: NOW, NONCE_HEADER: NONCE,
                            SIGNATURE_HEADER: "%%%"}, 403, "forbidden", "not the mailbox owner"),
        "sig-short": ({TIME_HEADER: NOW, NONCE_HEADER: NONCE,
                       SIGNATURE_HEADER: b64e(b"\0" * 32)}, 403, "forbidden", "owner"),
        "sig-zeros": ({TIME_HEADER: NOW, NONCE_HEADER: NONCE,
                       SIGNATURE_HEADER: sig}, 403, "forbidden", "owner"),
    }
    owner_routes = [(FETCH, FETCH_PATH), (ACK, ACK_PATH), (SESSION, SESSION_PATH), (PURGE, PURGE_PATH),
                    (INVITE, "/v1/invites/{fp}"),
                    (REVOKE, "/v1/invites/{fp}/revoke"), (RATCHET, RATCHET_PATH),
                    (CHUNK, CHUNK_PATH), (FILES_ACK, FILES_ACK_PATH)]
    cases = [
        Bad(f"{route}-{label}", route, route.split()[0], path, status, code, b"{}", headers, says)
        for route, path in owner_routes
        for label, (headers, status, code, says) in variants.items()
    ]
    # An owner route on a mailbox nobody published: 404 before any signature is looked at.
    cases += [
        Bad(f"{route}-unknown-mailbox", route, route.split()[0], path.replace(FP, NOFP), 404,
            "unknown_mailbox", b"{}", MISSING, "unknown mailbox")
        for route, path in owner_routes
    ]
    return cases


def _other_cases() -> list[Bad]:
    junk_bundle = {"name": "x", "sign_key": "A" * 44, "box_key": "A" * 44, "signature": "A" * 88}
    cases = [
        # Key directory.
        Bad("keys-get-unknown", KEYS_GET, "GET", "/v1/keys/{nofp}", 404, "not_found",
            says="no keys"),
        Bad("keys-put-empty-object", KEYS_PUT, "PUT", "/v1/keys/{nofp}", 400, "bad_request",
            b"{}", says="invalid key bundle"),
        Bad("keys-put-name-int", KEYS_PUT, "PUT", "/v1/keys/{nofp}", 400, "bad_request",
            jbody({**junk_bundle, "name": 1}), says="invalid key bundle"),
        Bad("keys-put-name-long", KEYS_PUT, "PUT", "/v1/keys/{nofp}", 400, "bad_request",
            jbody({**junk_bundle, "name": "n" * 65}), says="invalid key bundle"),
        Bad("keys-put-key-wrong-length", KEYS_PUT, "PUT", "/v1/keys/{nofp}", 400, "bad_request",
            jbody(junk_bundle), says="invalid key bundle"),
        Bad("keys-put-key-not-base64", KEYS_PUT, "PUT", "/v1/keys/{nofp}", 400, "bad_request",
            jbody({**junk_bundle, "sign_key": "\u00e9" * 44}), says="invalid key bundle"),
        Bad("keys-put-key-number", KEYS_PUT, "PUT", "/v1/keys/{nofp}", 400, "bad_request",
            jbody({**junk_bundle, "box_key": 12}), says="invalid key bundle"),
        Bad("keys-put-too-large", KEYS_PUT, "PUT", "/v1/keys/{nofp}", 413, "too_large",
            b"{" + b" " * JSON_LIMIT + b"}", says="exceeds the limit"),
        # Deposits and redemptions.
        Bad("deposit-empty", DEPOSIT, "POST", "/v1/mail/{fp}/{tag}", 400, "bad_request",
            says="empty body"),
        Bad("deposit-unknown-mailbox", DEPOSIT, "POST", "/v1/mail/{nofp}/{tag}", 404,
            "unknown_mailbox", b"blob", says="unknown mailbox"),
        Bad("deposit-too-large", DEPOSIT, "POST", "/v1/mail/{fp}/{tag}", 413, "too_large",
            b"\0" * (MAX_BLOB + 1), says="exceeds the limit"),
        Bad("redeem-empty", REDEEM, "POST", "/v1/redeem/{tag}", 400, "bad_request",
            says="empty body"),
        Bad("redeem-unknown", REDEEM, "POST", "/v1/redeem/{tag}", 404, "invite_unknown",
            b"blob", says="unknown"),
        Bad("redeem-too-large", REDEEM, "POST", "/v1/redeem/{tag}", 413, "too_large",
            b"\0" * (MAX_BLOB + 1), says="exceeds the limit"),
        # Ratchet keys (the attacks on their signatures: test_ratchet_directory.py).
        Bad("ratchet-put-empty-object", RATCHET, "PUT", RATCHET_PATH, 400, "bad_request", b"{}",
            OWNER, says="invalid ratchet keys: ratchet card: expected a JSON object"),
        Bad("ratchet-put-one-time-not-list", RATCHET, "PUT", RATCHET_PATH, 400, "bad_request",
            jbody({"one_time": {}}), OWNER, says="'one_time' must be a list"),
        Bad("ratchet-put-too-large", RATCHET, "PUT", RATCHET_PATH, 413, "too_large",
            b"{" + b" " * JSON_LIMIT + b"}", OWNER, says="exceeds the limit"),
        Bad("ratchet-claim-unknown", CLAIM, "POST", "/v1/ratchet/{nofp}/claim", 404, "not_found",
            says="no ratchet keys"),
        Bad("ratchet-card-unknown", CARD, "GET", "/v1/ratchet/{nofp}/card", 404, "not_found",
            says="no ratchet keys"),
        # File chunks (the quotas and the rest: test_relay_files.py).
        Bad("file-put-empty", FILE_PUT, "PUT", FILE_PUT_PATH, 400, "bad_request", says="sealed chunk"),
        Bad("file-put-index-word", FILE_PUT, "PUT", FILE_PUT_PATH[:-1] + "x", 400, "bad_request",
            b"x" * 100, says="index must be"),
        Bad("file-put-index-sign", FILE_PUT, "PUT", FILE_PUT_PATH[:-1] + "-1", 400, "bad_request",
            b"x" * 100, says="index must be"),
        Bad("file-put-index-huge", FILE_PUT, "PUT", FILE_PUT_PATH[:-1] + "9" * 30, 400, "bad_request",
            b"x" * 100, says="index must be"),
        Bad("file-put-unknown-mailbox", FILE_PUT, "PUT", FILE_PUT_PATH.replace(FP, NOFP), 404,
            "unknown_mailbox", b"x" * 100, says="unknown mailbox"),
        Bad("file-put-too-large", FILE_PUT, "PUT", FILE_PUT_PATH, 413, "too_large",
            b"\0" * (CHUNK_BYTES + ABYTES + 1), says="exceeds the limit"),
        Bad("chunk-no-file", CHUNK, "POST", CHUNK_PATH, 400, "bad_request", jbody({"index": 0}), OWNER,
            says="'file'"),
        Bad("chunk-index-float", CHUNK, "POST", CHUNK_PATH, 400, "bad_request",
            jbody({"file": FILE, "index": 0.5}), OWNER, says="'index'"),
        Bad("chunk-absent", CHUNK, "POST", CHUNK_PATH, 404, "no_such_chunk",
            jbody({"file": FILE, "index": 0}), OWNER, says="no such chunk"),
        Bad("files-ack-not-list", FILES_ACK, "POST", FILES_ACK_PATH, 400, "bad_request",
            jbody({"files": FILE}), OWNER, says="'files'"),
    ]
    # Wrong methods on every route: JSON 405.
    for route, method, path in (
        (HEALTH, "POST", "/healthz"), (HEALTH, "DELETE", "/healthz"),
        (KEYS_PUT, "DELETE", "/v1/keys/{fp}"), (KEYS_PUT, "POST", "/v1/keys/{fp}"),
        (KEYS_GET, "PATCH", "/v1/keys/{fp}"),
        (DEPOSIT, "GET", "/v1/mail/{fp}/{tag}"), (DEPOSIT, "PUT", "/v1/mail/{fp}/{tag}"),
        (FETCH, "GET", FETCH_PATH), (ACK, "GET", ACK_PATH), (ACK, "DELETE", ACK_PATH),
        (PURGE, "GET", PURGE_PATH),
        (SESSION, "GET", SESSION_PATH), (SESSION, "PUT", SESSION_PATH),
        (INVITE, "GET", "/v1/invites/{fp}"), (INVITE, "PUT", "/v1/invites/{fp}"),
        (REVOKE, "GET", "/v1/invites/{fp}/revoke"), (REDEEM, "GET", "/v1/redeem/{tag}"),
        (RATCHET, "GET", RATCHET_PATH), (RATCHET, "POST", RATCHET_PATH),
        (CLAIM, "GET", CLAIM_PATH), (CLAIM, "PUT", CLAIM_PATH),
        (CARD, "POST", CARD_PATH), (CARD, "PUT", CARD_PATH),
        (FILE_PUT, "GET", FILE_PUT_PATH), (FILE_PUT, "POST", FILE_PUT_PATH),
        (FILE_NEXT, "POST", FILE_NEXT_PATH), (FILE_NEXT, "DELETE", FILE_NEXT_PATH),
        (CHUNK, "PUT", CHUNK_PATH), (FILES_ACK, "PUT", FILES_ACK_PATH),
    ):
        cases.append(Bad(f"{route}-{method}", route, method, path, 405, "method_not_allowed",
                         says="method not allowed"))
    # Paths no route matches: JSON 404.
    for path in ("/", "/v1", "/v1/keys", "/v2/keys/{fp}", "/v1/mail/{fp}",
                 "/v1/mail/{fp}/{tag}/extra", "/v1/invites/{fp}/revoke/now", "/v1/redeem",
                 "/healthz/deep", "/v1/keys/{fp}/..", "/%00", "/v1/files/{fp}",
                 f"/v1/files/{{fp}}/{{tag}}/{FILE}/0/extra"):
        for method in ("GET", "POST"):
            cases.append(Bad(f"unknown-{method}-{path}", "", method, path, 404, "not_found",
                             b"{}", says="no such route"))
    return cases


BAD_REQUESTS = (_hex_path_cases() + _json_body_cases() + _field_cases() + _auth_cases()
                + _other_cases())


def send_bad(relay: RelayProcess, owner: Identity, case: Bad) -> Reply:
    path = case.path.format(fp=owner.fingerprint, nofp=secrets.token_hex(16), tag=new_tag())
    if case.auth == OWNER:
        return signed(relay, owner, case.method, path, case.body)
    fresh = {"now": str(int(time.time())), "nonce": secrets.token_hex(16)}
    raw = case.auth if isinstance(case.auth, dict) else {}
    headers = {k: v.format(**fresh) for k, v in raw.items()}
    return call(relay, case.method, path, case.body, headers)


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=[c.id for c in BAD_REQUESTS])
def test_bad_request_is_a_json_4xx_never_a_500(
    shared: RelayProcess, owner: Identity, case: Bad
) -> None:
    reply = send_bad(shared, owner, case)
    assert 400 <= reply.status < 500, (reply.status, reply.body[:300])
    assert_error(reply, case.status, case.code, case.says)


def test_bad_request_table_covers_every_route() -> None:
    store = SqliteStore(":memory:")
    try:
        app = create_app(store)
        routes = {f"{m} {r.path}" for r in app.routes if isinstance(r, Route)
                  for m in (r.methods or ()) if m != "HEAD"}
    finally:
        store.db.close()
    assert len(routes) == 18
    assert routes <= {c.route for c in BAD_REQUESTS}
    for route in routes - {HEALTH}:  # healthz takes no input but its method
        kinds = {c.status for c in BAD_REQUESTS if c.route == route}
        assert {400, 405} <= kinds, route


def test_the_relay_still_works_after_the_table(shared: RelayProcess, owner: Identity) -> None:
    reply = call(shared, "GET", "/healthz")
    assert reply.status == 200 and reply.json() == {"ok": True, "version": version(), "store": "sqlite"}
    tag = new_tag()
    mail_id = deposit(shared, owner.fingerprint, tag, b"still here")
    assert waiting(shared, owner, [tag]) == {mail_id: b"still here"}


# ---------------------------------------------------------------- key directory


@ON_EITHER_STORE
def test_publish_and_fetch_a_key_bundle(relay: RelayProcess) -> None:
    alice = Identity.generate("alice")
    fp = alice.fingerprint
    path = f"/v1/keys/{fp}"
    assert_error(call(relay, "GET", path), 404, "not_found")
    reply = call(relay, "PUT", path, jbody(alice.bundle().to_json()))
    assert reply.status == 200 and reply.json() == {"fingerprint": fp}

    got = call(relay, "GET", path)
    assert got.status == 200
    assert got.headers["content-type"].startswith("application/json")
    served = KeyBundle.from_json(got.json())
    served.check_against(fp)
    assert served == alice.bundle()
    # Publishing again (after a relay move, say) is idempotent.
    assert call(relay, "PUT", path, jbody(alice.bundle().to_json())).status == 200
    assert call(relay, "GET", path).json() == got.json()


def test_a_bundle_under_another_fingerprint_is_refused(relay: RelayProcess) -> None:
    alice, mallory = publish(relay, "alice"), Identity.generate("mallory")
    path = f"/v1/keys/{alice.fingerprint}"
    reply = call(relay, "PUT", path, jbody(mallory.bundle().to_json()))
    assert_error(reply, 400, "bad_request", "does not hash to this fingerprint")
    # The published bundle is untouched.
    assert KeyBundle.from_json(call(relay, "GET", path).json()) == alice.bundle()
    assert_error(call(relay, "GET", f"/v1/keys/{mallory.fingerprint}"), 404, "not_found")


@pytest.mark.parametrize("forgery", ["renamed", "other-signer", "zero-signature"])
def test_a_bundle_with_a_bad_signature_is_refused(relay: RelayProcess, forgery: str) -> None:
    alice, mallory = Identity.generate("alice"), Identity.generate("mallory")
    data = alice.bundle().to_json()
    if forgery == "renamed":
        data["name"] = "mallory"
    elif forgery == "other-signer":
        data["signature"] = b64e(mallory.sign(alice.bundle().signed_part()))
    else:
        data["signature"] = b64e(b"\0" * 64)
    reply = call(relay, "PUT", f"/v1/keys/{alice.fingerprint}", jbody(data))
    assert_error(reply, 400, "bad_request", "not self-signed")
    assert_error(call(relay, "GET", f"/v1/keys/{alice.fingerprint}"), 404, "not_found")


# ---------------------------------------------------------------- deposits


@ON_EITHER_STORE
def test_deposit_needs_published_keys(relay: RelayProcess) -> None:
    stranger = Identity.generate("stranger")
    reply = call(relay, "POST", f"/v1/mail/{stranger.fingerprint}/{new_tag()}", b"sealed")
    assert_error(reply, 404, "unknown_mailbox", "has not published keys")


@ON_EITHER_STORE
def test_deposit_then_fetch_returns_it(relay: RelayProcess) -> None:
    alice = publish(relay)
    tag, other_tag = new_tag(), new_tag()
    first = deposit(relay, alice.fingerprint, tag, b"\x00sealed one\xff")
    second = deposit(relay, alice.fingerprint, tag, b"sealed two")
    elsewhere = deposit(relay, alice.fingerprint, other_tag, b"other channel")
    assert len({first, second, elsewhere}) == 3

    data = fetch(relay, alice, [tag])
    assert [m["id"] for m in data["messages"]] == [first, second]  # oldest first
    assert all(m["tag"] == tag for m in data["messages"])
    assert base64.b64decode(data["messages"][0]["blob"]) == b"\x00sealed one\xff"
    assert abs(data["messages"][0]["ts"] - time.time()) < 60
    assert data["more"] is False
    assert waiting(relay, alice, [tag, other_tag]).keys() == {first, second, elsewhere}

    page = fetch(relay, alice, [tag, other_tag], limit=2)
    assert [m["id"] for m in page["messages"]] == [first, second] and page["more"] is True


def test_deposit_size_limit(relay: RelayProcess) -> None:
    alice = publish(relay)
    tag, path = new_tag(), f"/v1/mail/{alice.fingerprint}/{new_tag()}"
    assert_error(call(relay, "POST", path, b"\1" * (MAX_BLOB + 1)), 413, "too_large")
    # Sent chunked, with no length declared up front, it is still cut off.
    chunks = iter([b"\2" * 8192] * (MAX_BLOB // 8192 + 2))
    assert_error(call(relay, "POST", path, chunks), 413, "too_large")
    # Exactly the limit fits, and nothing from the refused ones was stored.
    mail_id = deposit(relay, alice.fingerprint, tag, b"\3" * MAX_BLOB)
    assert waiting(relay, alice, [tag, path.rsplit("/", 1)[1]]) == {mail_id: b"\3" * MAX_BLOB}


# ---------------------------------------------------------------- owner auth

REFUSALS: dict[str, tuple[int, str, str]] = {
    "other-key": (403, "forbidden", "not the mailbox owner"),
    "stale": (401, "unauthorized", "outside the window"),
    "future": (401, "unauthorized", "outside the window"),
    "replay": (401, "unauthorized", "replayed"),
    "missing": (401, "unauthorized", "missing"),
    "body-swapped": (403, "forbidden", "not the mailbox owner"),
    "other-route": (403, "forbidden", "not the mailbox owner"),
}


@pytest.mark.parametrize("route", ["fetch", "ack"])
@pytest.mark.parametrize("refusal", list(REFUSALS))
def test_refused_owner_request_changes_nothing(
    shared: RelayProcess, route: str, refusal: str
) -> None:
    alice, mallory = publish(shared, "alice"), publish(shared, "mallory")
    tag = new_tag()
    first = deposit(shared, alice.fingerprint, tag, b"first")
    expected = {first: b"first"}
    path = f"/v1/mail/{alice.fingerprint}/{route}"
    body = jbody({"tags": [tag]} if route == "fetch" else {"ids": [first]})

    if refusal == "replay":
        if route == "ack":
            # Sign an ack for the id the next deposit will get and use it while it names
            # nothing; replaying it once that mail exists must not delete it.
            upcoming = str(int(first) + 1)
            body = jbody({"ids": [upcoming]})
            headers = auth_headers(alice.sign, "POST", path, body)
            used = call(shared, "POST", path, body, headers)
            assert used.status == 200 and used.json() == {"deleted": 0}
            assert deposit(shared, alice.fingerprint, tag, b"second") == upcoming
            expected[upcoming] = b"second"
        else:
            headers = auth_headers(alice.sign, "POST", path, body)
            assert call(shared, "POST", path, body, headers).status == 200
        reply = call(shared, "POST", path, body, headers)
    elif refusal == "other-key":
        reply = call(shared, "POST", path, body, auth_headers(mallory.sign, "POST", path, body))
    elif refusal in ("stale", "future"):
        age = 600 if refusal == "stale" else -600
        reply = call(shared, "POST", path, body, stale_headers(alice, "POST", path, body, age))
    elif refusal == "missing":
        reply = call(shared, "POST", path, body)
    elif refusal == "body-swapped":
        signed_for = jbody({"tags": [new_tag()]} if route == "fetch" else {"ids": ["999999"]})
        reply = call(shared, "POST", path, body, auth_headers(alice.sign, "POST", path, signed_for))
    else:
        other = path.replace(route, "ack" if route == "fetch" else "fetch")
        reply = call(shared, "POST", path, body, auth_headers(alice.sign, "POST", other, body))

    status, code, says = REFUSALS[refusal]
    assert_error(reply, status, code, says)
    assert b64e(b"first") not in reply.body.decode()  # nothing leaked
    assert waiting(shared, alice, [tag]) == expected  # nothing deleted


@ON_EITHER_STORE
def test_owner_fetch_and_ack(relay: RelayProcess) -> None:
    alice, mallory = publish(relay, "alice"), publish(relay, "mallory")
    tag = new_tag()
    mail_id = deposit(relay, alice.fingerprint, tag, b"for alice")
    # Mallory can sign for her own mailbox only: asking there for alice's tag finds nothing,
    # and acking alice's ids there deletes nothing.
    assert fetch(relay, mallory, [tag])["messages"] == []
    reply = ack(relay, mallory, [mail_id])
    assert reply.status == 200 and reply.json() == {"deleted": 0}
    assert waiting(relay, alice, [tag]) == {mail_id: b"for alice"}

    reply = ack(relay, alice, [mail_id])
    assert reply.status == 200 and reply.json() == {"deleted": 1}
    assert fetch(relay, alice, [tag]) == {"messages": [], "more": False, "deleted": 0}
    # Acking again is harmless.
    assert ack(relay, alice, [mail_id]).json() == {"deleted": 0}


def test_fetch_acks_the_previous_page_before_it_reads(relay: RelayProcess) -> None:
    alice, mallory = publish(relay, "alice"), publish(relay, "mallory")
    tag = new_tag()
    first = [deposit(relay, alice.fingerprint, tag, b"one %d" % i) for i in range(3)]
    page = fetch(relay, alice, [tag], limit=2)
    assert [m["id"] for m in page["messages"]] == first[:2] and page["more"] is True
    # Mallory naming alice's ids in her own fetch deletes nothing of alice's.
    assert fetch(relay, mallory, [tag], ack=first[:2])["deleted"] == 0
    page = fetch(relay, alice, [tag], limit=2, ack=[m["id"] for m in page["messages"]])
    assert page["deleted"] == 2
    assert [m["id"] for m in page["messages"]] == first[2:] and page["more"] is False
    assert fetch(relay, alice, [tag], ack=first[2:]) == {"messages": [], "more": False, "deleted": 1}


@ON_EITHER_STORE
def test_ack_of_ids_no_mail_can_have_deletes_nothing(relay: RelayProcess) -> None:
    """Alphanumeric ids that are not row numbers, including ones that used to be 500s."""
    alice = publish(relay)
    tag = new_tag()
    mail_id = deposit(relay, alice.fingerprint, tag, b"keep")
    odd = ["abc", "9" * 64, "1" * 19, "\u00b2", "\u0661", "0"]  # '²' and Arabic-Indic one
    reply = ack(relay, alice, odd)
    assert reply.status == 200 and reply.json() == {"deleted": 0}
    assert waiting(relay, alice, [tag]) == {mail_id: b"keep"}


# ---------------------------------------------------------------- invite slots


@ON_EITHER_STORE
def test_invite_slot_admits_one_request(relay: RelayProcess) -> None:
    alice = publish(relay)
    tag = new_tag()
    unsigned = call(relay, "POST", f"/v1/invites/{alice.fingerprint}",
                    jbody({"tag": tag, "expires": time.time() + 600}))
    assert_error(unsigned, 401, "unauthorized")
    assert_error(call(relay, "POST", f"/v1/redeem/{tag}", b"early"), 404, "invite_unknown")

    reply = open_slot(relay, alice, tag, time.time() + 600)
    assert reply.status == 201 and reply.json() == {"tag": tag}
    first = call(relay, "POST", f"/v1/redeem/{tag}", b"contact request")
    assert first.status == 201 and first.json() == {"redeemed": True}
    assert_error(call(relay, "POST", f"/v1/redeem/{tag}", b"second"), 409, "invite_used")
    # The one request waits in the inviter's mailbox under the invite's tag.
    assert list(waiting(relay, alice, [tag]).values()) == [b"contact request"]


@ON_EITHER_STORE
def test_redeem_unknown_tag(relay: RelayProcess) -> None:
    publish(relay)
    assert_error(call(relay, "POST", f"/v1/redeem/{new_tag()}", b"req"), 404, "invite_unknown",
                 "unknown or revoked")


@ON_EITHER_STORE
def test_expired_slot_is_gone(relay: RelayProcess) -> None:
    alice = publish(relay)
    tag = new_tag()
    assert open_slot(relay, alice, tag, int(time.time()) - 60).status == 201
    assert_error(call(relay, "POST", f"/v1/redeem/{tag}", b"late"), 410, "invite_expired")
    assert waiting(relay, alice, [tag]) == {}


@ON_EITHER_STORE
def test_revoked_slot_is_unknown(relay: RelayProcess) -> None:
    alice, mallory = publish(relay, "alice"), publish(relay, "mallory")
    tag = new_tag()
    assert open_slot(relay, alice, tag, time.time() + 600).status == 201
    # Only the slot's owner can revoke it.
    path = f"/v1/invites/{mallory.fingerprint}/revoke"
    reply = signed(relay, mallory, "POST", path, jbody({"tag": tag}))
    assert reply.status == 200 and reply.json() == {"revoked": False}

    path = f"/v1/invites/{alice.fingerprint}/revoke"
    reply = signed(relay, alice, "POST", path, jbody({"tag": tag}))
    assert reply.status == 200 and reply.json() == {"revoked": True}
    assert_error(call(relay, "POST", f"/v1/redeem/{tag}", b"req"), 404, "invite_unknown")
    assert signed(relay, alice, "POST", path, jbody({"tag": tag})).json() == {"revoked": False}
    assert waiting(relay, alice, [tag]) == {}


# ---------------------------------------------------------------- limits, expiry, restarts


def test_full_mailbox_is_507(tmp_path: Path) -> None:
    with relay_with(tmp_path, "--max-mailbox", "3") as relay:
        alice, bob = publish(relay, "alice"), publish(relay, "bob")
        tag, invite = new_tag(), new_tag()
        assert waiting(relay, alice, [tag]) == {}  # alice reads this channel: its mail is hers
        ids = [deposit(relay, alice.fingerprint, tag, f"m{i}".encode()) for i in range(3)]
        path = f"/v1/mail/{alice.fingerprint}/{tag}"
        assert_error(call(relay, "POST", path, b"m3"), 507, "mailbox_full", "retry later")
        # An invite request counts against the same cap, and leaves the slot usable.
        assert open_slot(relay, alice, invite, time.time() + 600).status == 201
        assert_error(call(relay, "POST", f"/v1/redeem/{invite}", b"req"), 507, "mailbox_full")
        # Other mailboxes are not affected.
        deposit(relay, bob.fingerprint, tag, b"for bob")
        assert waiting(relay, alice, [tag]).keys() == set(ids)

        assert ack(relay, alice, ids[:1]).json() == {"deleted": 1}
        assert call(relay, "POST", f"/v1/redeem/{invite}", b"req").status == 201
        assert_error(call(relay, "POST", path, b"m3"), 507, "mailbox_full")
        assert ack(relay, alice, ids[1:2]).json() == {"deleted": 1}
        deposit(relay, alice.fingerprint, tag, b"m3")


def test_max_mailbox_must_be_positive(tmp_path: Path) -> None:
    p = subprocess.run(
        [TALK, "relay", "--max-mailbox", "0", "--port", str(free_port()),
         "--db", str(tmp_path / "never.db")],
        capture_output=True, text=True, timeout=30,
    )
    assert p.returncode == 1
    assert "--max-mailbox" in p.stderr
    assert not (tmp_path / "never.db").exists()


def test_undelivered_mail_expires_and_is_purged(tmp_path: Path) -> None:
    clock = RelayClock(tmp_path / "relay-clock")
    with relay_with(tmp_path, "--ttl", "60", "--purge-interval", "0.2", env=clock.env) as relay:
        alice = publish(relay)
        tag = new_tag()
        mail_id = deposit(relay, alice.fingerprint, tag, b"short-lived")
        assert waiting(relay, alice, [tag]) == {mail_id: b"short-lived"}
        clock.advance(61)  # past the TTL on the relay's clock, which decides expiry
        assert fetch(relay, alice, [tag]) == {"messages": [], "more": False, "deleted": 0}
        deadline = time.monotonic() + 5
        while mail_rows(relay.db) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mail_rows(relay.db) == 0
        # Keys do not expire; new mail is accepted as before.
        assert call(relay, "GET", f"/v1/keys/{alice.fingerprint}").status == 200
        fresh = deposit(relay, alice.fingerprint, tag, b"fresh")
        assert waiting(relay, alice, [tag]) == {fresh: b"fresh"}


@ON_EITHER_STORE
def test_restart_keeps_mail_keys_and_seen_nonces(relay: RelayProcess) -> None:
    alice = publish(relay)
    tag = new_tag()
    mail_id = deposit(relay, alice.fingerprint, tag, b"durable")
    path = f"/v1/mail/{alice.fingerprint}/fetch"
    body = jbody({"tags": [tag]})
    headers = auth_headers(alice.sign, "POST", path, body)
    assert call(relay, "POST", path, body, headers).status == 200

    relay.restart()

    assert waiting(relay, alice, [tag]) == {mail_id: b"durable"}
    assert KeyBundle.from_json(call(relay, "GET", f"/v1/keys/{alice.fingerprint}").json()) == (
        alice.bundle()
    )
    # A request seen before the restart is still a replay after it.
    assert_error(call(relay, "POST", path, body, headers), 401, "unauthorized", "replayed")
