"""The hooks' fast answer agrees with the cursor, and costs them no more than the standard library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from spool_writer.cursor import CursorReader, lock_path
from spool_writer.layout import SpoolLayout, check_sid
from spool_writer.peek import PENDING_SUFFIX, caught_up, nothing_new, safe_sid
from spool_writer.sessions import register
from spool_writer.spool import Spool
from tests.conftest import REPO
from tests.unit.samples import hexid, spool_message


def test_safe_sid_is_the_layouts_rule() -> None:
    for sid in ("01a227e0-ad0c-7ae3-8e38-1cf06485f88f", "a.b_c", "x" * 128):
        assert safe_sid(sid) and check_sid(sid) == sid
    for sid in ("../etc", ".hidden", "", "a/b", "x" * 129, "é"):
        assert not safe_sid(sid)


def test_nothing_new_agrees_with_the_cursor(tmp_path: Path) -> None:
    """It must say 'nothing new' exactly when take() would return nothing."""
    layout = SpoolLayout(tmp_path / "spool")
    register(layout.root, "codex", "s3", os.getpid())
    reader = CursorReader(layout.session_file("s3"), layout.cursor_file("s3"))
    assert not nothing_new(tmp_path, "s3")  # no cursor saved yet
    assert reader.take() == []
    assert nothing_new(tmp_path, "s3")
    Spool(layout.root).deliver(spool_message(hexid(1)))
    spool_file = layout.session_file("s3")
    state = json.loads(layout.cursor_file("s3").read_text())
    assert not caught_up(state, spool_file.stat().st_ino, spool_file.stat().st_size)
    assert not nothing_new(tmp_path, "s3")
    assert [r["id"] for r in reader.take()] == [hexid(1)]
    before = lock_path(layout.cursor_file("s3")).stat().st_mtime_ns
    os.utime(lock_path(layout.cursor_file("s3")), ns=(0, 0))
    assert nothing_new(tmp_path, "s3")
    assert lock_path(layout.cursor_file("s3")).stat().st_mtime_ns >= before  # marked as read, like take()


def test_a_pending_hand_over_or_an_unusable_sid_takes_the_full_way(tmp_path: Path) -> None:
    layout = SpoolLayout(tmp_path / "spool")
    register(layout.root, "codex", "s4", os.getpid())
    CursorReader(layout.session_file("s4"), layout.cursor_file("s4")).take()
    assert nothing_new(tmp_path, "s4")
    (layout.sessions_dir / ("s4" + PENDING_SUFFIX)).write_text("[]")
    assert not nothing_new(tmp_path, "s4")
    assert not nothing_new(tmp_path, "../s4")


def test_peek_imports_only_the_standard_library() -> None:
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r}); before = set(sys.modules); "
            "import spool_writer.peek; print(' '.join(sorted(set(sys.modules) - before)))")
    loaded = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    ours = {m for m in loaded if m.split(".")[0] in {"durable", "spool_writer"}}
    assert ours == {"durable", "durable.faces", "spool_writer", "spool_writer.peek"}
    assert all(m.split(".")[0] in sys.stdlib_module_names for m in set(loaded) - ours), loaded
