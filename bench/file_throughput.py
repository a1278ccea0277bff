"""File throughput: a file end to end on loopback — `talk send --file`, then `talk receive` taking it
into downloads — against the same bytes copied through the relay unencrypted, up and down.

Sealed: one `talk send bob --file F` by alice, a real child process timed from start to exit
(start-up, the hash pass, sealing every 256 KiB chunk with secretstream, putting each on the
relay, saving the transfer record every few chunks, the message that announces the file); then
one `talk receive` by bob, timed the same way (the message fetched and opened, every chunk
fetched, opened and written to a private partial file, the whole checked against its SHA-256,
placed in downloads, the chunks acked). The baseline, in the same run, puts the same number of
chunks of the file's plain bytes through the same client (`RelayClient.put_chunk`, one kept-alive
connection) into a mailbox whose tag is registered, as the send's is, then gets each back
(`get_chunk`) into a file that is synced and acks them: the relay's own cost of carrying a file
both ways, with none of talk's work around it. The file is --mb MiB of seeded random bytes. The
two cases alternate which goes first each round; each round sends a fresh file id (a link to
the file under a new name, so the send is a new transfer). The relay's rate limits are off: they
would measure the limiter.

    .venv/bin/python bench/file_throughput.py [--mb 64] [--rounds 3]

A table goes to stderr; stdout ends with one JSON line:

    {"mb": 64, "end_to_end_mb_s": …, "plain_mb_s": …, "ratio": …, "send_mb_s": …, "receive_mb_s": …,
     "send_ratio": …, "receive_ratio": …, "rounds": R, "load": [1, 5, 15 min]}

`ratio` is end to end ÷ plain (up and down), the median of the round-by-round ratios (1.0: the
encryption, the records and two commands' start-up cost nothing); `send_ratio` and
`receive_ratio` compare each half with its half of the baseline. Only loopback traffic;
everything is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import statistics
import sys
import time
from pathlib import Path

from common import Agent, BenchError, Deadline, Relay, befriend, begin, make_agent, relay_env, timed

from follower.relay.client import RelayClient
from keys.filestream import CHUNK_BYTES
from keys.identity import Identity

MB = 1024 * 1024


def write_random(path: Path, mb: int) -> None:
    rng = random.Random(29)
    with path.open("wb") as f:
        for _ in range(mb):
            f.write(rng.randbytes(MB))


def plain_copy(url: str, path: Path, out: Path) -> tuple[float, float]:
    """Seconds to put `path`'s chunks, unsealed, into a fresh mailbox under a registered tag, and
    to get them back into `out` (synced) and ack them."""
    owner, tag = Identity.generate("baseline"), secrets.token_hex(16)
    with RelayClient(url) as client:
        client.publish(owner.bundle())
        client.fetch(owner, [tag])  # the owner reads this tag: its files count against its own quota
        file_id = secrets.token_hex(16)
        start = time.perf_counter()
        with path.open("rb") as f:
            index = 0
            while block := f.read(CHUNK_BYTES):
                client.put_chunk(owner.fingerprint, tag, file_id, index, block)
                index += 1
        up = time.perf_counter() - start
        start = time.perf_counter()
        with out.open("wb") as f:
            for i in range(index):
                f.write(client.get_chunk(owner, file_id, i))
            f.flush()
            os.fsync(f.fileno())
        client.ack_files(owner, [file_id])
        down = time.perf_counter() - start
    out.unlink()
    return up, down


def sealed_copy(alice: Agent, bob: Agent, path: Path, deadline: Deadline) -> tuple[float, float]:
    """Seconds of alice's `talk send --file` and of bob's `talk receive` that takes the file."""
    send = alice.cmd("send", "bob", "--file", str(path))
    up, _ = timed(send, alice.env(), deadline, "alice: talk send --file")
    down, _ = timed(bob.cmd("receive"), bob.env(), deadline, "bob: talk receive")
    taken = sorted((bob.home / "bob" / "downloads").iterdir())
    if len(taken) != 1 or taken[0].stat().st_size != path.stat().st_size:
        raise BenchError(f"bob's downloads hold {[p.name for p in taken]}, not the one file sent")
    taken[0].unlink()
    return up / 1000, down / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mb", type=int, default=64, help="file size, MiB (64)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (3)")
    parser.add_argument("--timeout", type=float, default=900.0, help="budget, seconds (900)")
    args = parser.parse_args(argv)
    deadline, talk, root = begin(args.timeout)
    env = relay_env()
    relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", env)
    sealed: list[tuple[float, float]] = []
    plain: list[tuple[float, float]] = []
    try:
        relay.start(deadline)
        alice = make_agent(talk, root, relay, "alice", None, deadline)
        bob = make_agent(talk, root, relay, "bob", None, deadline)
        befriend(alice, bob, deadline)
        alice.ok(deadline, "policy", "bob", "--send-rate", "100000", "--yes")
        source = root / "data.bin"
        write_random(source, args.mb)
        for i in range(args.rounds):
            copy = root / f"data-{i}.bin"
            os.link(source, copy)  # another path: a new transfer, the same bytes
            for case in (("sealed", "plain") if i % 2 == 0 else ("plain", "sealed")):
                if case == "sealed":
                    sealed.append(sealed_copy(alice, bob, copy, deadline))
                else:
                    plain.append(plain_copy(relay.url, source, root / "plain.out"))
    except BenchError as exc:
        print(f"file_throughput: error: {exc}", file=sys.stderr)
        return 1
    finally:
        relay.stop()
        shutil.rmtree(root, ignore_errors=True)
    size = args.mb * MB / 1e6

    def rate(seconds: list[float]) -> float:
        return round(float(statistics.median([size / x for x in seconds])), 1)

    def ratio(ours: list[float], base: list[float]) -> float:
        return round(float(statistics.median([b / o for o, b in zip(ours, base, strict=True)])), 3)

    both, plain_both = [u + d for u, d in sealed], [u + d for u, d in plain]
    result = {
        "mb": args.mb, "end_to_end_mb_s": rate(both), "plain_mb_s": rate(plain_both),
        "ratio": ratio(both, plain_both),
        "send_mb_s": rate([u for u, _ in sealed]), "receive_mb_s": rate([d for _, d in sealed]),
        "send_ratio": ratio([u for u, _ in sealed], [u for u, _ in plain]),
        "receive_ratio": ratio([d for _, d in sealed], [d for _, d in plain]),
        "rounds": args.rounds, "load": list(os.getloadavg()),
    }
    print(f"talk send --file + talk receive ({args.mb} MiB)  median {result['end_to_end_mb_s']:7.1f} MB/s",
          file=sys.stderr)
    print(f"plain chunks up and down through the relay   median {result['plain_mb_s']:7.1f} MB/s",
          file=sys.stderr)
    print(f"ratio (median of rounds): {result['ratio']:.2f}; load average {os.getloadavg()[0]:.2f}",
          file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
