"""Relay limits and operations on real relay processes on loopback started with tiny limits:
rates, the stream cap, the client address, /healthz, metrics.

The token bucket and the address rule are pure, tested with explicit times in the unit tier
(tests/unit/relay/test_limits.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import InvalidStatus

from durable.version import version
from tests.conftest import TALK, RelayProcess, free_port
from tests.e2e.relay_calls import (
    ack,
    assert_error,
    call,
    deposit,
    new_tag,
    open_slot,
    open_stream,
    publish,
    relay_with,
    waiting,
)
from tests.redis_support import StoreRelay

# ---------------------------------------------------------------- rates on a real relay


def refused_deposit(relay: RelayProcess, fp: str, tag: str, headers: dict[str, str] | None = None) -> str:
    """Deposit that must be refused for its rate; returns the Retry-After value."""
    reply = call(relay, "POST", f"/v1/mail/{fp}/{tag}", b"blob", headers)
    assert_error(reply, 429, "rate_limited", "too many deposits")
    after = reply.headers.get("retry-after", "")
    assert after.isdigit() and int(after) >= 1, reply.headers
    return after


def deposit_as(relay: RelayProcess, fp: str, tag: str, forwarded_for: str) -> int:
    reply = call(relay, "POST", f"/v1/mail/{fp}/{tag}", b"blob", {"x-forwarded-for": forwarded_for})
    return reply.status


def test_per_tag_rate_is_429_with_retry_after(tmp_path: Path) -> None:
    with relay_with(tmp_path, "--rate-per-tag", "2/60", "--rate-per-client", "off") as relay:
        fp = publish(relay).fingerprint
        tag = new_tag()
        deposit(relay, fp, tag, b"one")
        deposit(relay, fp, tag, b"two")
        assert int(refused_deposit(relay, fp, tag)) in range(1, 31)  # one token per 30 s
        deposit(relay, fp, new_tag(), b"another channel is not held back")


def test_per_client_rate_counts_deposits_and_redemptions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALK_RELAY_RATE_PER_CLIENT", "3/60")  # the env var, not the flag
    with relay_with(tmp_path) as relay:
        owner = publish(relay)
        invite = new_tag()
        assert open_slot(relay, owner, invite, time.time() + 600).status == 201
        deposit(relay, owner.fingerprint, new_tag(), b"one")
        assert call(relay, "POST", f"/v1/redeem/{invite}", b"request").status == 201
        deposit(relay, owner.fingerprint, new_tag(), b"three")
        refused_deposit(relay, owner.fingerprint, new_tag())
        reply = call(relay, "POST", f"/v1/redeem/{new_tag()}", b"request")
        assert_error(reply, 429, "rate_limited", "from this client")
        assert len(waiting(relay, owner, [invite])) == 1  # owner routes are not deposit-limited


def test_forwarded_for_is_ignored_without_behind_proxy(tmp_path: Path) -> None:
    with relay_with(tmp_path, "--rate-per-client", "2/60") as relay:
        fp = publish(relay).fingerprint
        assert [deposit_as(relay, fp, new_tag(), "192.0.2.1") for _ in range(2)] == [201, 201]
        assert deposit_as(relay, fp, new_tag(), "192.0.2.2") == 429  # same socket peer


def test_behind_proxy_limits_each_forwarded_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALK_RELAY_BEHIND_PROXY", "1")
    with relay_with(tmp_path, "--rate-per-client", "2/60") as relay:
        fp = publish(relay).fingerprint
        first = "10.0.0.1, 192.0.2.1"  # the proxy appended 192.0.2.1; the client wrote the rest
        assert [deposit_as(relay, fp, new_tag(), first) for _ in range(3)] == [201, 201, 429]
        assert deposit_as(relay, fp, new_tag(), "10.0.0.1, 192.0.2.2") == 201


def test_a_bad_rate_is_a_usage_error(tmp_path: Path) -> None:
    p = subprocess.run(
        [TALK, "relay", "--port", str(free_port()), "--db", str(tmp_path / "never.db"),
         "--rate-per-tag", "lots"], capture_output=True, text=True, timeout=30,
    )
    assert p.returncode != 0 and "--rate-per-tag" in p.stderr and "bad rate" in p.stderr
    assert "Traceback" not in p.stderr


# ---------------------------------------------------------------- the stream cap


def test_extra_stream_is_refused_with_429_json(tmp_path: Path) -> None:
    with relay_with(tmp_path, "--max-streams", "2") as relay, ExitStack() as streams:
        me = publish(relay)
        first = streams.enter_context(open_stream(relay, me))
        streams.enter_context(open_stream(relay, me))
        with pytest.raises(InvalidStatus) as caught, open_stream(relay, me):
            pass
        response = caught.value.response
        assert response.status_code == 429
        body = json.loads(bytes(response.body or b""))
        assert body["error"] == "too_many_streams" and "2 push streams" in body["message"]
        streams.enter_context(open_stream(relay, publish(relay, "carol")))  # other mailboxes unaffected
        first.close()
        deadline = time.monotonic() + 5
        while True:  # the relay frees the slot once it sees the close
            try:
                streams.enter_context(open_stream(relay, me))
                break
            except InvalidStatus:
                assert time.monotonic() < deadline, "the closed stream's slot was never freed"
                time.sleep(0.05)


# ---------------------------------------------------------------- /healthz


def test_healthz_names_version_and_store(relay: RelayProcess) -> None:
    reply = call(relay, "GET", "/healthz")
    assert reply.status == 200 and reply.json() == {"ok": True, "version": version(), "store": "sqlite"}


@pytest.fixture
def own_redis() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A redis-server of this test's own on a free port, so the test can stop it."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=10)


def test_healthz_is_503_when_the_store_is_gone(
    tmp_path: Path, own_redis: tuple[subprocess.Popen[bytes], str]
) -> None:
    server, url = own_redis
    relay = StoreRelay(tmp_path / "unused.db", free_port(), store=url)
    deadline = time.monotonic() + 10
    while True:  # redis-server needs a moment to listen
        try:
            relay.start()
            break
        except RuntimeError:
            assert time.monotonic() < deadline, "relay on the test's Redis never started"
            time.sleep(0.1)
    try:
        reply = call(relay, "GET", "/healthz")
        assert reply.status == 200 and reply.json() == {"ok": True, "version": version(), "store": "redis"}
        server.terminate()
        server.wait(timeout=10)
        assert_error(call(relay, "GET", "/healthz"), 503, "store_unavailable", "redis store")
    finally:
        relay.stop()


# ---------------------------------------------------------------- metrics


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, labels) → value, from the metrics listener over loopback."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_count_the_traffic(tmp_path: Path) -> None:
    metrics_port = free_port()
    with relay_with(tmp_path, "--metrics-port", str(metrics_port)) as relay:
        owner = publish(relay)
        tag = new_tag()
        ids = [deposit(relay, owner.fingerprint, tag, blob) for blob in (b"abc", b"defgh")]
        assert len(waiting(relay, owner, [tag])) == 2
        stop = time.monotonic() + 15  # the depth gauge is sampled every few seconds
        while scrape(metrics_port)[("talk_relay_stored_messages", ())] != 2:
            assert time.monotonic() < stop, "the stored-messages gauge never showed the 2 waiting"
            time.sleep(0.2)
        assert ack(relay, owner, ids).json() == {"deleted": 2}
        assert call(relay, "GET", f"/v1/keys/{new_tag()}").status == 404
        with open_stream(relay, owner):
            seen = scrape(metrics_port)
        after = scrape(metrics_port)
        stop = time.monotonic() + 15
        while scrape(metrics_port)[("talk_relay_stored_messages", ())] != 0:  # the acked 2 left
            assert time.monotonic() < stop, "the stored-messages gauge never went back to 0"
            time.sleep(0.2)
    assert seen[("talk_relay_deposits_total", ())] == 2
    assert seen[("talk_relay_deposit_bytes_total", ())] == 8
    assert seen[("talk_relay_deliveries_total", ())] == 2
    assert seen[("talk_relay_acks_total", ())] == 2
    assert seen[("talk_relay_errors_total", (("code", "not_found"),))] == 1
    assert seen[("talk_relay_request_seconds_count", (("route", "deposit"),))] == 2
    assert seen[("talk_relay_open_streams", ())] == 1
    assert after[("talk_relay_open_streams", ())] in (0, 1)  # the close may still be in flight
    assert not [name for name, labels in seen if any(owner.fingerprint in v for _, v in labels)]


def test_metrics_are_off_unless_asked(relay: RelayProcess) -> None:
    reply = call(relay, "GET", "/metrics")
    assert reply.status == 404  # never on the public port
    assert json.loads(reply.body)["error"] == "not_found"
