"""A fast lane for the plain forms of `talk send` and `talk receive`.

Agents run these on every turn, and building the typer command tree costs more than the
command itself. Only the exact forms documented in `talk send --help` / `talk receive --help`
are taken here; anything else (help, unknown or malformed options) goes to typer, which
then prints its usual message. Both routes call the same functions in `talk.mail`.
"""

from __future__ import annotations

from collections.abc import Callable

VALUED = {"-u": "user", "--user": "user", "--relay": "relay",
          "--passphrase-file": "passphrase_file", "--peer": "peer"}
FLAGS = {"--json": "json"}


def _parse(
    args: list[str], valued: set[str], flags: set[str]
) -> tuple[dict[str, list[str]], list[str]] | None:
    opts: dict[str, list[str]] = {}
    positional: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        name, eq, inline = token.partition("=")
        if token.startswith("-") and token != "-":
            if name in valued:
                value = inline if eq else (args[i + 1] if i + 1 < len(args) else None)
                if value is None:
                    return None
                opts.setdefault(VALUED[name], []).append(value)
                i += 1 if eq else 2
                continue
            if token in flags:
                opts.setdefault(FLAGS[token], []).append("1")
                i += 1
                continue
            return None  # --help, --, typos: typer explains
        positional.append(token)
        i += 1
    return opts, positional


def route(argv: list[str]) -> Callable[[], None] | None:
    """The call for `argv` if it is a plain send/receive, else None."""
    if not argv or argv[0] not in ("send", "receive"):
        return None
    common = {"-u", "--user", "--relay", "--passphrase-file"}
    if argv[0] == "send":
        parsed = _parse(argv[1:], common, {"--json"})
        if parsed is None or len(parsed[1]) != 2 or any(len(v) > 1 for v in parsed[0].values()):
            return None
        opts, (name, text) = parsed
        from talk.mail import send

        return lambda: send(_one(opts, "user"), _one(opts, "relay"), _one(opts, "passphrase_file"),
                            name, text, "json" in opts)
    parsed = _parse(argv[1:], common | {"--peer"}, set())
    if parsed is None or parsed[1] or any(len(v) > 1 for k, v in parsed[0].items() if k != "peer"):
        return None
    opts = parsed[0]
    from talk.mail import receive

    return lambda: receive(_one(opts, "user"), _one(opts, "relay"), _one(opts, "passphrase_file"),
                           opts.get("peer"))


def _one(opts: dict[str, list[str]], key: str) -> str | None:
    values = opts.get(key)
    return values[0] if values else None
