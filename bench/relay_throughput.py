"""Relay throughput: N senders and M receivers against ONE relay worker, next to a minimal endpoint.

Clients are the real `follower.relay.client.RelayClient` (one kept-alive connection per thread), in
--procs processes (half send, half receive) so the client's GIL is not the bottleneck; the table
shows the server's CPU use in the window (`server cpu`, cores), which says whether the clients
saturated it (1.0: its one worker is busy all the time). The relay is a `talk relay` process on
a free 127.0.0.1 port. Sender i deposits pre-sealed blobs (sealed before timing, so
the client's crypto is not measured) into receiver i mod M's mailbox under their channel tag;
each receiver, like the follower, opens a session with one signed request, then loops MACed
fetches (a page of up to 100) that each ack the page before, pauses --linger-ms (the
follower's LINGER_S) after a page that was not full, and sleeps --idle-ms when its mailbox is
empty. Senders pause while more than --window messages
are deposited but not yet delivered, so the backlog stays bounded and latency means something.

Cases, measured in the same run, each after --warmup seconds, for --seconds:

  baseline   a minimal Starlette app (in this file) doing the relay's HTTP work without its
             auth or store: POST keeps a blob in a dict of deques and answers its id in JSON;
             POST .../fetch takes {"tags", "limit", "ack"}, forgets the acked ids and answers the
             oldest page of up to 100 as base64 in JSON, which the receivers decode. Under
             uvicorn with the relay's settings (one worker, uvloop, httptools, no access log),
             driven by the same client processes, pages, acks and lingers as the relay cases
  bare sqlite  the same minimal app doing talk's own store work instead of the dict: each POST
             is one `Store.deposit`, each fetch registers its tags once and is one
             `Store.next_page`, on the relay's own SQLite store (relay/sqlite_store.py) with the
             relay's default quotas; no auth, limits or wake-ups. The relay's own overhead is
             what sqlite loses against it
  sqlite     `talk relay --store sqlite:FILE`
  bare redis   the same on the relay's Redis store (relay/redis_store.py), its own prefix
  redis      `talk relay --store redis://127.0.0.1:6379/0?prefix=<unique>`  (not with --skip-redis)
  redis x2   two replicas on that Redis: senders to A, receivers to B

With --rounds N the whole sequence runs N times, case after case in each round (so a change in
the machine's load falls on every case alike); each figure is the median over the rounds, and
each ratio the median of the ratios within each round.

The relay's deposit rate limits (per client address, per tag) are turned off through their
environment variables: with every client on 127.0.0.1 they would measure the limiter.
Latency is deposit returned → the fetch that brought the message returned, p50/p99 over
messages delivered in the window. Every process started is stopped by its PID; the Redis keys
under the run's prefix are deleted afterwards (never FLUSHDB). Loopback only.

    .venv/bin/python bench/relay_throughput.py [--seconds 10] [--senders 16] [--receivers 16]
                                              [--skip-redis]

A table goes to stderr; stdout ends with one JSON line for the SQLite single-worker case:
    {"deposits_per_s":…,"deliveries_per_s":…,"baseline_per_s":…,"ratio":…,"p50_ms":…,"p99_ms":…}
(other cases as extra keys, and each case's server_cpu), with the ratios of deposits/s:
    vs_bare_store         sqlite ÷ bare sqlite         (target ≥ 0.9)
    redis_vs_bare_store   redis ÷ bare redis
    redis_vs_sqlite_deposits  redis ÷ sqlite           (target ≥ 0.75)
Targets: ≥ 5,000 deposits/s and deliveries/s, ratio ≥ 0.5; two Redis replicas at least 1.6 of one.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    BenchError,
    Deadline,
    Relay,
    base_env,
    find_talk,
    free_port,
    pct,
    relay_env,
    stop_process,
)

from follower.receive.inbound import LINGER_S
from follower.relay.client import RelayClient
from follower.relay.http11 import Connection
from keys.encoding import b64d
from keys.envelope import channel_tag, new_message, seal
from keys.identity import Identity
from keys.sodium import PublicKey

REDIS_URL = "redis://127.0.0.1:6379/0"
POOL = 64  # distinct pre-sealed blobs per sender, reused in turn
PAGE = 100


# ---- the minimal endpoint (served in a child process: `--serve-baseline PORT`) -------------

def baseline_app() -> Any:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    from keys.encoding import b64e

    # Per mailbox: waiting (id, blob) in order, and those served but not yet acked. A fetch
    # deletes what it acks, then serves the oldest page, as base64 in JSON, like the relay.
    waiting: dict[str, deque[tuple[str, bytes]]] = defaultdict(deque)
    served: dict[str, dict[str, bytes]] = defaultdict(dict)
    counter = iter(range(1, 1 << 62))

    async def post(request: Request) -> Response:
        mail_id = str(next(counter))
        waiting[request.path_params["r"]].append((mail_id, await request.body()))
        return JSONResponse({"id": mail_id}, status_code=201)

    async def fetch(request: Request) -> Response:
        box, data = request.path_params["r"], json.loads(await request.body())
        out = served[box]
        for mail_id in data.get("ack") or ():
            out.pop(mail_id, None)
        queue, page = waiting[box], list[dict[str, Any]]()
        while queue and len(page) < int(data.get("limit", PAGE)):
            mail_id, blob = queue.popleft()
            out[mail_id] = blob
            page.append({"id": mail_id, "tag": "t", "blob": b64e(blob), "ts": 0})
        return JSONResponse({"messages": page, "more": bool(queue), "deleted": 0})

    return _box_app(post, fetch)


def _box_app(post: Any, fetch: Any) -> Any:
    """POST /box/{r}/{tag} deposits, POST /box/{r}/fetch fetches, GET /healthz answers."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def healthz(request: Request) -> Response:
        return Response(b"ok")

    return Starlette(routes=[
        Route("/healthz", healthz, methods=["GET"]),
        Route("/box/{r}/fetch", fetch, methods=["POST"]),
        Route("/box/{r}/{tag}", post, methods=["POST"]),
    ])


