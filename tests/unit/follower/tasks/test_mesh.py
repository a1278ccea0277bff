"""Tests of `follower/tasks/mesh.py`, the opencode-mesh v1 text protocol: the protocol's own examples, legacy
markers, round trips through the builders, and garbled input that must fall back to chat."""

from __future__ import annotations

import random
import re
import string
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.mesh_fields import MARKERS, may_carry_block
from follower.tasks.mesh import (
    Parsed,
    new_task_id,
    parse,
    question_block,
    result_block,
    task_envelope,
)
from keys.gate import MAX_TEXT

KINDS = {"task", "result", "question", "digest", "chat"}

# The protocol's example blocks verbatim; only the enum placeholders are replaced by real values
# ("one-shot | session | resume" -> one-shot, "done | partial | failed" -> done, gen -> 3), and
# the task id placeholders by real ids: "<任务ID>" is no id (angle brackets are not shell-safe,
# and a task id is shown to the agent outside the quote, in a command it may run).
# The remarks in parentheses after env and options are part of the examples and stay as text.
EXAMPLE_TASK = """[opencode-mesh v1]
from: <发送节点名>
task: 节点a-mabc12-x7k2
mode: one-shot
reply: result-block
env: s=win32/x64 r=linux/x64        (v1.5 可选:s=发送方平台,r=接收方平台,未知为 ?)
---
<任务正文(自然语言,可多段)>"""

EXAMPLE_RESULT = """[opencode-mesh-result v1]
task: 节点a-mabc12-x7k2
status: done
summary: <≤300 字,直接给结论>
artifacts: <产物路径列表(逗号分隔)或 none>
[/opencode-mesh-result]"""

EXAMPLE_QUESTION = """[opencode-mesh-question v1]
task: 节点a-mabc12-x7k2
question: <一句话问题>
options: A | B | C      (可为空)
[/opencode-mesh-question]"""

EXAMPLE_DIGEST = """[opencode-mesh-digest v1]
task: 节点a-mabc12-x7k2
gen: 3
facts:
- <抽取式事实:逐字保留路径/命令/结论/约束,每行一条,按重要性排序>
pending: <未完成事项或 none>
refs: <产物/日志路径或 none>
[/opencode-mesh-digest]"""

EXAMPLES = [EXAMPLE_TASK, EXAMPLE_RESULT, EXAMPLE_QUESTION, EXAMPLE_DIGEST]

EXPECTED: list[tuple[str, str, dict[str, Any]]] = [
    (EXAMPLE_TASK, "task", {
        "task": "节点a-mabc12-x7k2", "mesh_from": "<发送节点名>", "mode": "one-shot", "reply": "result-block",
        "env": "s=win32/x64 r=linux/x64        (v1.5 可选:s=发送方平台,r=接收方平台,未知为 ?)",
    }),
    (EXAMPLE_RESULT, "result", {
        "task": "节点a-mabc12-x7k2", "status": "done", "summary": "<≤300 字,直接给结论>",
        "artifacts": ["<产物路径列表(逗号分隔)或 none>"],
    }),
    (EXAMPLE_QUESTION, "question", {
        "task": "节点a-mabc12-x7k2", "question": "<一句话问题>", "options": ["A", "B", "C      (可为空)"],
    }),
    (EXAMPLE_DIGEST, "digest", {
        "task": "节点a-mabc12-x7k2", "gen": 3,
        "facts": ["<抽取式事实:逐字保留路径/命令/结论/约束,每行一条,按重要性排序>"],
        "pending": "<未完成事项或 none>", "refs": ["<产物/日志路径或 none>"],
    }),
]


def legacy(text: str) -> str:
    return text.replace("opencode-mesh", "aoi-mesh")


# -- the protocol's examples ------------------------------------------------------------------


@pytest.mark.parametrize(("text", "kind", "fields"), EXPECTED)
def test_protocol_examples_parse(text: str, kind: str, fields: dict[str, Any]) -> None:
    parsed = parse(text)
    assert parsed.kind == kind
    assert parsed.fields == fields
    expected_body = "<任务正文(自然语言,可多段)>" if kind == "task" else text
    assert parsed.body == expected_body


@pytest.mark.parametrize(("text", "kind", "fields"), EXPECTED)
def test_protocol_examples_with_legacy_markers(text: str, kind: str, fields: dict[str, Any]) -> None:
    parsed = parse(legacy(text))
    assert (parsed.kind, parsed.fields) == (kind, fields)


@pytest.mark.parametrize(("text", "kind", "fields"), EXPECTED)
def test_protocol_examples_with_crlf(text: str, kind: str, fields: dict[str, Any]) -> None:
    crlf = text.replace("\n", "\r\n") + "\r\n"
    parsed = parse(crlf)
    assert (parsed.kind, parsed.fields) == (kind, fields)
    assert parsed.body == ("<任务正文(自然语言,可多段)>" if kind == "task" else crlf)


@pytest.mark.parametrize(("text", "kind", "fields"), EXPECTED)
def test_markers_tolerate_surrounding_whitespace(text: str, kind: str, fields: dict[str, Any]) -> None:
    lines = text.split("\n")
    padded = [f"  {line}\t " if line.startswith("[") else line for line in lines]
    parsed = parse("\n\n" + "\n".join(padded) + "\n\n")
    assert (parsed.kind, parsed.fields) == (kind, fields)


def test_markers_constant_lists_current_name_first() -> None:
    assert MARKERS == ("opencode-mesh", "aoi-mesh")


def test_example_options_without_the_remark() -> None:
    parsed = parse(EXAMPLE_QUESTION.replace("      (可为空)", ""))
    assert parsed.fields["options"] == ["A", "B", "C"]


@pytest.mark.parametrize("kind", ["result", "question", "digest"])
def test_mixed_open_and_close_tags(kind: str) -> None:
    text = {"result": EXAMPLE_RESULT, "question": EXAMPLE_QUESTION, "digest": EXAMPLE_DIGEST}[kind]
    old_open = text.replace(f"[opencode-mesh-{kind} v1]", f"[aoi-mesh-{kind} v1]")
    old_close = text.replace(f"[/opencode-mesh-{kind}]", f"[/aoi-mesh-{kind}]")
    assert old_open != text and old_close != text
    assert parse(old_open).kind == kind
    assert parse(old_close).kind == kind
    assert parse(old_open).fields == parse(text).fields == parse(old_close).fields


# -- task envelopes ------------------------------------------------------------------------------


def test_task_header_keys_are_lower_cased_and_unknown_keys_kept_apart() -> None:
    text = "\n".join([
        "", "  [aoi-mesh v1]  ", "From: laptop", "TASK: t-1", "priority: high", "x-trace: abc",
        "", "---", "", "line one", "  indented line two  ", "", "line four", "", "",
    ])
    parsed = parse(text)
    assert parsed.kind == "task"
    assert parsed.fields == {
        "mesh_from": "laptop", "task": "t-1", "mesh_priority": "high", "mesh_x-trace": "abc",
        "mode": "one-shot",
    }
    assert parsed.body == "line one\n  indented line two  \n\nline four"


def test_task_header_names_of_spool_fields_are_prefixed() -> None:
    parsed = parse("[opencode-mesh v1]\ntask: t\nkind: evil\nid: x\ntask_trust: true\ngap: 9\n"
                   "hops: x\n---\nbody")
    assert parsed.fields == {"task": "t", "mesh_kind": "evil", "mesh_id": "x", "mesh_task_trust": "true",
                             "mesh_gap": "9", "mesh_hops": "x", "mode": "one-shot"}


@pytest.mark.parametrize("task", ["t\u2028x", "a b", "x;rm", "<id>", "t\x1b[2J", "-x", "t" * 129])
def test_a_task_id_that_is_not_shell_and_header_safe_is_chat(task: str) -> None:
    assert parse(f"[opencode-mesh v1]\ntask: {task}\n---\nbody").kind == "chat"
    assert parse(f"[opencode-mesh-result v1]\ntask: {task}\nstatus: done\nsummary: s\nartifacts: none\n"
                 "[/opencode-mesh-result]").kind == "chat"


def test_a_task_header_value_with_controls_is_chat() -> None:
    assert parse("[opencode-mesh v1]\ntask: t\nenv: a\x1b[31m\n---\nbody").kind == "chat"


@pytest.mark.parametrize("mode", ["one-shot", "session", "resume"])
def test_task_modes(mode: str) -> None:
    parsed = parse(f"[opencode-mesh v1]\ntask: t\nmode: {mode}\n---\n")
    assert (parsed.kind, parsed.fields["mode"], parsed.body) == ("task", mode, "")


def test_task_body_may_hold_a_block_and_the_envelope_still_wins() -> None:
    text = EXAMPLE_TASK + "\n\n" + EXAMPLE_RESULT
    parsed = parse(text)
    assert parsed.kind == "task"
    assert parsed.body.endswith("[/opencode-mesh-result]")


def test_marker_not_on_the_first_line_is_not_a_task() -> None:
    assert parse("hello\n" + EXAMPLE_TASK).kind == "chat"


# -- blocks --------------------------------------------------------------------------------------


def test_result_block_after_free_text() -> None:
    block = EXAMPLE_RESULT.replace("status: done", "status: partial")
    text = "I ran the tests and fixed two imports.\n\n" + block
    parsed = parse(text + "\nthanks!")
    assert parsed.kind == "result"
    assert parsed.fields["status"] == "partial"
    assert parsed.body == text + "\nthanks!"


def test_result_summary_continues_until_the_next_known_key() -> None:
    text = "\n".join([
        "[opencode-mesh-result v1]", "task: t-9", "status: failed", "summary: could not build",
        "  the compiler is missing", "note: unknown keys are part of the summary", "",
        "artifacts: logs/build.txt, out/report.md ,", "[/opencode-mesh-result]",
    ])
    assert parse(text).fields == {
        "task": "t-9", "status": "failed",
        "summary": "could not build\nthe compiler is missing\nnote: unknown keys are part of the summary",
        "artifacts": ["logs/build.txt", "out/report.md"],
    }


@pytest.mark.parametrize("value", ["none", "None", ""])
def test_result_artifacts_none(value: str) -> None:
    text = f"[opencode-mesh-result v1]\ntask: t\nstatus: done\nartifacts: {value}\n[/opencode-mesh-result]"
    assert parse(text).fields == {"task": "t", "status": "done", "summary": "", "artifacts": []}


def test_question_with_empty_options() -> None:
    text = "[opencode-mesh-question v1]\ntask: t\nquestion: which branch?\noptions:\n[/aoi-mesh-question]"
    assert parse(text).fields == {"task": "t", "question": "which branch?", "options": []}


def test_digest_with_none_values_and_several_facts() -> None:
    text = "\n".join([
        "[aoi-mesh-digest v1]", "task: t", "gen: 12", "facts:", "- first fact", "  - second: kept",
        "", "-", "pending: none", "refs: none", "[/opencode-mesh-digest]",
    ])
    assert parse(text).fields == {
        "task": "t", "gen": 12, "facts": ["first fact", "second: kept"], "pending": None, "refs": [],
    }


def test_first_valid_block_wins() -> None:
    second = EXAMPLE_RESULT.replace("节点a-mabc12-x7k2", "second")
    assert parse(EXAMPLE_QUESTION + "\n" + EXAMPLE_RESULT).kind == "question"
    assert parse(EXAMPLE_RESULT + "\n" + second).fields["task"] == "节点a-mabc12-x7k2"
    broken = EXAMPLE_RESULT.replace("status: done", "status: maybe")
    assert parse(broken + "\n" + second).fields["task"] == "second"
    unclosed = EXAMPLE_RESULT.replace("[/opencode-mesh-result]", "")
    assert parse(unclosed + "\n" + second).fields["task"] == "second"


