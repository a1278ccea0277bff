"""What is secret or pins trust: identities, keys at rest, pinned contacts, invite codes, the
sealed envelope (classic, or hybrid with ML-KEM-768: `hybrid`, `kem_card`) and the gate;
`ratchet/` (Olm, pairwise) and `groups/` (Megolm and the group book) hold the forward-secret
state, sealed at rest. What is about mail (policy, the task
protocol) lives in `follower/`.

This package touches no network and no files beyond an identity's own folder, and imports
nothing of the project but the leaf package `durable` (errors, private files, locks), so every
other part but `durable` can build on it.

Its face (`__all__`, see `durable.faces`) is every module here and both subpackages: the
follower, the relay and the CLI each use some. Each module's own `__all__` says which of its
names they may use; `import keys` loads nothing more.
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("contacts", "encoding", "envelope", "fileref", "filestream", "gate", "groups", "hybrid",
           "identity", "invalid", "invites", "kem_card", "keystore", "names", "ratchet", "safety", "sodium",
           "wire")
__getattr__ = face(__name__, __all__)
