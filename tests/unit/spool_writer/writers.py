"""Spool writers the tests run as real processes: one delivery at a time, or in pages of 20 in a
batch as the follower delivers a fetched page (`Spool.batch`).

A writer reports each number before it delivers that id, so a parent that kills it must deliver
again every number it was told. The killable writers are forked from a forkserver that imported
the spool once: a kill test runs fifty of them, and a fresh interpreter each would cost more than
the test itself.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import random
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from spool_writer.spool import Spool

PAGE = 20


def write(root: Path, tag: str, count: int, max_bytes: int, generations: int, page: int,
          told: Callable[[int], None]) -> None:
    spool = Spool(root, max_bytes=max_bytes, generations=generations)
    for start in range(0, count, page):
        with spool.batch() if page > 1 else contextlib.nullcontext():
            for i in range(start, min(start + page, count)):
                told(i)  # before the call: the parent must redeliver every id it was told
                spool.deliver({"id": f"{tag}-{i}", "from": "f" * 32, "name": tag,
                               "text": f"message {i} " + "x" * 60, "ts": "2024-01-01T00:00:00Z",
                               "kind": "chat"})


def _write_until_killed(root: Path, tag: str, max_bytes: int, page: int, progress: Connection) -> None:
    progress.send_bytes(b"ready")
    # Each report is one write of a few bytes to a pipe: atomic, so a kill never tears one.
    write(root, tag, 100_000, max_bytes, 10_000, page, lambda i: progress.send_bytes(b"%d" % i))


def killed_writer(root: Path, tag: str, max_bytes: int, page: int, rng: random.Random) -> int:
    """Run a writer into the spool at `root` and SIGKILL it at a random moment; how many
    deliveries it had started (each one may or may not have reached the disk)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    reader, progress = context.Pipe(duplex=False)
    child = context.Process(target=_write_until_killed, args=(root, tag, max_bytes, page, progress))
    child.start()
    progress.close()  # ours: the child's end is its own now, so its death ends the pipe
    try:
        assert reader.recv_bytes() == b"ready"
        time.sleep(rng.uniform(0.001, 0.05))  # the fault lands wherever the writer is by then
        assert child.pid is not None
        child.kill()
        child.join(timeout=30)
        assert child.exitcode == -signal.SIGKILL
        started = []
        with contextlib.suppress(EOFError):
            while True:
                started.append(int(reader.recv_bytes()))
    finally:
        reader.close()
        if child.exitcode is None:  # a failed check above: the writer must not outlive the test
            child.kill()
            child.join()
        child.close()
    return max(started, default=-1) + 1


if __name__ == "__main__":  # ROOT TAG COUNT MAX_BYTES GENERATIONS, one delivery at a time
    root, tag, count, max_bytes, generations = Path(sys.argv[1]), sys.argv[2], *map(int, sys.argv[3:6])
    write(root, tag, count, max_bytes, generations, 1, lambda i: None)
