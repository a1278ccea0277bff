"""The hashes talk uses (BLAKE2b, SHA-256) and a constant-time comparison, without OpenSSL.

Why not `hashlib` and `hmac`. Importing either loads OpenSSL's libcrypto through `_hashlib`,
about 3 ms of every short command's start (`talk receive` and `talk send` run on every turn of
an agent) for hashes CPython also builds in: `hashlib.blake2b` *is* `_blake2.blake2b`, and the
builtin SHA-256 gives the same digests as OpenSSL's. Where an interpreter was built without its
own SHA-256 (a distribution may leave it out), `hashlib`'s is used and only the start is slower.
HMAC is not here: the one user (`keys.ratchet.late`, reading vodozemac's pickles of archived
chains) imports `hmac` when it seals or opens one, which most commands never do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["blake2b", "compare_digest", "sha256"]

if TYPE_CHECKING:  # the same functions, as typeshed types them
    from hashlib import blake2b, sha256
    from hmac import compare_digest
else:
    from _blake2 import blake2b

    try:  # CPython 3.12 and later name the builtin SHA-2 module _sha2, 3.11 _sha256
        from _sha2 import sha256
    except ImportError:
        try:
            from _sha256 import sha256
        except ImportError:
            from hashlib import sha256

    try:  # the comparison `hmac.compare_digest` falls back to, from the operator module's C part
        from _operator import _compare_digest as compare_digest
    except ImportError:
        from hmac import compare_digest
