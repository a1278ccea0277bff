"""Fixtures: a real relay on a loopback port, and `talk` run as a real process per identity."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar

import pytest
from hypothesis import settings

from relay.clock import TEST_CLOCK_ENV, parse_offset
from tests.hosts import npm as hosts_npm
from tests.hosts.fake_model import FakeModel
from tests.hosts.procs import ProcessGroup, reap_home

# Property tests judge what a function returns, never how fast: on a busy 2-core machine one
# example can take longer than Hypothesis's default 200 ms deadline and fail a correct test.
settings.register_profile("talk", deadline=None)
settings.load_profile("talk")

REPO = Path(__file__).resolve().parent.parent  # the checkout: pyproject.toml, the packages
TALK = shutil.which("talk", path=os.path.dirname(sys.executable)) or "talk"

T = TypeVar("T")


def open_paths() -> set[str]:
    """What this process holds open, by path (Linux)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RelayProcess:
    db: Path
    port: int
    extra: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)  # e.g. a test clock (RelayClock.env)
    log: Path | None = None  # stderr goes here, not to a pipe: a long-lived relay could fill one

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def store_args(self) -> list[str]:
        return ["--db", str(self.db)]

    def command(self) -> list[str]:
        return [TALK, "relay", "--port", str(self.port), *self.store_args(), *self.extra]

    def start(self) -> Self:
        env = {k: v for k, v in os.environ.items() if k != TEST_CLOCK_ENV} | self.env
        if self.log is None:
            self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         env=env)
        else:
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=log, env=env)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError as exc:
                if self.proc.poll() is not None:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    if self.log is not None:
                        err = self.log.read_text(errors="replace")
                    raise RuntimeError(f"relay exited: {err}") from exc
                time.sleep(0.05)
        raise RuntimeError("relay did not start")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def mailbox_db(self) -> Path:
        """The database, for reads confined to this test's own mailboxes (`WHERE fp = ?`): those
        hold on a relay shared with other tests too, unlike reads of the whole database (`db`)."""
        return self.db


@dataclass(frozen=True)
class RelayClock:
    """A test clock for relays started with its `env` (relay.clock): `advance` moves their wall
    clock, which decides expiry, ahead of the system's without waiting."""

    path: Path

    @property
    def env(self) -> dict[str, str]:
        return {TEST_CLOCK_ENV: str(self.path)}

    def advance(self, seconds: float) -> None:
        offset = parse_offset(self.path.read_text()) if self.path.exists() else 0.0
        fresh = self.path.with_name(self.path.name + ".new")
        fresh.write_text(repr(offset + seconds))
        os.replace(fresh, self.path)  # whole: the relay reads the file at any moment


class LentRelay(RelayProcess):
    """A test module's relay as one of its tests sees it: the same port, and nothing that would
    reach the other tests' mail. Each test still has mailboxes of its own (fresh identities), so
    sharing the process keeps them apart; stopping, restarting or reading the database would not,
    so each raises and names the marker that gives a test a relay of its own."""

    @property
    def db(self) -> Path:
        raise RelayIsShared("reads the relay's database")

    @db.setter
    def db(self, value: Path) -> None:
        self._db = value

    def mailbox_db(self) -> Path:
        return self._db

    def start(self) -> Self:
        raise RelayIsShared("starts the relay")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        raise RelayIsShared("stops the relay")

    def restart(self) -> None:
        raise RelayIsShared("restarts the relay")


class RelayIsShared(AssertionError):
    def __init__(self, what: str) -> None:
        super().__init__(f"this test {what}, which its module's other tests share: mark it "
                         "@pytest.mark.own_relay for a relay process of its own")


@pytest.fixture(scope="module")
def module_relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayProcess]:
    """One relay process for a test module's tests that only talk to it (see `relay`)."""
    folder = tmp_path_factory.mktemp("module-relay")
    r = RelayProcess(folder / "relay.db", free_port(), log=folder / "relay.log").start()
    yield r
    r.stop()


