"""The options of `talk send` and `talk receive`, declared once for both of their parsers.

The typer commands declare these parameters from the entries here (talk/options.py, talk/cli.py),
and the fast lane (talk/fastlane.py) parses argv with the same entries, so the two cannot
disagree about an option's spellings or whether it takes a value. Kept free of typer and click:
the fast lane imports it on every start.
"""

from __future__ import annotations


# Plain classes, not dataclasses: building a dataclass costs about a millisecond, paid on every
# start of `talk send`.
class OptionSpec:
    """One option: `dest` is the typer parameter's name, which is also its key in click's
    `ctx.params` and in the fast lane's result."""

    __slots__ = ("dest", "fast", "flags", "help", "multiple", "takes_value")

    def __init__(self, dest: str, flags: tuple[str, ...], help: str, *, takes_value: bool = True,
                 multiple: bool = False, fast: bool = True) -> None:
        self.dest = dest
        self.flags = flags
        self.help = help
        self.takes_value = takes_value
        self.multiple = multiple
        # False: the fast lane hands any argv that uses this option to typer.
        self.fast = fast


class CommandSpec:
    __slots__ = ("arguments", "name", "options")

    def __init__(self, name: str, arguments: tuple[str, ...], options: tuple[OptionSpec, ...]) -> None:
        self.name = name
        self.arguments = arguments
        self.options = options


USER = OptionSpec("user", ("--user", "-u"), "Identity to act as (or TALK_USER).")
RELAY = OptionSpec("relay", ("--relay",), "Relay URL (or TALK_RELAY; default: saved at init).")
PASSPHRASE_FILE = OptionSpec(
    "passphrase_file", ("--passphrase-file",), "File holding the passphrase (or TALK_PASSPHRASE_FILE)."
)
JSON = OptionSpec("as_json", ("--json",), "Machine-readable output.", takes_value=False)
PEER = OptionSpec("peer", ("--peer",), "Only this contact's mail (repeatable).", multiple=True)
# `talk send`'s waiting and task options: rarer forms, parsed by typer only (--timeout is a float,
# whose conversion and error message are click's).
WAIT = OptionSpec(
    "wait", ("--wait",),
    "Return only once the message is stored, spooled or delivered (exit 4 on timeout).", fast=False,
)
TIMEOUT = OptionSpec("timeout", ("--timeout",), "Seconds --wait waits.", fast=False)
TASK = OptionSpec(
    "task", ("--task",), "Wrap TEXT in an opencode-mesh v1 task envelope with a new task id.",
    takes_value=False, fast=False,
)
MODE = OptionSpec("mode", ("--mode",), "Task mode: one-shot, session or resume.", fast=False)

SEND = CommandSpec(
    "send", ("name", "text"), (WAIT, TIMEOUT, TASK, MODE, USER, RELAY, PASSPHRASE_FILE, JSON)
)
RECEIVE = CommandSpec("receive", (), (PEER, USER, RELAY, PASSPHRASE_FILE))
