"""The shared judgement of a host's wiring: which program of a hook is gone, what hooks found per
event amount to, an MCP server joined in, and a corrupt file turned into a line, not a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

from alarms.wiring import State, Wiring, guarded, judge_hooks, missing_program, with_mcp_server
from durable.errors import UserError

WHERE = Path("/h/settings.json")
OK = f"{sys.executable} -I -S {__file__}"


def test_missing_program_names_the_program_or_script_that_is_gone(tmp_path: Path) -> None:
    assert missing_program(OK) is None
    assert missing_program([sys.executable, "-m", "talk"]) is None
    assert missing_program("/gone/python -I x.py") == "/gone/python"
    script = "/gone/alarms/codex_hook.py"
    assert missing_program(f"{sys.executable} -I -S {script}") == script
    assert missing_program("no-such-program-here --x", {"PATH": str(tmp_path)}) == "no-such-program-here"
    assert missing_program("sh -c true", {"PATH": "/bin:/usr/bin"}) is None
    assert missing_program("") == "(an empty command)"
    not_executable = tmp_path / "python"
    not_executable.write_text("")
    assert missing_program([str(not_executable)]) == str(not_executable)


def test_judge_hooks_orders_not_wired_stale_incomplete_wired() -> None:
    events = ("Start", "Stop")
    assert judge_hooks("h", {}, events, "talk install h", WHERE).state is State.UNWIRED
    stale = judge_hooks("h", {"Start": ["/gone/py x"], "Stop": [OK]}, events, "talk install h", WHERE)
    assert (stale.state, stale.status, stale.fix) == (State.STALE, "fail", "talk install h")
    assert "/gone/py" in stale.detail and str(WHERE) in stale.detail
    part = judge_hooks("h", {"Start": [OK]}, events, "talk install h", WHERE)
    assert (part.state, part.status) == (State.INCOMPLETE, "warn") and "Stop" in part.detail
    assert judge_hooks("h", {"Start": [OK], "Stop": [OK]}, events, "again", WHERE).status == "ok"


def test_an_mcp_server_missing_or_stale_spoils_wired_hooks_only() -> None:
    wired = Wiring("h", State.WIRED, "hooks")
    assert with_mcp_server(wired, None, WHERE, "again").state is State.INCOMPLETE
    gone = with_mcp_server(wired, {"command": "/gone/talk", "args": ["mcp"]}, WHERE, "again")
    assert gone.state is State.STALE and "/gone/talk" in gone.detail
    ok = with_mcp_server(wired, {"command": sys.executable, "args": ["-m", "talk", "mcp"]}, WHERE, "again")
    assert ok.state is State.WIRED and str(WHERE) in ok.detail
    unwired = Wiring("h", State.UNWIRED, "none")
    assert with_mcp_server(unwired, None, WHERE, "again") is unwired


def test_guarded_turns_unreadable_config_into_a_warning_naming_the_file() -> None:
    def corrupt() -> Wiring:
        raise UserError(f"{WHERE} is not valid JSON")

    def bad_shape() -> Wiring:
        raise ValueError('"hooks" is not an object')

    unreadable = guarded("h", "talk install h", WHERE, corrupt)
    assert (unreadable.status, unreadable.fix) == ("warn", "talk install h")
    assert str(WHERE) in unreadable.detail
    shape = guarded("h", "talk install h", WHERE, bad_shape)
    assert shape.state is State.UNREADABLE and shape.detail == f'{WHERE}: "hooks" is not an object'
