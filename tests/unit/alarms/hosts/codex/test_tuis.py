"""alarms.hosts.codex.tuis: the waker it starts finds `alarms` from where the hook runs it (by path,
without site-packages), and not from inside the package (alarms/mailbox.py would shadow the
standard library's)."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path
from typing import Any

import pytest

from alarms.hosts.codex import tuis


def test_the_waker_is_started_with_the_folder_holding_alarms_on_its_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []

    def popen(argv: list[str], **_: Any) -> None:
        started.append(argv)

    monkeypatch.setattr(subprocess, "Popen", popen)
    tuis.start_waker(tmp_path)
    (argv,) = started
    code = argv[argv.index("-c") + 1]
    (root,) = [node.args[1].value for node in ast.walk(ast.parse(code))
               if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "insert"
               and isinstance(node.args[1], ast.Constant)]
    assert (Path(str(root)) / "alarms" / "hosts" / "codex" / "waker.py").is_file()
    assert argv[-2:] == ["--folder", str(tmp_path)]
