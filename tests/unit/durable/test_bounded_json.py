"""The bounded parse of peers' JSON: every input ends in a value or JSONRefused, never another error."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.bounded_json import MAX_DEPTH, JSONRefused, depth_over, parse_json


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000, 20_000, 65_000])
def test_nesting_past_the_limit_is_refused_not_a_recursion_error(depth: int) -> None:
    for text in (nested(depth), '{"a":' * depth + "1" + "}" * depth, "[" * depth):
        with pytest.raises(JSONRefused, match="deeper than"):
            parse_json(text.encode(), 1 << 20)


def test_nesting_up_to_the_limit_parses() -> None:
    assert parse_json(nested(MAX_DEPTH).encode(), 1 << 20) == json.loads(nested(MAX_DEPTH))


def test_brackets_inside_strings_are_text_not_depth() -> None:
    text = json.dumps({"text": "[" * 5000 + "{" * 5000 + '\\"[[[', "n": [[1]]})
    assert parse_json(text, 1 << 20)["text"].startswith("[[[")


def test_escaped_quotes_do_not_end_a_string() -> None:
    hidden = '["\\"' + "[" * 100 + '"]'  # the brackets sit in one string, after an escaped quote
    assert parse_json(hidden, 1000) == ['"' + "[" * 100]
    with pytest.raises(JSONRefused, match="deeper"):
        parse_json('["\\\\"' + "[" * 100 + "]" * 101, 1000)  # an escaped backslash ends the string


def test_size_encoding_and_syntax_are_refused_as_one_family() -> None:
    with pytest.raises(JSONRefused, match="over the limit"):
        parse_json(b"[1]", 2)
    with pytest.raises(JSONRefused, match="UTF-8"):
        parse_json(b'"\xff"', 100)
    with pytest.raises(JSONRefused, match="UTF-8"):
        parse_json('[1]'.encode("utf-16"), 100)  # the standard parser would have read it
    with pytest.raises(JSONRefused, match="not JSON"):
        parse_json(b"{not json", 100)
    assert issubclass(JSONRefused, ValueError)


def test_an_unclosed_string_after_many_brackets_walks_in_linear_time() -> None:
    hostile = '"\\"' * 20_000 + "[" * (MAX_DEPTH + 1)  # each quote would rescan to the end
    started = time.perf_counter()
    with pytest.raises(JSONRefused):
        parse_json(hostile, 1 << 20)
    assert time.perf_counter() - started < 1.0


def test_the_walk_agrees_with_the_parser_on_depth() -> None:
    assert not depth_over('[{"a": [1, "]]]]"]}]', 3)
    assert depth_over('[{"a": [[1]]}]', 3)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)


def depth_of(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    return 0


@given(json_values, st.integers(min_value=1, max_value=8))
def test_any_json_parses_exactly_when_within_the_depth(value: object, limit: int) -> None:
    text = json.dumps(value, ensure_ascii=False)
    if depth_of(value) <= limit:
        assert parse_json(text.encode(), 1 << 20, limit) == value
    else:
        with pytest.raises(JSONRefused):
            parse_json(text.encode(), 1 << 20, limit)


@given(st.binary(max_size=400) | st.text(alphabet='[]{}"\\,:1a ', max_size=400).map(str.encode))
def test_any_bytes_end_in_a_value_or_a_refusal(raw: bytes) -> None:
    try:
        value = parse_json(raw, 300)
    except JSONRefused:
        return
    assert json.dumps(value) == json.dumps(json.loads(raw.decode()))  # NaN equals no NaN: compare texts


def test_a_lone_surrogate_escape_is_refused_a_pair_or_a_written_backslash_is_text() -> None:
    assert parse_json(r'["\ud83d\ude00", "\\ud800"]', 100) == ["\U0001f600", "\\ud800"]
    for lone in (r'"\ud800"', r'"\udfff x"', r'{"a": ["\uDBFF"]}', r'"\ude00\ud83d"'):
        with pytest.raises(JSONRefused, match="UTF-16"):
            parse_json(lone, 100)
