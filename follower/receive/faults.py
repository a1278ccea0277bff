"""Whose fault a failure is while a message is taken: the message's (quarantine it, ack it) or
this machine's (leave it on the relay); and the reason a refusal keeps.
"""

from __future__ import annotations

from durable.errors import LocalFileRefused, RelayError, TimedOut
from follower.receive.quarantine import safe_text
from keys.ratchet.sessions import Busy

# Faults of this machine or of the way to the relay, never of the message being taken: a full disk,
# a folder's permissions, a planted link or a damaged file (`LocalFileRefused`), a lock held
# elsewhere, a relay that does not answer. The message may be
# sound, so it stays on the relay and comes again once they pass. Whatever else handling a message
# raises (a parse, a decryption, the gate, a name, a limit, a bug its content trips) is the
# message's doing: it is quarantined and acked, so no message from anyone holds back the rest.
MACHINE_FAULTS: tuple[type[Exception], ...] = (OSError, MemoryError, LocalFileRefused, Busy, RelayError,
                                                TimedOut)


def blames_message(exc: Exception) -> bool:
    """Whether `exc`, raised while a message was handled, is that message's fault (see above)."""
    return not isinstance(exc, MACHINE_FAULTS)


def refusal_reason(exc: Exception) -> str:
    """Why a message was refused, as one printable line of bounded length, whatever the error
    holds (an unexpected error may quote the peer's bytes: controls, lone surrogates, kilobytes)."""
    try:
        text = str(exc) or type(exc).__name__
    except Exception:  # an error whose own text fails: its name says enough
        text = type(exc).__name__
    return safe_text(text)
