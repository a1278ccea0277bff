"""`talk relay` without the command-line framework: its settings from the parsed options, then
the relay served until it is stopped.

Both parsers end here: typer's `relay` command (talk/cli.py) and the fast lane
(talk/fastlane.py), which starts a relay with neither typer nor click in its memory.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durable.home import talk_home
from relay.backends import StoreSpec, choose_store
from relay.config import HttpLimits, RelayConfig
from relay.limits import Rate, parse_networks
from talk.output import warn

__all__ = ["FlagError", "RelaySettings", "relay_settings", "serve_relay"]

RATE_FLAGS = {
    "--rate-per-client": "rate_per_client",
    "--rate-per-tag": "rate_per_tag",
    "--rate-publish": "rate_publish",
    "--rate-lookup": "rate_lookup",
    "--rate-owner": "rate_owner",
    "--rate-stream": "rate_stream",
    "--rate-chunks": "rate_chunks",
}


class FlagError(ValueError):
    """An option's value the relay cannot run with; typer shows it as a usage error of `flag`."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(message)
        self.flag = flag
        self.message = message


@dataclass(frozen=True)
class RelaySettings:
    host: str
    port: int
    store: StoreSpec
    config: RelayConfig
    metrics_port: int | None


def relay_settings(params: Mapping[str, Any], env: Mapping[str, str] = os.environ) -> RelaySettings:
    """The relay the options in `params` (named as talk.relay_specs names them) describe.

    Raises:
        FlagError: a rate, the proxies, the store or a limit cannot be had as given.
    """
    config = _relay_config(params)
    try:
        proxies = parse_networks(params["trusted_proxies"])
    except ValueError as exc:
        raise FlagError("--trusted-proxies", str(exc)) from exc
    behind_proxy = params["behind_proxy"]
    per_peer = 0 if behind_proxy else params["max_connections_per_client"]
    http = HttpLimits(
        params["max_header_bytes"],
        params["max_headers"],
        params["header_timeout"],
        params["max_connections"],
        per_peer,
        params["body_timeout"],
    )
    config = dataclasses.replace(
        config,
        max_unknown_messages=params["max_unknown"],
        max_tag_messages=params["max_per_tag"],
        max_file_bytes=params["max_file_bytes"],
        max_mailbox_file_bytes=params["max_mailbox_file_bytes"],
        trusted_proxies=proxies,
        http=http,
    )
    try:
        default_db = Path(talk_home(env)) / "relay.db"
        store = choose_store(params["store"], params["db"], env.get("TALK_RELAY_STORE"), default_db)
    except ValueError as exc:
        raise FlagError("--store", str(exc)) from exc
    return RelaySettings(params["host"], params["port"], store, config, params["metrics_port"])


def _relay_config(params: Mapping[str, Any]) -> RelayConfig:
    rates: dict[str, Any] = {}
    for flag, name in RATE_FLAGS.items():
        try:
            rates[name] = Rate.parse(params[name])
        except ValueError as exc:
            raise FlagError(flag, str(exc)) from exc
    try:
        config = dataclasses.replace(
            RelayConfig(
                ttl_s=params["ttl"],
                purge_interval_s=params["purge_interval"],
                max_streams_per_mailbox=params["max_streams"],
                behind_proxy=params["behind_proxy"],
            ),
            **rates,
        )
    except ValueError as exc:
        raise FlagError("--ttl", str(exc)) from exc
    if params["max_blob"] is not None:
        config = dataclasses.replace(config, max_blob=params["max_blob"])
    if params["max_mailbox"] is not None:
        config = dataclasses.replace(config, max_mailbox_messages=params["max_mailbox"])
    return config


def serve_relay(settings: RelaySettings) -> None:
    """Serve until stopped, saying on stderr when it listens and when it stopped.

    Raises:
        UserError: the port or the store cannot be had; nothing was said to be listening.
    """
    from talk import uvicorn_cli

    uvicorn_cli.defer()  # before the first import of any part of uvicorn
    from relay.server import serve  # the server's imports, once the options are known to be good

    where = f"http://{settings.host}:{settings.port}"

    def ready() -> None:
        warn(f"relay listening on {where} (store {settings.store.kind} {settings.store.describe()})")
        if settings.metrics_port is not None:
            warn(f"relay metrics on http://127.0.0.1:{settings.metrics_port}/metrics")

    def stopped() -> None:
        warn(f"relay on {where} stopped; what it stored stays in the store")

    serve(
        settings.host,
        settings.port,
        settings.store,
        settings.config,
        settings.metrics_port,
        on_ready=ready,
        on_stopped=stopped,
    )
