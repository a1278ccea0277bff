"""Hostile clients against a real relay process: each attack is performed, then shown to do no harm.

Several source addresses are simulated two ways: with --behind-proxy, through the
X-Forwarded-For hop a proxy would append; and for connection floods, by binding the flooding
sockets to 127.0.0.2 (all of 127/8 is loopback), so the relay sees a second peer.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path

import pytest
from websockets.exceptions import InvalidStatus

from keys.identity import Identity
from tests.conftest import TALK, Agent, RelayProcess, befriend, free_port, make_agent, wait_for
from tests.e2e.relay_calls import (
    Reply,
    assert_error,
    call,
    deposit,
    jbody,
    new_tag,
    open_stream,
    publish,
    relay_with,
    signed,
    waiting,
)
from tests.redis_support import StoreRelay, redis_prefix

FLOOD_SOURCE = "127.0.0.2"  # the attacker's loopback address; tests and /healthz use 127.0.0.1
HEALTH_AND_CLOSE = b"GET /healthz HTTP/1.1\r\nHost: r\r\nConnection: close\r\n\r\n"


def fingerprint(agent: Agent) -> str:
    return str(agent.ok("id", "--json").json()["fingerprint"])


@contextmanager
def relay_process(tmp_path: Path, *extra: str) -> Iterator[RelayProcess]:
    relay = RelayProcess(tmp_path / "relay" / "relay.db", free_port(), extra=list(extra)).start()
    try:
        yield relay
    finally:
        relay.stop()


def mail_rows(db: Path, fp: str) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM mail WHERE fp = ?", (fp,)).fetchone()[0])


def junk_flood(relay: RelayProcess, fp: str, addresses: int, per_address: int) -> dict[int, int]:
    """Deposit junk under a fresh random tag each time, as `addresses` clients; status → count."""
    statuses: dict[int, int] = {}
    for a in range(addresses):
        source = f"198.51.100.{a + 1}"
        for _ in range(per_address):
            reply = call(relay, "POST", f"/v1/mail/{fp}/{new_tag()}", secrets.token_bytes(64),
                         {"x-forwarded-for": source})
            statuses[reply.status] = statuses.get(reply.status, 0) + 1
    return statuses


# ---------------------------------------------------------------- junk cannot crowd out contacts


def test_junk_under_random_tags_from_many_addresses_cannot_stop_a_contact(tmp_path: Path) -> None:
    with relay_process(tmp_path, "--behind-proxy", "--max-unknown", "50", "--max-mailbox", "100") as relay:
        alice = make_agent(tmp_path, relay, "alice", None)
        bob = make_agent(tmp_path, relay, "bob", None)
        befriend(alice, bob)
        assert alice.ok("receive").out == ""  # a drain, as the follower makes: it names bob's channel
        fp = fingerprint(alice)

        flood = junk_flood(relay, fp, addresses=30, per_address=10)
        assert flood == {201: 50, 507: 250}, flood  # the junk filled its own quota, nothing more

        sent = bob.ok("send", "alice", "still gets through", "--json").json()
        got = alice.ok("receive").lines()
        assert [(m["name"], m["text"], m["id"]) for m in got] == [("bob", "still gets through", sent["id"])]

        purged = alice.ok("purge", "--unknown", "--json").json()
        assert purged["deleted"] == 50
        assert mail_rows(relay.db, fp) == 0  # bob's receipt waits in bob's mailbox, not here
        assert alice.ok("purge", "--unknown", "--json").json()["deleted"] == 0
        assert junk_flood(relay, fp, addresses=1, per_address=1) == {201: 1}  # the quota is free again


def test_a_new_contacts_first_message_waits_in_the_unknown_quota_and_survives_a_purge(
    tmp_path: Path,
) -> None:
    """Mail sent before the owner ever read its channel is kept by purge: purge registers the
    channels the owner reads before it deletes anything."""
    with relay_process(tmp_path, "--max-unknown", "5") as relay:
        alice = make_agent(tmp_path, relay, "alice", None)
        bob = make_agent(tmp_path, relay, "bob", None)
        befriend(alice, bob)
        bob.ok("send", "alice", "first words")  # alice has not read this channel yet
        assert junk_flood(relay, fingerprint(alice), addresses=1, per_address=6) == {201: 4, 507: 2}
        assert alice.ok("purge", "--unknown", "--json").json()["deleted"] == 4
        got = alice.ok("receive").lines()
        assert [(m["name"], m["text"]) for m in got] == [("bob", "first words")]


def test_purge_needs_to_be_told_what_to_purge(tmp_path: Path) -> None:
    with relay_process(tmp_path) as relay:
        alice = make_agent(tmp_path, relay, "alice", None)
        r = alice.run("purge")
        assert r.code == 1 and "talk purge --unknown" in r.err and "Traceback" not in r.err


def test_only_the_owner_can_purge(tmp_path: Path) -> None:
    with relay_with(tmp_path) as relay:
        alice, mallory = publish(relay, "alice"), publish(relay, "mallory")
        tag = new_tag()
        deposit(relay, alice.fingerprint, tag, b"kept")
        path = f"/v1/mail/{alice.fingerprint}/purge"
        assert_error(signed(relay, mallory, "POST", path, jbody({})), 403, "forbidden")
        assert_error(call(relay, "POST", path, jbody({})), 401, "unauthorized")
        assert list(waiting(relay, alice, [tag]).values()) == [b"kept"]


def test_junk_flood_on_the_redis_store(tmp_path: Path) -> None:
    with redis_prefix() as prefix:
        from tests.redis_support import REDIS_URL

        relay = StoreRelay(tmp_path / "unused.db", free_port(),
                           extra=["--behind-proxy", "--max-unknown", "20", "--max-mailbox", "30"],
                           store=f"{REDIS_URL}?prefix={prefix}").start()
        try:
            alice = publish(relay, "alice")
            mine = new_tag()
            assert waiting(relay, alice, [mine]) == {}  # alice reads `mine`
            assert junk_flood(relay, alice.fingerprint, addresses=10, per_address=5) == {201: 20, 507: 30}
            kept = [deposit(relay, alice.fingerprint, mine, b"real %d" % i) for i in range(30)]
            path = f"/v1/mail/{alice.fingerprint}/purge"
            reply = signed(relay, alice, "POST", path, jbody({"tags": [mine]}))
            assert reply.status == 200 and reply.json() == {"deleted": 20, "files": 0}
            assert set(waiting(relay, alice, [mine])) <= set(kept)
        finally:
            relay.stop()


def test_a_junk_flood_wakes_the_owners_stream_about_once_a_second(tmp_path: Path) -> None:
    """Each wake-up makes the owner's follower fetch: junk must not drive it into a fetch storm."""
    with relay_with(tmp_path) as relay:
        alice = publish(relay, "alice")
        mine = new_tag()
        assert waiting(relay, alice, [mine]) == {}  # a tag alice reads
        with open_stream(relay, alice) as ws:
            start = time.monotonic()
            for _ in range(100):
                deposit(relay, alice.fingerprint, new_tag(), b"junk")
            took = time.monotonic() - start
            deposit(relay, alice.fingerprint, mine, b"real")
            tags: list[str] = []
            deadline = time.monotonic() + 10
            while mine not in tags:  # a deposit under a known tag still wakes at once
                tags.append(json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))["tag"])
            try:
                while True:  # the held-back junk wake, if any, comes within a second
                    tags.append(json.loads(ws.recv(timeout=2))["tag"])
            except TimeoutError:
                pass
        junk = [t for t in tags if t != mine]
        assert 1 <= len(junk) <= took + 2, (len(junk), took)


