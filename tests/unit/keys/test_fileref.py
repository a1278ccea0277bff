"""keys.fileref: the one gate for the files a message announces. A ref out of its shape refuses
the whole message with Invalid naming the field; hostile values raise nothing else."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keys.encoding import utc_now_iso
from keys.envelope import Inner
from keys.fileref import CHUNK_BYTES, MAX_BODY, MAX_FILES, FileRef, body_of, files_of
from keys.gate import Invalid, check_inner
from tests.unit.samples import FP_A, FP_B

REF = FileRef("a" * 32, "report.pdf", 1234, "b" * 64, b"k" * 32, b"h" * 24)


def envelope(text: str = "", **more: Any) -> dict[str, Any]:
    return {"v": 1, "id": "3" * 32, "from": FP_A, "to": FP_B, "ts": utc_now_iso(), "kind": "chat",
            "text": text, **more}


def test_a_ref_goes_through_json_and_back() -> None:
    assert FileRef.from_json(REF.to_json()) == REF
    body = REF._replace(name=None)
    assert FileRef.from_json(body.to_json(), named=False) == body
    assert "name" not in body.to_json()
    assert REF.to_json()["chunk"] == CHUNK_BYTES


def test_the_gate_admits_files_and_a_body_through_fileref_only() -> None:
    extra = check_inner(envelope("see", files=[{**REF.to_json(), "admin": True}]), time.time())["extra"]
    assert extra["files"] == [REF.to_json()]  # an unknown field inside a ref is dropped
    assert files_of(extra) == [REF]
    body = REF._replace(id="c" * 32, name=None)
    inner = Inner.from_json(envelope("", body=body.to_json()))
    assert body_of(inner.extra) == body and files_of(inner.extra) == []
    assert body_of({}) is None


def field(name: str, value: object) -> dict[str, Any]:
    return {**REF.to_json(), name: value}


@pytest.mark.parametrize(("ref", "named"), [
    (field("id", "A" * 32), "id"), (field("id", "a" * 31), "id"), (field("id", "a" * 32 + "\n"), "id"),
    (field("size", -1), "size"), (field("size", 2**40 + 1), "size"), (field("size", True), "size"),
    (field("size", 1.0), "size"), (field("sha256", "B" * 64), "sha256"), (field("sha256", None), "sha256"),
    (field("key", base64.b64encode(b"k" * 31).decode()), "key"), (field("key", "!!"), "key"),
    (field("key", "a" * 10_000), "key"), (field("header", base64.b64encode(b"h" * 25).decode()), "header"),
    (field("chunk", 4096), "chunk"), (field("chunk", 262144.0), "chunk"),
    (field("name", ""), "name"), (field("name", "x" * 256), "name"), (field("name", 7), "name"),
    ({k: v for k, v in REF.to_json().items() if k != "name"}, "name"),
])
def test_each_bad_field_refuses_the_message_naming_it(ref: dict[str, Any], named: str) -> None:
    with pytest.raises(Invalid, match=named):
        check_inner(envelope(files=[ref]), time.time())


@pytest.mark.parametrize(("more", "named"), [
    ({"files": []}, "files"), ({"files": [REF.to_json()] * 2}, "share an id"),
    ({"files": [{**REF.to_json(), "id": f"{i:032x}"} for i in range(MAX_FILES + 1)]}, "files"),
    ({"files": REF.to_json()}, "files"), ({"body": REF.to_json()}, "body carries no name"),
    ({"body": [REF.to_json()]}, "body"),
    ({"body": REF._replace(name=None, size=MAX_BODY + 1).to_json()}, "a longer one goes as a file"),
])
def test_the_lists_shape_and_a_named_body_are_refused(more: dict[str, Any], named: str) -> None:
    with pytest.raises(Invalid, match=named):
        check_inner(envelope(**more), time.time())


def test_a_body_comes_with_no_text_and_files_ride_only_chat() -> None:
    body = REF._replace(name=None).to_json()
    with pytest.raises(Invalid, match="no text"):
        check_inner(envelope("hello", body=body), time.time())
    with pytest.raises(Invalid, match="chat"):
        check_inner({**envelope(files=[REF.to_json()]), "kind": "contact_accepted"}, time.time())


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
ref_fields = st.fixed_dictionaries({}, optional={
    "id": st.sampled_from(["a" * 32, "0" * 32]) | json_values,
    "name": st.text(max_size=300) | json_values,
    "size": st.integers(min_value=-2, max_value=2**41) | json_values,
    "sha256": st.just("b" * 64) | json_values,
    "key": st.binary(min_size=30, max_size=34).map(lambda b: base64.b64encode(b).decode()) | json_values,
    "header": st.binary(min_size=22, max_size=26).map(lambda b: base64.b64encode(b).decode()) | json_values,
    "chunk": st.just(CHUNK_BYTES) | json_values,
})


@given(st.lists(ref_fields | json_values, max_size=3) | json_values, ref_fields | json_values)
def test_hostile_refs_raise_only_invalid(files: object, body: object) -> None:
    for name, value in (("files", files), ("body", body)):
        try:
            extra = check_inner({**envelope(), name: value}, time.time())["extra"]
        except Invalid:
            continue
        # What passed is whole: it reads back as refs without another check failing.
        assert all(isinstance(r, FileRef) for r in files_of(extra))
        ref = body_of(extra)
        assert ref is None or ref.name is None
