"""relay.logsafe: names for addresses and fingerprints in the log that do not reveal them."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from relay import logsafe


def test_logsafe_hides_but_stays_stable_within_a_process() -> None:
    fp = "ab" * 16
    assert logsafe.hide(fp) == logsafe.hide(fp) != logsafe.hide("127.0.0.1")
    assert len(logsafe.hide(fp)) == 8 and fp not in logsafe.hide(fp)
    assert set(logsafe.hide(fp)) <= set("0123456789abcdef")


def test_a_plain_hash_of_a_guessed_address_does_not_match_the_logged_name() -> None:
    address = "192.0.2.7"
    unkeyed = hashlib.blake2b(address.encode(), digest_size=4).hexdigest()
    assert logsafe.hide(address) != unkeyed


def test_another_process_names_the_same_value_differently() -> None:
    """The key is drawn per process: two runs' logs cannot be matched line for line."""
    script = "from relay import logsafe; print(logsafe.hide('192.0.2.7'))"
    names = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True, timeout=30).stdout.strip() for _ in range(2)}
    assert len(names) == 2 and logsafe.hide("192.0.2.7") not in names