def bare_store_app(store_spec: str) -> Any:
    """The minimal app doing talk's own store work: `Store.deposit` per POST, and per fetch
    `Store.register_tags` for tags not registered yet (as the relay, which caches them) and
    one `Store.next_page`, with the relay's default quotas."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    from keys.encoding import b64e
    from relay.backends import open_backend, parse_store
    from relay.config import RelayConfig

    store, _ = open_backend(parse_store(store_spec))
    config = RelayConfig()
    known: set[str] = set()

    async def post(request: Request) -> Response:
        fp, tag, c = request.path_params["r"], request.path_params["tag"], config
        done = await store.deposit(fp, tag, await request.body(), time.time(), c.max_mailbox_messages,
                                   c.max_mailbox_bytes, c.max_unknown_messages, c.max_unknown_bytes,
                                   c.tag_messages, c.tag_bytes)
        if done.outcome != "stored":
            return JSONResponse({"error": str(done.outcome)}, status_code=507)
        return JSONResponse({"id": done.id}, status_code=201)

    async def fetch(request: Request) -> Response:
        fp, data = request.path_params["r"], json.loads(await request.body())
        tags, limit = data["tags"], int(data.get("limit", PAGE))
        fresh = [tag for tag in tags if fp + tag not in known]
        if fresh:
            await store.register_tags(fp, fresh, config.max_known_tags)
            known.update(fp + tag for tag in fresh)
        deleted, mail = await store.next_page(fp, data.get("ack") or [], tags, limit + 1,
                                              time.time() - config.ttl_s)
        page = [{"id": m.id, "tag": m.tag, "blob": b64e(m.blob), "ts": m.created} for m in mail[:limit]]
        return JSONResponse({"messages": page, "more": len(mail) > limit, "deleted": deleted})

    return _box_app(post, fetch)


def serve(app: Any, port: int) -> None:
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=port, access_log=False, log_level="warning",
                server_header=False)


@dataclass
class Server:
    """A minimal endpoint as a child process, stopped by its PID: the baseline, or with `store`
    (a --store spec) the bare store endpoint."""

    store: str | None = None
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, deadline: Deadline) -> None:
        which = ["--serve-baseline"] if self.store is None else ["--serve-store", self.store]
        self.proc = subprocess.Popen(
            [sys.executable, __file__, *which, "--port", str(self.port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=base_env(None),
        )
        wait_healthy(self.url, self.proc, deadline)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc)


def wait_healthy(url: str, proc: subprocess.Popen[bytes], deadline: Deadline) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    stop = time.monotonic() + deadline.timeout(15)
    while time.monotonic() < stop:
        if proc.poll() is not None:
            raise BenchError(f"server at {url} exited with {proc.returncode}")
        try:
            with opener.open(url + "/healthz", timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"server at {url} did not answer /healthz in time")


# ---- the load: worker processes, each running a few client threads ---------------------------

@dataclass
class Plan:
    """What every client thread needs; built before forking, so children inherit it."""

    send_url: str
    recv_url: str
    baseline: bool
    senders: list[tuple[str, str, list[bytes]]]  # (recipient fp, tag, pre-sealed blobs)
    receivers: list[tuple[Identity, list[str]]]  # (identity, the tags it fetches)
    window: int
    idle_s: float
    linger_s: float
    t0: float = 0.0  # measurement window, time.monotonic() (system-wide on Linux)
    t1: float = 0.0


class Shared:
    """Per-thread counters in shared memory: the senders' backlog gate reads their sums."""

    def __init__(self, senders: int, receivers: int) -> None:
        self.deposited = mp.Array("q", senders, lock=False)
        self.delivered = mp.Array("q", receivers, lock=False)
        self.stop = mp.Event()

    def backlog(self) -> int:
        return int(sum(self.deposited) - sum(self.delivered))