def test_after_a_restart_the_owners_tags_still_wake_at_once(tmp_path: Path) -> None:
    with relay_with(tmp_path) as relay:
        alice = publish(relay, "alice")
        mine = new_tag()
        assert waiting(relay, alice, [mine]) == {}
        relay.restart()  # the relay's memory of alice's tags is gone; the store's is not
        with open_stream(relay, alice) as ws:
            junk = [new_tag(), new_tag()]
            for tag in junk:  # the first wakes at once, the second is held back a second
                deposit(relay, alice.fingerprint, tag, b"junk")
            deposit(relay, alice.fingerprint, mine, b"real")
            tags = [json.loads(ws.recv(timeout=10))["tag"] for _ in range(3)]
        # Paced, `mine` would have had no wake of its own: the held-back one carries junk[1].
        assert sorted(tags) == sorted([*junk, mine])


# ---------------------------------------------------------------- rate limits


def assert_limited(reply: Reply, what: str) -> None:
    assert_error(reply, 429, "rate_limited", what)
    after = reply.headers.get("retry-after", "")
    assert after.isdigit() and int(after) >= 1, reply.headers


def test_key_publication_and_lookup_are_rate_limited_per_client(tmp_path: Path) -> None:
    with relay_with(tmp_path, "--behind-proxy", "--rate-publish", "2/60", "--rate-lookup", "3/60") as relay:
        first, second = publish(relay, "a"), publish(relay, "b")
        extra = Identity.generate("c")
        body = jbody(extra.bundle().to_json())
        assert_limited(call(relay, "PUT", f"/v1/keys/{extra.fingerprint}", body), "key publications")
        other = {"x-forwarded-for": "192.0.2.50"}  # another client is not held back
        assert call(relay, "PUT", f"/v1/keys/{extra.fingerprint}", body, other).status == 200

        for _ in range(3):
            assert call(relay, "GET", f"/v1/keys/{first.fingerprint}").status == 200
        assert_limited(call(relay, "GET", f"/v1/keys/{second.fingerprint}"), "key lookups")
        assert call(relay, "GET", f"/v1/keys/{second.fingerprint}", headers=other).status == 200