MALFORMED = [
    "",
    "just chatting",
    EXAMPLE_RESULT.replace("[/opencode-mesh-result]", ""),  # no close tag
    EXAMPLE_RESULT.replace("task: 节点a-mabc12-x7k2\n", ""),  # no task
    EXAMPLE_RESULT.replace("task: 节点a-mabc12-x7k2", "task:"),  # empty task
    EXAMPLE_RESULT.replace("status: done", "status: finished"),  # bad status
    EXAMPLE_RESULT.replace("status: done", "status: Done"),  # enum values are case-sensitive
    EXAMPLE_RESULT.replace("status: done", "status: done\nstatus: failed"),  # a key twice
    EXAMPLE_RESULT.replace("[/opencode-mesh-result]", "[/opencode-mesh-question]"),  # wrong close
    EXAMPLE_RESULT.replace("[opencode-mesh-result v1]", "[OPENCODE-MESH-result v1]"),  # case-sensitive
    EXAMPLE_RESULT.replace("[opencode-mesh-result v1]", "[opencode-mesh-result v2]"),
    EXAMPLE_RESULT.replace("\ntask:", "\n  task:"),  # keys start at column 0
    EXAMPLE_QUESTION.replace("question: <一句话问题>", "question:"),
    EXAMPLE_TASK.replace("mode: one-shot", "mode: forever"),
    EXAMPLE_TASK.replace("task: 节点a-mabc12-x7k2\n", ""),
    EXAMPLE_TASK.replace("\n---\n", "\n"),  # no separator
    EXAMPLE_TASK.replace("reply: result-block", "reply result-block"),  # header not key: value
    EXAMPLE_TASK.replace("reply: result-block", "from: twice"),
    EXAMPLE_TASK.replace("[opencode-mesh v1]", "[opencode-mesh v1"),
    EXAMPLE_DIGEST.replace("gen: 3", "gen: three"),
    EXAMPLE_DIGEST.replace("gen: 3", "gen: -3"),
    EXAMPLE_DIGEST.replace("gen: 3", "gen: ³"),
    EXAMPLE_DIGEST.replace("gen: 3", "gen: " + "9" * 5000),
    EXAMPLE_DIGEST.replace("refs: <产物/日志路径或 none>\n", ""),  # digests need every key
    EXAMPLE_DIGEST.replace("facts:\n", "facts: inline\n"),
    EXAMPLE_DIGEST.replace("- <抽取", "* <抽取"),  # facts are "- " lines
    "[opencode-mesh-result v1]\ntask: a\n[opencode-mesh-result v1]\n[/opencode-mesh-result]",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_falls_back_to_chat(text: str) -> None:
    assert parse(text) == Parsed("chat", {}, text)


# -- builders and round trips --------------------------------------------------------------------


def test_task_envelope_format() -> None:
    assert task_envelope("laptop", "laptop-abc-0000", "do it", env="s=linux/x64 r=win32/x64") == (
        "[opencode-mesh v1]\nfrom: laptop\ntask: laptop-abc-0000\nmode: one-shot\nreply: result-block\n"
        "env: s=linux/x64 r=win32/x64\n---\ndo it"
    )
    assert "env:" not in task_envelope("a", "t", "x", mode="session")


def test_result_block_format() -> None:
    assert result_block("t", "partial", "two of three\nlast: one pending", ["a.log", "b/c.md"]) == (
        "[opencode-mesh-result v1]\ntask: t\nstatus: partial\nsummary: two of three\n  last: one pending\n"
        "artifacts: a.log, b/c.md\n[/opencode-mesh-result]"
    )
    assert "\nartifacts: none\n" in result_block("t", "done", "ok")


def test_question_block_format() -> None:
    assert question_block("t", "which one?", ["A", "B"]) == (
        "[opencode-mesh-question v1]\ntask: t\nquestion: which one?\noptions: A | B\n"
        "[/opencode-mesh-question]"
    )
    assert "\noptions:\n" in question_block("t", "why?")


@pytest.mark.parametrize(("sender", "task_id", "text", "mode", "env"), [
    ("laptop", "laptop-m1x2y3-ab12", "run the tests", "one-shot", None),
    ("工作站", "任务-1", "请修复登录页面的错误。\n\n第二段:保留原有行为。", "session", "s=win32/x64 r=?"),
    ("a", "t", "status: done\n[opencode-mesh-result v1]\n  indented", "resume", None),
    ("n", "t:2", "", "one-shot", "s=? r=?"),
])
def test_task_round_trip(sender: str, task_id: str, text: str, mode: str, env: str | None) -> None:
    parsed = parse(task_envelope(sender, task_id, text, mode=mode, env=env))
    fields = {"mesh_from": sender, "task": task_id, "mode": mode, "reply": "result-block"}
    assert parsed == Parsed("task", fields if env is None else {**fields, "env": env}, text)


def test_task_envelope_drops_surrounding_blank_lines_and_crlf() -> None:
    assert parse(task_envelope("a", "t", "\n\r\n  body\r\nmore  \n\n")).body == "  body\nmore  "


@pytest.mark.parametrize(("status", "summary", "artifacts"), [
    ("done", "all green", ["out/report.md"]),
    ("partial", "已完成两项。\n第三项:等待审批\ntask: not a key\n\n  keeps its indent", []),
    ("failed", "", ["a b.txt", "路径/文件.log"]),
    ("done", "[opencode-mesh-result v1] inline is fine", None),
])
def test_result_round_trip(status: str, summary: str, artifacts: list[str] | None) -> None:
    parsed = parse("free text first\n" + result_block("任务-7", status, summary, artifacts) + "\n")
    assert parsed.kind == "result"
    fields = {"task": "任务-7", "status": status, "summary": summary, "artifacts": artifacts or []}
    assert parsed.fields == fields


@pytest.mark.parametrize(("question", "options"), [
    ("which database?", ["postgres", "sqlite"]),
    ("要覆盖现有文件吗?", ["是", "否", "先备份"]),
    ("proceed?", None),
])
def test_question_round_trip(question: str, options: list[str] | None) -> None:
    parsed = parse(question_block("t-1", question, options))
    assert (parsed.kind, parsed.fields) == ("question", {"task": "t-1", "question": question,
                                                         "options": options or []})


@pytest.mark.parametrize("call", [
    lambda: task_envelope("a", "t", "x", mode="forever"),
    lambda: task_envelope("a", "", "x"),
    lambda: task_envelope("a", "t\n2", "x"),
    lambda: task_envelope("a\nb", "t", "x"),
    lambda: task_envelope("a", "t", "x", env="two\nlines"),
    lambda: task_envelope("a", "t", "ok\n  [/opencode-mesh-result]  \nmore"),
    lambda: task_envelope("a", "t", "[/aoi-mesh-digest]"),
    lambda: result_block("t", "finished", "x"),
    lambda: result_block("", "done", "x"),
    lambda: result_block(" t", "done", "x"),
    lambda: result_block("t", "done", "x\n[/opencode-mesh-result]"),
    lambda: result_block("t", "done", "x\n[aoi-mesh-question v1]"),
    lambda: result_block("t", "done", "x", ["a,b"]),
    lambda: result_block("t", "done", "x", ["none"]),
    lambda: result_block("t", "done", "x", [""]),
    lambda: question_block("t", "two\nlines"),
    lambda: question_block("t", ""),
    lambda: question_block("t", "q", ["A | B"]),
    lambda: question_block("t\r", "q"),
])
def test_builders_reject_bad_input(call: Any) -> None:
    with pytest.raises(ValueError) as info:
        call()
    assert "\n" not in str(info.value)


# -- task ids ------------------------------------------------------------------------------------


def test_new_task_id_format() -> None:
    assert new_task_id("laptop", now=0, rand="ab12") == "laptop-0-ab12"
    task_id = new_task_id("laptop", now=1_700_000_000.9, rand="zz00")
    node, stamp, rand = task_id.split("-")
    assert (node, int(stamp, 36), rand) == ("laptop", 1_700_000_000, "zz00")


def test_new_task_id_sanitizes_the_node() -> None:
    assert new_task_id("My Laptop.local/工作", now=36, rand="0000") == "my-laptop-local----10-0000"
    assert new_task_id("", now=35, rand="0000") == "node-z-0000"
    assert new_task_id("build_box-2", now=1, rand="0000") == "build_box-2-1-0000"


def test_new_task_id_is_random_and_current() -> None:
    ids = {new_task_id("n") for _ in range(50)}
    assert len(ids) > 1
    assert all(re.fullmatch(r"n-[0-9a-z]+-[0-9a-z]{4}", task_id) for task_id in ids)


@pytest.mark.parametrize(("now", "rand"), [(-1, None), (float("nan"), None), (float("inf"), None),
                                           (0, "AB12"), (0, "abc"), (0, "ab-1")])
def test_new_task_id_rejects_bad_input(now: float, rand: str | None) -> None:
    with pytest.raises(ValueError):
        new_task_id("n", now=now, rand=rand)


# -- nothing raises ------------------------------------------------------------------------------


def garbled(rng: random.Random) -> str:
    pieces = [
        *MARKERS, "[", "]", "[/", " v1", "-result", "-question", "-digest", "\n", "\r\n", "\r", "---",
        "task:", "status:", "mode:", "gen:", "facts:", "- ", "summary:", "options:", " | ", ",", "none",
        "done", "one-shot", "  ", "中文", "\x00", "\u2028", "\ufeff", "³", "9" * 30,
        *rng.sample(EXAMPLES, 1),
    ]
    text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 40)))
    if rng.random() < 0.3:
        text += "".join(rng.choice(string.printable) for _ in range(rng.randrange(0, 30)))
    return text


