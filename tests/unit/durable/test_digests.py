"""The digests talk uses are hashlib's own, byte for byte, and loading them loads no OpenSSL."""

from __future__ import annotations

import hashlib
import hmac
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from durable.digests import blake2b, compare_digest, sha256
from tests.conftest import REPO


@given(st.binary(max_size=4096), st.binary(max_size=64), st.integers(1, 64), st.binary(max_size=16))
def test_blake2b_is_hashlibs(data: bytes, key: bytes, size: int, person: bytes) -> None:
    ours = blake2b(data, key=key, digest_size=size, person=person).hexdigest()
    assert ours == hashlib.blake2b(data, key=key, digest_size=size, person=person).hexdigest()


@given(st.lists(st.binary(max_size=2048), max_size=5))
def test_sha256_is_hashlibs_in_one_piece_or_many(parts: list[bytes]) -> None:
    ours = sha256()
    for part in parts:
        ours.update(part)
    assert ours.digest() == hashlib.sha256(b"".join(parts)).digest() == sha256(b"".join(parts)).digest()


@given(st.binary(max_size=64), st.binary(max_size=64))
def test_the_comparison_agrees_with_hmacs(a: bytes, b: bytes) -> None:
    assert compare_digest(a, b) == hmac.compare_digest(a, b) == (a == b)
    assert compare_digest(a, a)


def test_loading_them_loads_no_openssl() -> None:
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r}); import durable.digests; "
            "print(' '.join(sorted({'hashlib', 'hmac', '_hashlib', 'ssl'} & set(sys.modules))))")
    loaded = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == []
