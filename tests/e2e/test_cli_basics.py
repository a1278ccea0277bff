"""The basics a person expects of the command, through the real `talk`: a version, `-h` on every
command, no empty message, stdin as `echo` writes it, and one way to name a session."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import urllib.request
from importlib.metadata import version
from pathlib import Path

from tests.conftest import TALK, Agent, RelayProcess, befriend, free_port, make_agent, wait_for
from tests.e2e.terminal import on_a_terminal

EMPTY = "talk: error: the message is empty; give the text to send (or - to read it from stdin)"


def talk(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALK_")}
    return subprocess.run([TALK, *args], capture_output=True, text=True, env=env, timeout=30,
                          stdin=subprocess.DEVNULL)


def test_version_in_both_spellings_is_the_installed_one() -> None:
    for flag in ("--version", "-V"):
        done = talk(flag)
        assert (done.returncode, done.stdout, done.stderr) == (0, f"talk {version('talk-mailbox')}\n", "")


def test_dash_h_is_help_on_the_command_and_on_every_subcommand() -> None:
    commands: list[list[str]] = [[], ["send"], ["session"], ["session", "unregister"], ["invite", "list"],
                                 ["install", "codex"]]
    for argv in commands:
        done = talk(*argv, "-h")
        assert done.returncode == 0, (argv, done.stderr)
        assert "Usage: talk" in done.stdout and "--help" in done.stdout, argv


def test_an_empty_or_blank_message_is_refused_and_nothing_is_sent(pair: tuple[Agent, Agent]) -> None:
    alice, _ = pair
    for text, stdin in (("", None), ("  \n ", None), ("-", "\n")):
        r = alice.run("send", "bob", text, stdin=stdin)
        assert r.code == 1 and r.out == "" and "Traceback" not in r.err, (text, r.err)
        assert r.err.strip() == EMPTY
    assert alice.ok("outbox", "--json").json() == []


def test_stdin_loses_the_one_line_break_echo_adds_and_keeps_the_rest(pair: tuple[Agent, Agent]) -> None:
    alice, bob = pair
    alice.ok("send", "bob", "-", stdin="first line\n")
    alice.ok("send", "bob", "-", stdin="two lines\nkept\n\n")
    alice.ok("send", "bob", "-", stdin="windows\r\n")
    texts = [m["text"] for m in bob.ok("receive").lines()]
    assert texts == ["first line", "two lines\nkept\n", "windows"]


def test_session_unregister_takes_the_id_as_register_does(bob: Agent) -> None:
    pid = str(os.getpid())
    for sid in ("s1", "s2"):
        bob.ok("session", "register", "--host", "codex", "--id", sid, "--pid", pid)
    assert bob.ok("session", "unregister", "--id", "s1", "--json").json() == {"sid": "s1", "moved": 0}
    older_form = bob.ok("session", "unregister", "s2", "--json").json()
    assert older_form == {"sid": "s2", "moved": 0}
    for argv in ([], ["s3", "--id", "s3"]):
        r = bob.run("session", "unregister", *argv)
        assert r.code == 1 and r.err.strip().startswith("talk: error: name the session once"), r.err


def test_whoami_lists_the_identities_and_marks_the_one_commands_use(
    tmp_path: Path, relay: RelayProcess
) -> None:
    bob = make_agent(tmp_path, relay, "bob", None)
    assert bob.ok("whoami").out.splitlines() == [
        f"* bob  {bob.ok('id', '--json').json()['fingerprint']}  {relay.url}  (keys not encrypted)"]
    Agent(bob.home, relay.url).ok("init", "amy", "--no-passphrase")
    both = bob.ok("whoami", "--json").json()
    assert both["default"] is None and [i["name"] for i in both["identities"]] == ["amy", "bob"]
    assert "pick one with -u NAME" in bob.ok("whoami").out
    chosen = bob.ok("whoami", "-u", "amy", "--json").json()
    assert chosen["default"] == "amy" and [i["default"] for i in chosen["identities"]] == [True, False]
    wrong = bob.run("whoami", "-u", "carol")
    assert wrong.code == 1 and "no identity 'carol'" in wrong.err and "talk init carol" in wrong.err
    empty = Agent(tmp_path / "nobody", relay.url).ok("whoami")
    assert "no identity in" in empty.out and "talk init NAME" in empty.out


def test_policy_without_a_name_lists_every_contacts_rule(pair: tuple[Agent, Agent]) -> None:
    _, bob = pair
    listed = bob.ok("policy", "--json").json()["policies"]
    assert [(r["name"], r["policy"]) for r in listed] == [("alice", "accept")]
    assert bob.ok("policy").out.startswith("alice: accept, ")
    refused = bob.run("policy", "--receive-rate", "5")  # a change needs a name
    assert refused.code == 1 and "name the contact to change" in refused.err
    lonely = Agent(bob.home.parent / "home-nobody", bob.relay_url)
    lonely.ok("init", "nobody", "--no-passphrase")
    assert "no contacts yet" in lonely.ok("policy").out


def test_the_relay_says_it_listens_once_it_does_and_says_when_it_stopped(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALK_")}
    relay = subprocess.Popen([TALK, "relay", "--port", str(port), "--db", str(tmp_path / "relay.db")],
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert relay.stderr is not None
        first = relay.stderr.readline()
        assert first.startswith(f"talk: relay listening on http://127.0.0.1:{port}")
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # it said so only once the port took connections
        health = f"http://127.0.0.1:{port}/healthz"
        wait_for(lambda: urllib.request.urlopen(health, timeout=5).status == 200, 30, "the relay to serve")
        relay.send_signal(signal.SIGTERM)
        rest = relay.communicate(timeout=30)[1]
    finally:
        if relay.poll() is None:
            relay.kill()
    assert relay.returncode in (0, -signal.SIGTERM), rest  # uvicorn ends by the signal it shut down on
    assert f"relay on http://127.0.0.1:{port} stopped" in rest and "Traceback" not in rest


def test_a_terminal_is_asked_for_the_passphrase_without_echo(tmp_path: Path, relay: RelayProcess) -> None:
    secret = "correct horse battery staple"
    alice = Agent(tmp_path / "home-alice", relay.url)
    asked = [("a passphrase for alice's keys: ", secret), ("the same again: ", secret)]
    code, shown = on_a_terminal(alice, "init", "alice", typed=asked)
    assert code == 0, shown
    assert "a passphrase for alice's keys:" in shown and "the same again:" in shown and secret not in shown
    assert alice.ok("whoami", "--json").json()["identities"][0]["passphrase"] is True
    bob = make_agent(tmp_path, relay, "bob", None)
    pfile = tmp_path / "alice.pass"
    pfile.write_text(secret + "\n")
    pfile.chmod(0o600)
    befriend(bob, Agent(alice.home, relay.url, pfile))  # off a terminal her commands need the file
    code, shown = on_a_terminal(alice, "send", "bob", "typed at a prompt",
                                typed=[("passphrase for alice: ", secret)])
    assert code == 0 and "passphrase for alice:" in shown and secret not in shown, shown
    assert [m["text"] for m in bob.ok("receive").lines()] == ["typed at a prompt"]
    wrong = [("passphrase for alice: ", "not it")]
    code, shown = on_a_terminal(alice, "send", "bob", "wrong one", typed=wrong)
    assert code != 0 and "passphrase" in shown and "Traceback" not in shown
    off = alice.run("send", "bob", "off a terminal")  # no file, no terminal: says what to do
    assert off.code != 0 and "passphrase" in off.err
    follow = alice.run("follow")
    assert follow.code == 1 and "cannot ask for the passphrase" in follow.err


def test_shell_completion_is_offered_and_completes_commands() -> None:
    script = talk("--show-completion", "bash")
    assert script.returncode == 0 and "_talk_completion" in script.stdout
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALK_")}
    env.update(_TALK_COMPLETE="complete_bash", COMP_WORDS="talk se", COMP_CWORD="1")
    done = subprocess.run([TALK], capture_output=True, text=True, env=env, timeout=30,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and done.stdout.split() == ["send", "setup", "session"], done.stderr
