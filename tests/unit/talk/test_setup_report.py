"""talk.setup_report: which hosts count as installed, what is left to do for each, and the screen."""

from __future__ import annotations

from alarms.wiring import State
from talk.setup_report import (
    FollowerReport,
    HostReport,
    SetupReport,
    by_hand,
    launch_command,
    needs_setup,
    render,
    to_json,
)


def host(name: str, state: State, on_path: bool = True, **more: object) -> HostReport:
    given: dict[str, object] = {"detail": f"{name} detail", "fix": "", "door": f"{name} door",
                                "installs": True, **more}
    return HostReport(name, name.title(), on_path, state, **given)  # type: ignore[arg-type]


def test_a_host_is_installed_by_its_program_on_path_or_its_folder() -> None:
    assert host("a", State.ABSENT, on_path=True).installed
    assert host("a", State.UNWIRED, on_path=False).installed
    assert not host("a", State.ABSENT, on_path=False).installed


def test_the_command_for_a_door_setup_cannot_open_is_given_not_guessed() -> None:
    url = ("--url", "URL", "The server, e.g. http://127.0.0.1:4096.")
    assert by_hand("srv", [url]) == "talk door srv --url URL  (URL: The server, e.g. http://127.0.0.1:4096)"
    assert by_hand("hooks", []) == ""


def test_what_is_left_is_the_failure_then_the_wirings_fix_then_the_door_to_open() -> None:
    assert host("a", State.WIRED).todo == ""
    assert host("a", State.INCOMPLETE, fix="enable it").todo == "enable it"
    assert host("a", State.UNTRUSTED, fix="approve them", failure="no program").todo == "approve them"
    assert host("a", State.UNWIRED, failure="refused").todo == "talk install a"
    opened = host("a", State.ABSENT, start="talk door a --url URL", installs=False)
    assert opened.todo == "talk door a --url URL" and opened.label == "door to start"
    assert host("a", State.WIRED, start="talk door a --url URL").todo == ""


def test_doctor_names_installed_hosts_setup_would_wire() -> None:
    rows = [host("wired", State.WIRED), host("bare", State.UNWIRED), host("new", State.ABSENT),
            host("gone", State.ABSENT, on_path=False), host("daemon", State.ABSENT, installs=False),
            host("half", State.INCOMPLETE)]
    assert [h.name for h in needs_setup(rows)] == ["bare", "new"]


def test_the_screen_and_the_json_say_the_same() -> None:
    rows = [host("alpha", State.WIRED, sessions=("s1", "s2"), launch=launch_command("alpha")),
            host("beta", State.INCOMPLETE, fix="beta enable talk"),
            host("gamma", State.ABSENT, on_path=False)]
    report = SetupReport("bob", rows, FollowerReport(True, 42, True, "started (pid 42)"), "/x/setup.json")
    screen = render(report)
    assert screen.splitlines()[:3] == ["talk setup for bob", "follower: started (pid 42)",
                                       "Alpha        wired           2 live: s1, s2"]
    assert "  start its sessions with: talk run alpha" in screen and "  to do: beta enable talk" in screen
    assert "no session yet" in screen
    assert "not found here: Gamma" in screen and "talk setup --undo" in screen
    data = to_json(report)
    assert [(h["host"], h["installed"], h["todo"]) for h in data["hosts"]] == [
        ("alpha", True, None), ("beta", True, "beta enable talk"), ("gamma", False, None)]
    assert data["follower"] == {"running": True, "pid": 42, "started": True, "said": "started (pid 42)",
                                "todo": None}


def test_a_host_with_no_live_session_says_when_a_new_one_takes_mail() -> None:
    idle = host("a", State.WIRED, reach="from its first prompt")
    busy = host("b", State.WIRED, reach="from its first second", sessions=("s1",))
    screen = render(SetupReport("me", [idle, busy], None, "snap"))
    assert "  a new session takes mail from its first prompt" in screen
    assert "from its first second" not in screen  # b has a live session: nothing to wait for
    assert to_json(SetupReport("me", [idle], None, "snap"))["hosts"][0]["reach"] == "from its first prompt"
