"""A simulated power loss for in-process tests: what the disk holds is what was last synced.

`Disk.watch` records, for every file synced (`os.fsync`, `os.fdatasync`), the bytes it held at
that moment, and carries the record along a rename (`os.replace`), as `durable.files` makes a
file durable by syncing a temporary one and renaming it. `Disk.lose_power` then puts every
recorded file under a folder back to those bytes and gives the process a new boot id: what a
machine shows after losing the writes it had not waited for. A file never synced is left as
it is (the kernel may have written it back, or not: each test says which it needs).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import durable.boot


class Disk:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._patch = monkeypatch
        self.synced: dict[Path, bytes] = {}
        self.boots = 0
        self._boot_id = durable.boot.boot_id
        self._answers: list[Callable[[], str]] = []

    def watch(self) -> Disk:
        fsync, fdatasync, replace = os.fsync, os.fdatasync, os.replace

        def record(fd: int) -> None:
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if path.is_file():
                self.synced[path] = path.read_bytes()

        def synced_fsync(fd: int) -> None:
            fsync(fd)
            record(fd)

        def synced_fdatasync(fd: int) -> None:
            fdatasync(fd)
            record(fd)

        def renamed(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
            replace(src, dst)
            moved = self.synced.pop(Path(os.fspath(src)).absolute(), None)
            if moved is not None:
                self.synced[Path(os.fspath(dst)).absolute()] = moved

        self._patch.setattr(os, "fsync", synced_fsync)
        self._patch.setattr(os, "fdatasync", synced_fdatasync)
        self._patch.setattr(os, "replace", renamed)
        self._new_boot()
        return self

    def lose_power(self, folder: Path) -> None:
        """Every synced file under `folder` back to its last synced bytes; a new boot."""
        for path, data in self.synced.items():
            if path.is_relative_to(folder.absolute()):
                path.write_bytes(data)
        self._new_boot()

    def _new_boot(self) -> None:
        """Every module that imported `boot_id` answers the new boot from now on."""
        self.boots += 1
        for module in list(sys.modules.values()):
            if getattr(module, "boot_id", None) in (self._boot_id, *self._answers):
                self._patch.setattr(module, "boot_id", self._answer(f"boot {self.boots}"))

    def _answer(self, boot: str) -> Callable[[], str]:
        def answer() -> str:
            return boot
        self._answers.append(answer)
        return answer
