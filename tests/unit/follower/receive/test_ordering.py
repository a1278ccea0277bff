"""follower.receive.ordering: a sender's mail never overtakes its parked mail; nobody else's waits."""

from __future__ import annotations

from pathlib import Path

import pytest

from follower.files.parked import Parked
from follower.receive.ordering import Route, route, senders_waiting


@pytest.mark.parametrize(("files", "held", "waiting", "way"), [
    (True, False, False, Route.PARK),
    (True, True, True, Route.PARK),  # a held file message is parked first, held once its files are in
    (True, False, True, Route.PARK),  # a second file message waits in the same line
    (False, True, True, Route.HOLD),  # held mail goes aside, not to the agent: it overtakes nothing
    (False, True, False, Route.HOLD),
    (False, False, True, Route.BEHIND),
    (False, False, False, Route.HAND_ON),
])
def test_route(files: bool, held: bool, waiting: bool, way: Route) -> None:
    assert route(files, held, waiting) is way


def test_senders_waiting_are_those_with_mail_parked(tmp_path: Path) -> None:
    assert senders_waiting(tmp_path) == set()  # no folder at all
    Parked(tmp_path).ensure()
    assert senders_waiting(tmp_path) == set()
    record = {"id": "1" * 32, "text": "t"}
    Parked(tmp_path).park(record, "a" * 32, [], None, None, True)
    Parked(tmp_path).park({**record, "id": "2" * 32}, "b" * 32, [], None, None, True)
    assert senders_waiting(tmp_path) == {"a" * 32, "b" * 32}
    (Parked(tmp_path).folder / f"{'3' * 32}.json").write_bytes(b"\0" * 10)  # damaged: no one's
    assert senders_waiting(tmp_path) == {"a" * 32, "b" * 32}