def test_owner_requests_are_rate_limited_even_unsigned(tmp_path: Path) -> None:
    with relay_with(tmp_path, "--rate-owner", "3/60") as relay:
        alice = publish(relay, "alice")
        path = f"/v1/mail/{alice.fingerprint}/fetch"
        assert_error(call(relay, "POST", path, jbody({"tags": [new_tag()]})), 401, "unauthorized")
        assert waiting(relay, alice, [new_tag()]) == {}
        assert waiting(relay, alice, [new_tag()]) == {}
        assert_limited(signed(relay, alice, "POST", path, jbody({"tags": [new_tag()]})), "owner requests")
        assert_limited(call(relay, "POST", f"/v1/mail/{alice.fingerprint}/purge", b"{}"), "owner requests")


def test_stream_handshakes_are_rate_limited(tmp_path: Path) -> None:
    with relay_with(tmp_path, "--rate-stream", "2/60") as relay, ExitStack() as streams:
        alice = publish(relay, "alice")
        streams.enter_context(open_stream(relay, alice))
        streams.enter_context(open_stream(relay, alice))
        with pytest.raises(InvalidStatus) as caught, open_stream(relay, alice):
            pass
        response = caught.value.response
        assert response.status_code == 429 and int(response.headers["Retry-After"]) >= 1
        assert json.loads(bytes(response.body or b""))["error"] == "rate_limited"


def test_a_spoofed_leftmost_forwarded_for_does_not_choose_the_client(tmp_path: Path) -> None:
    with relay_with(tmp_path, "--behind-proxy", "--rate-per-client", "2/60") as relay:
        fp = publish(relay).fingerprint

        def as_spoofer(fake: str) -> int:
            # The proxy appends the address it saw (192.0.2.9) after whatever the client wrote.
            reply = call(relay, "POST", f"/v1/mail/{fp}/{new_tag()}", b"blob",
                         {"x-forwarded-for": f"{fake}, 192.0.2.9"})
            return reply.status

        assert [as_spoofer(f"203.0.113.{i}") for i in range(1, 5)] == [201, 201, 429, 429]


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--trusted-proxies", "10.0.0.0/8,proxy.example", "bad proxy address"),
    ("--rate-owner", "lots", "bad rate"), ("--rate-stream", "0/1", "bad rate"),
])
def test_a_bad_limit_is_a_usage_error(tmp_path: Path, flag: str, value: str, says: str) -> None:
    p = subprocess.run([TALK, "relay", "--port", str(free_port()), "--db", str(tmp_path / "never.db"),
                        flag, value], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and flag in p.stderr and says in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "never.db").exists()


# ---------------------------------------------------------------- HTTP: heads, connections, bodies


