"""bench/powerloss.py, the power-loss harness of bench/ratchet_soak.py: a real child process writes
through the project's own durable helpers with the harness armed by its sitecustomize, then the
simulated power loss puts the folder back to what was synced."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO
from tests.unit.bench.scripts import load_bench

CHILD = """
import os, sys
from pathlib import Path
from durable.boot import boot_id
from durable.files import replace_file
from durable.slots import read_slots, write_slots

home = Path(sys.argv[1])
fd = os.open(home / "log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
os.write(fd, b"synced\\n")
os.fsync(fd)
os.write(fd, b"not synced\\n")
os.close(fd)
replace_file(home / "kept.json", b"new, synced")
replace_file(home / "loose.json", b"new, not synced", sync=False)
replace_file(home / "fresh.json", b"never synced", sync=False)
at = write_slots(home / "state", b"one", None)
write_slots(home / "state", b"two, not synced", at, sync=False)
(home / "gone").unlink()
print(boot_id())
"""


@pytest.fixture(scope="module")
def powerloss() -> ModuleType:
    return load_bench("powerloss")


def test_a_power_loss_brings_back_the_synced_bytes_and_drops_the_rest(powerloss: ModuleType,
                                                                      tmp_path: Path) -> None:
    home, shadow, boot = tmp_path / "home", tmp_path / "shadow", tmp_path / "boot_id"
    home.mkdir()
    (home / "kept.json").write_bytes(b"old")
    (home / "loose.json").write_bytes(b"old")
    (home / "gone").write_bytes(b"deleted after the snapshot")
    disk = powerloss.Disk(home, shadow)
    disk.snapshot()  # what predates the run is on the disk
    first = powerloss.new_boot(boot)
    env = powerloss.child_env({"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}, home, shadow, boot)
    child = subprocess.run([sys.executable, "-c", CHILD, str(home)], env=env, capture_output=True,
                           text=True, timeout=60, check=True)
    assert child.stdout.strip() == first  # the boot id is the one the harness controls
    assert (home / "log").read_bytes() == b"synced\nnot synced\n"  # a kill would keep it all

    loss = disk.lose_power()
    second = powerloss.new_boot(boot)

    assert (home / "log").read_bytes() == b"synced\n"
    assert (home / "kept.json").read_bytes() == b"new, synced"
    assert (home / "loose.json").read_bytes() == b"old"  # renamed over it unsynced: the old file
    assert not (home / "fresh.json").exists()
    assert not (home / "gone").exists()  # an unlink holds
    after = subprocess.run([sys.executable, "-c", "from durable.slots import read_slots; import sys;"
                            "from pathlib import Path; s = read_slots(Path(sys.argv[1]) / 'state');"
                            "assert s is not None; print(s.payload.decode());"
                            "from durable.boot import boot_id; print(boot_id())", str(home)],
                           env=env, capture_output=True, text=True, timeout=60, check=True)
    assert after.stdout.split("\n")[:2] == ["one", second]
    assert loss.deleted == 1 and loss.restored == 3
