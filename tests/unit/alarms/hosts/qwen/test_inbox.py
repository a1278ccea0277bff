"""The Qwen door's own socket: only a connection that presents its token is read, and only
receipts in their documented shape come out of it."""

from __future__ import annotations

import json
import os
import queue
import socket
import stat

from alarms.hosts.qwen.frames import QwenReceipt, auth_line
from alarms.hosts.qwen.inbox import ReceiptInbox, receipts_of
from tests.conftest import wait_for


def status_line(status: str, orig: str) -> bytes:
    return json.dumps({"msgV": 1, "msgId": "x", "type": "control", "action": "delivery_status",
                       "status": status, "origMsgId": orig}).encode() + b"\n"


def test_receipts_need_the_token_first() -> None:
    body = status_line("delivered", "talk-a") + b"junk\n" + status_line("held", "talk-b")
    assert receipts_of(auth_line("t" * 64) + body, "t" * 64) == [QwenReceipt("delivered", "talk-a"),
                                                                   QwenReceipt("held", "talk-b")]
    assert receipts_of(auth_line("u" * 64) + body, "t" * 64) == []
    assert receipts_of(body, "t" * 64) == []
    assert receipts_of(b"", "t") == [] and receipts_of(b"\n\n", "t") == []


def test_the_socket_is_private_and_hands_on_what_it_reads() -> None:
    got: queue.Queue[QwenReceipt] = queue.Queue()
    inbox = ReceiptInbox(got.put).start()
    try:
        assert stat.S_IMODE(os.stat(inbox.path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(inbox.folder).st_mode) == 0o700
        for token in ("wrong", inbox.token):
            with socket.socket(socket.AF_UNIX) as conn:
                conn.connect(inbox.path)
                conn.sendall(auth_line(token) + status_line("delivered", "talk-" + token[:5]))
                conn.shutdown(socket.SHUT_WR)
                conn.recv(1)
        first = wait_for(lambda: got.get(timeout=5), 10, "a receipt")
        assert first == QwenReceipt("delivered", "talk-" + inbox.token[:5])
        assert got.empty()
    finally:
        inbox.close()
    assert not os.path.exists(inbox.path) and not inbox.folder.exists()
