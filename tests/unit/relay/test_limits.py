"""relay.limits: rates, token buckets, the limiter and its sweep, the wake throttle, Retry-After,
and the client address the limits key on. Pure decisions, `now` passed in: explicit times."""

from __future__ import annotations

import pytest

from relay.limits import (
    OFF,
    Limiter,
    Rate,
    TokenBucket,
    WakeThrottle,
    client_address,
    parse_networks,
    retry_after,
)


@pytest.mark.parametrize(("text", "per_s", "burst"), [
    ("20/1", 20.0, 20.0), ("20/1:100", 20.0, 100.0), ("3/60", 0.05, 3.0), ("5", 5.0, 5.0),
    ("off", 0.0, 0.0), ("OFF", 0.0, 0.0),
])
def test_rate_parse(text: str, per_s: float, burst: float) -> None:
    assert Rate.parse(text) == Rate(per_s, burst)


@pytest.mark.parametrize("text", ["", "x", "1/0", "0/1", "-1/1", "1/1:0", "1/1:x", "nan/1", "inf/1"])
def test_rate_parse_refuses_nonsense(text: str) -> None:
    with pytest.raises(ValueError, match="bad rate"):
        Rate.parse(text)


def test_bucket_spends_its_burst_then_refills_at_the_rate() -> None:
    bucket = TokenBucket.full(Rate(2.0, 3.0), now=100.0)
    assert [bucket.take(100.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(100.0) == pytest.approx(0.5)  # one token takes 1/2 s at 2 per second
    assert bucket.take(100.25) == pytest.approx(0.25)
    assert bucket.take(100.5) == 0.0
    assert bucket.take(1000.0) == 0.0  # a long pause refills to the burst, never beyond it
    assert bucket.tokens == pytest.approx(2.0)


def test_bucket_ignores_a_clock_going_backwards() -> None:
    bucket = TokenBucket.full(Rate(1.0, 1.0), now=50.0)
    assert bucket.take(50.0) == 0.0
    assert bucket.take(10.0) == pytest.approx(1.0)  # no tokens minted from a negative interval
    assert bucket.take(50.5) == pytest.approx(0.5)


def test_limiter_keys_are_independent_and_off_never_refuses() -> None:
    limiter = Limiter(Rate(1.0, 1.0))
    assert limiter.take("a", 0.0) == 0.0
    assert limiter.take("a", 0.0) > 0.0
    assert limiter.take("b", 0.0) == 0.0
    unlimited = Limiter(OFF)
    assert all(unlimited.take("a", 0.0) == 0.0 for _ in range(1000))
    assert unlimited.buckets == {}


def test_limiter_sweeps_idle_buckets_but_keeps_busy_ones() -> None:
    limiter = Limiter(Rate(1.0, 2.0), sweep_at=3)
    for key in ("idle1", "idle2", "busy"):
        limiter.take(key, 0.0)
    limiter.take("busy", 0.0)  # empty now; the idle ones hold 1 of 2 and refill by t=1
    limiter.take("new", 1.5)
    assert set(limiter.buckets) == {"busy", "new"}
    assert limiter.take("busy", 1.5) == 0.0 and limiter.take("busy", 1.5) > 0.0


def test_wake_throttle_paces_each_mailbox_and_keeps_one_late_wake() -> None:
    throttle = WakeThrottle(1.0)
    assert throttle.take("a", 10.0) == 0.0
    assert throttle.take("a", 10.25) == pytest.approx(0.75)  # held back, sent at the window's end
    assert throttle.take("a", 10.5) is None  # that one late wake covers the rest of the window
    assert throttle.take("b", 10.5) == 0.0  # another mailbox has its own window
    throttle.fired("a", 11.0)
    assert throttle.take("a", 11.5) == pytest.approx(0.5)
    throttle.fired("a", 12.0)
    assert throttle.take("a", 13.0) == 0.0


def test_retry_after_is_whole_seconds_and_never_zero() -> None:
    assert [retry_after(w) for w in (0.001, 0.5, 1.0, 1.01, 59.2)] == ["1", "1", "1", "2", "60"]


def test_client_address_trusts_forwarded_for_only_behind_a_proxy() -> None:
    assert client_address("10.0.0.9", "1.2.3.4, 10.0.0.1", behind_proxy=False) == "10.0.0.9"
    assert client_address("10.0.0.9", None, behind_proxy=True) == "10.0.0.9"
    assert client_address("10.0.0.9", " , ", behind_proxy=True) == "10.0.0.9"
    assert client_address(None, None, behind_proxy=False) == "unknown"


def test_behind_a_proxy_the_client_is_the_rightmost_untrusted_hop() -> None:
    # The proxy appends the address it saw; whatever stands left of it the client wrote.
    assert client_address("10.0.0.9", "6.6.6.6, 1.2.3.4", behind_proxy=True) == "1.2.3.4"
    assert client_address("10.0.0.9", "1.2.3.4, ", behind_proxy=True) == "1.2.3.4"
    cdn = parse_networks("10.0.0.0/8, 192.0.2.7")
    assert client_address("10.0.0.9", "6.6.6.6, 1.2.3.4, 192.0.2.7, 10.1.1.1", True, cdn) == "1.2.3.4"
    assert client_address("10.0.0.9", "10.2.2.2", True, cdn) == "10.0.0.9"  # all trusted: the peer
    assert client_address("10.0.0.9", "6.6.6.6, not-an-ip", True, cdn) == "not-an-ip"
    with pytest.raises(ValueError, match="bad proxy address 'x'"):
        parse_networks("10.0.0.0/8, x")


def test_an_ipv6_client_is_limited_as_its_64() -> None:
    one = client_address("2001:db8:1:2:aaaa::1", None, behind_proxy=False)
    assert one == client_address("2001:db8:1:2:ffff:1:2:3", None, behind_proxy=False) == "2001:db8:1:2::/64"
    assert client_address("2001:db8:1:3::1", None, behind_proxy=False) != one
    assert client_address("::ffff:192.0.2.1", None, behind_proxy=False) == "192.0.2.1"
    assert client_address("10.0.0.9", "2001:db8::5, 10.0.0.1", True, parse_networks("10.0.0.1")) == (
        "2001:db8::/64")
