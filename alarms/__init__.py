"""The doors: how peer mail enters the sessions of each agent host, exactly once.

One subpackage per host (`claude`, `codex`, `copilot`, `gemini`, `opencode`, `pi`, `qwen`), each
holding its doors (hook, monitor, daemon, extension), its install and uninstall, and its face
(`__init__`, meeting the contract in `door.py`); `registry.py` lists them. Beside them, what the
doors share: `mailbox` (a session's mail), `framing` (what the model reads), `handover` (the
exactly-once hand-over reconciled with the host's transcript), `hook_runtime` (what every hook
door runs on), `hook_fit`, `procnet` (who is at the other end of a local TCP socket), and
the install machinery `host_config`, `host_files`, `wiring`.

Every door of a session reads that session's spool through one shared cursor, so a message
handed on by one door (a monitor, a hook, a daemon) is never handed on again by another.
This package imports only `spool_writer`, the leaf package `durable` and the standard library:
hooks run on every agent turn. Doors never decrypt nor talk to the relay, so they never import
`keys`: what they show comes from the spool line the follower wrote.

The face (`__all__`, see `durable.faces`), what the CLI uses: `registry` (every host, by name),
`door` (the contract and its Request and Done), `host_files` (the permission check `talk doctor`
runs), `wiring` (the states of a host's wiring, which `talk setup` reports), `framing` (what `talk
mcp` shows the model), `mailbox` (a session's mail). `hosts` is public
on purpose, for what the registry does not serve: `talk alarm` starts, finds and stops the
opencode and Qwen doors (their daemon and install modules), and the old entry points beside it
run a host's door.
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("door", "framing", "host_files", "hosts", "mailbox", "registry", "wiring")
__getattr__ = face(__name__, __all__)
