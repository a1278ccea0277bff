"""Every error a user of talk can hit, with the exit code the CLI maps it to.

    TalkError                      exit 1 unless a subclass says otherwise
    ├── UserError                  1  bad input, missing identity/contact, wrong passphrase
    │   ├── NotFound
    │   ├── InviteError            expired, used, revoked or malformed invite codes
    │   ├── LocalFileRefused       a file or folder of this machine is unsafe or damaged
    │   ├── SourceGone             a file being sent is deleted, unreadable or no longer a file
    │   └── MessageTooLarge
    ├── SecurityError              2  refused for safety: never shown, nothing sent
    │   ├── PinMismatch            a key bundle does not hash to the pinned fingerprint
    │   ├── KeyInUse               a bundle reuses a key already pinned to another contact
    │   ├── TamperedMessage        ciphertext that does not open, or opens to nonsense
    │   │   ├── TamperedChunk      a file's chunk that does not open, is out of place, or ends early
    │   │   └── MalformedMessage   opened, from a contact, but a field is not of its shape
    │   │       ├── StaleMessage   dated outside the window in which replays can be told apart
    │   │       ├── ReplayedMessage  a sequence number the sender already used for another message
    │   │       └── GroupRefused   a group update or group message the group's rule refuses
    │   └── UnknownSender          sealed by a key that no contact pins
    ├── RelayError                 3  the relay cannot be reached or answers with a failure
    └── TimedOut                   4  `--wait` gave up before the message got that far

Messages say what happened and what to do, in one line. Every part raises these and the
`talk` command maps them to exit codes, so the tree lives below them all.
"""

from __future__ import annotations

__all__ = [
    "GroupRefused",
    "InviteError",
    "KeyInUse",
    "LocalFileRefused",
    "MalformedMessage",
    "MessageTooLarge",
    "NotFound",
    "PinMismatch",
    "RelayError",
    "ReplayedMessage",
    "SecurityError",
    "SourceGone",
    "StaleMessage",
    "TalkError",
    "TamperedChunk",
    "TamperedMessage",
    "TimedOut",
    "UnknownSender",
    "UserError",
]


class TalkError(Exception):
    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UserError(TalkError):
    exit_code = 1


class NotFound(UserError):
    pass


class InviteError(UserError):
    pass


class LocalFileRefused(UserError):
    """A file or folder of this machine that talk will not use as it is (a link, another user's,
    writable by others, damaged): a fault of this machine, never of the mail being handled, so a
    receiver leaves that mail on the relay until the user fixes it (`follower.receive.inbound`)."""


class SourceGone(UserError):
    """A file being sent can no longer be read as a regular file (deleted, unreadable, a folder
    or device in its place): its upload stalls until it is back (`follower.send.stall`)."""


class MessageTooLarge(UserError):
    pass


class SecurityError(TalkError):
    exit_code = 2


class PinMismatch(SecurityError):
    pass


class KeyInUse(SecurityError):
    pass


class TamperedMessage(SecurityError):
    pass


class TamperedChunk(TamperedMessage):
    """A chunk of a file that fails its tag, comes out of order, ends the stream early, or a
    stream whose last chunk does not end it (`keys.filestream`)."""


class MalformedMessage(TamperedMessage):
    """A contact's message opened, but the gate refused a field. `sender` is the contact and
    `msg_id` the message's id when that field was sound, so the sender can be told."""

    def __init__(self, message: str, sender: object = None, msg_id: str | None = None) -> None:
        super().__init__(message)
        self.sender = sender
        self.msg_id = msg_id


class GroupRefused(MalformedMessage):
    """A group control message or group message that the group's rule refuses; `str()` says why."""


class UnknownSender(SecurityError):
    pass


class StaleMessage(MalformedMessage):
    pass


class ReplayedMessage(MalformedMessage):
    """`highest`: the highest seq seen from the sender, which its refusal tells it so that it can
    number past it (a sender whose counter a restored backup rolled back)."""

    highest: int | None = None


class RelayError(TalkError):
    """The relay could not be reached, or refused a request; `status` is the HTTP status if any."""

    exit_code = 3

    def __init__(self, message: str, status: int | None = None, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class TimedOut(TalkError):
    exit_code = 4
