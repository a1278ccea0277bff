"""Does forward-secret mail survive kills, power losses and late mail? A soak, both ways, counted.

Alice and bob (each in its own TALK_HOME, as on its own machine, each with a follower running:
`talk follow --foreground`, so the bench holds its pid) write to each other through a real relay
on loopback, in turns: alice sends a burst of 1-5 messages with `talk send`, waits (a few
seconds at most) until bob's follower has spooled them, then bob does the same; one turn is one
such reply exchange, so each turn moves the Olm ratchet on. --messages messages go each way, each
text naming its direction and number. On the way, at random (seeded: --seed):

  sender kill      a `talk send` is killed (SIGKILL) at a random moment of its run; what it did
                   is read back from the sender's outbox (`talk outbox --offline --all --json`):
                   an entry there means it was sent (its follower resends what the relay never
                   got); none means it was not, and the same message is sent again
  follower kill    the receiving follower is killed (SIGKILL) while the burst comes in, and
                   started again
  power loss       all of one side's processes are killed (its follower, a send in flight),
                   every file of its folder goes back to what was last synced to its disk, and
                   its machine boots again with a new boot id (bench/powerloss.py says how, and
                   where the model is kinder or harsher than a disk). Mid-send on the sending
                   side, or while a burst comes in on the receiving side.
  late mail        a few deposits of `talk send` (--delayed) are held back by a proxy between
                   the identities and the relay (bench/holding_proxy.py), which answers the
                   sender as the relay would; each reaches the relay only after 10 to 13 more
                   turns, its resends (the same sealed bytes) held with it.

Then everything is let go and kept running until every message sent was delivered, or nothing
changed for --quiet seconds (a final drain). Counted per direction:

  sent        ids `talk send` printed, and ids the sender's outbox holds for a killed send
  delivered   ids in the receiver's spool (every spool file: what the agent is handed)
  lost        sent, never delivered, never quarantined
  duplicated  ids delivered more than once to the receiver's agent
  refused     quarantined at the receiver and never recovered (`talk quarantine --json`):
              refused for good; the reasons are listed
  unrecorded  delivered ids the sender never recorded as sent

Run with the venv's interpreter:

    .venv/bin/python bench/ratchet_soak.py [--messages 1000] [--quick] [--seed N] [--json] [--keep]

--quick: 100 messages each way (about 2 minutes, a minute of it the final drain when something
stays refused); the full run took 9.5 minutes on 2 busy cores. The report goes to stdout (with
--json, one JSON object instead, and the text to stderr). Exit status 1 if anything was lost,
duplicated or refused for good, 2 if the bench itself failed. Only loopback traffic; everything
is removed afterwards (--keep: the folder is kept and named, with each follower's log).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from common import Agent, BenchError, Deadline, Relay, base_env, befriend, begin, ndjson, relay_env
from holding_proxy import HoldingProxy
from powerloss import Disk, child_env, new_boot

from spool_writer.cursor import message_of
from spool_writer.lines import size_of

TEXT = "soak {src}>{dst} #{n:05d}"
PATTERN = re.compile(r"soak (?P<src>\w+)>(?P<dst>\w+) #(?P<n>\d+)")
HIGH_RATE = "100000"  # messages a minute: far above the soak's, so no policy holds it
BURST_MOST = 5
DELAY_TURNS = 10  # a held deposit reaches the relay after this many turns at least
DELAY_SPREAD = 3  # ... and at most this many more
WAIT_S = 5.0  # for a burst to be spooled before the other side answers anyway
# Events, as chances: per send (a kill, or a power loss of the sending side mid-send), and per
# burst coming in (the receiving follower killed, or the receiving side's power lost).
P_SEND_KILL = 0.04
P_SEND_POWER = 0.01
P_FOLLOWER_KILL = 0.05
P_RECEIVE_POWER = 0.02
CHILD_ENV = {
    "TALK_RESEND_AFTER": "2",  # resends of what the relay never got come within seconds
    "TALK_DEPOSIT_JITTER": "0,0.05",  # receipts leave at once: the outboxes keep up
}


@dataclass
class Side:
    name: str
    peer: str
    agent: Agent
    disk: Disk
    boot: Path
    log: Path
    follow_env: dict[str, str]
    send_env: dict[str, str]
    fp: str = ""
    follower: subprocess.Popen[bytes] | None = None
    sending: subprocess.Popen[bytes] | None = None
    sent: dict[int, str] = field(default_factory=dict)  # message number -> id
    held: dict[str, int] = field(default_factory=dict)  # id -> turn it was held in
    power_losses: int = 0
    follower_restarts: int = 0

    @property
    def folder(self) -> Path:
        return self.agent.home / self.name


@dataclass
class Counts:
    send_kills: int = 0
    follower_kills: int = 0
    resent_after_kill: int = 0  # killed before its outbox knew it: sent again
    slow_bursts: int = 0  # bursts not all spooled within WAIT_S (late, held or killed ones aside)
    follower_exits: int = 0  # followers found dead without being killed
    restored: int = 0
    deleted: int = 0


def spool_lines(folder: Path) -> list[dict[str, object]]:
    """Every message of every spool file of identity `folder`, read as its agents' reader reads
    them (`spool_writer.cursor.message_of`: a line a kill cut short is skipped)."""
    found: list[dict[str, object]] = []
    for path in sorted((folder / "spool").rglob("*.ndjson*")):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        found += [dict(record) for raw in data.splitlines() if (record := message_of(raw)) is not None]
    return found


def tail(path: Path, start: int) -> bytes:
    """What was appended to `path` past `start` (its size before), or b"" (it was compacted)."""
    try:
        with path.open("rb") as f:
            f.seek(start)
            return f.read()
    except FileNotFoundError:
        return b""


class Inbox:
    """The ids spooled from one sender, read again whenever the inbox file changes."""

    def __init__(self, folder: Path, sender: str) -> None:
        self.path = folder / "spool" / "inbox.ndjson"
        self.sender = sender
        self.size = -1
        self.ids: set[str] = set()

    def refresh(self) -> set[str]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size != self.size:
            self.size = size
            self.ids = {str(r.get("id")) for r in spool_lines(self.path.parent.parent)
                        if r.get("name") == self.sender}
        return self.ids


class Soak:
    def __init__(self, args: argparse.Namespace, talk: str, deadline: Deadline, proxy: HoldingProxy,
                 alice: Side, bob: Side) -> None:
        self.args = args
        self.talk = talk
        self.deadline = deadline
        self.proxy = proxy
        self.rng = random.Random(args.seed)
        self.sides = {"alice": alice, "bob": bob}
        self.inbox = {s.name: Inbox(s.folder, s.peer) for s in (alice, bob)}  # keyed by receiver
        self.counts = Counts()
        self.durations: list[float] = []
        self.release_at: dict[int, int] = {}  # id(Held) -> turn it is let go in
        self.turn = 0

    # -- processes ---------------------------------------------------------------------------

    def start_follower(self, side: Side) -> None:
        with side.log.open("ab") as log:
            side.follower = subprocess.Popen(
                [self.talk, "follow", "--foreground"], env=side.follow_env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True)

    def kill(self, proc: subprocess.Popen[bytes] | None) -> bool:
        """SIGKILL by pid; whether it was still running."""
        if proc is None or proc.poll() is not None:
            return False
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        return True

    def kill_follower(self, side: Side) -> None:
        if self.kill(side.follower):
            self.counts.follower_kills += 1
        self.start_follower(side)
        side.follower_restarts += 1

    def power_loss(self, side: Side) -> None:
        """Every process of the side dies at once; its disk keeps what was synced; it boots again."""
        self.kill(side.follower)
        self.kill(side.sending)
        loss = side.disk.lose_power()
        new_boot(side.boot)
        side.power_losses += 1
        self.counts.restored += loss.restored
        self.counts.deleted += loss.deleted
        print(f"turn {self.turn}: power loss of {side.name}: {loss.restored} files back to their "
              f"last sync, {loss.deleted} never synced gone", file=sys.stderr)
        self.start_follower(side)

    def check_followers(self) -> None:
        for side in self.sides.values():
            if side.follower is None or side.follower.poll() is not None:
                self.counts.follower_exits += 1
                self.start_follower(side)

    # -- sending -----------------------------------------------------------------------------

    def outbox(self, side: Side) -> list[dict[str, object]]:
        out = side.agent.ok(self.deadline, "outbox", "--offline", "--all", "--limit", "0", "--json")
        try:
            parsed = json.loads(out)
        except ValueError:
            return ndjson(out)
        return parsed if isinstance(parsed, list) else [parsed]

    def find_sent(self, side: Side, text: str) -> str | None:
        for entry in self.outbox(side):
            if entry.get("text") == text and entry.get("name") == side.peer:
                return str(entry["id"])
        return None

    def send(self, side: Side, n: int, event: str | None, hold: bool) -> None:
        """Message number `n` from `side`, until it is sent (a killed send that left nothing
        in the outbox is sent again); `event`: "kill" or "power" at a random moment of it."""
        text = TEXT.format(src=side.name, dst=side.peer, n=n)
        peer = self.sides[side.peer]
        while True:
            if hold:
                held_before = len(self.proxy.held)
                self.proxy.hold_next(peer.fp)
            start = time.monotonic()
            outbox_size = size_of(side.folder / "outbox.ndjson")
            proc = subprocess.Popen([self.talk, "send", side.peer, text, "--json"], env=side.send_env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            side.sending = proc
            hit = False
            if event is not None:
                self.moment(side, proc, outbox_size, text.encode())
                if proc.poll() is None:
                    hit = True
                    if event == "kill":
                        self.kill(proc)
                        self.counts.send_kills += 1
                    else:
                        self.power_loss(side)
            try:
                out, err = proc.communicate(timeout=self.deadline.timeout())
            except subprocess.TimeoutExpired as exc:
                self.kill(proc)
                raise BenchError(f"{side.name}: talk send timed out") from exc
            finally:
                side.sending = None
            if hold:
                self.proxy.disarm(peer.fp)
            if not hit:
                if proc.returncode != 0:
                    raise BenchError(f"{side.name}: talk send exited {proc.returncode}: "
                                     f"{err.decode().strip()}")
                self.durations.append(time.monotonic() - start)
                msg_id = str(json.loads(out)["id"])
                side.sent[n] = msg_id
                if hold and len(self.proxy.held) > held_before:
                    side.held[msg_id] = self.turn
                    held = self.proxy.held[-1]
                    self.release_at[id(held)] = self.turn + DELAY_TURNS + self.rng.randint(0, DELAY_SPREAD)
                return
            found = self.find_sent(side, text)
            if found is not None:
                side.sent[n] = found
                return
            self.counts.resent_after_kill += 1
            event = None  # the message again, this time left alone

    def moment(self, side: Side, proc: subprocess.Popen[bytes], outbox_size: int, text: bytes) -> None:
        """Wait for a random moment of `proc`'s run: half the time anywhere in the later part
        of a typical send (its start-up is most of it), half the time just after its outbox
        recorded the message, where a kill leaves a message sent but not yet deposited."""
        typical = statistics.median(self.durations) if self.durations else 0.2
        if self.rng.random() < 0.5:
            time.sleep(self.rng.uniform(0.4, 1.0) * typical)
            return
        stop = time.monotonic() + 2 * typical + 1.0
        path = side.folder / "outbox.ndjson"
        while proc.poll() is None and time.monotonic() < stop and text not in tail(path, outbox_size):
            time.sleep(0.001)
        time.sleep(self.rng.uniform(0.0, 0.01))

    def burst(self, side: Side, first: int, count: int, holds: set[int]) -> list[str]:
        """Messages first..first+count-1 from `side`; the ids the receiver should have soon."""
        expected = []
        for n in range(first, first + count):
            roll = self.rng.random()
            hold = n in holds
            event = None if hold else ("kill" if roll < P_SEND_KILL else
                                       "power" if roll < P_SEND_KILL + P_SEND_POWER else None)
            self.send(side, n, event, hold)
            msg_id = side.sent[n]
            if event is None and msg_id not in side.held:
                expected.append(msg_id)
        return expected

    def wait_spooled(self, receiver: Side, ids: list[str]) -> None:
        """Until `receiver` has spooled `ids` (WAIT_S at most); a kill or a power loss of the
        receiving side may come meanwhile."""
        roll = self.rng.random()
        if roll < P_FOLLOWER_KILL + P_RECEIVE_POWER:
            time.sleep(self.rng.uniform(0.0, 0.2))  # while the burst comes in
            if roll < P_FOLLOWER_KILL:
                self.kill_follower(receiver)
            else:
                self.power_loss(receiver)
        stop = time.monotonic() + WAIT_S
        inbox = self.inbox[receiver.name]
        while not set(ids) <= inbox.refresh():
            if time.monotonic() > stop:
                self.counts.slow_bursts += 1
                return
            time.sleep(0.02)

    def release_due(self) -> None:
        self.proxy.turn = self.turn
        for held in list(self.proxy.held):
            if self.release_at.get(id(held), 0) <= self.turn:
                self.proxy.release(held)

    def run(self) -> None:
        n = self.args.messages
        delayed = self.args.delayed
        # Holds spread over the first 70% of the messages, alternating sides, so each has its
        # DELAY_TURNS and more before the end.
        spots = [int((i + 1) * 0.7 * n / (delayed + 1)) for i in range(delayed)]
        holds = {"alice": set(spots[0::2]), "bob": set(spots[1::2])}
        next_n = {"alice": 0, "bob": 0}
        started = time.monotonic()
        while min(next_n.values()) < n:
            self.turn += 1
            self.release_due()
            self.check_followers()
            for name in ("alice", "bob"):
                side, left = self.sides[name], n - next_n[name]
                if left <= 0:
                    continue
                count = min(left, self.rng.randint(1, BURST_MOST))
                expected = self.burst(side, next_n[name], count, holds[name])
                next_n[name] += count
                self.wait_spooled(self.sides[side.peer], expected)
            if self.turn % 25 == 0:
                print(f"turn {self.turn}: sent {next_n['alice']}/{n} and {next_n['bob']}/{n}, "
                      f"{time.monotonic() - started:.0f}s", file=sys.stderr)

    def drain(self) -> float:
        """Everything let go and left running until all is delivered or nothing changes for
        --quiet seconds; how long it took."""
        start = time.monotonic()
        for held in list(self.proxy.held):
            self.proxy.release(held)
        last, changed = None, time.monotonic()
        while time.monotonic() - changed < self.args.quiet:
            self.check_followers()
            state = tuple(len(self.inbox[s.name].refresh()) for s in self.sides.values())
            waiting = sum(len(set(s.sent.values()) - self.inbox[s.peer].refresh())
                          for s in self.sides.values())
            if waiting == 0:
                break
            if state != last:
                last, changed = state, time.monotonic()
            self.deadline.timeout()
            time.sleep(0.2)
        return time.monotonic() - start

    # -- the report --------------------------------------------------------------------------

    def report(self) -> dict[str, object]:
        directions: dict[str, object] = {}
        reasons: Counter[str] = Counter()
        failed = False
        for side in self.sides.values():
            receiver = self.sides[side.peer]
            sent = set(side.sent.values())
            for entry in self.outbox(side):
                if entry.get("name") == side.peer and PATTERN.fullmatch(str(entry.get("text", ""))):
                    sent.add(str(entry["id"]))
            states = Counter(str(e.get("state")) for e in self.outbox(side)
                             if PATTERN.fullmatch(str(e.get("text", ""))))
            seen = Counter(str(r.get("id")) for r in spool_lines(receiver.folder)
                           if r.get("name") == side.name)
            delivered = set(seen)
            quarantined = [q for q in ndjson(receiver.agent.ok(self.deadline, "quarantine", "--json"))
                           if q.get("from") == side.fp]
            refused = {str(q.get("id")) for q in quarantined if not q.get("recovered")} - delivered
            for q in quarantined:
                if not q.get("recovered"):
                    reasons[str(q.get("reason"))] += 1
            lost = sent - delivered - refused
            duplicated = sum(c - 1 for c in seen.values() if c > 1)
            late = set(side.held)
            failed = failed or bool(lost or duplicated or refused)
            directions[f"{side.name}>{side.peer}"] = {
                "sent": len(sent), "delivered": len(delivered & sent), "lost": len(lost),
                "duplicated": duplicated, "refused_for_good": len(refused),
                "unrecorded": len(delivered - sent),
                "quarantined": len(quarantined),
                "recovered": sum(1 for q in quarantined if q.get("recovered")),
                "delayed": len(late), "delayed_refused": len(late & refused),
                "delayed_lost": len(late & lost),
                "outbox_states": dict(states),
                "lost_ids": sorted(lost)[:20], "refused_ids": sorted(refused)[:20],
            }
        return {"directions": directions, "refusal_reasons": dict(reasons), "failed": failed}


def make_side(talk: str, root: Path, proxy: HoldingProxy, name: str, peer: str,
              deadline: Deadline) -> Side:
    home, shadow, boot = root / f"home-{name}", root / f"shadow-{name}", root / f"boot-{name}"
    home.mkdir()
    new_boot(boot)
    env = child_env({**base_env(None), **CHILD_ENV}, home, shadow, boot)
    agent = Agent(talk, name, home, proxy.url, env)
    follow_env = agent.env()
    side = Side(name, peer, agent, Disk(home, shadow), boot, root / f"{name}-follower.log", follow_env,
                {**follow_env, "TALK_RELAY": proxy.send_url})
    agent.ok(deadline, "init", name, "--no-passphrase")
    side.fp = json.loads(agent.ok(deadline, "id", "--json"))["fingerprint"]
    return side


def set_up(talk: str, root: Path, proxy: HoldingProxy, deadline: Deadline) -> tuple[Side, Side]:
    alice = make_side(talk, root, proxy, "alice", "bob", deadline)
    bob = make_side(talk, root, proxy, "bob", "alice", deadline)
    befriend(alice.agent, bob.agent, deadline)
    for side in (alice, bob):
        side.agent.ok(deadline, "policy", side.peer, "--send-rate", HIGH_RATE, "--receive-rate", HIGH_RATE,
                      "--yes")
    # Warm-up both ways: the session is established before the soak, as in a conversation.
    alice.agent.ok(deadline, "send", "bob", "warm-up")
    bob.agent.ok(deadline, "send", "alice", "warm-up answer")
    for side in (bob, alice):
        if len(ndjson(side.agent.ok(deadline, "receive"))) != 1:
            raise BenchError(f"{side.name} did not get the warm-up message")
    for side in (alice, bob):
        side.disk.snapshot()  # what predates the soak is on the disk
    return alice, bob


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=1000, help="messages each way (1000)")
    parser.add_argument("--quick", action="store_true", help="100 messages each way")
    parser.add_argument("--seed", type=int, default=1, help="the random events' seed (1)")
    parser.add_argument("--delayed", type=int, help="deposits held back (messages / 100, at least 2)")
    parser.add_argument("--quiet", type=float, default=60.0,
                        help="the final drain ends after this many seconds without a delivery (60)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="budget, seconds (3600)")
    parser.add_argument("--json", action="store_true", help="the report as one JSON object on stdout")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (and say where)")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages = 100
    if args.delayed is None:
        args.delayed = max(2, args.messages // 100)
    return args


def text_report(result: dict[str, object]) -> str:
    lines = [f"ratchet soak: {result['messages']} messages each way, seed {result['seed']}, "
             f"{result['turns']} turns, {result['elapsed_s']}s (drain {result['drain_s']}s)"]
    directions = result["directions"]
    assert isinstance(directions, dict)
    for label, d in directions.items():
        lines.append(f"  {label}: sent {d['sent']}, delivered {d['delivered']}, lost {d['lost']}, "
                     f"duplicated {d['duplicated']}, refused for good {d['refused_for_good']} "
                     f"(quarantined {d['quarantined']}, recovered {d['recovered']}), "
                     f"unrecorded {d['unrecorded']}; "
                     f"delayed {d['delayed']} (refused {d['delayed_refused']}, lost {d['delayed_lost']})")
        lines.append(f"    sender's outbox: {d['outbox_states']}")
    lines.append(f"  events: {result['events']}")
    for reason, count in dict(result["refusal_reasons"]).items():  # type: ignore[call-overload]
        lines.append(f"  refused {count}x: {reason}")
    lines.append("  FAILED: something was lost, duplicated or refused for good" if result["failed"]
                 else "  ok: nothing lost, duplicated or refused for good")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    deadline, talk, root = begin(args.timeout)
    relay = Relay(talk, root / "relay" / "relay.db", root / "relay.log", relay_env())
    proxy: HoldingProxy | None = None
    soak: Soak | None = None
    started = time.monotonic()
    try:
        relay.start(deadline)
        proxy = HoldingProxy(relay.port)
        alice, bob = set_up(talk, root, proxy, deadline)
        soak = Soak(args, talk, deadline, proxy, alice, bob)
        for side in (alice, bob):
            soak.start_follower(side)
        soak.run()
        drain = soak.drain()
        found = soak.report()
        c = soak.counts
        result: dict[str, object] = {
            "bench": "ratchet_soak", "messages": args.messages, "seed": args.seed, "turns": soak.turn,
            "elapsed_s": round(time.monotonic() - started, 1), "drain_s": round(drain, 1),
            "events": {"send_kills": c.send_kills, "follower_kills": c.follower_kills,
                       "power_losses": {s.name: s.power_losses for s in (alice, bob)},
                       "delayed": sum(len(s.held) for s in (alice, bob)),
                       "resends_held": proxy.swallowed, "sent_again_after_kill": c.resent_after_kill,
                       "files_restored": c.restored, "files_deleted": c.deleted,
                       "slow_bursts": c.slow_bursts, "follower_exits": c.follower_exits},
            **found, "load": round(os.getloadavg()[0], 2),
        }
    except BenchError as exc:
        print(f"ratchet_soak: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if soak is not None:
            for side in soak.sides.values():
                soak.kill(side.sending)
                soak.kill(side.follower)
        if proxy is not None:
            proxy.close()
        relay.stop()
        if args.keep:
            print(f"ratchet_soak: kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    text = text_report(result)
    if args.json:
        print(text, file=sys.stderr)
        print(json.dumps(result))
    else:
        print(text)
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
