"""Identities the keys tests share: made once per module, since generating keys is the slow part."""

from __future__ import annotations

import pytest

from keys.identity import Identity


@pytest.fixture(scope="module")
def alice_id() -> Identity:
    return Identity.generate("alice")


@pytest.fixture(scope="module")
def bob_id() -> Identity:
    return Identity.generate("bob")


@pytest.fixture(scope="module")
def carol_id() -> Identity:
    return Identity.generate("carol")