def send_loop(plan: Plan, shared: Shared, i: int, out: dict[str, Any]) -> None:
    fp, tag, blobs = plan.senders[i]
    client = RelayClient(plan.send_url)
    conn = Connection("127.0.0.1", int(plan.send_url.rsplit(":", 1)[1]), 10.0)
    times: list[tuple[str, float]] = out["deposits"]
    n = 0
    try:
        while not shared.stop.is_set():
            if shared.backlog() > plan.window:
                time.sleep(0.0005)
                continue
            blob = blobs[n % len(blobs)]
            if plan.baseline:
                status, body = conn.exchange("POST", f"/box/{fp}/{tag}", blob,
                                             {"content-type": "application/octet-stream"})
                if status != 201:
                    raise BenchError(f"baseline POST answered {status}")
                mail_id = json.loads(body)["id"]
            else:
                mail_id = client.deposit(fp, tag, blob)
            times.append((mail_id, time.monotonic()))
            n += 1
            shared.deposited[i] = n
    finally:
        client.close()
        conn.close()


def receive_loop(plan: Plan, shared: Shared, j: int, out: dict[str, Any]) -> None:
    me, tags = plan.receivers[j]
    client = RelayClient(plan.recv_url, sessions=True)  # as the follower: MACs after one signature
    conn = Connection("127.0.0.1", int(plan.recv_url.rsplit(":", 1)[1]), 10.0)
    times: list[tuple[str, float]] = out["deliveries"]
    n = 0
    taken: list[str] = []
    try:
        while not shared.stop.is_set():
            if plan.t0 <= time.monotonic() <= plan.t1:
                out["fetches"] += 1
            if plan.baseline:  # the same pages and acks, with no auth and no store behind them
                request = json.dumps({"tags": tags, "limit": PAGE, "ack": taken}).encode()
                status, body = conn.exchange("POST", f"/box/{me.fingerprint}/fetch", request,
                                             {"content-type": "application/json"})
                if status != 200:
                    raise BenchError(f"baseline fetch answered {status}")
                page = json.loads(body)
                out["bytes"] += sum(len(b64d(m["blob"])) for m in page["messages"])  # as the client
                more = bool(page["more"])
                ids = taken = [m["id"] for m in page["messages"]]
            else:  # as the follower: each fetch acks the page before it
                mail, more = client.fetch(me, tags, PAGE, ack=taken)
                out["bytes"] += sum(len(m.blob) for m in mail)
                ids = taken = [m.id for m in mail]
            if not ids:
                time.sleep(plan.idle_s)
                continue
            now = time.monotonic()
            times.extend((mail_id, now) for mail_id in ids)
            n += len(ids)
            shared.delivered[j] = n
            if not more and plan.linger_s:
                time.sleep(plan.linger_s)  # as the follower: let the next page gather
    finally:
        client.close()
        conn.close()


