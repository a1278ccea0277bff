"""The options of `talk send`, `talk receive` and `talk show`, declared once for both of their parsers.

The typer commands declare these parameters from the entries here (talk/options.py, talk/cli.py),
and the fast lane (talk/fastlane.py) parses argv with the same entries, so the two cannot
disagree about an option's spellings, whether it takes a value, its type, bounds or environment
variable. Kept free of typer and click: the fast lane imports it on every start. (`talk relay`'s
options live in talk/relay_specs.py, read only when a relay starts.)
"""

from __future__ import annotations


# Plain classes, not dataclasses: building a dataclass costs about a millisecond, paid on every
# start of `talk send`.
class OptionSpec:
    """One option: `dest` is the typer parameter's name, which is also its key in click's
    `ctx.params` and in the fast lane's result."""

    __slots__ = ("default", "dest", "envvar", "fast", "flags", "help", "kind", "least", "metavar", "most",
                 "multiple", "off", "takes_value")

    def __init__(self, dest: str, flags: tuple[str, ...], help: str, *, takes_value: bool = True,
                 multiple: bool = False, fast: bool = True, metavar: str | None = None,
                 kind: type = str, least: float | None = None, most: float | None = None,
                 envvar: str | None = None, off: tuple[str, ...] = (),
                 default: str | float | None = None) -> None:
        self.dest = dest
        self.flags = flags
        self.help = help
        self.metavar = metavar  # what --help shows for the value: its choices, or what it is
        self.takes_value = takes_value
        self.multiple = multiple
        # False: the fast lane hands any argv that uses this option to typer.
        self.fast = fast
        # The value's type: str, int, float or pathlib.Path. The fast lane takes a number in its
        # plainest spelling only (digits, and for a float one point between digits) and leaves
        # anything else (a sign, blanks, a typo) to click, whose conversion and message it would
        # have to copy; likewise a number outside [least, most].
        self.kind = kind
        self.least = least
        self.most = most
        self.envvar = envvar  # read when the option is not given (an empty value counts as unset)
        self.off = off  # a flag's negative spellings (`--no-x`), which set it False
        self.default = default  # what the command gets when the option is not given


class CommandSpec:
    """`arguments` are required; `optional` ones may follow them, and are None when not given."""

    __slots__ = ("arguments", "name", "optional", "options")

    def __init__(self, name: str, arguments: tuple[str, ...], options: tuple[OptionSpec, ...],
                 optional: tuple[str, ...] = ()) -> None:
        self.name = name
        self.arguments = arguments
        self.options = options
        self.optional = optional


USER = OptionSpec("user", ("--user", "-u"), "Identity to act as (or TALK_USER).", metavar="NAME")
RELAY = OptionSpec("relay", ("--relay",), "Relay URL (or TALK_RELAY; default: saved at init).",
                   metavar="URL")
PASSPHRASE_FILE = OptionSpec(
    "passphrase_file", ("--passphrase-file",), "File holding the passphrase (or TALK_PASSPHRASE_FILE).",
    metavar="PATH",
)
JSON = OptionSpec("as_json", ("--json",), "Machine-readable output.", takes_value=False)
PEER = OptionSpec("peer", ("--peer",), "Only this contact's mail (repeatable).", multiple=True,
                  metavar="NAME")
# `talk send`'s waiting and task options: rarer forms, parsed by typer only (--timeout is a float,
# whose conversion and error message are click's).
WAIT = OptionSpec(
    "wait", ("--wait",),
    "Return only once the message is stored, spooled, written or delivered (exit 4 on timeout).", fast=False,
    metavar="stored|spooled|written|delivered",
)
TIMEOUT = OptionSpec("timeout", ("--timeout",), "Seconds --wait waits.", fast=False, metavar="SECONDS")
TASK = OptionSpec(
    "task", ("--task",), "Wrap TEXT in an opencode-mesh v1 task envelope with a new task id.",
    takes_value=False, fast=False,
)
MODE = OptionSpec("mode", ("--mode",), "Task mode: one-shot, session or resume.", fast=False,
                  metavar="one-shot|session|resume")

FILE = OptionSpec("files", ("--file",), "Send this file with the message (repeatable); resumes if run again.",
                  multiple=True, fast=False, metavar="PATH")

SEND = CommandSpec(
    "send", ("name",), (FILE, WAIT, TIMEOUT, TASK, MODE, USER, RELAY, PASSPHRASE_FILE, JSON),
    optional=("text",),
)
RECEIVE = CommandSpec("receive", (), (PEER, USER, RELAY, PASSPHRASE_FILE))

# `talk show`: people read a conversation often, and it must answer at once (bench/show_speed.py).
PEEK = OptionSpec("peek", ("--peek",), "Show without marking anything read.", takes_value=False)
UNREAD = OptionSpec("unread", ("--unread",), "Only received messages not read yet.", takes_value=False)
MARK_READ = OptionSpec("mark_read", ("--mark-read",), "Mark everything received read; list nothing.",
                       takes_value=False)
FULL = OptionSpec("full", ("--full",), "Whole texts, not their first line.", takes_value=False)
EVERYTHING = OptionSpec("everything", ("--all",),
                        "Every message ever sent, not only recent ones (reads the whole outbox history).",
                        takes_value=False)
FOLLOW = OptionSpec("follow", ("--follow", "-f"),
                    "Keep printing new messages, and sent ones whose state moves, until Ctrl-C.",
                    takes_value=False)
SHOWN = 50  # lines `talk show` prints without --limit: about a screenful
LIMIT = OptionSpec("limit", ("--limit",), "Show the newest N messages (0: all).", metavar="N", kind=int,
                   default=SHOWN)
SHOW = CommandSpec("show", (), (PEEK, UNREAD, MARK_READ, FULL, EVERYTHING, FOLLOW, LIMIT, USER, JSON),
                   optional=("name",))
