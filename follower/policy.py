"""Inbound policy per contact: accept, hold or refuse their mail; task trust; rate limits.

A pin says who a peer is; a rule says what their mail may do here. Contacts made by invite
are accepted by default; a contact pinned from a bare fingerprint (`talk add`) is held until a
person accepts it, so a typo'd or planted fingerprint cannot reach an agent. Checking its keys
(`talk verify`) is recorded but widens nothing by itself: only a change made on a terminal or
with `--yes` does. Task envelopes are framed as tasks only from contacts trusted for tasks,
which is never the default. Every change, and every check, is appended to `trust.log`.
"""

from __future__ import annotations

import time
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from durable.errors import UserError
from durable.files import read_json, write_json
from durable.locks import folder_locked
from durable.ndjson import append_records, read_records
from durable.parsed_file import ParsedFile
from keys.contacts import Contact, Source

__all__ = ["Policy", "PolicyBook", "raised_by_verify"]

POLICIES_FILE = "policies.json"
TRUST_LOG = "trust.log"
RECEIVE_PER_MIN = 600  # 10 a second: far above a conversation, and a runaway loop shows in a minute
SEND_PER_MIN = 600
HOLD_HOURS = 24.0


class Policy(StrEnum):
    ACCEPT = "accept"
    HOLD = "hold"
    REFUSE = "refuse"


class Rule(NamedTuple):
    policy: Policy
    tasks: bool = False
    receive_per_min: int = RECEIVE_PER_MIN
    send_per_min: int = SEND_PER_MIN

    def to_json(self) -> dict[str, Any]:
        return {**self._asdict(), "policy": self.policy.value}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Rule:
        """A stored rule; anything hand-edited into a wrong type or range is damage, never trust."""
        try:
            tasks = data.get("tasks", False)
            if not isinstance(tasks, bool):
                raise ValueError("'tasks' must be true or false")
            rule = cls(Policy(data["policy"]), tasks, int(data.get("receive_per_min", RECEIVE_PER_MIN)),
                       int(data.get("send_per_min", SEND_PER_MIN)))
            check_rate(rule.receive_per_min, "receive_per_min")
            check_rate(rule.send_per_min, "send_per_min")
            return rule
        except (KeyError, TypeError, ValueError, UserError) as exc:
            raise UserError(f"a rule in {POLICIES_FILE} is damaged ({exc}); set it again with "
                            "`talk policy NAME accept|hold|refuse`") from exc


def default_rule(contact: Contact) -> Rule:
    vouched = contact.source in (Source.INVITED, Source.JOINED)
    return Rule(Policy.ACCEPT if vouched else Policy.HOLD)


def raised_by_verify(rule: Rule) -> Policy | None:
    """What checking a contact's keys may lead a person to widen: held mail to accepted. A
    refused contact stays refused (the keys were never the reason), so that is `talk policy`."""
    return Policy.ACCEPT if rule.policy is Policy.HOLD else None


def check_rate(value: int | None, what: str) -> None:
    if value is not None and not 1 <= value <= 100_000:
        raise UserError(f"{what} must be between 1 and 100000 messages a minute")


def _rules_of(raw: Any) -> dict[str, Any]:
    """The stored rules, as `rule` reads them (each checked when it is asked for)."""
    return raw if isinstance(raw, dict) else {}


class PolicyBook:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / POLICIES_FILE
        self.log = folder / TRUST_LOG
        # Read for every message a follower takes: parsed again only when the file changed.
        self._rules = ParsedFile(self.path, {}, _rules_of)

    def rule(self, contact: Contact) -> Rule:
        stored = self._rules.get().get(contact.fingerprint)
        return Rule.from_json(stored) if isinstance(stored, dict) else default_rule(contact)

    def change(self, contact: Contact, *, policy: Policy | None = None, tasks: bool | None = None,
               receive_per_min: int | None = None, send_per_min: int | None = None) -> tuple[Rule, Rule]:
        """Set what is given, keep the rest; returns (before, after) and logs the change."""
        check_rate(receive_per_min, "--receive-rate")
        check_rate(send_per_min, "--send-rate")
        with folder_locked(self.folder):
            raw: dict[str, Any] = read_json(self.path, {})
            before = self._stored_or_default(raw.get(contact.fingerprint), contact)
            after = before._replace(
                policy=before.policy if policy is None else policy,
                tasks=before.tasks if tasks is None else tasks,
                receive_per_min=receive_per_min or before.receive_per_min,
                send_per_min=send_per_min or before.send_per_min,
            )
            raw[contact.fingerprint] = after.to_json()
            write_json(self.path, raw)
        self.note(contact, "policy", before=before.to_json(), after=after.to_json())
        return before, after

    @staticmethod
    def _stored_or_default(stored: Any, contact: Contact) -> Rule:
        """What a change starts from: a damaged rule is replaced (what its error advises)."""
        try:
            return Rule.from_json(stored) if isinstance(stored, dict) else default_rule(contact)
        except UserError:
            return default_rule(contact)

    def note(self, contact: Contact, action: str, **details: Any) -> None:
        """Append one line to the trust log: who widened or narrowed what, and when."""
        append_records(self.log, [{"ts": time.time(), "action": action, "name": contact.name,
                                   "fingerprint": contact.fingerprint, **details}])

    def history(self) -> list[dict[str, Any]]:
        return read_records(self.log)