def worker(plan: Plan, shared: Shared, role: str, indexes: list[int], results: Any) -> None:
    out: dict[str, Any] = {"deposits": [], "deliveries": [], "errors": [], "fetches": 0, "bytes": 0}
    loop = send_loop if role == "send" else receive_loop

    def guarded(k: int) -> None:
        try:
            loop(plan, shared, k, out)
        except Exception as exc:  # reported in the table, not swallowed
            out["errors"].append(f"{role} {k}: {exc}")

    threads = [threading.Thread(target=guarded, args=(k,)) for k in indexes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put(out)


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU time the processes `pids` have used so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


def drive(plan: Plan, procs: int, warmup: float, seconds: float, servers: list[int]) -> dict[str, Any]:
    shared = Shared(len(plan.senders), len(plan.receivers))
    plan.t0 = time.monotonic() + warmup
    plan.t1 = plan.t0 + seconds
    results: Any = mp.get_context("fork").Queue()
    half = max(1, procs // 2)
    groups = [("send", list(range(len(plan.senders)))[k::half]) for k in range(half)]
    groups += [("recv", list(range(len(plan.receivers)))[k::half]) for k in range(half)]
    groups = [g for g in groups if g[1]]
    ctx = mp.get_context("fork")
    children = [ctx.Process(target=worker, args=(plan, shared, role, idx, results))
                for role, idx in groups]
    for c in children:
        c.start()
    try:
        time.sleep(max(0.0, plan.t0 - time.monotonic()))
        cpu0 = cpu_seconds(servers)
        time.sleep(max(0.0, plan.t1 - time.monotonic()))
        cpu = (cpu_seconds(servers) - cpu0) / (plan.t1 - plan.t0)
    finally:
        shared.stop.set()
        outs = [results.get(timeout=60) for _ in children]
        for c in children:
            c.join(timeout=30)
            if c.is_alive():
                os.kill(c.pid or 0, signal.SIGKILL)
                c.join()
    return {**summarize(plan, outs), "server_cpu": round(cpu, 2)}



def summarize(plan: Plan, outs: list[dict[str, Any]]) -> dict[str, Any]:
    deposited = {i: t for o in outs for i, t in o["deposits"]}
    delivered = [(i, t) for o in outs for i, t in o["deliveries"]]
    span = plan.t1 - plan.t0
    in_window = [(i, t) for i, t in delivered if plan.t0 <= t <= plan.t1]
    lat = [(t - deposited[i]) * 1000 for i, t in in_window if i in deposited]
    return {
        "deposits_per_s": round(sum(plan.t0 <= t <= plan.t1 for t in deposited.values()) / span),
        "deliveries_per_s": round(len(in_window) / span),
        "p50_ms": round(statistics.median(lat), 2) if lat else float("nan"),
        "p99_ms": round(pct(lat, 0.99), 2),
        "fetches_per_message": round(sum(o["fetches"] for o in outs) / max(1, len(in_window)), 2),
        "errors": [e for o in outs for e in o["errors"]][:5],
    }


# ---- the setup: identities, tags, pre-sealed blobs --------------------------------------------

def make_plan(args: argparse.Namespace, send_url: str, recv_url: str, baseline: bool) -> Plan:
    receivers = [Identity.generate(f"r{j}") for j in range(args.receivers)]
    senders = [Identity.generate(f"s{i}") for i in range(args.senders)]
    tags: dict[int, list[str]] = defaultdict(list)
    jobs = []
    for i, s in enumerate(senders):
        j = i % len(receivers)
        peer = PublicKey(receivers[j].box_public)
        tag = channel_tag(s.box_secret, peer, receivers[j].fingerprint)
        tags[j].append(tag)
        blobs = [seal(new_message(s.fingerprint, receivers[j].fingerprint, f"throughput {i}.{k}"),
                      s.box_secret, peer) for k in range(POOL)]
        jobs.append((receivers[j].fingerprint, tag, blobs))
    if not baseline:
        with RelayClient(send_url) as client:
            for r in receivers:
                client.publish(r.bundle())
    plan_receivers = [(r, tags[j] or ["0" * 32]) for j, r in enumerate(receivers)]
    return Plan(send_url, recv_url, baseline, jobs, plan_receivers, args.window, args.idle_ms / 1000,
                args.linger_ms / 1000)


def run_case(name: str, args: argparse.Namespace, urls: tuple[str, str], baseline: bool,
             servers: list[int]) -> dict[str, Any]:
    plan = make_plan(args, urls[0], urls[1], baseline)
    result = drive(plan, args.procs, args.warmup, args.seconds, servers)
    result["case"] = name
    return result


def pids(proc: subprocess.Popen[bytes] | None) -> list[int]:
    return [] if proc is None else [proc.pid]


def delete_redis_keys(prefix: str) -> int:
    from redis import Redis

    client = Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        for k in range(0, len(keys), 1000):
            client.delete(*keys[k:k + 1000])
        return len(keys)
    finally:
        client.close()


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every case, --rounds times, case after case in each round."""
    deadline = Deadline(args.timeout)
    talk = find_talk()
    results = []
    with tempfile.TemporaryDirectory(prefix="talk-throughput-") as tmp:
        for k in range(args.rounds):
            root = Path(tmp) / f"round{k}"
            results += [{**r, "round": k} for r in run_round(args, talk, root, deadline)]
    return results


def run_round(args: argparse.Namespace, talk: str, root: Path, deadline: Deadline) -> list[dict[str, Any]]:
    results = [run_bare(args, "baseline", None, deadline)]
    root.mkdir(parents=True)
    results.append(run_bare(args, "bare sqlite", f"sqlite:{root / 'bare.db'}", deadline))
    relay = Relay(talk, root / "sqlite" / "relay.db", root / "sqlite.log", relay_env())
    relay.start(deadline)
    try:
        results.append(run_case("sqlite", args, (relay.url, relay.url), False, pids(relay.proc)))
    finally:
        relay.stop()
    if not args.skip_redis:
        prefix = f"talk-bench-{uuid.uuid4().hex[:12]}:"
        try:
            results.append(run_bare(args, "bare redis", f"{REDIS_URL}?prefix={prefix}", deadline))
        finally:
            delete_redis_keys(prefix)
        results += run_redis(args, talk, root, deadline)
    return results


def run_bare(args: argparse.Namespace, name: str, store: str | None, deadline: Deadline) -> dict[str, Any]:
    """A case on a minimal endpoint: the baseline (no store), or the bare store endpoint."""
    server = Server(store)
    server.start(deadline)
    try:
        return run_case(name, args, (server.url, server.url), True, pids(server.proc))
    finally:
        server.stop()


def run_redis(args: argparse.Namespace, talk: str, root: Path, deadline: Deadline) -> list[dict[str, Any]]:
    results = []
    for replicas in (1, 2):
        prefix = f"talk-bench-{uuid.uuid4().hex[:12]}:"
        store = f"{REDIS_URL}?prefix={prefix}"
        relays = [Relay(talk, root / f"redis{replicas}{k}" / "unused.db", root / f"redis{replicas}{k}.log",
                        relay_env(), store=store) for k in range(replicas)]
        try:
            for r in relays:
                r.start(deadline)
            urls = (relays[0].url, relays[-1].url)
            name = "redis" if replicas == 1 else "redis x2 (A→B)"
            results.append(run_case(name, args, urls, False, [p for r in relays for p in pids(r.proc)]))
        finally:
            for r in relays:
                r.stop()
            delete_redis_keys(prefix)
    return results


FIGURES = ("deposits_per_s", "deliveries_per_s", "p50_ms", "p99_ms", "fetches_per_message", "server_cpu")
# (key, case, its reference): deposits/s of the first over the second, the median over rounds
RATIOS = (("vs_bare_store", "sqlite", "bare sqlite"), ("redis_vs_bare_store", "redis", "bare redis"),
          ("redis_vs_sqlite_deposits", "redis", "sqlite"))


def medians(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per case, in the order they ran: each figure the median over the rounds."""
    cases: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        cases.setdefault(r["case"], []).append(r)
    return [{"case": name, **{k: _median([r[k] for r in rows]) for k in FIGURES},
             "errors": [e for r in rows for e in r["errors"]][:5]} for name, rows in cases.items()]


def round_ratios(results: list[dict[str, Any]]) -> dict[str, float]:
    """Each of RATIOS within each round (both cases under the same load), then the median."""
    by = {(r["round"], r["case"]): r["deposits_per_s"] for r in results}
    rounds = sorted({r["round"] for r in results})
    out = {}
    for key, case, reference in RATIOS:
        found = [by[k, case] / by[k, reference] for k in rounds if by.get((k, reference)) and (k, case) in by]
        if found:
            out[key] = round(statistics.median(found), 3)
            out[key + "_rounds"] = [round(x, 3) for x in found]
    return out


def _median(values: list[float]) -> float:
    clean = [v for v in values if v == v]  # a p50 of no message is NaN
    return round(statistics.median(clean), 2) if clean else float("nan")


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    rows = medians(results)
    base = next(r for r in rows if r["case"] == "baseline")["deliveries_per_s"]
    print(f"{args.senders} senders, {args.receivers} receivers, {args.procs} client processes, "
          f"window {args.window}, {args.seconds:g} s after {args.warmup:g} s warm-up, "
          f"median of {args.rounds} round(s)", file=sys.stderr)
    print(f"{'case':<16}{'deposits/s':>12}{'deliveries/s':>14}{'p50 ms':>9}{'p99 ms':>9}{'vs base':>9}"
          f"{'fetch/msg':>11}{'server cpu':>12}", file=sys.stderr)
    for r in rows:
        ratio = r["deliveries_per_s"] / base if base else float("nan")
        print(f"{r['case']:<16}{round(r['deposits_per_s']):>12,}{round(r['deliveries_per_s']):>14,}"
              f"{r['p50_ms']:>9}{r['p99_ms']:>9}{ratio:>9.2f}{r['fetches_per_message']:>11}"
              f"{r['server_cpu']:>12}", file=sys.stderr)
        for e in r["errors"]:
            print(f"  error: {e}", file=sys.stderr)
    sq = next(r for r in rows if r["case"] == "sqlite")
    line: dict[str, Any] = {
        "deposits_per_s": sq["deposits_per_s"], "deliveries_per_s": sq["deliveries_per_s"],
        "baseline_per_s": base, "ratio": round(sq["deliveries_per_s"] / base, 3) if base else None,
        "p50_ms": sq["p50_ms"], "p99_ms": sq["p99_ms"], "server_cpu": sq["server_cpu"],
        "baseline_server_cpu": next(r for r in rows if r["case"] == "baseline")["server_cpu"],
        "rounds": args.rounds,
    }
    keys = {"redis": "redis", "redis x2 (A→B)": "redis2", "bare sqlite": "bare_sqlite",
            "bare redis": "bare_redis"}
    for r in rows:
        if r["case"] in keys:
            key = keys[r["case"]]
            line[f"{key}_deposits_per_s"] = r["deposits_per_s"]
            line[f"{key}_deliveries_per_s"] = r["deliveries_per_s"]
            line[f"{key}_p50_ms"], line[f"{key}_p99_ms"] = r["p50_ms"], r["p99_ms"]
            line[f"{key}_server_cpu"] = r["server_cpu"]
    line.update(round_ratios(results))
    if "redis_deliveries_per_s" in line:
        line["redis_vs_sqlite"] = round(line["redis_deliveries_per_s"] / max(1, sq["deliveries_per_s"]), 3)
    if "redis2_deliveries_per_s" in line and "redis_deliveries_per_s" in line:
        two, one = line["redis2_deliveries_per_s"], line["redis_deliveries_per_s"]
        line["two_vs_one"] = round(two / max(1, one), 3)
    line["errors"] = sum(len(r["errors"]) for r in results)
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--senders", type=int, default=16)
    parser.add_argument("--receivers", type=int, default=16)
    parser.add_argument("--procs", type=int, default=4, help="client processes (half send, half receive)")
    parser.add_argument("--window", type=int, default=1600, help="most messages deposited, not delivered")
    parser.add_argument("--idle-ms", type=float, default=2.0, help="a receiver's sleep on an empty fetch")
    parser.add_argument("--linger-ms", type=float, default=LINGER_S * 1000,
                        help="a receiver's pause after a page that was not full (the follower's)")
    parser.add_argument("--skip-redis", action="store_true")
    parser.add_argument("--rounds", type=int, default=1, help="runs of every case, interleaved")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--serve-baseline", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-store", metavar="STORE", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_baseline or args.serve_store:
        serve(baseline_app() if args.serve_baseline else bare_store_app(args.serve_store), args.port)
        return 0
    try:
        results = run(args)
    except BenchError as exc:
        print(f"relay_throughput: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({**report(results, args), "load": round(os.getloadavg()[0], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
