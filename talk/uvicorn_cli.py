"""uvicorn without its command line, until something asks for it.

`import uvicorn.config` runs the package's `__init__` first, and that imports `uvicorn.main`:
uvicorn's own command line, with click, the file watcher and the multiprocessing supervisors,
about 2.5 MB of a relay's memory for as long as it serves, and never used by it (the relay
builds `uvicorn.config.Config` and `uvicorn.server.Server` itself). `defer` registers the
package without running its `__init__`; its submodules import as usual, `Config` and `Server`
come from their own modules, and any other name (`uvicorn.run`, `__version__`) runs the real
`__init__` on first use, so code that wants the whole package still gets it.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

__all__ = ["defer"]

PACKAGE = "uvicorn"
OWN_MODULES = {"Config": "uvicorn.config", "Server": "uvicorn.server"}


def defer() -> None:
    """Register uvicorn with its `__init__` deferred; nothing if it is imported already (or absent)."""
    if PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None:
        return
    package = importlib.util.module_from_spec(spec)  # its __path__ and __spec__, nothing executed

    def attribute(name: str) -> Any:
        if name in OWN_MODULES:
            return getattr(importlib.import_module(OWN_MODULES[name]), name)
        del package.__getattr__  # from now on the package is whole
        assert spec.loader is not None
        spec.loader.exec_module(package)
        return _attribute(package, name)

    package.__getattr__ = attribute  # type: ignore[method-assign]
    sys.modules[PACKAGE] = package


def _attribute(package: ModuleType, name: str) -> Any:
    try:
        return package.__dict__[name]
    except KeyError:
        raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}") from None
