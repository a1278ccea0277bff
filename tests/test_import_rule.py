"""Imports run one way (see the design's Layout): each package imports only the ones below it,
no module imports itself round a circle, the subpackages of a package (each taken whole) import
one another without a circle either, and a package with a face is used only through it.

Every import of one of our packages counts, wherever it is written: at the top, inside a
function (the lazy imports that keep hooks fast), or under `if TYPE_CHECKING:`.

A face (`durable.faces`) is the `__all__` of a package's `__init__`: its public modules (and the
names its `__init__` defines, where it defines any: an agent host's contract). Another
package may import those modules (`import P.mod`, `from P import mod`) and, from each, the names
in its own `__all__` (`from P.mod import name`, or `mod.name` after one of those imports);
anything else reaches past the face. The rule holds for the packages in FACED and every
subpackage of one, each with a face of its own; a subpackage's face binds the rest of its parent
package too. A package switches the rule on by declaring its face and joining FACED.
"""

from __future__ import annotations

import ast
import functools
import importlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

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


# Packages held to their faces (subpackages included); the others still change their insides.
FACED = ("durable", "spool_writer", "relay", "keys", "follower", "alarms", "talk")


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def literal_all(tree: ast.Module) -> tuple[str, ...] | None:
    """A module's `__all__` as written at its top level (a list or tuple of strings); None if it has none."""
    names: tuple[str, ...] | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            names = tuple(ast.literal_eval(node.value))
        elif isinstance(node, ast.AugAssign) and ast.unparse(node.target) == "__all__":
            names = (*(names or ()), *ast.literal_eval(node.value))
    return names


@dataclass(frozen=True)
class Import:
    file: str
    line: int
    importer: str  # the importing module, dotted
    target: str  # `import target` or `from target import names`
    names: tuple[str, ...] | None  # None for `import target`


@dataclass
class Sources:
    """Our modules as written: which exist, which are packages, their `__all__` and their imports."""

    faced_roots: tuple[str, ...]  # FACED, or a test's own
    modules: set[str] = field(default_factory=set)
    packages: set[str] = field(default_factory=set)
    alls: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)

    def faced(self, package: str) -> bool:
        """Held to its face: in FACED, or inside a package that is."""
        return any(inside(package, root) for root in self.faced_roots)


Found = tuple[int, str, tuple[str, ...] | None]  # line, target, names (None for `import target`)


