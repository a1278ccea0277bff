"""spool_writer.sessions: one copy per live session, the fallback inbox, takeover, gc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable.errors import NotFound, UserError
from spool_writer import lines
from spool_writer.cursor import CursorReader
from spool_writer.layout import oldest_first
from spool_writer.process import alive, start_time
from spool_writer.record import SpoolRecord
from spool_writer.registry import stand_in_sid
from spool_writer.sessions import gc, list_sessions, register, session_of, unregister
from spool_writer.spool import Spool
from tests.conftest import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def message(msg_id: str) -> SpoolRecord:
    return {"id": msg_id, "from": "a" * 32, "name": "alice", "text": f"text of {msg_id}",
            "ts": "2024-01-01T00:00:00Z", "kind": "chat"}


def ids_in(spool_file: Path) -> list[str]:
    return [json.loads(line)["id"] for p in oldest_first(spool_file) for line in lines.read_lines(p)]


class Hosts:
    """Real processes standing in for agent host programs."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> int:
        p = subprocess.Popen(["sleep", "60"])
        self.procs.append(p)
        return p.pid

    def stop(self, pid: int) -> None:
        for p in self.procs:
            if p.pid == pid:
                p.kill()
                p.wait()


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    h = Hosts()
    yield h
    for p in h.procs:
        p.kill()
        p.wait()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "spool"


def session_file(root: Path, sid: str) -> Path:
    return root / "sessions" / f"{sid}.ndjson"


def test_with_no_session_mail_waits_in_the_inbox(root: Path) -> None:
    Spool(root).deliver(message("m1"))
    assert ids_in(root / "inbox.ndjson") == ["m1"]
    assert list_sessions(root) == []


def test_three_live_sessions_each_get_their_own_copy(root: Path, hosts: Hosts) -> None:
    for sid, host in [("s1", "claude"), ("s2", "codex"), ("s3", "opencode")]:
        register(root, host, sid, hosts.start())
    spool = Spool(root)
    spool.deliver(message("m1"))
    spool.deliver(message("m2"))
    for sid in ("s1", "s2", "s3"):
        assert ids_in(session_file(root, sid)) == ["m1", "m2"]
    assert not (root / "inbox.ndjson").exists()


def test_a_session_whose_host_exited_gets_no_new_mail(root: Path, hosts: Hosts) -> None:
    gone, live = hosts.start(), hosts.start()
    register(root, "claude", "gone", gone)
    register(root, "claude", "live", live)
    Spool(root).deliver(message("m1"))
    hosts.stop(gone)
    Spool(root).deliver(message("m2"))
    assert ids_in(session_file(root, "gone")) == ["m1"]
    assert ids_in(session_file(root, "live")) == ["m1", "m2"]
    hosts.stop(live)
    Spool(root).deliver(message("m3"))  # nobody live: the inbox, not a dead session
    assert ids_in(root / "inbox.ndjson") == ["m3"]


def test_one_spool_sees_sessions_come_and_go(root: Path, hosts: Hosts) -> None:
    """A long-lived writer (the follower's) keeps the registry parsed: each change is seen."""
    spool = Spool(root)
    spool.deliver(message("m1"))
    first = hosts.start()
    register(root, "claude", "s1", first)
    spool.deliver(message("m2"))
    register(root, "codex", "s2", hosts.start())
    spool.deliver(message("m3"))
    hosts.stop(first)
    spool.deliver(message("m4"))  # the registry is the same; the liveness is asked each time
    assert ids_in(session_file(root, "s1"))[-2:] == ["m2", "m3"]
    assert ids_in(session_file(root, "s2"))[-2:] == ["m3", "m4"]
    unregister(root, "s2")
    spool.deliver(message("m5"))
    assert ids_in(root / "inbox.ndjson")[-1] == "m5"
    assert ids_in(session_file(root, "s1"))[-1] == "m3"


def test_gc_hands_back_only_unread_lines_and_keeps_live_sessions(root: Path, hosts: Hosts) -> None:
    gone, live = hosts.start(), hosts.start()
    register(root, "codex", "gone", gone)
    register(root, "claude", "live", live)
    spool = Spool(root)
    for i in range(2):
        spool.deliver(message(f"m{i}"))
    reader = CursorReader(session_file(root, "gone"), root / "sessions" / "gone.cursor")
    assert [r["id"] for r in reader.take()] == ["m0", "m1"]
    for i in range(2, 5):
        spool.deliver(message(f"m{i}"))
    hosts.stop(gone)
    actions = gc(root)
    assert actions == [f"moved 3 unread lines of session gone to the inbox; removed its spool "
                       f"(its host process {gone} is gone)"]
    assert ids_in(root / "inbox.ndjson") == ["m2", "m3", "m4"]
    assert sorted(p.name for p in (root / "sessions").iterdir()) == ["live.ndjson"]
    assert ids_in(session_file(root, "live")) == [f"m{i}" for i in range(5)]
    assert [s.sid for s in list_sessions(root)] == ["live"]
    assert gc(root) == []


