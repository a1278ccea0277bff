"""Group mail both ways (sending and taking control messages) and the loop guard."""

from __future__ import annotations

from durable.faces import face

__all__ = ("group_inbound", "group_mail", "loop_guard")
__getattr__ = face(__name__, __all__)