def imports_in(tree: ast.AST, module: str, is_package: bool) -> Iterator[Found]:
    """Every import in `tree`, wherever it sits; relative ones resolved against `module`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".")
            if node.level:
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            yield node.lineno, target, tuple(alias.name for alias in node.names)


FUNCTION = ast.FunctionDef | ast.AsyncFunctionDef


def scopes(tree: ast.Module) -> Iterator[tuple[ast.AST, list[ast.Import | ast.ImportFrom]]]:
    """Each function (and the module) with the imports written in it, outside its inner functions."""
    owner: dict[ast.AST, ast.AST] = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            owner[child] = parent if isinstance(parent, FUNCTION) else owner.get(parent, tree)
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, FUNCTION))]:
        yield scope, [n for n in ast.walk(scope)
                      if isinstance(n, ast.Import | ast.ImportFrom) and owner.get(n, tree) is scope]


def attribute_uses(tree: ast.Module, modules: set[str]) -> Iterator[Found]:
    """`mod.name` after `from P import mod` or `import P.mod`: `name` taken from `P.mod` as by an import.

    A module's name is bound where its import is written (the module, or one function), and read
    there and in what that encloses.
    """
    for scope, imports in scopes(tree):
        bound: dict[str, str] = {}
        for imp in imports:
            for alias in imp.names:
                if isinstance(imp, ast.Import):
                    name = alias.name if alias.asname else alias.name.split(".")[0]
                    bound[alias.asname or name] = name
                elif imp.level == 0 and f"{imp.module}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{imp.module}.{alias.name}"
        bound = {name: module for name, module in bound.items() if module.split(".")[0] in modules}
        if not bound:
            continue
        inner = {id(n.value) for n in ast.walk(scope) if isinstance(n, ast.Attribute)}
        for node in ast.walk(scope):
            if not isinstance(node, ast.Attribute) or id(node) in inner:
                continue
            chain: list[str] = []
            value: ast.expr = node
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if not (isinstance(value, ast.Name) and value.id in bound):
                continue
            parts = [*bound[value.id].split("."), *chain]
            depth = max(d for d in range(1, len(parts) + 1) if ".".join(parts[:d]) in modules or d == 1)
            # a module's own metadata (`__all__`, `__file__`) is every module's, not a name it exports
            if depth < len(parts) and not (parts[depth].startswith("__") and parts[depth].endswith("__")):
                yield node.lineno, ".".join(parts[:depth]), (parts[depth],)


@functools.cache
def read_sources(root: Path, packages: tuple[str, ...] = OURS, faced: tuple[str, ...] = FACED) -> Sources:
    found = Sources(faced)
    trees: dict[str, tuple[Path, ast.Module]] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(root, path)
            trees[module] = path, ast.parse(path.read_text(), filename=str(path))
            found.modules.add(module)
            if path.name == "__init__.py":
                found.packages.add(module)
            found.alls[module] = literal_all(trees[module][1])
    for module, (path, tree) in trees.items():
        written = imports_in(tree, module, path.name == "__init__.py")
        for line, target, names in dict.fromkeys([*written, *attribute_uses(tree, found.modules)]):
            if target.split(".")[0] in packages:
                found.imports.append(Import(str(path.relative_to(root)), line, module, target, names))
    return found


def inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def past_the_face(imp: Import, src: Sources) -> list[str]:
    """What `imp` takes that a face it crosses does not show; nothing when it keeps to the faces."""
    def crossed(package: str) -> bool:
        return src.faced(package) and not inside(imp.importer, package)

    parts = imp.target.split(".")
    for depth in range(1, len(parts)):
        package = ".".join(parts[:depth])
        if crossed(package) and parts[depth] not in (src.alls.get(package) or ()):
            return [f"{package}.{parts[depth]} is not public in {package}"]
    if imp.names is None:
        return []
    if imp.target in src.packages:
        if not crossed(imp.target):
            return []
        return [f"{imp.target}.{name} is not public in {imp.target}"
                for name in imp.names if name not in (src.alls.get(imp.target) or ())]
    if not any(crossed(".".join(parts[:d])) for d in range(1, len(parts))):
        return []
    return [f"{imp.target}.{name} is not in its __all__"
            for name in imp.names if name not in (src.alls.get(imp.target) or ())]


def reaches_past(src: Sources) -> list[str]:
    return [f"{imp.file}:{imp.line}: {problem}" for imp in src.imports for problem in past_the_face(imp, src)]


def import_graph(src: Sources) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (`from P import mod` imports P.mod, else P), its own
    enclosing packages left out."""
    graph: dict[str, set[str]] = {m: set() for m in src.modules}
    for imp in src.imports:
        targets = [imp.target] if imp.names is None else [
            f"{imp.target}.{n}" if f"{imp.target}.{n}" in src.modules else imp.target for n in imp.names]
        for target in targets:
            while target not in src.modules and "." in target:
                target = target.rsplit(".", 1)[0]
            # A module always loads the packages above it first, so naming one of them (a host's
            # install reading its face's NAME) adds no arrow the import system did not draw already.
            if target in src.modules and target != imp.importer and not imp.importer.startswith(target + "."):
                graph[imp.importer].add(target)
    return graph


def tangles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that import each other round circles (strongly connected, more than one)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for nxt in sorted(graph[module]):
            if nxt not in order:
                visit(nxt)
                low[module] = min(low[module], low[nxt])
            elif nxt in stack:
                low[module] = min(low[module], order[nxt])
        if low[module] == order[module]:
            group = {stack.pop()}
            while module not in group:
                group.add(stack.pop())
            if len(group) > 1:
                found.append(group)

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return found


def a_circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """One circle through a tangle: its modules in import order, the first repeated at the end."""
    path = [min(group)]
    while path[-1] not in path[:-1]:
        path.append(min(graph[path[-1]] & group))
    return path[path.index(path[-1]):]


# Circles that were here before the check: each must go (delete its line when it does), and no new
# one may come. Both are tangles of lazy imports and TYPE_CHECKING-only imports.
KNOWN_TANGLES: list[set[str]] = []


