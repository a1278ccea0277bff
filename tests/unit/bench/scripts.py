"""Loading a benchmark script (bench/NAME.py) as a module, for the tests of its pure parts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import REPO

BENCH = REPO / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/NAME.py as a module; its `from common import ...` finds bench/common.py."""
    before = set(sys.modules)
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while defining
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))
        # Names bound already: leave no bare top-level module of bench/ behind (common, and
        # any script this one imports).
        for bare in set(sys.modules) - before:
            if Path(getattr(sys.modules[bare], "__file__", None) or "/").parent == BENCH:
                del sys.modules[bare]
