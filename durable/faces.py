"""A package's face: the modules other packages may import, each loaded on first use.

A package names its public modules in `__all__` and hands them to `face`:

    __all__ = ("cursor", "layout")
    __getattr__ = face(__name__, __all__)

`import spool_writer` then loads nothing more, and `spool_writer.cursor` imports that module
the first time it is read, so a hook pays only for the modules it uses. An `__init__` that
defines names of its own (an agent host's contract, `alarms.door.Host`) lists them in `__all__`
too: they are found before `__getattr__` is asked. Each public module
declares its own `__all__`: other packages use those names and nothing else
(tests/test_import_rule.py holds them to it).

Standard library only, and only `sys`: every package's `__init__` imports this.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a hook ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import ModuleType

__all__ = ["face"]


def face(package: str, modules: Iterable[str]) -> Callable[[str], ModuleType]:
    """The module `__getattr__` of `package`: a public module of it, imported when first asked for."""
    public = frozenset(modules)

    def public_module(name: str) -> ModuleType:
        if name not in public:
            raise AttributeError(f"module {package!r} has no attribute {name!r} (its public modules: "
                                 f"{', '.join(sorted(public))})")
        __import__(f"{package}.{name}")
        return sys.modules[f"{package}.{name}"]

    return public_module