def test_no_import_circle() -> None:
    graph = import_graph(read_sources(ROOT))
    found = tangles(graph)
    new = [" -> ".join(a_circle(graph, group)) for group in found if group not in KNOWN_TANGLES]
    assert not new, "modules importing each other round a circle:\n" + "\n".join(new)
    gone = [group for group in KNOWN_TANGLES if group not in found]
    assert not gone, f"these circles are gone (or changed): take them off KNOWN_TANGLES: {gone}"


def test_the_circle_check_finds_one_inside_functions_and_type_checking(tmp_path: Path) -> None:
    write(tmp_path, {"pa/__init__.py": "", "pa/one.py": "from pa import two\n",
                     "pa/two.py": "def f() -> None:\n    import pa.three\n",
                     "pa/three.py": "from typing import TYPE_CHECKING\n"
                                    "if TYPE_CHECKING:\n    from pa.one import x\n",
                     "pa/four.py": "import pa.one\n"})
    graph = import_graph(read_sources(tmp_path, ("pa",), ()))
    assert tangles(graph) == [{"pa.one", "pa.two", "pa.three"}]
    assert a_circle(graph, tangles(graph)[0]) == ["pa.one", "pa.two", "pa.three", "pa.one"]


def part_of(module: str, package: str) -> str | None:
    """The part of `package` that `module` belongs to: the subpackage it sits in, or itself when it
    sits directly in `package`; None outside `package` (and for `package` itself)."""
    if not module.startswith(package + "."):
        return None
    return package + "." + module[len(package) + 1:].split(".")[0]


def parts_graph(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """Part of `package` -> the other parts of it that its modules import (see `part_of`)."""
    parts: dict[str, set[str]] = {}
    for module, targets in graph.items():
        here = part_of(module, package)
        if here is None:
            continue
        parts.setdefault(here, set())
        for target in targets:
            there = part_of(target, package)
            if there is not None and there != here:
                parts[here].add(there)
                parts.setdefault(there, set())
    return parts


def part_circles(src: Sources) -> list[str]:
    """Circles between the parts of each package: a subpackage counts as one, so its modules may not
    lean on a sibling that leans back on it, even through different modules."""
    graph = import_graph(src)
    found = []
    for package in sorted(src.packages):
        parts = parts_graph(graph, package)
        found += [f"{package}: " + " -> ".join(a_circle(parts, group)) for group in tangles(parts)]
    return found


def test_no_circle_between_the_subpackages_of_a_package() -> None:
    found = part_circles(read_sources(ROOT))
    assert not found, "subpackages importing each other round a circle (move what both use below " \
                      "them, e.g. into a module beside them):\n" + "\n".join(found)


def test_the_subpackage_check_finds_a_circle_no_module_makes(tmp_path: Path) -> None:
    write(tmp_path, {"pa/__init__.py": "", "pa/top.py": "import pa.one.a\n",
                     "pa/one/__init__.py": "", "pa/one/a.py": "from pa.two import b\n", "pa/one/c.py": "",
                     "pa/two/__init__.py": "",
                     "pa/two/b.py": "def f() -> None:\n    from pa.one.c import x\n"})
    src = read_sources(tmp_path, ("pa",), ())
    assert not tangles(import_graph(src))  # module by module, no circle
    assert part_circles(src) == ["pa: pa.one -> pa.two -> pa.one"]


def test_no_package_reaches_past_a_face() -> None:
    found = reaches_past(read_sources(ROOT))
    assert not found, "imports past a package's face (use a public module and a name in its __all__, " \
                      "or make it public on purpose):\n" + "\n".join(found)


def faceless(src: Sources) -> list[str]:
    return [p for p in sorted(src.packages) if src.faced(p) and src.alls[p] is None]


def test_every_faced_package_declares_its_face(tmp_path: Path) -> None:
    assert not faceless(read_sources(ROOT)), "packages in FACED without a face (an __all__ of public " \
                                             f"modules in __init__): {faceless(read_sources(ROOT))}"
    write(tmp_path, {"low/__init__.py": "__all__ = ('sub',)\n", "low/sub/__init__.py": "",
                     "high/__init__.py": ""})
    assert faceless(read_sources(tmp_path, ("low", "high"), ("low", "high"))) == ["high", "low.sub"]


@pytest.mark.parametrize("package", FACED)
def test_a_face_loads_no_module_until_one_is_asked_for(package: str) -> None:
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); import {package}; "
            "print(' '.join(m for m in sys.modules if m.split('.')[0] in sys.argv[1:]))")
    loaded = subprocess.run([sys.executable, "-I", "-S", "-c", code, *OURS], capture_output=True, text=True,
                            check=True).stdout.split()
    assert set(loaded) <= {package, "durable", "durable.faces"}, loaded




