"""Does sending to a group of ten cost at most three pairwise sends?

One `talk send @team TEXT` by alice (a Megolm encryption, then one pairwise copy per member:
sealed, padded, deposited under that pair's tag) against one `talk send bob TEXT` (one
pairwise message), each a real child process timed end to end (start-up, unlock, encrypt,
the relay round trips), against a real relay on loopback. Both ride Olm sessions (forward
secrecy on), set up by the warm-up rounds, which also share the group's key with every member,
as any group does after its first message. The two sends alternate which goes first each
round, so host noise hits them alike.

    .venv/bin/python bench/group_send.py [--runs 15] [--warmups 2] [--members 10]

A table goes to stderr; stdout ends with one JSON line:

    {"pairwise_ms": ..., "group_ms": ..., "ratio": ..., "members": N, "runs": R}

`ratio` is the median of the round-by-round ratios group/pairwise. Target: ratio <= 3.
Only loopback traffic; everything is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

from common import Agent, BenchError, Deadline, Relay, befriend, begin, make_agent, pct, relay_env, timed

SEND_RATE = "100000"  # the sender's own brake counts each copy; the bench measures the path


def setup(talk: str, relay: Relay, root: Path, members: int, deadline: Deadline) -> tuple[Agent, list[Agent]]:
    alice = make_agent(talk, root, relay, "alice", None, deadline)
    peers = [make_agent(talk, root, relay, f"m{i}", None, deadline) for i in range(members)]
    for peer in peers:
        befriend(alice, peer, deadline)
        alice.ok(deadline, "policy", peer.name, "--send-rate", SEND_RATE, "--yes")
    alice.ok(deadline, "group", "create", "team", *[a for p in peers for a in ("--member", p.name)])
    return alice, peers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15, help="timed rounds (15)")
    parser.add_argument("--warmups", type=int, default=2, help="untimed rounds first (2)")
    parser.add_argument("--members", type=int, default=10, help="members besides the sender (10)")
    parser.add_argument("--timeout", type=float, default=900.0, help="budget, seconds (900)")
    args = parser.parse_args(argv)
    deadline, talk, root = begin(args.timeout)
    relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", relay_env())
    pairwise: list[float] = []
    group: list[float] = []
    try:
        relay.start(deadline)
        alice, peers = setup(talk, relay, root, args.members, deadline)
        env = alice.env()
        for i in range(args.warmups + args.runs):
            steps = [("pairwise", ["send", peers[0].name, f"pairwise {i}"]),
                     ("group", ["send", "@team", f"group {i}"])]
            for label, cmd in (steps if i % 2 == 0 else steps[::-1]):
                ms, _ = timed(alice.cmd(*cmd), env, deadline, f"alice: talk {cmd[0]} {cmd[1]}")
                if i >= args.warmups:
                    (pairwise if label == "pairwise" else group).append(ms)
    except BenchError as exc:
        print(f"group_send: error: {exc}", file=sys.stderr)
        return 1
    finally:
        relay.stop()
        shutil.rmtree(root, ignore_errors=True)
    ratio = statistics.median(g / p for g, p in zip(group, pairwise, strict=True))
    rows = (("talk send m0 (pairwise)", pairwise), (f"talk send @team ({args.members})", group))
    for label, values in rows:
        print(f"{label:<32} median {statistics.median(values):7.1f}  p90 {pct(values, 0.9):7.1f}  "
              f"min {min(values):7.1f} ms", file=sys.stderr)
    print(f"ratio group/pairwise (median of rounds): {ratio:.2f}  (target <= 3); "
          f"load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(json.dumps({"pairwise_ms": round(statistics.median(pairwise), 1),
                      "group_ms": round(statistics.median(group), 1), "ratio": round(ratio, 3),
                      "members": args.members, "runs": args.runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
