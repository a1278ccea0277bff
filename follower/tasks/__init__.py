"""The opencode-mesh task protocol (`mesh`) and the ledger of tasks sent and received (`ledger`)."""

from __future__ import annotations

from durable.faces import face

__all__ = ("ledger", "mesh")
__getattr__ = face(__name__, __all__)
