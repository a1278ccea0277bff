"""follower.send.ratchet_send: the switch and the contacts' view (the sending itself is in tests/e2e)."""

from __future__ import annotations

from pathlib import Path

import pytest

from follower.send.ratchet_send import RATCHET_ENV, forward_secret, ratchet_enabled
from keys.ratchet.sessions import SESSIONS_DIR
from tests.unit.samples import FP_A, FP_B


@pytest.mark.parametrize(("value", "enabled"), [(None, True), ("on", True), ("off", False), (" OFF ", False)])
def test_ratchet_keys_are_off_only_when_the_environment_says_off(
        monkeypatch: pytest.MonkeyPatch, value: str | None, enabled: bool) -> None:
    if value is None:
        monkeypatch.delenv(RATCHET_ENV, raising=False)
    else:
        monkeypatch.setenv(RATCHET_ENV, value)
    assert ratchet_enabled() is enabled


def test_a_contact_has_forward_secrecy_while_a_session_is_held(tmp_path: Path) -> None:
    (tmp_path / SESSIONS_DIR).mkdir()
    (tmp_path / SESSIONS_DIR / f"{FP_A}.json").write_text('{"v": 1, "sessions": ["a pickle"], "seen": []}')
    (tmp_path / SESSIONS_DIR / f"{FP_B}.nocard").write_text("{}")
    assert forward_secret(tmp_path, FP_A) and not forward_secret(tmp_path, FP_B)
    # After a loss the file stays, to keep the ids seen and the history, with no session in it.
    (tmp_path / SESSIONS_DIR / f"{FP_A}.json").write_text('{"v": 1, "sessions": [], "seen": ["x"]}')
    assert not forward_secret(tmp_path, FP_A)
