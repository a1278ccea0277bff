"""The client side of one identity. `follower.account.Account` is the one API, on top; nothing
below it imports it. Below, one subpackage per idea, and beside them what both directions use:

  policy     each contact's accept/hold/refuse and rates: the sender checks it, the receiver applies it
  held       mail a policy or a rate kept aside until a person releases or drops it

  relay/     the connection to a relay: client, HTTP/1.1, push stream, backoff
  send/      number -> seal (ratchet or sealed box) -> outbox -> deposit, resends, waiting for receipts
  receive/   fetch -> open -> decide -> hand on -> ack: inbound, admission, sequence, stores
  files/     the files a message announces: downloaded, checked, placed under a safe name
  groups/    group mail both ways and the loop guard
  tasks/     the opencode-mesh task protocol (mesh) and its ledger
  history/   the read model a person sees (`talk show`): timeline, transcript, read marks, receive log
  daemon/    the follower process: daemon, upkeep, state (`python -m follower` starts it)

Every `__init__` is a face (`__all__`, see `durable.faces`) and imports only `durable.faces`:
`talk send` and `talk receive` load only the modules they use. On `talk receive`'s path to one chat
message, classes are plain classes or NamedTuples, not dataclasses: importing `dataclasses` (it
brings `inspect`) and building each class cost ~10 ms of every start, a sixth of the command
(tests/e2e/test_import_weight.py holds the line). The face here is every part
(`__main__` too: `talk follow --foreground` runs the daemon's `run` in its own process); each
subpackage's face is the modules the CLI, the Account or a sibling part uses, and binds the
other parts of `follower` as it binds the CLI.
"""

from __future__ import annotations

from durable.faces import face

__all__ = ("__main__", "account", "daemon", "files", "groups", "held", "history", "policy", "receive",
           "relay", "send", "tasks")
__getattr__ = face(__name__, __all__)