@pytest.fixture
def relay(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RelayProcess]:
    """A real relay on loopback. Tests marked `own_relay` get a process of their own (to stop,
    restart or read its database); the others share their module's: starting a relay costs more
    than most tests, and their identities, hence mailboxes, are fresh per test anyway."""
    if request.node.get_closest_marker("own_relay") is None:
        shared: RelayProcess = request.getfixturevalue("module_relay")
        if shared.proc is None or shared.proc.poll() is not None:
            raise RuntimeError("the module's relay is gone: a test stopped it without own_relay")
        yield LentRelay(shared.db, shared.port, list(shared.extra))
        return
    r = RelayProcess(tmp_path / "relay" / "relay.db", free_port()).start()
    yield r
    r.stop()


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


@dataclass
class Agent:
    """One identity in its own TALK_HOME, as on its own machine."""

    home: Path
    relay_url: str
    passphrase_file: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. shorter expiry for a test

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TALK_")}
        env["TALK_HOME"] = str(self.home)
        env["TALK_RELAY"] = self.relay_url
        if self.passphrase_file is not None:
            env["TALK_PASSPHRASE_FILE"] = str(self.passphrase_file)
        return {**env, **self.extra_env}

    def run(self, *args: str, stdin: str | None = None, timeout: float = 30) -> Result:
        # No stdin unless given: a command must behave as it does for an agent, off a terminal.
        feed: dict[str, Any] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
        p = subprocess.run(
            [TALK, *args], capture_output=True, text=True, env=self.env(), timeout=timeout, **feed,
        )
        return Result(p.returncode, p.stdout, p.stderr)

    def ok(self, *args: str, stdin: str | None = None) -> Result:
        r = self.run(*args, stdin=stdin)
        assert r.code == 0, f"talk {' '.join(args)} exited {r.code}: {r.err}"
        return r


def make_agent(tmp_path: Path, relay: RelayProcess, name: str, passphrase: str | None) -> Agent:
    home = tmp_path / f"home-{name}"
    pfile = None
    if passphrase is not None:
        pfile = tmp_path / f"{name}.pass"
        pfile.write_text(passphrase + "\n")
        pfile.chmod(0o600)
    agent = Agent(home, relay.url, pfile)
    flag = [] if pfile else ["--no-passphrase"]
    agent.ok("init", name, *flag)
    return agent


def befriend(inviter: Agent, joiner: Agent) -> None:
    """invite → join → the inviter's receive accepts → the joiner's receive sees the acceptance."""
    code = inviter.ok("invite", "--json").json()["code"]
    joiner.ok("join", code)
    accepted = inviter.ok("receive").lines()
    assert [m["kind"] for m in accepted] == ["contact_accepted"]
    told = joiner.ok("receive").lines()
    assert [m["kind"] for m in told] == ["contact_accepted"]


@pytest.fixture
def alice(tmp_path: Path, relay: RelayProcess) -> Agent:
    return make_agent(tmp_path, relay, "alice", "correct horse battery staple")


@pytest.fixture
def bob(tmp_path: Path, relay: RelayProcess) -> Agent:
    return make_agent(tmp_path, relay, "bob", None)


@pytest.fixture
def pair(alice: Agent, bob: Agent) -> tuple[Agent, Agent]:
    befriend(alice, bob)
    return alice, bob


# --- real agent hosts (tests/hosts) -------------------------------------------------------------

@pytest.fixture(scope="session")
def host_bin() -> Path:
    """tests/hosts/node_modules/.bin with opencode, codex, claude (npm ci on first use; else skip)."""
    return hosts_npm.host_bin()


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    with FakeModel() as model:
        yield model


@pytest.fixture
def host_home(tmp_path: Path) -> Iterator[Path]:
    """A throwaway HOME; any process still running with it is killed on teardown."""
    home = tmp_path / "home"
    home.mkdir()
    yield home
    reap_home(home)


@pytest.fixture
def host_procs(host_home: Path) -> Iterator[ProcessGroup]:
    """Processes started here are killed (tree and group, by pid) before host_home is reaped."""
    with ProcessGroup() as group:
        yield group


def wait_for(check: Callable[[], T | None], timeout: float, what: str, step: float = 0.05) -> T:
    """Poll `check` every `step` seconds until it returns something true, and return that; fail
    with `what` after `timeout` seconds. The one way the tests wait: on a condition, never a sleep."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An identity folder `bob` as the alarms find it (they read no keys: only the spool)."""
    home = tmp_path / "talk-home"
    (home / "bob").mkdir(parents=True)
    (home / "bob" / "identity.json").write_text("{}")
    return home / "bob"
