"""A host as talk uses it (`alarms.door.Host`): its package's constants and the little it does
its own way, with what every host does alike written once here.

Alike: install, uninstall, the paths `talk doctor` checks and (unless the package has its own
`wiring(identity)`) how far talk is wired, all from the package's `install` module; what wakes a
session (the package's WAKES, or its own `wakes(identity)`); and no daemon door's status unless
the package has `door_status` and `render_status`. Nothing is imported until it is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from alarms.door import Done, Request
    from alarms.wiring import Wiring

__all__ = ["Face"]


class Face:
    def __init__(self, package: ModuleType) -> None:
        self._package = package

    def __getattr__(self, name: str) -> Any:
        return getattr(self._package, name)

    def _own(self, name: str) -> Any:
        """The package's own function `name`, or None (its submodules do not count)."""
        own = self._package.__dict__.get(name)
        return own if callable(own) and not isinstance(own, ModuleType) else None

    def _install(self) -> Any:
        return importlib.import_module(f"{self._package.__name__}.install")

    def install_doors(self, request: Request) -> Done:
        done: Done = self._install().install(request)
        return done

    def uninstall_doors(self, request: Request) -> Done:
        done: Done = self._install().uninstall(request)
        return done

    def wiring(self, identity: Path | None) -> Wiring:
        own = self._own("wiring")
        judged: Wiring = own(identity) if own else self._install().wiring()
        return judged

    def paths(self) -> list[Path]:
        return list(self._install().paths())

    def wakes(self, identity: Path | None) -> str:
        own = self._own("wakes")
        return str(own(identity) if own else self._package.WAKES)

    def door_status(self, identity: Path) -> tuple[str, Any] | None:
        own = self._own("door_status")
        return own(identity) if own else None

    def render_status(self, report: Mapping[str, Any]) -> list[str]:
        own = self._own("render_status")
        return list(own(report)) if own else []
