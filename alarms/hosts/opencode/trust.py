"""Whether the opencode door may hand mail to the server it reached, and how it signs in there.

opencode's server speaks plain HTTP. While the user's opencode is down, any other user of the
machine may bind its loopback port, and would then receive the decrypted mail the door posts,
and answer as if it took it. A server password cannot tell the door it reached the right
server: HTTP basic auth sends the password to whoever answers, so an impostor learns it and
accepts it. What the door checks instead, on every connection and before it sends a byte, is
who owns the other end: the kernel's record of the socket the server accepted, which carries the
uid of the listener. A server on this machine is trusted only when that uid is the alarm's own;
one on another machine (no socket on this machine is the other end) is beyond the reach of this
machine's users, and is trusted as the URL the user gave.

opencode (1.18.33) protects its server with `OPENCODE_SERVER_PASSWORD` (user
`OPENCODE_SERVER_USERNAME`, default "opencode"). Set in the alarm's environment, it is sent,
only to a server that passed the check above, so another user can neither read nor inject
mail through that opencode.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import pwd
from collections.abc import Mapping

__all__ = ["authorization", "distrust"]

DEFAULT_USER = "opencode"


def _who(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def distrust(owner: int | None, peer_ip: str, me: int, where: str) -> str | None:
    """Why the server at `where` must not get mail, or None when it may. `owner` is the uid of
    the other end of the connection (None: not on this machine, or not to be seen)."""
    if owner == me:
        return None
    if owner is not None:
        return (f"the server at {where} belongs to {_who(owner)}, not to you: "
                "talk hands it no mail")
    if ipaddress.ip_address(peer_ip.split("%", 1)[0]).is_loopback:
        return (f"cannot tell who runs the server at {where} (this system shows no owner of the "
                "connection): talk hands it no mail")
    return None


def authorization(env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The basic-auth header opencode asks for when it runs with a server password, else none."""
    password = env.get("OPENCODE_SERVER_PASSWORD")
    if not password:
        return {}
    user = env.get("OPENCODE_SERVER_USERNAME") or DEFAULT_USER
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return {"authorization": f"Basic {token}"}
