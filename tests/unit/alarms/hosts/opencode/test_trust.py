"""Whom the opencode alarm trusts: the owner of the other end of each connection, read from the
kernel's socket tables, and the password header it sends only to a trusted server."""

from __future__ import annotations

import base64
import os
import socket

import pytest

from alarms.hosts.opencode.api import OpencodeClient, OpencodeUntrusted
from alarms.hosts.opencode.trust import authorization, distrust
from alarms.procnet import connection_owner, peer_owner
from tests.conftest import free_port, wait_for
from tests.fake_opencode import NOBODY, fake_opencode

# 127.0.0.1:4096 accepted a connection from 127.0.0.1:53924 (uid 1000), and ::ffff:127.0.0.1:8080
# (a dual-stack listener, uid 1001) one from 127.0.0.1:40000.
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1000 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5897 1 0
   1: 0100007F:1000 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000  1000        0 7777 1 0
   2: 0100007F:D2A4 0100007F:1000 01 00000000:00000000 00:00000000 00000000     0        0 7778 1 0
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:9C40 01 00000000:00000000 00:00000000 00000000  1001        0 1 1 0
"""  # noqa: E501


def test_the_owner_of_a_connection_is_that_of_the_socket_at_its_other_end() -> None:
    import ipaddress

    lo = ipaddress.ip_address("127.0.0.1")
    assert connection_owner([TCP, TCP6], (lo, 53924), (lo, 4096)) == 1000
    assert connection_owner([TCP, TCP6], (lo, 4096), (lo, 53924)) == 0  # the client's own end
    assert connection_owner([TCP, TCP6], (lo, 40000), (lo, 8080)) == 1001  # IPv4-mapped
    assert connection_owner([TCP, TCP6], (lo, 1), (lo, 4096)) is None  # not on this machine


def test_peer_owner_reads_this_machines_tables() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname()) as client:
            assert peer_owner(client) == os.geteuid()


def test_only_the_users_own_server_is_trusted() -> None:
    assert distrust(1000, "127.0.0.1", 1000, "127.0.0.1:4096") is None
    why = distrust(NOBODY, "127.0.0.1", 1000, "127.0.0.1:4096")
    assert why == ("the server at 127.0.0.1:4096 belongs to nobody (uid 65534), not to you: "
                   "talk hands it no mail")
    assert "cannot tell who runs" in (distrust(None, "::1", 1000, "[::1]:4096") or "")
    assert distrust(None, "10.1.2.3", 1000, "10.1.2.3:4096") is None  # another machine's


def test_the_password_header_is_opencodes_basic_auth() -> None:
    assert authorization({}) == {}
    header = authorization({"OPENCODE_SERVER_PASSWORD": "s3cret"})["authorization"]
    assert base64.b64decode(header.removeprefix("Basic ")) == b"opencode:s3cret"
    env = {"OPENCODE_SERVER_PASSWORD": "p", "OPENCODE_SERVER_USERNAME": "me"}
    header = authorization(env)["authorization"]
    assert base64.b64decode(header.removeprefix("Basic ")) == b"me:p"


@pytest.mark.skipif(os.geteuid() != 0, reason="running a listener as another user needs root")
def test_a_listener_of_another_user_gets_no_request_and_no_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENCODE_SERVER_PASSWORD", "never-leaks")
    port = free_port()
    with fake_opencode(port, uid=NOBODY) as impostor:
        with pytest.raises(OpencodeUntrusted, match="belongs to nobody"):
            OpencodeClient(impostor.url).prompt_async("ses_x", {"parts": []})
        with pytest.raises(OpencodeUntrusted):
            OpencodeClient(impostor.url).open_events(5)
        assert not impostor.requests
    with fake_opencode(port) as own:
        OpencodeClient(own.url).prompt_async("ses_x", {"parts": []})
        (request,) = wait_for(lambda: own.requests, 5, "the post")
        assert base64.b64decode(request["authorization"].removeprefix("Basic ")) == b"opencode:never-leaks"