def vm_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def flood_head(port: int, size: int) -> bytes:
    """Send one request head of `size` bytes (one endless header) from the attacker's address;
    return what the relay answered before it closed the connection (b"" if it reset it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20, source_address=(FLOOD_SOURCE, 0)) as s:
        block = b"a" * 65536
        try:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: relay\r\nX-Flood: ")
            for _ in range(size // len(block)):
                s.sendall(block)
        except OSError:
            pass  # the relay closed it: what the test wants
        try:
            return s.recv(4096)
        except OSError:
            return b""


def poll_health(relay: RelayProcess, stop: threading.Event, statuses: list[int]) -> None:
    while not stop.is_set():
        try:
            statuses.append(call(relay, "GET", "/healthz").status)
        except OSError:
            statuses.append(0)
        time.sleep(0.02)


def test_a_header_flood_is_cut_off_and_healthz_keeps_answering(tmp_path: Path) -> None:
    with relay_process(tmp_path) as relay:
        assert relay.proc is not None
        pid = relay.proc.pid
        statuses: list[int] = []
        stop = threading.Event()
        poller = threading.Thread(target=poll_health, args=(relay, stop, statuses))
        poller.start()
        answers: list[bytes] = []
        flooders = [threading.Thread(target=lambda: answers.append(flood_head(relay.port, 4 << 20)))
                    for _ in range(20)]
        try:
            for t in flooders:
                t.start()
            for t in flooders:
                t.join(timeout=60)
        finally:
            stop.set()
            poller.join()
        assert len(answers) == 20
        assert all(a == b"" or a.startswith(b"HTTP/1.1 431") for a in answers), answers[:3]
        assert any(a.startswith(b"HTTP/1.1 431") for a in answers)
        assert statuses and set(statuses) == {200}, statuses
        assert vm_kb(pid, "VmHWM") < 100 * 1024  # the peak, over the whole flood
        assert call(relay, "GET", "/healthz").status == 200


def raw_exchange(port: int, request: bytes, source: str = "127.0.0.1") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=20, source_address=(source, 0)) as s:
        s.sendall(request)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
        return reply


def json_error(reply: bytes, status: int, code: str) -> None:
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d" % status), reply[:200]
    assert b"content-type: application/json" in head.lower()
    data = json.loads(body)
    assert set(data) == {"error", "message"} and data["error"] == code, data


def test_too_many_headers_is_431(relay: RelayProcess) -> None:
    headers = b"".join(b"X-H%d: 1\r\n" % i for i in range(101))
    json_error(raw_exchange(relay.port, b"GET /healthz HTTP/1.1\r\nHost: r\r\n" + headers + b"\r\n"),
               431, "headers_too_large")
    assert raw_exchange(relay.port, HEALTH_AND_CLOSE).startswith(b"HTTP/1.1 200")


def test_half_open_requests_are_closed_after_the_header_timeout(tmp_path: Path) -> None:
    with relay_process(tmp_path, "--header-timeout", "2") as relay:
        opened = []
        try:
            for i in range(300):
                s = socket.create_connection(("127.0.0.1", relay.port), timeout=30,
                                             source_address=(FLOOD_SOURCE, 0))
                opened.append(s)
                if i % 2:  # half send part of a head, half send nothing at all
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: r\r\n")
            assert call(relay, "GET", "/healthz").status == 200  # still answering meanwhile
            for s in opened:  # the relay ends every one of them
                reply = s.recv(4096)
                assert reply == b"" or reply.startswith(b"HTTP/1.1 408"), reply
        finally:
            for s in opened:
                s.close()
        reply = raw_exchange(relay.port, b"GET /healthz HTTP/1.1\r\nHost: r\r\n")
        json_error(reply, 408, "timeout")


def test_the_connection_cap_answers_503_json(tmp_path: Path) -> None:
    with relay_process(tmp_path, "--max-connections", "5", "--header-timeout", "60") as relay:
        idle = [socket.create_connection(("127.0.0.1", relay.port), timeout=30,
                                         source_address=(FLOOD_SOURCE, 0)) for _ in range(5)]
        replies: list[bytes] = []

        def turned_away() -> bool:  # the relay takes the idle ones in its own time
            replies.append(raw_exchange(relay.port, HEALTH_AND_CLOSE))
            return not replies[-1].startswith(b"HTTP/1.1 200")

        try:
            wait_for(turned_away, 15, "the connection cap")
            json_error(replies[-1], 503, "busy")
        finally:
            for s in idle:
                s.close()
        wait_for(lambda: call(relay, "GET", "/healthz").status == 200, 15, "connections taken again")


def test_one_address_cannot_take_every_connection(tmp_path: Path) -> None:
    with relay_process(tmp_path, "--max-connections-per-client", "20", "--header-timeout", "60") as relay:
        held = [socket.create_connection(("127.0.0.1", relay.port), timeout=30,
                                         source_address=(FLOOD_SOURCE, 0)) for _ in range(40)]
        try:
            refused = [s.recv(4096) for s in held[20:]]  # the relay answers these at once
            for reply in refused:
                assert reply == b"" or reply.startswith(b"HTTP/1.1 503"), reply
            assert any(reply.startswith(b"HTTP/1.1 503") for reply in refused)
            json_error(next(r for r in refused if r), 503, "busy")
            assert call(relay, "GET", "/healthz").status == 200  # another address is served
        finally:
            for s in held:
                s.close()
        def served_again() -> bool:  # closed connections give the address its share back
            try:
                return raw_exchange(relay.port, HEALTH_AND_CLOSE, FLOOD_SOURCE).startswith(b"HTTP/1.1 200")
            except OSError:
                return False

        wait_for(served_again, 15, "the address to get its connections back")


def stop_and_read_log(relay: RelayProcess) -> str:
    assert relay.proc is not None and relay.proc.stderr is not None
    relay.proc.terminate()
    log = relay.proc.stderr.read().decode(errors="replace")
    relay.proc.wait(timeout=10)
    relay.stop()
    return log


def test_malformed_and_abandoned_bodies_are_4xx_or_a_quiet_close(tmp_path: Path) -> None:
    relay = RelayProcess(tmp_path / "relay.db", free_port()).start()
    try:
        fp = publish(relay).fingerprint
        path = f"/v1/mail/{fp}/{new_tag()}".encode()
        head = b"POST " + path + b" HTTP/1.1\r\nHost: r\r\n"
        for _ in range(5):
            chunked = head + b"Transfer-Encoding: chunked\r\n\r\n"
            bad_chunk = raw_exchange(relay.port, chunked + b"4\r\nabcd\r\nzz\r\n")
            if bad_chunk:  # the request was under way, so closing it quietly is the answer too
                json_error(bad_chunk, 400, "bad_request")
            bad_head = raw_exchange(relay.port, b"POST /v1 HTTP/1.1\r\nHost r\r\n\r\n")
            json_error(bad_head, 400, "bad_request")
            with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as s:
                s.sendall(head + b"Content-Length: 1000\r\n\r\n" + b"x" * 10)  # then goes away
            with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as s:
                s.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n10\r\nabc")
        deposit(relay, fp, new_tag(), b"the relay is fine")
        assert call(relay, "GET", "/healthz").status == 200
    finally:
        log = stop_and_read_log(relay)
    assert "Traceback" not in log and "internal error" not in log, log[-2000:]


# ---------------------------------------------------------------- files


def test_relay_database_files_are_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask, which alone would give 0644
    try:
        db = tmp_path / "fresh" / "relay.db"
        relay = RelayProcess(db, free_port()).start()
        try:
            deposit(relay, publish(relay).fingerprint, new_tag(), b"blob")
            files = [db, db.with_name("relay.db-wal"), db.with_name("relay.db-shm")]
            assert {f.name: f.stat().st_mode & 0o777 for f in files} == {f.name: 0o600 for f in files}
        finally:
            relay.stop()
        db.chmod(0o644)  # a file left by an older relay is tightened on start
        relay.start()
        relay.stop()
        assert db.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_a_body_trickled_slower_than_the_body_timeout_is_408_and_closed(tmp_path: Path) -> None:
    with relay_process(tmp_path, "--body-timeout", "1") as relay:
        path = b"/v1/mail/%s/%s" % (b"a" * 32, b"b" * 32)
        head = b"POST %s HTTP/1.1\r\nHost: r\r\nContent-Length: 100\r\n\r\n" % path
        reply = raw_exchange(relay.port, head + b"only part of it")
        json_error(reply, 408, "timeout")
        assert b"body" in reply.partition(b"\r\n\r\n")[2]
        assert call(relay, "GET", "/healthz").status == 200  # still answering


def read_answer(s: socket.socket) -> bytes:
    """One answer on a kept-alive connection: its head and its content-length of body."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += s.recv(65536)
    found = re.search(rb"content-length: (\d+)", answer.partition(b"\r\n\r\n")[0].lower())
    assert found is not None, answer
    while len(answer.partition(b"\r\n\r\n")[2]) < int(found[1]):
        answer += s.recv(65536)
    return answer


