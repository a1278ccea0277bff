"""talk.config_snapshot: what undo does to each path a host's install wrote, decided from what the
path held before setup, after it, when undo began and after the uninstall."""

from __future__ import annotations

from pathlib import Path

from talk.config_snapshot import (
    ABSENT,
    Entry,
    Kind,
    Restore,
    Seen,
    apply,
    equivalent,
    load_entries,
    look,
    remember,
    restore_action,
    save_entries,
)


def file(data: bytes, mode: int = 0o600) -> Seen:
    return Seen(Kind.FILE, data, mode)


DIR = Seen(Kind.DIR, mode=0o700)
USER = file(b'{"theme": "dark"}\n')
WIRED = file(b'{\n  "theme": "dark",\n  "mcpServers": {"talk": {}}\n}\n')
UNWIRED = file(b'{\n  "theme": "dark"\n}\n')  # the uninstall's own layout


def test_json_and_toml_are_compared_by_what_they_say() -> None:
    assert equivalent(b'{"a": 1, "b": [2]}', b'{\n  "b": [2],\n  "a": 1\n}\n', ".json")
    assert not equivalent(b'{"a": 1}', b'{"a": 2}', ".json")
    assert equivalent(b'a = 1\n[t]\nb = "x"\n', b'[t]\nb = "x"\n', ".toml") is False
    assert equivalent(b"a = 1\n", b"a=1", ".toml")
    assert equivalent(None, b"{}\n", ".json") and equivalent(None, b"", ".toml")
    assert not equivalent(b"x", b"x ", ".md") and equivalent(b"{", b"{", ".json")


def test_an_untouched_file_is_put_back_whatever_the_uninstall_left() -> None:
    codex_trust = file(b'[hooks.state."k"]\ntrusted_hash = "x"\n')  # the host's record of talk's hooks
    entry = Entry(ABSENT, codex_trust)
    assert restore_action(entry, codex_trust, codex_trust, ".toml") is Restore.PUT_BACK
    entry = Entry(USER, WIRED)
    assert restore_action(entry, WIRED, file(b'{"theme": "dark", "x": 1}'), ".json") is Restore.PUT_BACK


def test_a_file_changed_since_is_put_back_only_when_the_uninstall_left_the_same() -> None:
    entry = Entry(USER, WIRED)
    edited = file(b'{"theme": "dark", "mcpServers": {"talk": {}}, "font": 3}')
    assert restore_action(entry, edited, UNWIRED, ".json") is Restore.PUT_BACK
    assert restore_action(entry, edited, file(b'{"theme": "dark", "font": 3}'), ".json") is Restore.KEPT
    assert restore_action(entry, edited, USER, ".json") is Restore.SAME


def test_a_file_absent_before_goes_when_it_holds_nothing_and_stays_when_it_holds_the_users() -> None:
    entry = Entry(ABSENT, WIRED)
    edited = file(b'{"mine": 1, "mcpServers": {"talk": {}}}')
    assert restore_action(entry, edited, file(b"{}\n"), ".json") is Restore.PUT_BACK
    assert restore_action(entry, edited, ABSENT, ".json") is Restore.SAME
    assert restore_action(entry, edited, file(b'{"mine": 1}'), ".json") is Restore.KEPT


def test_folders_absent_before_are_removed_and_those_there_before_made_again() -> None:
    assert restore_action(Entry(ABSENT, DIR), DIR, DIR, "") is Restore.REMOVE_DIR
    assert restore_action(Entry(DIR, DIR), DIR, ABSENT, "") is Restore.PUT_BACK
    assert restore_action(Entry(DIR, DIR), DIR, DIR, "") is Restore.SAME
    assert restore_action(Entry(DIR, DIR), DIR, USER, "") is Restore.KEPT


def test_a_second_setup_keeps_the_first_before_and_trusts_its_after_only_if_untouched() -> None:
    first = remember(None, USER, WIRED)
    assert first == Entry(USER, WIRED)
    assert remember(first, WIRED, WIRED) == Entry(USER, WIRED)
    touched = remember(first, UNWIRED, WIRED)  # the user took talk out by hand in between
    assert touched == Entry(USER, None)
    assert remember(touched, WIRED, WIRED) == Entry(USER, None)  # once in doubt, parse at undo
    assert restore_action(touched, WIRED, UNWIRED, ".json") is Restore.PUT_BACK


def test_entries_survive_the_file_they_are_saved_in() -> None:
    entries = {"/a": Entry(ABSENT, None), "/b": Entry(file(b"\x00\xff bytes", 0o644), DIR)}
    assert load_entries(save_entries(entries)) == entries


def test_apply_writes_the_bytes_and_mode_back_and_removes_only_empty_folders(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "settings.json"
    before = file(b'{"a": 1}', 0o644)
    assert apply(path, Restore.PUT_BACK, before)
    assert look(path) == before
    assert apply(path, Restore.PUT_BACK, ABSENT) and look(path) == ABSENT
    made = tmp_path / "made"
    (made / "inner").mkdir(parents=True)
    (made / "inner" / "theirs").write_text("x")
    assert not apply(made / "inner", Restore.REMOVE_DIR, ABSENT) and (made / "inner").is_dir()
    (made / "inner" / "theirs").unlink()
    assert apply(made / "inner", Restore.REMOVE_DIR, ABSENT) and not (made / "inner").exists()
