"""Imports run one way (see the design's Layout): each package imports only the ones below it.

Every import of one of our packages counts, wherever it is written: at the top, inside a
function (the lazy imports that keep hooks fast), or under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OURS = ("durable", "keys", "relay", "follower", "spool_writer", "alarms", "talk")
ALLOWED: dict[str, set[str]] = {
    "durable": set(),
    "keys": {"durable"},
    "relay": {"keys", "durable"},
    "follower": {"keys", "spool_writer", "durable"},
    "spool_writer": {"durable"},
    "alarms": {"spool_writer", "durable"},
    "talk": {"durable", "keys", "relay", "follower", "spool_writer", "alarms"},
}


def imported_modules(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def edges(package: str) -> list[tuple[str, int, str]]:
    """(file, line, imported package) for every import of another package of ours in `package`."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            for module in imported_modules(node):
                top = module.split(".")[0]
                if top in OURS and top != package:
                    found.append((str(path.relative_to(ROOT)), getattr(node, "lineno", 0), top))
    return found


def test_every_package_imports_only_what_is_below_it() -> None:
    violations = [f"{file}:{line}: {package} -> {target}"
                  for package in OURS for file, line, target in edges(package)
                  if target not in ALLOWED[package]]
    assert not violations, "imports against the one-way rule:\n" + "\n".join(violations)


def test_the_rule_sees_imports_inside_functions_and_type_checking_blocks(tmp_path: Path) -> None:
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from talk import cli\n"
              "def f() -> None:\n    import keys.gate\n")
    found = [m for node in ast.walk(ast.parse(source)) for m in imported_modules(node)]
    assert found == ["typing", "talk", "keys.gate"]


def test_every_package_is_checked() -> None:
    on_disk = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench"}
    assert on_disk <= set(OURS), f"a package the rule does not know: {on_disk - set(OURS)}"


# The tests mirror the code: unit tests in tests/unit/<package>/[<sub>/], process tests in tests/e2e/, host
# tests in tests/hosts/; only these project-wide checks sit at the top. Helpers two tests share live
# in a helper module, never in a test module another test imports.
TOP_LEVEL_TESTS = {"test_import_rule.py", "test_quality.py"}


def test_tests_live_where_the_layout_says() -> None:
    tests = ROOT / "tests"
    misplaced = [str(p.relative_to(ROOT)) for p in sources_under_tests("test_*.py")
                 if not (p.parent == tests and p.name in TOP_LEVEL_TESTS)
                 and p.relative_to(tests).parts[0] not in {"unit", "e2e", "hosts"}]
    stray_units = [str(p.relative_to(ROOT)) for p in (tests / "unit").glob("*/")
                   if p.is_dir() and p.name != "__pycache__" and p.name not in {*OURS, "bench"}]
    # deeper folders mirror the package's own subpackages: tests/unit/alarms/codex/ for alarms/codex/
    unmirrored = [str(p.relative_to(ROOT)) for p in (tests / "unit").glob("*/*/")
                  if p.is_dir() and p.name != "__pycache__"
                  and not (ROOT / p.relative_to(tests / "unit") / "__init__.py").is_file()]
    assert not misplaced and not stray_units and not unmirrored, misplaced + stray_units + unmirrored


def imported_test_modules(node: ast.AST) -> list[str]:
    """Test modules of ours that `node` imports, `from tests import test_x` included."""
    named = []
    if isinstance(node, ast.ImportFrom) and node.module:
        named = [f"{node.module}.{alias.name}" for alias in node.names]
    return [m for m in imported_modules(node) + named
            if m.startswith("tests.") and m.rsplit(".", 1)[-1].startswith("test_")]


def sources_under_tests(pattern: str) -> list[Path]:
    """Our files under tests/, not the host programs npm installs there (Node ships Python files)."""
    return sorted(p for p in (ROOT / "tests").rglob(pattern) if "node_modules" not in p.parts)


def test_no_test_imports_another_test_module() -> None:
    found = [f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}: {module}"
             for path in sources_under_tests("*.py")
             for node in ast.walk(ast.parse(path.read_text()))
             for module in imported_test_modules(node)]
    assert not found, "tests importing test modules (move the helper out):\n" + "\n".join(found)


def test_the_test_import_check_sees_both_forms() -> None:
    source = "from tests import test_relay_api as api\nfrom tests.e2e.test_follower import status\n"
    assert [m for node in ast.walk(ast.parse(source)) for m in imported_test_modules(node)] == [
        "tests.test_relay_api", "tests.e2e.test_follower"]
