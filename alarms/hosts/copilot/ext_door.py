"""The door talk's Copilot CLI extension opens: `python -m alarms.hosts.copilot.ext_door`, started by
the extension (alarms/hosts/copilot/extension) inside a plain `copilot` session.

Copilot CLI starts each extension as its own child process and talks to it over that child's
stdin and stdout; the extension starts this door as its child in turn and relays between the
session and the door as newline-delimited JSON (the protocol is in extension.mjs). No socket, no
port: only the user's own Copilot process can reach the door.

What the door decides is `ui_door`'s, unchanged (`ExtDoor` is a `UiDoor` whose calls go through
`Bridge` instead of the TCP server): it registers the session with the same id and Copilot
process the hooks register, so hooks and door share one cursor; it sends mail only into an idle
session (`activity`), as a prompt that starts a turn, through the hand-over's TURN door, and
holds it while a turn runs or a permission question is open. Copilot loads extensions only in a
trusted folder, so no folder-trust question can be open when this door starts.

In prompt mode (`copilot -p PROMPT`) the door stays shut: the prompt is on its way, and the hooks
bring mail waiting with it (a turn of the door's own would come first and answer on the script's
stdout).

When the extension goes (Copilot's /clear or /resume stops it and starts it again for the new
session; Copilot's exit stops it), the door's stdin ends and it retires its session: the
session's unread mail goes back to the inbox, for the next session's registration to take over.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from alarms import mailbox
from alarms.door_stdio import emit_stdout, teller
from alarms.hosts.copilot import NAME as HOST
from alarms.hosts.copilot.activity import Activity
from alarms.hosts.copilot.rpc import CALL_TIMEOUT_S, MAX_BODY, RpcError
from alarms.hosts.copilot.ui_door import UiDoor, holder_pid
from spool_writer import process

__all__ = ["Bridge", "ExtDoor", "main", "prompt_mode"]

PROMPT_FLAGS = ("-p", "--prompt")

Notice = Callable[[dict[str, Any]], None]


class Bridge:
    """The door's end of the extension's relay: calls go out as lines on `emit`, answers and
    session events come in through `feed`. Events reach `on_notice` shaped as the server's
    `session.event` notifications, so `UiDoor._notice` reads both alike."""

    def __init__(self, sid: str, emit: Callable[[str], None], on_notice: Notice) -> None:
        self.sid, self.emit, self.on_notice = sid, emit, on_notice
        self._next_id = 0
        self._answers: dict[int, dict[str, Any]] = {}
        self._ended = False
        self._changed = threading.Condition()

    @property
    def closed(self) -> bool:
        return self._ended

    def call(self, method: str, params: dict[str, Any], timeout: float = CALL_TIMEOUT_S) -> Any:
        with self._changed:
            self._next_id += 1
            cid = self._next_id
        try:
            self.emit(json.dumps({"id": cid, "method": method, "params": params}))
        except OSError as exc:
            raise RpcError(f"talk's Copilot extension is gone: {exc}") from exc
        with self._changed:
            if not self._changed.wait_for(lambda: cid in self._answers or self._ended, timeout):
                raise RpcError(f"talk's Copilot extension did not answer {method} within {timeout:g} s")
            if cid not in self._answers:
                raise RpcError(f"talk's Copilot extension ended before answering {method}")
            answer = self._answers.pop(cid)
        if "error" in answer:
            raise RpcError(f"Copilot CLI refused {method}: {answer['error']}")
        return answer.get("result")

    def feed(self, line: dict[str, Any]) -> None:
        """One line from the extension: an answer, or a session event."""
        if isinstance(line.get("id"), int):
            with self._changed:
                self._answers[line["id"]] = line
                self._changed.notify_all()
        elif isinstance(line.get("event"), dict):
            params = {"sessionId": self.sid, "event": line["event"]}
            self.on_notice({"method": "session.event", "params": params})

    def end(self) -> None:
        with self._changed:
            self._ended = True
            self._changed.notify_all()
        self.on_notice({"method": "connection.closed", "params": {}})

    def read(self, stream: IO[bytes]) -> None:
        """Feed lines from `stream` until it ends (a line longer than the limit ends it too)."""
        try:
            while line := stream.readline(MAX_BODY + 1):
                if len(line) > MAX_BODY:
                    break
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict):
                    self.feed(message)
        finally:
            self.end()


class ExtDoor(UiDoor):
    """`UiDoor` for the one session the extension joined; `run()` serves until the extension ends."""

    def __init__(self, folder: Path, sid: str, workspace: str, host: int, alive: Callable[[], bool],
                 say: Callable[[str], None]) -> None:
        super().__init__(folder, 0, workspace, host, alive, say)
        self.sid, self.workspace, self.host = sid, workspace, host
        self.activity = Activity(trusted=True)
        self.bridge = Bridge(sid, emit_stdout, self._notice)

    def run(self) -> None:
        try:
            self._serve(self.bridge)
        except Exception as exc:  # a broken door must say so, and leave Copilot running
            self.say(f"stopped ({type(exc).__name__}: {exc}); mail now waits for Copilot's hooks")

    def _follow(self, conn: object) -> None:
        """The session is the extension's for good: Copilot starts the extension again for another."""


def prompt_mode(argv: list[str]) -> bool:
    """Whether Copilot was started as `copilot -p PROMPT` (or --prompt[=PROMPT])."""
    return any(a in PROMPT_FLAGS or a.startswith("--prompt=") for a in argv[1:])


def argv_of(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


say = teller("copilot door")


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m alarms.hosts.copilot.ext_door",
                                     description="talk's door into a Copilot CLI session "
                                                 "(started by talk's extension).")
    parser.add_argument("--session", required=True, help="Copilot's session id")
    parser.add_argument("--workspace", default="", help="the session's state folder")
    parser.add_argument("--pid", required=True, type=int,
                        help="the Copilot process that started the extension")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = arguments(argv)
    if prompt_mode(argv_of(args.pid)):
        for _ in sys.stdin.buffer:  # until the extension ends
            pass
        return 0
    # The process the hooks register: the one holding the session open, else the extension's parent.
    host = (holder_pid(args.workspace) if args.workspace else None) or args.pid
    start = process.start_time(host)

    def alive() -> bool:
        return process.alive(host, start)

    try:
        mail = mailbox.connect(args.session, HOST, host, alive, say)
        if mail is None:
            return 0
        door = ExtDoor(mail.layout.root.parent, args.session, args.workspace, host, alive, say)
        reader = threading.Thread(target=door.bridge.read, args=(sys.stdin.buffer,), daemon=True)
        reader.start()
        door.run()
        mail.retire()  # left behind: its unread mail goes to the session Copilot shows next
    except BrokenPipeError:
        return 0
    except Exception as exc:  # one line for the extension's log, then exit: it starts us again
        say(f"stopped: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