def test_gc_retires_a_session_nobody_wrote_or_read_for_idle_days(root: Path, hosts: Hosts) -> None:
    register(root, "other", "idle", hosts.start())
    Spool(root).deliver(message("m1"))
    assert gc(root, idle_days=14) == []
    actions = gc(root, idle_days=14, now=time.time() + 15 * 86400)
    assert len(actions) == 1 and actions[0].startswith("moved 1 unread line of session idle to the inbox")
    assert ids_in(root / "inbox.ndjson") == ["m1"]


def test_a_registering_session_takes_the_inbox_over_and_the_next_one_does_not(
    root: Path, hosts: Hosts
) -> None:
    spool = Spool(root, max_bytes=1, generations=10)  # the inbox has generations: oldest first
    for i in range(3):
        spool.deliver(message(f"m{i}"))
    first = register(root, "claude", "first", hosts.start())
    second = register(root, "claude", "second", hosts.start())
    assert (first.took_over, second.took_over) == (3, 0)
    assert ids_in(first.spool) == ["m0", "m1", "m2"]
    assert ids_in(second.spool) == []
    assert not any(root.glob("inbox.ndjson*"))


REGISTER = """
import sys
from pathlib import Path
from spool_writer.sessions import register
print(register(Path(sys.argv[1]), "codex", sys.argv[2], int(sys.argv[3])).took_over)
"""


def test_two_sessions_registering_at_once_one_gets_the_inbox(root: Path, hosts: Hosts) -> None:
    spool = Spool(root)
    for i in range(200):
        spool.deliver(message(f"m{i}"))
    procs = [subprocess.Popen([sys.executable, "-c", REGISTER, str(root), sid, str(hosts.start())],
                              env=ENV, stdout=subprocess.PIPE, text=True) for sid in ("x", "y")]
    took = sorted(int(p.communicate(timeout=60)[0]) for p in procs)
    assert took == [0, 200]
    assert sorted(len(ids_in(session_file(root, sid))) for sid in ("x", "y")) == [0, 200]


def test_unregister_hands_unread_lines_back_and_removes_the_files(root: Path, hosts: Hosts) -> None:
    register(root, "claude", "s1", hosts.start())
    spool = Spool(root)
    spool.deliver(message("m1"))
    CursorReader(session_file(root, "s1"), root / "sessions" / "s1.cursor").take()
    spool.deliver(message("m2"))
    assert [s.unread for s in list_sessions(root)] == [1]
    assert unregister(root, "s1") == 1
    assert ids_in(root / "inbox.ndjson") == ["m2"]
    assert list(root.joinpath("sessions").iterdir()) == []
    with pytest.raises(NotFound, match="talk session list"):
        unregister(root, "s1")


def test_without_a_cursor_every_line_is_unread(root: Path, hosts: Hosts) -> None:
    register(root, "claude", "s1", hosts.start())
    spool = Spool(root, max_bytes=1, generations=10)
    for i in range(3):
        spool.deliver(message(f"m{i}"))
    assert unregister(root, "s1", max_bytes=1, generations=10) == 3
    assert ids_in(root / "inbox.ndjson") == ["m0", "m1", "m2"]


def test_a_reused_pid_is_not_the_registered_host(root: Path, hosts: Hosts) -> None:
    pid = hosts.start()
    register(root, "claude", "s1", pid)
    registry = json.loads((root / "sessions.json").read_text())
    assert registry["sessions"]["s1"]["pid_start"] == start_time(pid)
    registry["sessions"]["s1"]["pid_start"] -= 1  # as if another process had held this pid before
    (root / "sessions.json").write_text(json.dumps(registry))
    assert [s.alive for s in list_sessions(root)] == [False]
    Spool(root).deliver(message("m1"))
    assert ids_in(root / "inbox.ndjson") == ["m1"]


@pytest.mark.parametrize("sid", ["", ".hidden", "a/b", "..", "x" * 129, "spa ce", "new\nline"])
def test_a_session_id_that_cannot_be_a_file_name_is_refused(root: Path, sid: str) -> None:
    with pytest.raises(UserError, match="session id"):
        register(root, "claude", sid, os.getpid())


def test_register_refuses_a_process_that_is_not_running(root: Path) -> None:
    p = subprocess.Popen(["true"])
    p.wait()
    with pytest.raises(UserError, match="--pid"):
        register(root, "claude", "s1", p.pid)
    with pytest.raises(UserError, match="bad host name"):  # which names exist is alarms.registry's
        register(root, "Not a host!", "s1", os.getpid())


