"""keys.safety: safety numbers are symmetric and well formed."""

from __future__ import annotations

import re

from keys.identity import Identity
from keys.safety import safety_number

SAFETY_FORMAT = re.compile(r"^\d{5}( \d{5}){11}$")


def test_safety_number_is_symmetric_and_well_formed(
    alice_id: Identity, bob_id: Identity, carol_id: Identity
) -> None:
    number = safety_number(alice_id.fingerprint, bob_id.fingerprint)
    assert number == safety_number(bob_id.fingerprint, alice_id.fingerprint)
    assert SAFETY_FORMAT.match(number), number
    assert len(number.split()) == 12
    assert safety_number(alice_id.fingerprint, carol_id.fingerprint) != number


