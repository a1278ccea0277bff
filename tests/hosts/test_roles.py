"""tests/hosts/roles.py: the role a recorded request gives a text, and what README's door matrix
claims for each door (the `hosts` tests compare the two on the real programs)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.hosts.fake_model import Request
from tests.hosts.roles import matrix_role, matrix_rows, matrix_transform, role_of

TABLE = """\
| Host, version | Door | Model sees it as |
|---|---|---|
| Alpha 1.0 | hooks | `developer` (Start, Tool): only so; `user` (Stop): next, escaped as `&lt;` `&amp;` |
| Beta 2 | a socket | `user`: a message of its own. Text as sent |
| Gamma, a row added later | something new |

after the table
"""


def request(path: str, body: dict[str, Any]) -> Request:
    return {"path": path, "body": body}


def test_role_of_reads_each_wire_format() -> None:
    result, text = {"type": "tool_result", "content": "out B"}, {"type": "text", "text": "C"}
    anthropic = request("/v1/messages", {"system": [{"type": "text", "text": "sys A"}], "messages": [
        {"role": "user", "content": [result, text]},
        {"role": "system", "content": [{"type": "text", "text": "mid D"}]}]})
    assert [role_of(anthropic, n) for n in "ABCDZ"] == ["system", "tool", "user", "system", None]
    responses = request("/v1/responses", {"instructions": "i A", "input": [
        {"role": "developer", "content": [{"type": "input_text", "text": "ctx B"}]},
        {"type": "function_call_output", "output": "out C"}, {"role": "user", "content": "D"}]})
    assert [role_of(responses, n) for n in "ABCD"] == ["system", "developer", "tool", "user"]
    gemini = request("/v1beta/models/m:streamGenerateContent", {
        "systemInstruction": {"parts": [{"text": "s A"}]}, "contents": [
            {"role": "user", "parts": [{"functionResponse": {"response": {"output": "B"}}}, {"text": "C"}]}]})
    assert [role_of(gemini, n) for n in "ABC"] == ["system", "tool", "user"]
    chat = request("/v1/chat/completions", {"messages": [{"role": "tool", "content": "A"}]})
    assert role_of(chat, "A") == "tool"


def test_the_matrix_gives_each_door_its_role_and_tolerates_more_rows() -> None:
    assert list(matrix_rows(TABLE)) == ["Alpha 1.0", "Beta 2", "Gamma, a row added later"]
    assert matrix_role("Alpha", "Start", TABLE) == matrix_role("Alpha", "Tool", TABLE) == "developer"
    assert matrix_role("Alpha", "Stop", TABLE) == "user"
    assert matrix_role("Beta", "anything", TABLE) == "user"  # no doors named: every door
    with pytest.raises(AssertionError):
        matrix_role("Alpha", "Other", TABLE)


def test_the_matrix_names_a_hosts_rewriting_or_claims_bytes_as_sent() -> None:
    assert matrix_transform("Alpha", "Start", TABLE) is None and matrix_transform("Beta", "x", TABLE) is None
    escape = matrix_transform("Alpha", "Stop", TABLE)
    assert escape is not None and escape("a<b>&c") == "a&lt;b>&amp;c"


def test_every_host_row_of_the_readme_says_what_the_model_sees() -> None:
    rows = matrix_rows()
    assert len(rows) >= 9 and all(rows.values()), rows
    assert matrix_role("Codex", "PostToolUse") == "developer" and matrix_role("Codex", "Stop") == "user"
    escape = matrix_transform("Gemini CLI", "AfterTool")
    assert escape is not None and escape("> a & b") == "&gt; a & b"
