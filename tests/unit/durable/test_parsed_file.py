"""ParsedFile: a file parsed once, parsed again whenever it changed, never a stale value."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from durable.errors import LocalFileRefused
from durable.files import write_json
from durable.parsed_file import ParsedFile


def counting(calls: list[object]) -> Callable[[object], object]:
    def parse(raw: object) -> object:
        calls.append(raw)
        return raw

    return parse


def test_parsed_once_while_the_file_stays(tmp_path: Path) -> None:
    path = tmp_path / "book.json"
    write_json(path, {"a": 1})
    calls: list[object] = []
    book = ParsedFile(path, {}, counting(calls))
    assert book.get() == {"a": 1}
    assert book.get() == {"a": 1}
    assert len(calls) == 1


def test_a_replaced_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "book.json"
    write_json(path, {"a": 1})
    book = ParsedFile(path, {}, dict)
    assert book.get() == {"a": 1}
    write_json(path, {"a": 2})  # same size: the new inode tells
    assert book.get() == {"a": 2}


def test_an_edit_in_place_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "book.json"
    path.write_text('{"a": 1}')
    book = ParsedFile(path, {}, dict)
    assert book.get() == {"a": 1}
    path.write_text('{"a": 22}')
    assert book.get() == {"a": 22}
    path.write_text('{"a": 3}')  # the same size again: the modification time tells
    os.utime(path, ns=(1, 1))
    assert book.get() == {"a": 3}


def test_missing_then_created_then_removed(tmp_path: Path) -> None:
    path = tmp_path / "book.json"
    book = ParsedFile(path, {}, dict)
    assert book.get() == {}
    write_json(path, {"a": 1})
    assert book.get() == {"a": 1}
    path.unlink()
    assert book.get() == {}


def test_a_damaged_file_raises_every_time(tmp_path: Path) -> None:
    path = tmp_path / "book.json"
    write_json(path, {"a": 1})
    book = ParsedFile(path, {}, dict)
    assert book.get() == {"a": 1}
    path.write_text("{not json")
    for _ in range(2):
        with pytest.raises(LocalFileRefused):
            book.get()
