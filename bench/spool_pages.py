"""What syncing a fetched page once, instead of every message, buys the follower.

The follower's own steps for each message it takes, with the project's own code and real
files: the line into the spool (`Spool.deliver`, here with two live sessions, so two copies)
and the id and numbering into the channel store (`ChannelDB.record`). Two ways, alternating
round by round in one run so host noise falls on both alike:

  one_by_one  each message synced on its own (the spool's lines and index fdatasynced per
              message), as a follower did before pages
  paged       pages of --page messages inside `ChannelDB.page()` and `Spool.batch()`: one
              fdatasync per spool file and one for the index per page, one commit per page

    .venv/bin/python bench/spool_pages.py [--messages 2000] [--page 100] [--runs 5]

A table goes to stderr; stdout ends with one JSON line:

    {"one_by_one_per_s": ..., "paged_per_s": ..., "ratio": ..., "messages": N, "page": P, "runs": R}

`ratio` is paged / one_by_one (medians). Files live in a temporary folder on the same disk
as the system's temp dir; what an fdatasync costs there decides the gain.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from follower.receive.channeldb import ChannelDB
from keys.encoding import utc_now_iso
from keys.envelope import Inner
from spool_writer.record import SpoolRecord
from spool_writer.sessions import register
from spool_writer.spool import Spool

SENDER = "a" * 32


def run(root: Path, messages: int, page: int | None, hosts: list[int]) -> float:
    """Messages per second through spool and store, in a fresh identity folder."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    spool = Spool(root / "spool")
    for n, pid in enumerate(hosts):
        register(root / "spool", "claude", f"s{n}", pid)
    store = ChannelDB(root)
    records: list[SpoolRecord] = [{"id": secrets.token_hex(16), "from": SENDER, "name": "alice",
                "text": f"message {i} " + "x" * 200, "ts": utc_now_iso(), "kind": "chat"}
               for i in range(messages)]
    step = page or 1
    start = time.perf_counter()
    for at in range(0, messages, step):
        with contextlib.nullcontext() if page is None else _page(store, spool):
            for i in range(at, min(messages, at + step)):
                record = records[i]
                spool.deliver(record)
                inner = Inner(record["id"], SENDER, "b" * 32, record["ts"], "chat", record["text"], {}, i + 1)
                store.record(SENDER, inner, time.time())
    elapsed = time.perf_counter() - start
    store.close()
    return messages / elapsed


@contextlib.contextmanager
def _page(store: ChannelDB, spool: Spool) -> Iterator[None]:
    """What the follower wraps around a page (`follower.daemon.daemon.Follower.page`)."""
    with store.page(), spool.batch():
        yield


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=2000, help="messages per round (2000)")
    parser.add_argument("--page", type=int, default=100, help="messages per page (100, the follower's)")
    parser.add_argument("--runs", type=int, default=5, help="rounds of each (5)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="talk-bench-"))
    hosts = [subprocess.Popen(["sleep", "3600"]) for _ in range(2)]  # two live "sessions"
    samples: dict[str, list[float]] = {"one_by_one": [], "paged": []}
    try:
        for i in range(args.runs):
            order = [("one_by_one", None), ("paged", args.page)]
            for label, page in order if i % 2 == 0 else order[::-1]:
                samples[label].append(run(tmp / label, args.messages, page, [h.pid for h in hosts]))
    finally:
        for h in hosts:
            h.kill()
            h.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    for label, values in samples.items():
        print(f"{label:<10} median {medians[label]:8.0f} msg/s  (min {min(values):.0f}, "
              f"max {max(values):.0f}; {args.runs} rounds of {args.messages})", file=sys.stderr)
    print(f"load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(json.dumps({"one_by_one_per_s": round(medians["one_by_one"]),
                      "paged_per_s": round(medians["paged"]),
                      "ratio": round(medians["paged"] / medians["one_by_one"], 2),
                      "messages": args.messages, "page": args.page, "runs": args.runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
