"""Does holding a message cost more as held mail piles up?

A contact whose mail is held (policy `hold`, or over its receive rate) may keep writing. Each
round holds a first batch of messages from that contact into an empty box and a third batch
into a box that already holds two batches from it, one hold into each in turn, so that host
noise (a shared disk's syncs) hits both batches alike; the third batch's time over the
first's is what a growing backlog costs. A second pair holds a batch for a new contact into
an empty box and into a box crowded with other contacts' held mail, in the same way.
Holds go through `follower.held.HeldBox.hold`, the very call the follower makes (with the
same sync to disk), on texts of --text-kb of mixed script, the worst case for an escaping
store. The box's bytes on disk are compared with the texts' own UTF-8 bytes.

    .venv/bin/python bench/held_growth.py [--runs 9] [--batch 20] [--text-kb 60] [--crowd 2000]

A table goes to stderr; stdout ends with one JSON line:

    {"first_ms": ..., "third_ms": ..., "ratio": ..., "empty_ms": ..., "crowded_ms": ...,
     "crowd_ratio": ..., "stored_ratio": ..., ...}

Target: ratio <= 1.2 and crowd_ratio <= 1.2 (medians of per-round ratios); stored_ratio near
1. Everything is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import BenchError, begin

from follower.held import HELD_DIR, HeldBox

REASON = "held until the recipient accepts it"


def record(sender: str, text: str) -> dict[str, Any]:
    return {"id": secrets.token_hex(16), "from": sender, "name": "mallory", "text": text,
            "ts": "2026-12-04T12:00:00.000000Z", "kind": "chat"}


def hold_one(box: HeldBox, sender: str, text: str) -> float:
    """Hold one message from `sender`; its wall time, ms."""
    start = time.perf_counter()
    if not box.hold(record(sender, text), REASON):
        raise BenchError("a fresh message was reported held already")
    return (time.perf_counter() - start) * 1000


def alternate(boxes: dict[str, tuple[HeldBox, str]], texts: list[str], flip: bool) -> dict[str, float]:
    """One hold into each box in turn per text (the order flipped by `flip`); ms per box."""
    spent = dict.fromkeys(boxes, 0.0)
    order = list(boxes)[::-1] if flip else list(boxes)
    for k, text in enumerate(texts):
        for label in order if k % 2 else order[::-1]:
            box, sender = boxes[label]
            spent[label] += hold_one(box, sender, text)
    return spent


def fresh_box(root: Path, most: int) -> HeldBox:
    folder = root / secrets.token_hex(4)
    folder.mkdir(mode=0o700)
    return HeldBox(folder, most=most)


def stored_bytes(box: HeldBox) -> int:
    return sum(p.stat().st_size for p in (box.folder / HELD_DIR).rglob("*.json"))


def texts_of(count: int, kb: int) -> list[str]:
    unit = "held mail 長い文章 🙂 "  # ASCII, CJK and an emoji: 1, 3 and 4 bytes a character
    return [f"{i}: " + unit * (kb * 1024 // len(unit.encode())) for i in range(count)]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=9, help="timed rounds (9)")
    parser.add_argument("--batch", type=int, default=20, help="holds per batch (20)")
    parser.add_argument("--text-kb", type=int, default=60, help="kilobytes of text per message (60)")
    parser.add_argument("--crowd", type=int, default=2000, help="other contacts' held messages (2000)")
    parser.add_argument("--timeout", type=float, default=900.0, help="budget, seconds (900)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    deadline, _, root = begin(args.timeout)
    samples: dict[str, list[float]] = {"first": [], "third": [], "empty": [], "crowded": []}
    texts = texts_of(3 * args.batch, args.text_kb)
    small = texts_of(args.batch, 1)
    stored = sent = 0
    try:
        crowd = fresh_box(root, most=args.crowd)
        senders = [secrets.token_hex(16) for _ in range(10)]
        for i in range(args.crowd):
            crowd.hold(record(senders[i % len(senders)], small[i % len(small)]), REASON)
        for i in range(args.runs + 1):  # the first round warms caches and is not counted
            deadline.timeout()
            first, third = fresh_box(root, 10 * args.batch), fresh_box(root, 10 * args.batch)
            loud = secrets.token_hex(16)
            for text in texts[:2 * args.batch]:  # the backlog the third batch lands on
                hold_one(third, loud, text)
            timed = alternate({"first": (first, loud), "third": (third, loud)}, texts[2 * args.batch:],
                              i % 2 == 1)
            stored, sent = stored_bytes(third), sum(len(t.encode()) for t in texts)
            empty = fresh_box(root, args.batch)
            newcomers = {"empty": (empty, secrets.token_hex(16)), "crowded": (crowd, secrets.token_hex(16))}
            timed |= alternate(newcomers, texts[:args.batch], i % 2 == 0)
            for box in (first, third, empty):
                shutil.rmtree(box.folder)
            if i:
                for label, ms in timed.items():
                    samples[label].append(ms)
    except BenchError as exc:
        print(f"held_growth: error: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in samples.items()}
    ratio = statistics.median(t / f for t, f in zip(samples["third"], samples["first"], strict=True))
    crowd_ratio = statistics.median(c / e for c, e in zip(samples["crowded"], samples["empty"], strict=True))
    for label, values in samples.items():
        print(f"{args.batch} holds, {label:<8}: median {med[label]:8.1f} ms, min {min(values):8.1f} ms "
              f"({args.runs} runs)", file=sys.stderr)
    print(f"third/first {ratio:.2f}; crowded ({args.crowd} held for others)/empty {crowd_ratio:.2f}; "
          f"stored/sent bytes {stored / sent:.3f}; load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(json.dumps({"first_ms": round(med["first"], 1), "third_ms": round(med["third"], 1),
                      "ratio": round(ratio, 3), "empty_ms": round(med["empty"], 1),
                      "crowded_ms": round(med["crowded"], 1), "crowd_ratio": round(crowd_ratio, 3),
                      "stored_ratio": round(stored / sent, 3), "batch": args.batch,
                      "text_kb": args.text_kb, "crowd": args.crowd, "runs": args.runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
