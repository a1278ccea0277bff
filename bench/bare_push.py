"""The floor under live mail: the same three hops as talk's, with none of talk's work.

`bench/latency.py` times talk's send → spool against this pipeline in the same run, so its
ratio says how much of a live message's way is talk's own (the store, the checks, opening and
judging the message, the spool's locks and index) and how much is the machine's (waking three
processes on loopback, the HTTP and WebSocket code they share):

  relay     a Starlette app under uvicorn with the relay's loop and HTTP parser (uvloop,
            httptools): a POST to /v1/mail/{fp}/{tag} reads the body, gives it a number, hands
            talk's push frame for it to the mailbox's stream (the relay's own `Wakeups`, one
            turn of the loop before it answers, as the relay does) and answers 201 {"id": …};
            nothing is stored, checked or counted.
  follow    talk's own WebSocket reader (`follower.relay.stream.Stream`) on that stream, each
            frame parsed as the follower parses it (`pushed_mail`), and one line
            {"id": <the blob's first 16 bytes, hex>} appended to a file with one write: no
            opening, no dedup, no lock, no sync.

The sender is the benchmark's, with talk's `RelayClient.deposit`, as for talk's own run.

    python bench/bare_push.py relay --port PORT
    python bench/bare_push.py follow --url ws://127.0.0.1:PORT/v1/mail/FP/stream --out FILE
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import Deadline, base_env, free_port, stop_process, tail_of, wait_answering


def line_id(blob: bytes) -> str:
    """What the bare follower writes for a blob, and the sender waits for."""
    return blob[:16].hex()


def relay_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket

    from relay.notify import Wakeups, notice

    streams: dict[str, set[Wakeups]] = {}
    numbers = iter(range(1, sys.maxsize))

    async def healthz(request: Request) -> Response:
        return Response(b"ok")

    async def deposit(request: Request) -> Response:
        fp, tag = request.path_params["fp"], request.path_params["tag"]
        blob, mail_id = await request.body(), str(next(numbers))
        for queue in streams.get(fp, ()):
            queue.tell(notice(tag, mail_id, blob))
        await asyncio.sleep(0)  # the relay's one turn: the frame is written before the answer
        return JSONResponse({"id": mail_id}, status_code=201)

    async def stream(ws: WebSocket) -> None:
        fp = ws.path_params["fp"]
        queue = Wakeups()
        streams.setdefault(fp, set()).add(queue)
        try:
            await ws.accept()
            await ws.send_json({"type": "ready"})
            while True:
                await queue.wait()
                for told in queue.take():
                    await ws.send_text(told.frame())  # the relay's own frame
        finally:
            streams[fp].discard(queue)

    return Starlette(routes=[
        Route("/healthz", healthz, methods=["GET"]),
        Route("/v1/mail/{fp}/{tag}", deposit, methods=["POST"]),
        WebSocketRoute("/v1/mail/{fp}/stream", stream),
    ])


def serve(port: int) -> None:
    import uvicorn

    uvicorn.run(relay_app(), host="127.0.0.1", port=port, loop="uvloop", http="httptools",
                access_log=False, log_level="warning", server_header=False)


def follow(url: str, out: str) -> None:
    from follower.relay.push import MAX_MESSAGE, pushed_mail
    from follower.relay.stream import Stream

    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with Stream.open(url, {}, 10.0, MAX_MESSAGE) as stream:
        for frame in stream.messages():
            item = pushed_mail(frame)
            if item is not None:
                os.write(fd, b'{"id": "%s"}\n' % line_id(item.blob).encode())


class BarePipeline:
    """The bare relay and a bare follower on `fp`'s stream, as child processes, writing `out`."""

    def __init__(self, fp: str, out: Path, log: Path) -> None:
        self.fp, self.out, self.log = fp, out, log
        self.port = free_port()
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, deadline: Deadline) -> None:
        relay = self._spawn("relay", "--port", str(self.port))
        wait_answering(relay, self.url + "/healthz", deadline, self.log_tail)
        self._spawn("follow", "--url", f"ws://127.0.0.1:{self.port}/v1/mail/{self.fp}/stream",
                    "--out", str(self.out))

    def _spawn(self, *argv: str) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as log:
            proc = subprocess.Popen([sys.executable, __file__, *argv], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=log, env=base_env(None))
        self.procs.append(proc)
        return proc

    def log_tail(self) -> str:
        return tail_of(self.log)

    def stop(self) -> None:
        procs, self.procs = self.procs, []
        for proc in reversed(procs):
            stop_process(proc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    relay = sub.add_parser("relay")
    relay.add_argument("--port", type=int, required=True)
    follower = sub.add_parser("follow")
    follower.add_argument("--url", required=True)
    follower.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.part == "relay":
        serve(args.port)
    else:
        follow(args.url, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
