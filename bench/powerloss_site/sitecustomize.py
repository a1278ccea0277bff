"""Python imports this at start-up in a bench child whose PYTHONPATH names this folder: it arms
bench/powerloss.py when POWERLOSS_SHADOW names the shadow of the child's disk, and does nothing
otherwise (see that module for the model)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

if os.environ.get("POWERLOSS_SHADOW"):
    _spec = importlib.util.spec_from_file_location(
        "powerloss", Path(__file__).resolve().parent.parent / "powerloss.py")
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["powerloss"] = _module  # its dataclasses look their module up
    _spec.loader.exec_module(_module)
    _module.install_from_env()
