"""Safety numbers: sixty digits two people read aloud to confirm they pinned each other."""

from __future__ import annotations

from durable.digests import blake2b

__all__ = ["safety_number"]


def safety_number(fp_a: str, fp_b: str) -> str:
    """The same string on both sides: the two fingerprints are hashed in sorted order."""
    first, second = sorted((fp_a, fp_b))
    digest = blake2b(
        bytes.fromhex(first) + bytes.fromhex(second), digest_size=40, person=b"talk-safety-v1"
    ).digest()
    groups = [int.from_bytes(digest[i * 3 : i * 3 + 3], "big") % 100000 for i in range(12)]
    return " ".join(f"{g:05d}" for g in groups)
