"""A simulated power loss for in-process tests, with the soak's own model (bench/powerloss.py):
what the disk holds of a folder is what was last synced there.

`Disks.watch(folder, ...)` takes each folder as on the disk now (a sync(1)) and from then on
follows this process's syncs, renames and unlinks, as the soak's children do; `lose_power(folder)`
puts that folder back to what its disk holds (a file never synced goes) and gives the process
a new boot id: what a machine shows after losing the writes it had not waited for.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import durable.boot
from tests.unit.bench.scripts import load_bench


class Disks:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, shadows: Path) -> None:
        self._patch = monkeypatch
        self._shadows = shadows
        self._model = load_bench("powerloss")
        self._disks: dict[Path, Any] = {}
        self._boot = shadows / "boot_id"

    def watch(self, *folders: Path) -> Disks:
        self._shadows.mkdir(parents=True, exist_ok=True)
        for folder in folders:
            disk = self._disks[folder] = self._model.Disk(folder, self._shadows / folder.name)
            disk.snapshot()
        for name, wrapper in self._model.wrappers(list(self._disks.values())).items():
            self._patch.setattr(os, name, wrapper)
        self._patch.setattr(durable.boot, "BOOT_ID_FILE", self._boot)
        self._new_boot()
        return self

    def lose_power(self, folder: Path) -> None:
        """`folder` as its disk holds it; the machine boots again."""
        self._disks[folder].lose_power()
        self._new_boot()

    def _new_boot(self) -> None:
        self._model.new_boot(self._boot)
        durable.boot.boot_id.cache_clear()  # every module that imported it reads the new id