def test_gc_hands_back_a_spool_no_registry_entry_names(root: Path) -> None:
    orphan = session_file(root, "orphan")  # as a crash inside register, before the registry write
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(lines.encode(message("m1")))
    assert gc(root) == ["moved 1 unread line of unregistered spool orphan to the inbox; removed it"]
    assert ids_in(root / "inbox.ndjson") == ["m1"]
    assert not orphan.exists()


def test_a_takeover_repeated_after_a_crash_adds_nothing_twice(root: Path, hosts: Hosts) -> None:
    Spool(root).deliver(message("m1"))
    inbox = root / "inbox.ndjson"
    saved = inbox.read_bytes()
    register(root, "claude", "s1", hosts.start())
    inbox.write_bytes(saved)  # as a kill after the copy, before the inbox was removed
    assert register(root, "claude", "s1", hosts.start()).took_over == 0
    assert ids_in(session_file(root, "s1")) == ["m1"]


# The `talk` commands, run as real processes against an identity in a temporary TALK_HOME.

TALK = str(Path(sys.executable).with_name("talk"))


def talk(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALK_")}
    env.update(TALK_HOME=str(home), PYTHONPATH=str(REPO))
    return subprocess.run([TALK, *args], capture_output=True, text=True, env=env, timeout=30)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An identity `bob`; its keys cannot be published (no relay), which these commands never need."""
    home = tmp_path / "home"
    r = talk(home, "init", "bob", "--no-passphrase", "--relay", "http://127.0.0.1:9")
    assert r.returncode == 3 and (home / "bob" / "identity.json").exists(), r.stderr
    return home


def test_cli_session_register_list_unregister(home: Path, hosts: Hosts) -> None:
    root = home / "bob" / "spool"
    Spool(root).deliver(message("m1"))
    pid = hosts.start()
    r = talk(home, "session", "register", "--host", "claude", "--id", "s1", "--pid", str(pid), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"sid": "s1", "host": "claude", "pid": pid,
                                    "spool": str(session_file(root, "s1")), "took_over": 1}
    r = talk(home, "session", "list", "--json")
    assert json.loads(r.stdout) == [{"sid": "s1", "host": "claude", "pid": pid, "alive": True,
                                     "spool": str(session_file(root, "s1")), "unread": 1}]
    r = talk(home, "session", "unregister", "s1", "--json")
    assert json.loads(r.stdout) == {"sid": "s1", "moved": 1}
    assert ids_in(root / "inbox.ndjson") == ["m1"]
    r = talk(home, "session", "unregister", "s1")
    assert r.returncode == 1 and "talk session list" in r.stderr and "Traceback" not in r.stderr


def talk_under(home: Path, program: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`talk ARGS` run as the child of a shell script named like a host program (its process name
    is the script's name); the script prints its own pid on stderr first."""
    program.parent.mkdir(parents=True, exist_ok=True)
    # Not `exec`: the script must stay the parent, as a host stays above the shell it starts.
    program.write_text('#!/bin/sh\necho "host-pid $$" >&2\n"$@"\nstatus=$?\nexit $status\n')
    program.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALK_")}
    env.update(TALK_HOME=str(home), PYTHONPATH=str(REPO))
    return subprocess.run([str(program), TALK, *args], capture_output=True, text=True, env=env, timeout=30)


def test_cli_register_without_pid_finds_the_host_above_it(home: Path, tmp_path: Path) -> None:
    """The bug: with no --pid the calling program (a shell that ends at once) was recorded, so the
    session was gone as it began. Now the nearest process running the host is."""
    r = talk_under(home, tmp_path / "bin" / "codex", "session", "register", "--host", "codex", "--id", "s2",
                   "--json")
    assert r.returncode == 0, r.stderr
    host = int(r.stderr.split("host-pid ")[1].split()[0])
    assert json.loads(r.stdout)["pid"] == host != os.getpid()


def test_cli_register_without_pid_refuses_when_no_host_runs_above(home: Path) -> None:
    for host in ("codex", "other"):
        r = talk(home, "session", "register", "--host", host, "--id", "s2")
        assert r.returncode == 1 and "--pid" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    assert json.loads(talk(home, "session", "list", "--json").stdout) == []


def test_cli_register_checks_its_input(home: Path, hosts: Hosts) -> None:
    pid = str(hosts.start())
    r = talk(home, "session", "register", "--host", "codex", "--id", ".hidden", "--pid", pid)
    assert r.returncode == 1 and "session id" in r.stderr
    r = talk(home, "session", "register", "--host", "emacs", "--id", "s3", "--pid", pid)
    assert r.returncode != 0 and "emacs" in r.stderr
    r = talk(home, "session", "register", "--host", "codex", "--id", "s2", "--pid", pid)
    assert r.returncode == 0, r.stderr
    r = talk(home, "session", "list")
    assert r.returncode == 0 and r.stdout.startswith("s2 ") and "running" in r.stdout


def test_cli_gc_reports_what_it_removed(home: Path, hosts: Hosts) -> None:
    pid = hosts.start()
    r = talk(home, "session", "register", "--host", "opencode", "--id", "s1", "--pid", str(pid))
    assert r.returncode == 0, r.stderr
    Spool(home / "bob" / "spool").deliver(message("m1"))
    assert json.loads(talk(home, "gc", "--json").stdout) == {"actions": []}
    hosts.stop(pid)
    r = talk(home, "gc", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"actions": [f"moved 1 unread line of session s1 to the inbox; "
                                                f"removed its spool (its host process {pid} is gone)"]}
    assert talk(home, "gc").stdout == "nothing to clean up\n"


def test_a_delivery_cut_short_in_the_inbox_is_not_doubled_by_a_takeover(root: Path, hosts: Hosts) -> None:
    inbox = root / "inbox.ndjson"
    inbox.parent.mkdir(parents=True)
    inbox.write_bytes(lines.encode(message("m1")))  # as a kill after the write, before the index
    Spool(root).deliver(message("m2"))
    register(root, "claude", "s1", hosts.start())  # m1 moves with the note that it reached s1
    assert Spool(root).deliver(message("m1"))  # the follower's redelivery completes it
    assert ids_in(session_file(root, "s1")) == ["m1", "m2"]


def test_the_start_time_is_read_past_a_program_name_with_spaces_and_parens(
    tmp_path: Path, hosts: Hosts
) -> None:
    odd = tmp_path / "agent) 1 2 (x"
    odd.write_bytes(Path("/bin/sleep").read_bytes())
    odd.chmod(0o700)
    proc = subprocess.Popen([str(odd), "60"])
    hosts.procs.append(proc)
    started = start_time(proc.pid)
    assert started is not None
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    assert 0 <= uptime - started / os.sysconf("SC_CLK_TCK") < 10  # it started a moment ago
    assert alive(proc.pid, started) and not alive(proc.pid, started + 1)


# --- one host process, one session ----------------------------------------------------------------

def test_a_stand_in_gives_way_to_the_hosts_own_session_with_its_unread_mail(root: Path, hosts: Hosts) -> None:
    """A door that cannot learn the host's session id (the MCP server) registers a stand-in named
    after the host process; when the host's own door registers for the same process, the stand-in
    goes and its unread mail comes along, so the process is one session and each message is
    handed on once."""
    pid = hosts.start()
    stand_in = stand_in_sid(pid)
    register(root, "claude", stand_in, pid)
    Spool(root).deliver(message("m1"))
    Spool(root).deliver(message("m2"))
    taken = CursorReader(session_file(root, stand_in), root / "sessions" / f"{stand_in}.cursor").take()
    assert [r["id"] for r in taken] == ["m1", "m2"]  # handed on through the stand-in: not again
    Spool(root).deliver(message("m3"))
    reg = register(root, "claude", "claude-sess", pid)
    assert reg.took_over == 1  # m3, the one line the stand-in had not read
    assert [s.sid for s in list_sessions(root)] == ["claude-sess"]
    assert ids_in(session_file(root, "claude-sess")) == ["m3"]
    assert session_of(root, pid) == "claude-sess"


def test_a_door_finds_the_session_of_its_host_process(root: Path, hosts: Hosts) -> None:
    pid, other = hosts.start(), hosts.start()
    assert session_of(root, pid) is None
    register(root, "claude", stand_in_sid(pid), pid)
    assert session_of(root, pid) == stand_in_sid(pid)
    register(root, "codex", "codex-sess", other)
    register(root, "claude", "claude-sess", pid)
    assert session_of(root, pid) == "claude-sess"
    assert session_of(root, other) == "codex-sess"
    hosts.stop(pid)
    assert session_of(root, pid) is None  # a process gone has no session, whatever the registry says


def test_sessions_with_their_own_ids_never_give_way(root: Path, hosts: Hosts) -> None:
    """Two sessions the host named itself may share a process (a host running sub-sessions): only
    stand-ins give way."""
    pid = hosts.start()
    register(root, "opencode", "ses-a", pid)
    register(root, "opencode", "ses-b", pid)
    assert sorted(s.sid for s in list_sessions(root)) == ["ses-a", "ses-b"]
