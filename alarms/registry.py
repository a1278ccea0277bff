"""Every agent host talk has a door into, in one place: the CLI, `talk doctor` and `talk status`
read them from here instead of keeping lists of their own. The list itself is the face of
`alarms.hosts` (its `__all__`, one name per host folder).

Lazy: naming a host imports only its package's `__init__` (constants and functions that import
the rest when called) and `alarms.host_face`, never its doors or its install code.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from alarms import hosts as hosts_face
from durable.errors import UserError

if TYPE_CHECKING:
    from alarms.door import DaemonHost, Host, LaunchHost

__all__ = ["NAMES", "OTHER", "agent_host", "author_env", "daemon_hosts", "host_of", "hosts", "launch_hosts",
           "parse_host"]

# Every host: the face of `alarms.hosts`, which lists each host's folder once (importing it loads
# no host). A new host is its folder and its name there.
NAMES: tuple[str, ...] = tuple(hosts_face.__all__)
OTHER = "other"  # a session registered by a door that does not know its host (`talk mcp --host other`)
ANY_AGENT_ENV = "AI_AGENT"  # the variable more and more hosts set for their tools, whoever they are


def host_of(name: str) -> Host:
    """The host `name` (one of NAMES): its package, with what every host does alike."""
    from alarms.host_face import Face

    if name not in NAMES:
        raise KeyError(name)
    return cast("Host", Face(importlib.import_module(f"alarms.hosts.{name}")))


def hosts() -> list[Host]:
    return [host_of(name) for name in NAMES]


def daemon_hosts() -> list[DaemonHost]:
    """The hosts whose door is a daemon (`alarms.door.DaemonHost`): `talk alarm` starts those."""
    return [cast("DaemonHost", host) for host in hosts() if hasattr(host, "start_door")]


def launch_hosts() -> list[LaunchHost]:
    """The hosts with a door that needs a launch flag (`alarms.door.LaunchHost`): `talk run` starts those."""
    return [cast("LaunchHost", host) for host in hosts() if hasattr(host, "run_session")]


def parse_host(value: str) -> str:
    """A host name a session may register under (NAMES, or OTHER); UserError naming the choices."""
    if value in (*NAMES, OTHER):
        return value
    raise UserError(f"unknown host {value!r}; use one of: {', '.join((*NAMES, OTHER))}")


def author_env() -> list[tuple[str, str]]:
    """(host's title, variable) for each variable a host sets in its tools' environment, and
    AI_AGENT ("an agent") last: the one more and more hosts share."""
    named = [(host.TITLE, name) for host in hosts() for name in host.AUTHOR_ENV]
    return [*named, ("an agent", ANY_AGENT_ENV)]


def agent_host(env: Mapping[str, str]) -> str | None:
    """The title of the agent host whose session this environment belongs to, or None."""
    for title, name in author_env():
        if env.get(name, "").strip().lower() not in ("", "0", "false"):
            return title
    return None