@pytest.mark.parametrize("package", FACED)
def test_each_face_matches_its_modules(package: str) -> None:
    src = read_sources(ROOT)
    for pkg in sorted(p for p in src.packages if inside(p, package)):
        loaded = importlib.import_module(pkg)
        assert hasattr(loaded, "__getattr__"), f"{pkg} declares a face without its loader (durable.faces)"
        # a public name is a module, or one the `__init__` defines itself (an agent host's contract)
        public = [m for m in src.alls[pkg] or () if f"{pkg}.{m}" in src.modules]
        missing = [m for m in src.alls[pkg] or () if m not in public and m not in vars(loaded)]
        assert not missing, f"{pkg}'s face names modules it does not have: {missing}"
        for name in public:
            module = getattr(loaded, name)  # the face's __getattr__ imports it
            assert module.__name__ == f"{pkg}.{name}"
            shown = src.alls[module.__name__]
            assert shown is not None, f"{module.__name__} is public in {pkg} but declares no __all__"
            absent = [n for n in shown if not hasattr(module, n)]
            assert not absent, f"{module.__name__}.__all__ names what it does not define: {absent}"


def test_the_face_rule_catches_a_reach_past(tmp_path: Path) -> None:
    write(tmp_path, {"low/__init__.py": "__all__ = ('api', 'sub')\n",
                     "low/api.py": "__all__ = ['shown']\nshown = hidden = 1\n", "low/inner.py": "",
                     "low/sub/__init__.py": "__all__ = ('door',)\n", "low/sub/door.py": "__all__ = []\n",
                     "low/sub/back.py": "", "low/user.py": "from low.sub import back\n",
                     "high/__init__.py": "",
                     "high/ok.py": "import low.api\nfrom low import api\nfrom low.api import shown\n"
                                   "from low.sub import door\n",
                     "high/bad.py": "from low.api import hidden\nimport low.inner\nfrom low import inner\n"
                                    "def f() -> None:\n    from low.sub.back import x\n",
                     "high/dots.py": "import low.api\nfrom low import api as door\n"
                                     "low.api.shown, door.shown\ndoor.hidden\n"
                                     "def f() -> None:\n    import low\n    low.sub.back.y\n"
                                     "def g() -> None:\n    low.api.hidden\n"})
    found = reaches_past(read_sources(tmp_path, ("low", "high"), ("low",)))
    assert found == ["low/user.py:1: low.sub.back is not public in low.sub",
                     "high/bad.py:1: low.api.hidden is not in its __all__",
                     "high/bad.py:2: low.inner is not public in low",
                     "high/bad.py:3: low.inner is not public in low",
                     "high/bad.py:5: low.sub.back is not public in low.sub",
                     "high/dots.py:4: low.api.hidden is not in its __all__",
                     "high/dots.py:7: low.sub.back is not public in low.sub",
                     "high/dots.py:9: low.api.hidden is not in its __all__"]


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_every_package_is_checked() -> None:
    on_disk = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench"}
    assert on_disk <= set(OURS), f"a package the rule does not know: {on_disk - set(OURS)}"



def test_the_account_is_imported_by_no_part_of_the_client() -> None:
    """`follower.account` is the one API on top: the parts below it get what they use instead."""
    graph = import_graph(read_sources(ROOT))
    users = sorted(m for m, deps in graph.items()
                   if "follower.account" in deps and m.startswith("follower.") and m != "follower.__main__")
    assert not users, f"modules below the Account that import it: {users}"

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
    # deeper folders mirror the package's own subpackages: tests/unit/alarms/hosts/ for alarms/hosts/
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
