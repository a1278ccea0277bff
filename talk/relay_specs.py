"""The options of `talk relay`, declared once for both of its parsers (see talk.command_specs).

typer's `relay` command (talk/cli.py) declares its parameters from these entries, and the fast
lane (talk/fastlane.py) reads argv and the environment with them, so that a relay starts without
the command-line framework in its memory for as long as it serves.
"""

from __future__ import annotations

from pathlib import Path

from talk.command_specs import CommandSpec, OptionSpec

__all__ = ["RELAY"]

ENV = "TALK_RELAY_"  # every relay setting read from the environment is named so


def _number(dest: str, help: str, kind: type, default: float | None, *, env: bool = True,
            least: float | None = None, most: float | None = None, metavar: str | None = None) -> OptionSpec:
    return OptionSpec(dest, ("--" + dest.replace("_", "-"),), help, kind=kind, default=default, least=least,
                      most=most, envvar=ENV + dest.upper() if env else None, metavar=metavar)


def _rate(dest: str, what: str, default: str) -> OptionSpec:
    return OptionSpec(dest, ("--" + dest.replace("_", "-"),), f"{what}: N/S[:BURST] (429 above), or off.",
                      envvar=ENV + dest.upper(), metavar="RATE", default=default)


HOST = OptionSpec("host", ("--host",), "Address to listen on.", metavar="ADDRESS", default="127.0.0.1")
PORT = _number("port", "Port to listen on.", int, 8765, env=False, metavar="PORT")
STORE = OptionSpec("store", ("--store",), "sqlite:PATH or redis://HOST:PORT/DB[?prefix=talk:] (env "
                   "TALK_RELAY_STORE; default: sqlite:TALK_HOME/relay.db). Replicas share mail through one "
                   "Redis.", metavar="STORE")
DB = OptionSpec("db", ("--db",), "SQLite file: short for --store sqlite:PATH.", kind=Path, metavar="PATH")
TTL = _number("ttl", "Seconds undelivered mail is kept.", float, 7 * 86400, metavar="SECONDS")
MAX_BLOB = _number("max_blob", "Largest accepted blob, bytes (413 above).", int, None, least=1,
                   metavar="BYTES")
PURGE_INTERVAL = _number("purge_interval", "Seconds between expiry sweeps.", float, 60.0, env=False,
                         metavar="SECONDS")
MAX_MAILBOX = _number("max_mailbox", "Most undelivered messages per mailbox (507 above).", int, None, least=1)
RATE_PER_CLIENT = _rate("rate_per_client", "Deposits per client address", "50/1:200")
RATE_PER_TAG = _rate("rate_per_tag", "Deposits per channel tag", "20/1:100")
MAX_STREAMS = _number("max_streams", "Open push streams per mailbox on this process (429 above).", int, 8,
                      least=1)
RATE_PUBLISH = _rate("rate_publish", "Key publications per client address", "10/60:200")
RATE_LOOKUP = _rate("rate_lookup", "Key lookups per client address", "20/1:400")
RATE_OWNER = _rate("rate_owner", "Owner requests (fetch, ack, session, invites, purge) per client address",
                   "100/1:2000")
RATE_STREAM = _rate("rate_stream", "Push stream handshakes per client address", "2/1:60")
MAX_UNKNOWN = _number("max_unknown", "Messages per mailbox under tags its owner never fetched (507 above).",
                      int, 200, least=1)
MAX_PER_TAG = _number("max_per_tag", "Most undelivered messages under one channel tag the owner reads: one "
                      "sender's share of --max-mailbox (507 above); default a tenth of it, at least 100.",
                      int, None, least=1)
MAX_FILE_BYTES = _number("max_file_bytes", "Largest file a sender may upload, bytes (413 above).", int,
                         512 * 1024 * 1024, least=1, metavar="BYTES")
MAX_MAILBOX_FILE_BYTES = _number("max_mailbox_file_bytes", "File bytes one mailbox holds until its owner "
                                 "takes them (507 above).", int, 2048 * 1024 * 1024, least=1, metavar="BYTES")
RATE_CHUNKS = _rate("rate_chunks", "File chunks (256 KiB each) uploaded per client address", "400/1:800")
BEHIND_PROXY = OptionSpec("behind_proxy", ("--behind-proxy",), "Take the client address from "
                          "X-Forwarded-For: the rightmost hop that is not a --trusted-proxies address. Only "
                          "behind a proxy that appends to it.", takes_value=False, off=("--no-behind-proxy",),
                          envvar=ENV + "BEHIND_PROXY")
TRUSTED_PROXIES = OptionSpec("trusted_proxies", ("--trusted-proxies",), "With --behind-proxy: addresses or "
                             "CIDRs of further proxies, comma-separated.", envvar=ENV + "TRUSTED_PROXIES",
                             metavar="ADDRESSES", default="")
MAX_CONNECTIONS = _number("max_connections", "Open connections on this process (503 above).", int, 4096,
                          least=1)
MAX_CONNECTIONS_PER_CLIENT = _number("max_connections_per_client", "Open connections from one address (503 "
                                     "above); 0 for no cap. Off with --behind-proxy, where all come from the "
                                     "proxy.", int, 512, least=0)
MAX_HEADER_BYTES = _number("max_header_bytes", "Bytes of a request line and headers (431 above).", int,
                           64 * 1024, least=1024, metavar="BYTES")
MAX_HEADERS = _number("max_headers", "Headers per request (431 above).", int, 100, least=1)
HEADER_TIMEOUT = _number("header_timeout", "Seconds a client has to send a request's headers (408 and closed "
                         "after).", float, 10.0, least=0.1, metavar="SECONDS")
BODY_TIMEOUT = _number("body_timeout", "Seconds a client has to send a request's body once its headers are "
                       "in (408 and closed after).", float, 30.0, least=0.1, metavar="SECONDS")
METRICS_PORT = _number("metrics_port", "Serve Prometheus metrics on 127.0.0.1:PORT (off unless given).", int,
                       None, least=1, most=65535, metavar="PORT")

RELAY = CommandSpec("relay", (), (
    HOST, PORT, STORE, DB, TTL, MAX_BLOB, PURGE_INTERVAL, MAX_MAILBOX, RATE_PER_CLIENT, RATE_PER_TAG,
    MAX_STREAMS, RATE_PUBLISH, RATE_LOOKUP, RATE_OWNER, RATE_STREAM, MAX_UNKNOWN, MAX_PER_TAG,
    MAX_FILE_BYTES, MAX_MAILBOX_FILE_BYTES, RATE_CHUNKS, BEHIND_PROXY,
    TRUSTED_PROXIES, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_CLIENT, MAX_HEADER_BYTES, MAX_HEADERS,
    HEADER_TIMEOUT, BODY_TIMEOUT, METRICS_PORT,
))
