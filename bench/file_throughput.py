"""File throughput: `talk send --file` end to end on loopback, against the same bytes copied through
the relay unencrypted.

One `talk send bob --file F` by alice, a real child process timed from start to exit: start-up,
the hash pass, sealing every 256 KiB chunk (secretstream), putting each on the relay, saving the
transfer record every few chunks, and the message that announces the file. The baseline, in the
same run, puts the same number of chunks of the file's plain bytes through the same client
(`follower.relay.client.RelayClient.put_chunk`, one kept-alive connection) into a mailbox whose
tag is registered, as the send's is: the relay's own cost of storing a file, with none of talk's
work around it. The file is --mb MiB of seeded random bytes. The two cases alternate which goes
first each round; each round sends a fresh file id (a copy of the file under a new name, so
the send is a new transfer). The relay's rate limits are off: they would measure the limiter.

    .venv/bin/python bench/file_throughput.py [--mb 64] [--rounds 3]

A table goes to stderr; stdout ends with one JSON line:

    {"mb": 64, "send_mb_s": …, "plain_mb_s": …, "ratio": …, "rounds": R, "load": [1, 5, 15 min]}

`ratio` is send ÷ plain, the median of the round-by-round ratios (1.0: the encryption, the
record and the start-up cost nothing). Only loopback traffic; everything is removed afterwards.
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


def plain_copy(url: str, path: Path) -> float:
    """Seconds to put `path`'s chunks, unsealed, into a fresh mailbox under a registered tag."""
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
        elapsed = time.perf_counter() - start
        client.ack_files(owner, [file_id])
    return elapsed


def sealed_send(alice: Agent, path: Path, deadline: Deadline) -> float:
    command = alice.cmd("send", "bob", "--file", str(path))
    ms, _ = timed(command, alice.env(), deadline, "alice: talk send --file")
    return ms / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mb", type=int, default=64, help="file size, MiB (64)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (3)")
    parser.add_argument("--timeout", type=float, default=900.0, help="budget, seconds (900)")
    args = parser.parse_args(argv)
    deadline, talk, root = begin(args.timeout)
    env = relay_env()
    relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", env)
    send_s: list[float] = []
    plain_s: list[float] = []
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
            for case in (("send", "plain") if i % 2 == 0 else ("plain", "send")):
                if case == "send":
                    send_s.append(sealed_send(alice, copy, deadline))
                else:
                    plain_s.append(plain_copy(relay.url, source))
            bob.ok(deadline, "receive")  # the mailbox's quota frees as bob takes what came
    except BenchError as exc:
        print(f"file_throughput: error: {exc}", file=sys.stderr)
        return 1
    finally:
        relay.stop()
        shutil.rmtree(root, ignore_errors=True)
    size = args.mb * MB / 1e6
    send_rate = statistics.median(size / s for s in send_s)
    plain_rate = statistics.median(size / s for s in plain_s)
    ratio = statistics.median(p / s for s, p in zip(send_s, plain_s, strict=True))
    print(f"talk send --file ({args.mb} MiB)   median {send_rate:7.1f} MB/s", file=sys.stderr)
    print(f"plain chunks through the relay  median {plain_rate:7.1f} MB/s", file=sys.stderr)
    print(f"ratio send/plain (median of rounds): {ratio:.2f}; load average {os.getloadavg()[0]:.2f}",
          file=sys.stderr)
    print(json.dumps({"mb": args.mb, "send_mb_s": round(send_rate, 1), "plain_mb_s": round(plain_rate, 1),
                      "ratio": round(ratio, 3), "rounds": args.rounds, "load": list(os.getloadavg())}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
