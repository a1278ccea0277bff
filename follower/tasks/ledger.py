"""The task ledger: opencode-mesh tasks sent and received, and their latest status.

Both sides append what passes through them (a task envelope, a result or question block) to
`tasks.ndjson`; `talk tasks` folds it into one row per task. A task id that comes again from
the same peer is a retry: the protocol asks the receiver to check for earlier work first.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from durable.files import replace_file
from durable.locks import folder_locked
from durable.ndjson import append_records, json_lines, read_records

if TYPE_CHECKING:
    from follower.tasks.mesh import Parsed

__all__ = ["TASKS_FILE", "TaskLedger", "fold"]

TASKS_FILE = "tasks.ndjson"
PREVIEW = 200
TRIM_BYTES = 512 * 1024  # past this, the ledger forgets tasks idle for KEEP_DAYS
KEEP_DAYS = 30


def fold(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One row per (task id, peer): who asked, the task text, the latest status and summary."""
    rows: dict[str, dict[str, Any]] = {}
    for event in events:
        task, peer = event.get("task"), event.get("peer")
        if not isinstance(task, str) or not isinstance(peer, str):
            continue
        key = f"{peer}/{task}"
        row = rows.setdefault(key, {"task": task, "peer": peer, "name": event.get("name", ""),
                                    "asked_by": "", "mode": "", "text": "", "status": "unknown",
                                    "summary": "", "artifacts": [], "retries": 0, "updated": 0.0})
        row["updated"] = max(row["updated"], float(event.get("ts", 0)))
        if event.get("ev") == "task":
            if row["asked_by"]:
                row["retries"] += 1
            row["asked_by"] = "me" if event.get("dir") == "out" else "peer"
            row["mode"], row["text"] = event.get("mode", ""), event.get("text", "")
            if row["status"] == "unknown":
                row["status"] = "open"
        elif event.get("ev") == "result":
            row["status"] = event.get("status", "unknown")
            row["summary"], row["artifacts"] = event.get("summary", ""), event.get("artifacts", [])
        elif event.get("ev") == "question" and row["status"] in ("unknown", "open"):
            row["status"] = "question"
            row["summary"] = event.get("question", "")
    return rows


class TaskLedger:
    """Appends and trims under the identity folder's lock (a trim replaces the file)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / TASKS_FILE

    def record(self, ev: str, direction: str, peer: str, name: str, fields: dict[str, Any],
               msg_id: str) -> None:
        event = {"ev": ev, "dir": direction, "peer": peer, "name": name, "msg": msg_id, "ts": time.time(),
                 **{k: v for k, v in fields.items() if k in ("task", "mode", "status", "summary",
                                                              "artifacts", "question", "options")}}
        if "text" in fields:
            event["text"] = str(fields["text"])[:PREVIEW]
        with folder_locked(self.folder):
            append_records(self.path, [event])
            if self.path.stat().st_size > TRIM_BYTES:
                self._trim(time.time())

    def _trim(self, now: float) -> None:
        """Keep the events of tasks touched in the last KEEP_DAYS: a retry of an older task is
        then taken as new, which is what its peer's protocol expects of a long-gone task."""
        events = read_records(self.path)
        live = {key for key, row in fold(events).items() if row["updated"] > now - KEEP_DAYS * 86400}
        kept = [e for e in events if f"{e.get('peer')}/{e.get('task')}" in live]
        replace_file(self.path, json_lines(kept))

    def received(self, peer: str, name: str, block: Parsed | None, msg_id: str) -> bool:
        """Note a block that came from `peer` (a task, a result or a question); whether it is a
        task `peer` sent before, which makes this one a retry."""
        if block is None or block.kind not in ("task", "result", "question"):
            return False
        if block.kind != "task":
            self.record(block.kind, "in", peer, name, block.fields, msg_id)
            return False
        retry = self.seen_task(peer, block.fields["task"])
        self.record("task", "in", peer, name, {**block.fields, "text": block.body}, msg_id)
        return retry

    def seen_task(self, peer: str, task: str) -> bool:
        """Whether `peer` sent us task `task` before (then this one is a retry)."""
        return any(e.get("ev") == "task" and e.get("dir") == "in" and e.get("peer") == peer
                   and e.get("task") == task for e in read_records(self.path))

    def rows(self) -> list[dict[str, Any]]:
        return sorted(fold(read_records(self.path)).values(), key=lambda r: r["updated"])

    def find(self, task: str) -> list[dict[str, Any]]:
        return [r for r in self.rows() if r["task"] == task]
