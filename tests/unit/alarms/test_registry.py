"""alarms.registry: every host in one place, each meeting the door contract, and no production file
outside its host's folder naming a host (by its name in a string, or by importing its modules)."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from alarms.door import DaemonHost, HostPackage
from alarms.hosts import claude, codex, copilot, gemini, opencode, pi, qwen
from alarms.registry import NAMES, OTHER, agent_host, daemon_hosts, host_of, parse_host
from durable.errors import UserError

ROOT = Path(__file__).resolve().parents[3]
PRODUCTION = ("durable", "keys", "relay", "follower", "spool_writer", "alarms", "talk")

# Files that may name a host outside alarms/hosts/<host>/: the registry's one line (the face of
# alarms.hosts, one name per host folder), and the entry points installed configs name by path or
# module (kept where those configs expect them).
MAY_NAME_HOSTS = {
    "alarms/hosts/__init__.py",
    "alarms/claude_hook.py", "alarms/claude_monitor.py", "alarms/claude_monitor.sh", "alarms/pi_door.py",
    "alarms/copilot_hook.py", "alarms/codex_hook.py", "alarms/gemini_hook.py",
    "alarms/qwen.py", "alarms/opencode.py",
}
# A host's name as a word; "opencode-mesh" is the task protocol's name, not the host.
HOST_WORD = re.compile(r"\b(" + "|".join(NAMES) + r")\b(?!-mesh)")


def test_the_registry_names_each_host_package_once_and_each_meets_the_contract() -> None:
    assert len(set(NAMES)) == len(NAMES) and OTHER not in NAMES
    found = {p.parent.name for p in (ROOT / "alarms" / "hosts").glob("*/__init__.py")}
    assert found == set(NAMES)
    typed: list[HostPackage] = [claude, codex, copilot, gemini, opencode, pi, qwen]  # mypy checks them
    assert [h.NAME for h in typed] == list(NAMES) == [host_of(n).NAME for n in NAMES]
    daemons: list[DaemonHost] = [opencode, qwen]  # mypy checks the daemon doors' part too
    assert [h.NAME for h in daemon_hosts()] == [h.NAME for h in daemons]


def test_a_host_name_is_checked_where_a_person_gives_one() -> None:
    assert parse_host("codex") == "codex" and parse_host(OTHER) == OTHER
    with pytest.raises(UserError, match="unknown host 'vim'; use one of: claude, codex"):
        parse_host("vim")


def test_each_hosts_variable_names_it() -> None:
    assert agent_host({"CODEX_SANDBOX": "seatbelt"}) == "Codex"
    assert agent_host({"QWEN_CODE": "1"}) == "Qwen Code"
    assert agent_host({"AI_AGENT": "1"}) == "an agent" and agent_host({}) is None


def test_naming_a_host_imports_only_its_face_not_its_doors_or_install() -> None:
    code = ("import sys\nfrom alarms.registry import agent_host, hosts\nagent_host({})\n"
            "[h.OPTIONS for h in hosts()]\n"
            "print(sorted(m for m in sys.modules if m.startswith('alarms.hosts.') and m.count('.') > 2))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]"


def host_names_in(path: Path) -> list[str]:
    """Hosts `path` names: in string constants other than docstrings, and in the modules it imports."""
    if path.suffix != ".py":
        return HOST_WORD.findall(path.read_text())
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found += HOST_WORD.findall(node.value)
        elif isinstance(node, ast.Import):
            found += [m for alias in node.names if alias.name.startswith("alarms.")
                      for m in HOST_WORD.findall(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("alarms"):
            found += HOST_WORD.findall(node.module) + [a.name for a in node.names if a.name in NAMES]
    return found


def test_no_production_file_outside_a_host_folder_names_a_host() -> None:
    named = {}
    for package in PRODUCTION:
        for path in sorted((ROOT / package).rglob("*")):
            rel = path.relative_to(ROOT)
            in_host_folder = (rel.parts[:2] == ("alarms", "hosts") and len(rel.parts) > 3
                              and rel.parts[2] in NAMES)
            if path.suffix not in (".py", ".sh") or str(rel) in MAY_NAME_HOSTS or in_host_folder:
                continue
            hosts = sorted(set(host_names_in(path)))
            if hosts:
                named[str(rel)] = hosts
    assert not named, (f"host knowledge outside alarms/hosts/<host>/ (move it there, or to the registry): "
                       f"{named}")


def test_the_name_check_sees_strings_and_imports_not_docstrings_or_the_mesh(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text('"""Codex, claude: prose."""\nfrom alarms.hosts.qwen import daemon\n'
                      'import alarms.hosts.pi.door\n'
                      'X = "an opencode-mesh task"\nY = ["gemini"]\n')
    assert sorted(host_names_in(source)) == ["gemini", "pi", "qwen"]


@pytest.mark.parametrize("name", NAMES)
def test_each_host_package_imports_nothing_at_the_top(name: str) -> None:
    code = (f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nbefore = set(sys.modules)\n"
            f"import alarms.hosts.{name}\nnew = set(sys.modules) - before\n"
            "print(sorted(m for m in new if m.partition('.')[0] not in ('alarms', '__future__')\n"
            "             and m not in ('durable', 'durable.faces')))")  # the face's loader: `sys` only
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
    assert name == importlib.import_module(f"alarms.hosts.{name}").NAME


def test_each_launch_host_meets_the_launch_contract() -> None:
    """`talk run HOST` is built from these when talk starts: a host missing one breaks every command."""
    import inspect

    from alarms.registry import launch_hosts

    found = launch_hosts()
    assert {host.NAME for host in found} >= {"codex", "copilot"}
    for host in found:
        assert isinstance(host.RUN_HELP, str) and host.RUN_HELP
        assert isinstance(host.RUN_OPTIONS, tuple)
        assert list(inspect.signature(host.run_session).parameters) == ["folder", "args", "env", "given"]