def test_a_kept_alive_connection_answering_in_time_outlives_both_timeouts(tmp_path: Path) -> None:
    """The deadlines share one timer per connection that is moved, not armed per request: a
    connection whose requests each come whole in time is never cut, and a head trickled after a
    body is cut at the head's own deadline, not the body's."""
    fetch = b"POST /v1/mail/%s/fetch HTTP/1.1\r\nHost: r\r\nContent-Length: 2\r\n\r\n" % (b"a" * 32)
    with relay_process(tmp_path, "--header-timeout", "1", "--body-timeout", "60") as relay, \
            socket.create_connection(("127.0.0.1", relay.port), timeout=30) as s:
        ends = time.monotonic() + 2.5  # past the header timeout, twice
        answered = 0
        while time.monotonic() < ends:
            s.sendall(fetch + b"{}")
            read_answer(s)
            answered += 1
            time.sleep(0.1)  # the pace of a client, not a wait for anything
        assert answered > 5
        s.sendall(fetch)  # a body slower than the head's timeout, within its own: answered too
        time.sleep(1.5)
        s.sendall(b"{}")
        assert not read_answer(s).startswith(b"HTTP/1.1 408")
        started = time.monotonic()
        s.sendall(b"GET /healthz HTTP/1.1\r\n")  # a head that never ends, after a request with a body
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
        json_error(reply, 408, "timeout")
        assert time.monotonic() - started < 30  # the head's 1 s, with room; the body's would be 60