def test_random_garbage_never_raises() -> None:
    rng = random.Random(20261015)
    for _ in range(3000):
        assert parse(garbled(rng)).kind in KINDS


def test_only_a_text_with_a_marker_can_carry_a_block() -> None:
    """The receiver skips the parser for a text without one (`follower.receive.spool_line`)."""
    rng = random.Random(20261205)
    for text in [*EXAMPLES, *map(legacy, EXAMPLES), *(garbled(rng) for _ in range(3000))]:
        assert may_carry_block(text) or parse(text).kind == "chat"
    assert all(may_carry_block(example) for example in EXAMPLES)


@pytest.mark.parametrize("example", [*EXAMPLES, *map(legacy, EXAMPLES)])
def test_truncated_examples_never_raise(example: str) -> None:
    complete = parse(example).kind
    for text in (example, example.replace("\n", "\r\n")):
        for cut in range(len(text) + 1):
            for piece in (text[:cut], text[cut:]):
                assert parse(piece).kind in {complete, "chat"}


# --- a peer's text, whatever it holds, is read in time linear in its length and never raises --------

MESH_LINE = st.sampled_from([
    "[opencode-mesh v1]", "[opencode-mesh-result v1]", "[/opencode-mesh-result]", "[aoi-mesh-digest v1]",
    "[/aoi-mesh-digest]", "[opencode-mesh-question v1]", "---", "task: t-1", "status: done", "gen: 1",
    "gen: " + "9" * 40, "facts:", "- a fact", "pending: none", "refs: a, b", "summary: x", "  more", "",
    "options: a | b", "mode: one-shot", "task: \u2028", "\r",
])


@given(st.lists(st.one_of(MESH_LINE, st.text(max_size=20)), max_size=60).map("\n".join))
def test_any_text_parses_to_a_kind_without_raising(text: str) -> None:
    assert parse(text).kind in ("task", "result", "question", "digest", "chat")


@pytest.mark.parametrize("text", [
    "[opencode-mesh-result v1]\n" * 2600,
    ("[opencode-mesh-result v1]\n" + "x\n" * 10 + "[/opencode-mesh-digest]\n") * 1500,
    "[opencode-mesh v1]\n" + "key: value\n" * 6000,
    "[opencode-mesh-digest v1]\ntask: t-1\ngen: 1\nfacts:\n" + "- a\n" * 16000,
])
def test_the_largest_hostile_texts_parse_in_time(text: str) -> None:
    started = time.perf_counter()
    parse(text[:MAX_TEXT])
    assert time.perf_counter() - started < 1.0  # linear: milliseconds; a quadratic walk takes minutes
