"""follower.files.names: a peer's name for a file never becomes a path, a hidden file, a device or
a name that reads otherwise than it is; placing never replaces, never follows a link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.errors import LocalFileRefused
from follower.files.names import MAX_NAME_BYTES, candidates, place, safe_name


@pytest.mark.parametrize(("wish", "name"), [
    ("report.pdf", "report.pdf"),
    ("../../.ssh/authorized_keys", "_.._.ssh_authorized_keys"),
    ("/etc/passwd", "_etc_passwd"),
    ("..", "file"), (".", "file"), ("...", "file"), ("", "file"), ("\x00", "file"),
    (".bashrc", "bashrc"), ("  .hidden  ", "hidden"),
    ("C:\\Windows\\system32", "C__Windows_system32"),
    ("CON", "_CON"), ("nul.txt", "_nul.txt"), ("Com1.tar.gz", "_Com1.tar.gz"), ("LPT9", "_LPT9"),
    ("aux ", "_aux"), ("COM\u00b9", "_COM1"), ("console.txt", "console.txt"),
    ("invoice\u202egpj.exe", "invoicegpj.exe"),  # a bidi override would show "exe.jpg"
    ("a\nb\rc\td", "abcd"), ("zero\u200bwidth", "zerowidth"), ("tag\U000e0041s", "tags"),
    ("\uff0e\uff0e\uff0fsecret", "_secret"),  # fullwidth "../" normalises to it
    ("a\u2215b\u2044c", "a_b_c"),  # slashes that look like one
    ('what?<>|*"', "what______"),
])
def test_peer_names_become_safe_file_names(wish: str, name: str) -> None:
    assert safe_name(wish) == name


def test_a_long_name_is_cut_keeping_its_extension() -> None:
    name = safe_name("é" * 300 + ".tar")
    assert len(name.encode()) <= MAX_NAME_BYTES and name.endswith(".tar") and name.startswith("é")


@given(st.text(max_size=300))
def test_any_name_is_one_harmless_path_component(wish: str) -> None:
    name = safe_name(wish)
    assert name and "/" not in name and "\\" not in name and "\x00" not in name
    assert not name.startswith(".") and name not in (".", "..")
    assert 0 < len(name.encode()) <= MAX_NAME_BYTES
    assert safe_name(name) == name  # already safe: kept as it is


def test_candidates_number_before_the_extension() -> None:
    assert candidates("a.txt")[:3] == ["a.txt", "a (2).txt", "a (3).txt"]
    assert candidates("README")[1] == "README (2)"


def partial_file(tmp_path: Path, data: bytes = b"payload") -> Path:
    folder = tmp_path / "partial"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / os.urandom(4).hex()
    path.write_bytes(data)
    return path


def test_place_never_overwrites(tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    first = place(partial_file(tmp_path, b"one"), downloads, "a.txt")
    second = place(partial_file(tmp_path, b"two"), downloads, "a.txt")
    assert (first.name, second.name) == ("a.txt", "a (2).txt")
    assert first.read_bytes() == b"one" and second.read_bytes() == b"two"
    assert not list((tmp_path / "partial").iterdir())


def test_a_symlink_planted_under_the_target_name_is_left_alone(tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (downloads / "a.txt").symlink_to(victim)
    (downloads / "b.txt").symlink_to(tmp_path / "nowhere")  # dangling: still not followed
    landed = [place(partial_file(tmp_path), downloads, n) for n in ("a.txt", "b.txt")]
    assert [p.name for p in landed] == ["a (2).txt", "b (2).txt"]
    assert victim.read_bytes() == b"precious" and not (tmp_path / "nowhere").exists()


def test_a_downloads_folder_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "downloads").symlink_to(elsewhere)
    partial = partial_file(tmp_path)
    with pytest.raises(LocalFileRefused, match="symbolic link"):
        place(partial, tmp_path / "downloads", "a.txt")
    assert partial.exists() and not list(elsewhere.iterdir())


def test_a_place_killed_after_its_link_finishes_under_the_same_name(tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir(mode=0o700)
    partial = partial_file(tmp_path)
    chosen: list[str] = []
    os.link(partial, downloads / "a.txt")  # as a killed call left it, having heard "a.txt"
    chosen.append("a.txt")
    assert place(partial, downloads, "a.txt", chosen[-1], chosen.append).name == "a.txt"
    assert not partial.exists() and chosen == ["a.txt"]
    # Killed after the unlink too: the partial is gone, the link stands.
    assert place(partial, downloads, "a.txt", "a.txt").name == "a.txt"
    assert sorted(p.name for p in downloads.iterdir()) == ["a.txt"]


def test_a_chosen_name_holding_another_file_is_not_taken(tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir(mode=0o700)
    (downloads / "a.txt").write_bytes(b"someone else's")
    landed = place(partial_file(tmp_path, b"mine"), downloads, "a.txt", "a.txt")
    assert landed.name == "a (2).txt" and landed.read_bytes() == b"mine"
